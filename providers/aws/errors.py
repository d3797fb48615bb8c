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
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import tenacity
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
    Clock,
    CredentialsError,
    InsufficientCapacity,
    NotFound,
    NotSupported,
    ProviderError,
    QuotaExceeded,
)

log = logging.getLogger("burst.providers.aws")

T = TypeVar("T")

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


class BackendUnavailable(ProviderError):
    """AWS did not answer usefully (5xx, throttled past the retries, lost responses) or the breaker is open.

    Nothing is known to have been applied. The caller retries on a later tick
    (mutating calls with the same key: sizes are absolute, so a resend cannot
    double a launch).
    """


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


@dataclass(frozen=True)
class RetrySettings:
    """How often and how long a transient failure is retried (jittered exponential backoff, wall time)."""

    attempts: int = 5
    initial_wait_s: float = 0.2
    max_wait_s: float = 5.0


class CircuitBreaker:
    """Opens after `failure_threshold` consecutive failed calls; half-opens `cool_off_s` later (on `clock`)."""

    def __init__(self, clock: Clock, *, failure_threshold: int = 5, cool_off_s: float = 60.0) -> None:
        if failure_threshold < 1 or cool_off_s < 0:
            raise ValueError("failure_threshold must be >= 1 and cool_off_s >= 0")
        self.clock = clock
        self.failure_threshold = failure_threshold
        self.cool_off = timedelta(seconds=cool_off_s)
        self.failures = 0
        self.opened_at: datetime | None = None
        self.trips = 0

    @property
    def state(self) -> str:
        """closed, open or half_open."""
        if self.opened_at is None:
            return "closed"
        return "half_open" if self.clock() >= self.opened_at + self.cool_off else "open"

    def before(self, what: str) -> None:
        """Raise BackendUnavailable while open; let one trial through when half-open."""
        if self.state == "open":
            assert self.opened_at is not None
            until = self.opened_at + self.cool_off
            raise BackendUnavailable(
                f"AWS circuit breaker open after {self.failures} consecutive failures; {what} not sent "
                f"until {until.isoformat()}"
            )

    def success(self) -> None:
        if self.opened_at is not None:
            log.info("AWS circuit breaker closed")
        self.failures = 0
        self.opened_at = None

    def failure(self) -> None:
        self.failures += 1
        if self.opened_at is not None or self.failures >= self.failure_threshold:
            if self.opened_at is None:
                self.trips += 1
                log.warning("AWS circuit breaker opened", extra={"failures": self.failures})
            self.opened_at = self.clock()  # a failed half-open trial re-opens it for another cool-off


class Caller:
    """Calls one boto3 operation with retries, the breaker and error mapping (see the module docstring)."""

    def __init__(self, breaker: CircuitBreaker, retry: RetrySettings) -> None:
        self.breaker = breaker
        self.retry = retry

    def call(self, client: Any, operation: str, **params: Any) -> Any:
        """`client.<operation>(**params)`; returns the response dict or raises a ProviderError."""
        return self.run(operation, lambda: getattr(client, operation)(**params))

    def run(self, what: str, fn: Callable[[], T]) -> T:
        """Run `fn` (one or more SDK calls that are safe to repeat) under the retry policy and the breaker."""
        self.breaker.before(what)
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            wait=tenacity.wait_random_exponential(multiplier=self.retry.initial_wait_s, max=self.retry.max_wait_s),
            stop=tenacity.stop_after_attempt(max(1, self.retry.attempts)),
            reraise=True,
            before_sleep=lambda state: log.info(
                "retrying AWS call",
                extra={"operation": what, "attempt": state.attempt_number, "error": _describe(state)},
            ),
        )
        try:
            result = retrying(fn)
        except ProviderError:
            self.breaker.success()  # AWS answered; the caller's own check failed
            raise
        except (ClientError, BotoCoreError, ResponseParserError) as exc:
            mapped = map_error(exc, what)
            if isinstance(mapped, BackendUnavailable):
                self.breaker.failure()
            else:
                self.breaker.success()  # a definite answer: the service is up
            raise mapped from None
        self.breaker.success()
        return result


def _describe(state: tenacity.RetryCallState) -> str:
    exc = state.outcome.exception() if state.outcome is not None else None
    if exc is None:
        return ""
    return error_code(exc) or type(exc).__name__
