"""AWS error handling: SDK errors mapped onto typed provider errors, retries, and a circuit breaker.

Every boto3 call of the AWS provider goes through `Caller.call`:

* **Retries** (tenacity): throttling (`RequestLimitExceeded`, `Throttling`,
  `ThrottlingException`, ...), HTTP 5xx and connection errors (a lost
  response) are retried with jittered exponential backoff (`RetrySettings`,
  short waits that tests shorten further). botocore's own retries are turned
  off (see `boto_config`) so that this is the one retry layer.
* **Circuit breaker** (`CircuitBreaker`): after `failure_threshold`
  consecutive calls that failed even after their retries, the breaker opens
  and every call fails fast with `BackendUnavailable` until `cool_off_s` has
  passed on the injected clock; then one trial call is let through
  (half-open): success closes the breaker, failure opens it again.
* **Mapping** (`map_error`): capacity, quota, support and credential errors
  become `InsufficientCapacity`, `QuotaExceeded`, `NotSupported`,
  `CredentialsError`; anything else that is not ours becomes
  `BackendUnavailable`. No SDK exception leaves the provider.

Credential errors carry one clear message that names the error code and the
fix, never a key, token or secret.
"""

from __future__ import annotations

import logging

from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
    ReadTimeoutError,
)
from botocore.parsers import ResponseParserError

from providers.base import (
    BackendUnavailable,
    CredentialsError,
    ErrorMapping,
    InsufficientCapacity,
    NotFound,
    NotSupported,
    ProviderError,
    QuotaExceeded,
)

log = logging.getLogger("burst.providers.aws")


THROTTLING_CODES = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "SlowDown",
    }
)
"""Error codes that mean "slow down": retried with backoff."""

CAPACITY_CODES = frozenset({"InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity"})
QUOTA_CODES = frozenset(
    {"VcpuLimitExceeded", "InstanceLimitExceeded", "LimitExceeded", "MaxSpotInstanceCountExceeded"}
)
UNSUPPORTED_CODES = frozenset({"Unsupported", "UnsupportedOperation"})
CREDENTIAL_CODES = frozenset(
    {
        "UnrecognizedClientException",
        "AuthFailure",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "MissingAuthenticationToken",
        "InvalidAccessKeyId",
    }
)
PERMISSION_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
NOT_FOUND_CODES = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed", "ResourceNotFound"})

CREDENTIALS_FIX = (
    "set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run burst with an IAM role "
    "(boto3's default credential chain)"
)


def boto_config(*, connect_timeout_s: float = 5.0, read_timeout_s: float = 20.0) -> Config:
    """botocore settings for every client: no SDK retries (tenacity retries), short timeouts."""
    return Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=connect_timeout_s,
        read_timeout=read_timeout_s,
    )


def error_code(exc: BaseException) -> str:
    """The AWS error code of a ClientError ('' for anything else)."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def http_status(exc: BaseException) -> int:
    if isinstance(exc, ClientError):
        return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return 0


def is_transient(exc: BaseException) -> bool:
    """Whether a failed call is worth retrying: throttling, 5xx, a lost or unreadable response."""
    if isinstance(exc, ClientError):
        return error_code(exc) in THROTTLING_CODES or http_status(exc) >= 500
    return isinstance(
        exc,
        ConnectionClosedError
        | EndpointConnectionError
        | ReadTimeoutError
        | ConnectTimeoutError
        | ResponseParserError,  # a 5xx HTML page (what a proxy or an emulator returns on a crash)
    )


def map_error(exc: BaseException, what: str) -> ProviderError:
    """The typed provider error for an SDK exception raised by `what` (an operation name)."""
    code = error_code(exc)
    message = _message(exc)
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return CredentialsError(f"AWS credentials not found ({type(exc).__name__}): {CREDENTIALS_FIX}")
    if code in CREDENTIAL_CODES:
        return CredentialsError(f"AWS rejected the credentials ({code}) on {what}: {CREDENTIALS_FIX}")
    if code in PERMISSION_CODES:
        return CredentialsError(
            f"the AWS credentials lack a permission ({code}) for {what}: grant it in the controller's IAM "
            "policy (providers.aws.AWS_IAM_PERMISSIONS lists every permission burst needs)"
        )
    if code in CAPACITY_CODES:
        return InsufficientCapacity(f"{code} on {what}: {message}")
    if code in QUOTA_CODES:
        return QuotaExceeded(f"{code} on {what}: {message}")
    if code in UNSUPPORTED_CODES:
        return NotSupported(f"{code} on {what}: {message}")
    if code in NOT_FOUND_CODES:
        return NotFound(f"{code} on {what}: {message}")
    if code:
        return BackendUnavailable(f"{code} on {what}: {message}")
    return BackendUnavailable(f"{what} failed: {type(exc).__name__}")


def _message(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Message", "")).strip()[:300]
    return type(exc).__name__


def _describe(exc: BaseException) -> str:
    return error_code(exc) or type(exc).__name__


ERRORS = ErrorMapping(
    backend="AWS",
    sdk_errors=(ClientError, BotoCoreError, ResponseParserError),
    is_transient=is_transient,
    map_error=map_error,
    describe=_describe,
)
"""How boto3 fails, for `providers.base.Caller` (with the breaker: see the module docstring)."""
