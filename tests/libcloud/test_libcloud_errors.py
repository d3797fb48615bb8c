"""Driver exceptions mapped onto the protocol's errors: libcloud's own exception classes, carrying the
messages real clouds send (EC2, OpenStack Nova, Azure, GCE)."""

from __future__ import annotations

import pytest
from libcloud.common.exceptions import BaseHTTPError, RateLimitReachedError
from libcloud.common.types import InvalidCredsError, MalformedResponseError, ServiceUnavailableError
from libcloud.common.types import ProviderError as LibcloudProviderError

from providers.base import (
    CredentialsError,
    InsufficientCapacity,
    NotFound,
    NotSupported,
    ProviderError,
    QuotaExceeded,
)
from providers.libcloud import BackendUnavailable, map_error
from providers.libcloud.errors import is_transient

FIX = "export the key in LC_KEY"

CASES = [
    (BaseHTTPError(400, "InsufficientInstanceCapacity: We currently do not have sufficient p4d.24xlarge capacity "
                        "in the Availability Zone you requested (us-east-1a)."), InsufficientCapacity),
    (BaseHTTPError(500, "No valid host was found. There are not enough hosts available."), InsufficientCapacity),
    (BaseHTTPError(409, "AllocationFailed: Allocation failed. We do not have sufficient capacity for the requested "
                        "VM size in this region."), InsufficientCapacity),
    (BaseHTTPError(400, "ZONE_RESOURCE_POOL_EXHAUSTED: The zone does not have enough resources"),
     InsufficientCapacity),
    (BaseHTTPError(400, "VcpuLimitExceeded: You have requested more vCPU capacity than your current vCPU limit"),
     QuotaExceeded),
    (BaseHTTPError(403, "Quota exceeded for cores: Requested 96, but already used 0 of 64 cores"), QuotaExceeded),
    (BaseHTTPError(409, "OperationNotAllowed: Operation could not be completed as it results in exceeding approved "
                        "standardNDASv4Family Cores quota."), QuotaExceeded),
    (InvalidCredsError("AuthFailure: AWS was not able to validate the provided access credentials"),
     CredentialsError),
    (BaseHTTPError(401, "The request you have made requires authentication."), CredentialsError),
    (BaseHTTPError(403, "AuthorizationFailed: The client does not have authorization to perform action"),
     CredentialsError),
    (BaseHTTPError(404, "Instance could not be found"), NotFound),
    (BaseHTTPError(400, "InvalidInstanceID.NotFound: The instance ID 'i-123' does not exist"), NotFound),
    (NotImplementedError("start_node not implemented for this driver"), NotSupported),
    (BaseHTTPError(500, "InternalFailure: We encountered an internal error."), BackendUnavailable),
    (ServiceUnavailableError(), BackendUnavailable),
    (BaseHTTPError(400, "RequestLimitExceeded: Request limit exceeded."), BackendUnavailable),
    (TimeoutError("timed out"), BackendUnavailable),
]


@pytest.mark.parametrize(("exc", "expected"), CASES, ids=[f"{type(e).__name__}-{t.__name__}" for e, t in CASES])
def test_map_error(exc: BaseException, expected: type[ProviderError]) -> None:
    mapped = map_error(exc, "create_node", credentials_fix=FIX)
    assert type(mapped) is expected
    assert "create_node" in str(mapped)
    if expected is CredentialsError:
        assert FIX in str(mapped)


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (RateLimitReachedError(), True),
        (BaseHTTPError(400, "Throttling: Rate exceeded"), True),
        (BaseHTTPError(400, "RequestLimitExceeded: Request limit exceeded."), True),
        (BaseHTTPError(503, "Service Unavailable"), True),
        (ServiceUnavailableError(), True),
        (MalformedResponseError("Failed to parse XML", body="<html>502 Bad Gateway</html>"), True),
        (ConnectionResetError("reset"), True),
        (BaseHTTPError(500, "No valid host was found."), False),
        (BaseHTTPError(403, "Quota exceeded for instances"), False),
        (InvalidCredsError(), False),
        (LibcloudProviderError("Invalid flavorRef", 400), False),
        (BaseHTTPError(404, "not found"), False),
        (NotFound("ours"), False),
    ],
)
def test_is_transient(exc: BaseException, transient: bool) -> None:
    assert is_transient(exc) is transient
