"""libcloud error handling: driver exceptions mapped onto typed provider errors, and retries.

Every driver call of the libcloud provider goes through `Caller.run`:

* **Retries** (tenacity): rate limiting (HTTP 429, libcloud's
  `RateLimitReachedError`, EC2's `RequestLimitExceeded`/`Throttling`), HTTP
  5xx, connection errors (a lost response) and malformed (non-XML/JSON)
  bodies are retried with jittered exponential backoff (`RetrySettings`).
  libcloud's own retry layer is off unless `LIBCLOUD_RETRY_FAILED_HTTP_REQUESTS`
  is set, so this is normally the one retry layer.
* **Mapping** (`map_error`): libcloud has no portable error codes, so the
  mapping reads the exception type, the HTTP status and the message. Quota
  messages (`Quota exceeded for cores`, `VcpuLimitExceeded`, Azure's
  `exceeding approved ... quota`) become `QuotaExceeded`; capacity messages
  (`InsufficientInstanceCapacity`, `ZONE_RESOURCE_POOL_EXHAUSTED`, OpenStack's
  `No valid host was found`, Azure's `AllocationFailed`/`SkuNotAvailable`)
  become `InsufficientCapacity`; `InvalidCredsError`, HTTP 401/403 and
  auth-failure codes become `CredentialsError`; HTTP 404 and `...NotFound`
  codes become `NotFound`; a method the driver does not implement becomes
  `NotSupported`; anything else becomes `BackendUnavailable`. Quota is checked
  before credentials because Nova answers a quota refusal with HTTP 403.

No driver exception leaves the provider. Credential errors name the fix, never
a key or secret.
"""

from __future__ import annotations

import functools
import logging
import re

from libcloud.common.exceptions import BaseHTTPError, RateLimitReachedError
from libcloud.common.types import InvalidCredsError, LibcloudError, MalformedResponseError
from libcloud.common.types import ProviderError as LibcloudProviderError

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

log = logging.getLogger("burst.providers.libcloud")


THROTTLING = re.compile(r"RequestLimitExceeded|Throttl|TooManyRequests|Too Many Requests|rate limit", re.I)
QUOTA = re.compile(
    r"quota|LimitExceeded|limit exceeded|exceeds? (the )?(\w+ )?limit|QuotaExceeded", re.I
)
CAPACITY = re.compile(
    r"Insufficient\w*Capacity|insufficient capacity|ZONE_RESOURCE_POOL_EXHAUSTED|resource pool exhausted"
    r"|No valid host was found|out of capacity|not enough capacity|capacity (is )?not available"
    r"|SkuNotAvailable|AllocationFailed|OverconstrainedAllocationRequest|ServerCapacityUnavailable",
    re.I,
)
AUTH = re.compile(
    r"AuthFailure|AuthorizationFailed|Unauthorized|AccessDenied|Access denied|Forbidden|InvalidClientTokenId"
    r"|SignatureDoesNotMatch|invalid credentials|authentication (failed|required)|OptInRequired"
    r"|ExpiredToken|InvalidAccessKeyId",
    re.I,
)
NOT_FOUND = re.compile(r"NotFound|not found|does not exist", re.I)


def http_status(exc: BaseException) -> int:
    """The HTTP status a libcloud exception carries (0 when none)."""
    if isinstance(exc, BaseHTTPError):
        return int(exc.code or 0)
    if isinstance(exc, LibcloudProviderError):
        return int(exc.http_code or 0)
    return 0


def message_of(exc: BaseException) -> str:
    """The cloud's message of a libcloud exception, without libcloud's driver repr (at most 300 characters)."""
    if isinstance(exc, BaseHTTPError):
        text = str(exc.message)
    elif isinstance(exc, LibcloudError):
        text = str(exc.value)
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:300]


def is_transient(exc: BaseException) -> bool:
    """Whether a failed driver call is worth retrying: throttling, 5xx, a lost or unreadable response."""
    if isinstance(exc, ProviderError | InvalidCredsError):
        return False
    if isinstance(exc, RateLimitReachedError | MalformedResponseError):
        return True
    if isinstance(exc, BaseHTTPError | LibcloudError) and (CAPACITY.search(message_of(exc)) or (
        QUOTA.search(message_of(exc)) and not THROTTLING.search(message_of(exc))
    )):
        return False  # a definite answer, whatever the status (Nova's "No valid host" can be a 500)
    status = http_status(exc)
    if status == 429 or status >= 500:
        return True
    if isinstance(exc, BaseHTTPError | LibcloudError):
        return THROTTLING.search(message_of(exc)) is not None
    return isinstance(exc, OSError)  # socket errors; requests' ConnectionError and Timeout are OSErrors


def map_error(exc: BaseException, what: str, *, credentials_fix: str) -> ProviderError:
    """The typed provider error for a driver exception raised by `what` (an operation name)."""
    if isinstance(exc, ProviderError):
        return exc
    status = http_status(exc)
    message = message_of(exc)
    if isinstance(exc, NotImplementedError):
        return NotSupported(f"{what}: the libcloud driver does not implement it ({message})")
    if CAPACITY.search(message):
        return InsufficientCapacity(f"{what}: {message}")
    if QUOTA.search(message) and not THROTTLING.search(message):
        return QuotaExceeded(f"{what}: {message}")
    if isinstance(exc, InvalidCredsError) or status in (401, 403) or AUTH.search(message):
        return CredentialsError(f"the cloud rejected the credentials on {what} ({message}): {credentials_fix}")
    if status == 404 or NOT_FOUND.search(message):
        return NotFound(f"{what}: {message}")
    if status:
        return BackendUnavailable(f"{what} failed (HTTP {status}): {message}")
    return BackendUnavailable(f"{what} failed: {type(exc).__name__}: {message}")


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {message_of(exc)}"


def error_mapping(credentials_fix: str) -> ErrorMapping:
    """How a libcloud driver fails, for `providers.base.Caller`: every driver exception is mapped (none leaves
    the provider), credential errors naming `credentials_fix`."""
    return ErrorMapping(
        backend="libcloud",
        sdk_errors=(Exception,),
        is_transient=is_transient,
        map_error=functools.partial(map_error, credentials_fix=credentials_fix),
        describe=_describe,
    )
