"""GCP error handling: google-api-core errors and operation errors mapped onto typed provider errors, with retries.

Every Compute API call of the GCP provider goes through `Caller.call`:

* **Retries** (tenacity): HTTP 429 (rate limits: the client library does
  not retry them), 5xx and connection errors are retried with jittered
  exponential backoff (`RetrySettings`). The library's own retries are turned
  off per call (`retry=None`), so this is the one retry layer. A mutating
  call is resent with the same `requestId`, so the Compute API applies it at
  most once.
* **Mapping** (`map_error`, `map_operation_error`): capacity
  (`ZONE_RESOURCE_POOL_EXHAUSTED`), quota, not-found, unsupported and
  credential errors become `InsufficientCapacity`, `QuotaExceeded`,
  `NotFound`, `NotSupported`, `CredentialsError`; anything else becomes
  `BackendUnavailable`. No SDK exception leaves the provider.

Credential errors carry one clear message naming the fix, never a token,
key or the contents of a key file.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from google.api_core import exceptions as core
from google.auth import exceptions as auth_exceptions

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

log = logging.getLogger("burst.providers.gcp")


CAPACITY_CODES = frozenset(
    {
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
        "RESOURCE_POOL_EXHAUSTED",
        "STOCKOUT",
    }
)
"""Operation error codes (and error reasons) that mean "no capacity in this zone now"."""

QUOTA_CODES = frozenset({"QUOTA_EXCEEDED", "quotaExceeded", "limitExceeded"})
NOT_FOUND_CODES = frozenset({"RESOURCE_NOT_FOUND", "notFound"})
UNSUPPORTED_CODES = frozenset({"UNSUPPORTED_OPERATION", "unsupportedOperation"})
RATE_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded"})

CREDENTIALS_FIX = (
    "run `gcloud auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS to a service account "
    "key file, or run burst with an attached service account (Application Default Credentials)"
)
PERMISSIONS_FIX = (
    "grant it to burst's service account (providers.gcp.GCP_API_METHODS lists every method burst calls; "
    "the README lists the IAM permissions)"
)


def reasons(exc: BaseException) -> list[str]:
    """The `reason` of each entry of a Google API error's `errors` list (and its ErrorInfo reason)."""
    out: list[str] = []
    for entry in getattr(exc, "errors", None) or []:
        if isinstance(entry, dict) and entry.get("reason"):
            out.append(str(entry["reason"]))
    reason = getattr(exc, "reason", None)
    if reason:
        out.append(str(reason))
    return out


def is_transient(exc: BaseException) -> bool:
    """Whether a failed call is worth retrying: 429, 5xx, a rate-limit 403, a lost or refused connection."""
    if isinstance(exc, core.TooManyRequests | core.ServerError):
        return True
    if isinstance(exc, core.Forbidden) and RATE_REASONS & set(reasons(exc)):
        return True
    import requests

    return isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout)


def _message(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())[:300]


def map_error(exc: BaseException, what: str) -> ProviderError:
    """The typed provider error for an exception raised by the Compute API method `what`."""
    rejected = (auth_exceptions.RefreshError, auth_exceptions.InvalidOperation, core.Unauthorized)
    if isinstance(exc, rejected):  # a 401, and the credentials could not be refreshed
        return CredentialsError(f"the Compute API rejected the credentials (401) on {what}: {CREDENTIALS_FIX}")
    if isinstance(exc, auth_exceptions.DefaultCredentialsError):
        return CredentialsError(f"GCP credentials not found (Application Default Credentials): {CREDENTIALS_FIX}")
    if isinstance(exc, auth_exceptions.GoogleAuthError):
        return CredentialsError(f"GCP credentials could not be used on {what} ({type(exc).__name__}): {CREDENTIALS_FIX}")
    codes = set(reasons(exc))
    message = _message(exc)
    if codes & CAPACITY_CODES or "ZONE_RESOURCE_POOL_EXHAUSTED" in message:
        return InsufficientCapacity(f"ZONE_RESOURCE_POOL_EXHAUSTED on {what}: {message}")
    if codes & QUOTA_CODES:
        return QuotaExceeded(f"quota exceeded on {what}: {message}")
    if isinstance(exc, core.Forbidden | core.PermissionDenied):
        return CredentialsError(f"the GCP credentials lack a permission (403) for {what}: {PERMISSIONS_FIX}")
    if isinstance(exc, core.NotFound):
        return NotFound(f"not found on {what}: {message}")
    if codes & UNSUPPORTED_CODES:
        return NotSupported(f"not supported on {what}: {message}")
    if isinstance(exc, core.GoogleAPICallError):
        return BackendUnavailable(f"HTTP {exc.code} on {what}: {message}")
    return BackendUnavailable(f"{what} failed: {type(exc).__name__}")


def map_operation_error(errors: Iterable[tuple[str, str]], what: str) -> ProviderError:
    """The typed provider error for a finished operation's `error.errors` entries, as (code, message) pairs."""
    pairs = list(errors)
    codes = {c for c, _ in pairs}
    text = "; ".join(f"{c}: {m}" for c, m in pairs)[:300]
    if codes & CAPACITY_CODES:
        return InsufficientCapacity(f"ZONE_RESOURCE_POOL_EXHAUSTED on {what}: {text}")
    if codes & QUOTA_CODES:
        return QuotaExceeded(f"QUOTA_EXCEEDED on {what}: {text}")
    if codes & NOT_FOUND_CODES:
        return NotFound(f"RESOURCE_NOT_FOUND on {what}: {text}")
    if codes & UNSUPPORTED_CODES:
        return NotSupported(f"UNSUPPORTED_OPERATION on {what}: {text}")
    return BackendUnavailable(f"operation failed on {what}: {text}")


def _describe(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    return f"HTTP {code}" if code else type(exc).__name__


ERRORS = ErrorMapping(
    backend="Compute API",
    sdk_errors=(core.GoogleAPIError, auth_exceptions.GoogleAuthError, OSError),
    is_transient=is_transient,
    map_error=map_error,
    describe=_describe,
)
"""How google-cloud-compute fails, for `providers.base.Caller` (requests' errors outside these: a transient one is
BackendUnavailable)."""
