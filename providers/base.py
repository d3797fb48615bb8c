"""The provider protocol every backend implements, and the typed errors it raises.

A provider is a thin, side-effecting adapter between burst and one backend (an
AWS account, a GCP project, an on-prem rack, the simulator). Only the actuator
calls the mutating methods; the reconcile loop calls the read methods once per
tick after `refresh()`.

Contract shared by every method (each docstring adds its own):

* **Asynchronous.** Mutating calls record an intent and return; their results
  (nodes booting, nodes gone) are observed on a later `refresh()`, never
  returned.
* **Idempotent by key.** Every mutating call carries a `key` derived from the
  action. A key the provider has already applied (per method) is a no-op, so a
  retry after a crash between "sent" and "recorded" never doubles a launch. A
  call that raised before applying anything does not consume its key. To issue
  the same request again on purpose (e.g. retrying terminate until NotFound),
  use a new key.
* **Eventually consistent listings.** `nodes()` may lag the provider's own
  view: a node just launched can be missing for a while. Sizes (`group_state()`)
  are the provider's record of what was asked and are what burst counts,
  together with booting capacity, so a stale listing never causes a second launch.
* **Typed errors.** SDK exceptions never leave the provider module; they are
  mapped onto `ProviderError` subclasses below, each saying what the caller does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, TypeAlias, TypeVar, runtime_checkable

import tenacity

from burst.model import Node, NodeGroup, NodeId, Offering, ProviderEvent, WarmState

log = logging.getLogger("burst.providers")
T = TypeVar("T")

Clock: TypeAlias = Callable[[], datetime]
"""Returns the current time (timezone-aware UTC). Injected so tests and the simulator control time."""


class ProviderError(Exception):
    """Base of every error a provider raises on purpose (SDK errors are mapped onto subclasses)."""


class InsufficientCapacity(ProviderError):
    """The backend cannot supply the nodes asked for right now (EC2 ICE, GCE ZONE_RESOURCE_POOL_EXHAUSTED).

    Nothing was applied. The planner tries another group or offering on the
    next tick, and this offering is avoided for a cooldown.
    """


class QuotaExceeded(ProviderError):
    """An account/project quota (vCPUs, GPUs, instances) forbids the size asked for.

    Nothing was applied. The group is capped at its current size until the
    quota changes; the planner plans around it.
    """


class NotFound(ProviderError):
    """The group or node named does not exist (or no longer does).

    On `terminate` this means the node is already gone: the caller treats it as
    success (terminate is retried until NotFound). On any other call it means
    burst's view of the groups is stale: rediscover them.
    """


class NotSupported(ProviderError):
    """The backend cannot do this for this group (e.g. warm pools on Spot, hibernation of GPU types).

    The caller skips the capability for that group (the planner filters on it)
    and does not retry.
    """


class CredentialsError(ProviderError):
    """The provider's credentials are missing, expired or lack a permission.

    The provider is marked unhealthy and nothing is planned on it until a
    later refresh succeeds; the message names the credential or permission.
    """


class InvalidTarget(ProviderError, ValueError):
    """A size outside the group's [min_size, max_size] (or negative). A bug in the caller: nothing was applied."""


class BackendUnavailable(ProviderError):
    """The backend did not answer usefully (5xx, throttled past the retries, a lost response, an unfinished
    operation) or its circuit breaker is open.

    Nothing is known to have been applied. The caller retries on a later tick
    with the same key (a resend is applied at most once: by the request id, the
    node name or the absolute size each backend's idempotency rests on).
    """


@dataclass(frozen=True)
class RetrySettings:
    """How often and how long a transient failure is retried (jittered exponential backoff, wall time)."""

    attempts: int = 5
    initial_wait_s: float = 0.2
    max_wait_s: float = 5.0


class CircuitBreaker:
    """Opens after `failure_threshold` consecutive failed calls; half-opens `cool_off_s` later (on `clock`)."""

    def __init__(self, clock: Clock, *, failure_threshold: int = 5, cool_off_s: float = 60.0,
                 backend: str = "AWS") -> None:
        if failure_threshold < 1 or cool_off_s < 0:
            raise ValueError("failure_threshold must be >= 1 and cool_off_s >= 0")
        self.clock = clock
        self.backend = backend
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
                f"{self.backend} circuit breaker open after {self.failures} consecutive failures; {what} not sent "
                f"until {until.isoformat()}"
            )

    def success(self) -> None:
        if self.opened_at is not None:
            log.info(f"{self.backend} circuit breaker closed")
        self.failures = 0
        self.opened_at = None

    def failure(self) -> None:
        self.failures += 1
        if self.opened_at is not None or self.failures >= self.failure_threshold:
            if self.opened_at is None:
                self.trips += 1
                log.warning(f"{self.backend} circuit breaker opened", extra={"failures": self.failures})
            self.opened_at = self.clock()  # a failed half-open trial re-opens it for another cool-off


@dataclass(frozen=True)
class ErrorMapping:
    """How one backend's SDK fails: which exceptions are its own, which are worth retrying, the typed error of
    each, and a short description of one for logs."""

    backend: str  # as logs name it ("AWS", "Compute API", "libcloud")
    sdk_errors: tuple[type[BaseException], ...]  # mapped by `map_error`; anything else is a bug, not the backend
    is_transient: Callable[[BaseException], bool]
    map_error: Callable[[BaseException, str], ProviderError]
    describe: Callable[[BaseException], str]


class Caller:
    """Runs backend calls with retries of transient failures, an optional circuit breaker and error mapping:
    every provider module's one way of calling its SDK."""

    def __init__(self, retry: RetrySettings, errors: ErrorMapping, *, breaker: CircuitBreaker | None = None) -> None:
        self.retry = retry
        self.errors = errors
        self.breaker = breaker

    def run(self, what: str, fn: Callable[[], T], *, before_retry: Callable[[], None] | None = None) -> T:
        """Run `fn` (one or more SDK calls that are safe to repeat) as operation `what`; raise a ProviderError.

        A transient failure is retried (`RetrySettings`); `before_retry`, when given, runs before every attempt
        after the first (a create re-reads the listing there, so a retry after a lost response finds the node
        the first attempt made). An SDK error is mapped to its typed error (a BackendUnavailable counts against
        the breaker, any definite answer closes it); another exception goes up as it is, unless transient
        (then BackendUnavailable).
        """
        errors = self.errors
        if self.breaker is not None:
            self.breaker.before(what)
        attempt = 0

        def once() -> T:
            nonlocal attempt
            attempt += 1
            if attempt > 1 and before_retry is not None:
                before_retry()
            return fn()

        def note_retry(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            log.info(f"retrying {errors.backend} call", extra={
                "operation": what, "attempt": state.attempt_number, "error": "" if exc is None else errors.describe(exc)})

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(errors.is_transient),
            wait=tenacity.wait_random_exponential(multiplier=self.retry.initial_wait_s, max=self.retry.max_wait_s),
            stop=tenacity.stop_after_attempt(max(1, self.retry.attempts)),
            reraise=True,
            before_sleep=note_retry,
        )
        try:
            result = retrying(once)
        except ProviderError:
            if self.breaker is not None:
                self.breaker.success()  # the backend answered; the caller's own check failed
            raise
        except errors.sdk_errors as exc:
            mapped = errors.map_error(exc, what)
            if self.breaker is not None:
                if isinstance(mapped, BackendUnavailable):
                    self.breaker.failure()
                else:
                    self.breaker.success()  # a definite answer: the service is up
            raise mapped from None
        except Exception as exc:
            if errors.is_transient(exc):
                raise BackendUnavailable(f"{what} failed: {type(exc).__name__}") from None
            raise
        if self.breaker is not None:
            self.breaker.success()
        return result


@dataclass(frozen=True)
class GroupState:
    """One group's sizes as its provider records them: the desired serving size and the warm pool beyond it."""

    target: int  # serving nodes asked for (ASG DesiredCapacity, MIG targetSize); warm nodes not included
    warm_size: int  # warm-pool nodes last asked for (0 if never)
    warm_state: WarmState  # the state they are kept in (the group's configured one if never asked)

    @property
    def warm_pool(self) -> tuple[int, WarmState]:
        """The warm pool as (size, state)."""
        return self.warm_size, self.warm_state


@runtime_checkable
class Provider(Protocol):
    """One backend's node groups behind one interface (see the module docstring for the shared contract)."""

    name: str
    """Short, stable name of this provider instance (matches `NodeGroup.provider`)."""

    def node_groups(self) -> Sequence[NodeGroup]:
        """The node groups this provider manages, discovered by tags or Terraform outputs.

        Synchronous and read-only. Raises CredentialsError.
        """
        ...

    def offerings(self, group_id: str) -> Sequence[Offering]:
        """What `group_id` can launch: instance type, zone, capacity type, USD/hour, availability.

        An offering known to be failing right now has `available=False`.
        Synchronous and read-only. Raises NotFound (unknown group), CredentialsError.
        """
        ...

    def nodes(self) -> Mapping[NodeId, Node]:
        """Every non-terminated node of every group, warm-pool nodes included, by id.

        Eventually consistent: a newly launched node may be missing for a
        provider-documented delay, and states may lag. Count capacity from
        `group_state()`, not from this listing. Raises CredentialsError.
        """
        ...

    def group_state(self, group_id: str) -> GroupState:
        """The target and warm pool of `group_id` as the provider records them.

        Immediately consistent with the last applied `set_target`,
        `set_warm_pool` and `terminate`. Raises NotFound, CredentialsError.
        """
        ...

    def set_target(self, group_id: str, size: int, *, key: str) -> None:
        """Ask for `group_id` to have `size` serving nodes (absolute, not a delta).

        Asynchronous: nodes are launched (from the warm pool first, where there
        is one) or removed by the backend afterwards; observe them through
        `nodes()`. Idempotent by `key`.

        Raises NotFound (unknown group); InvalidTarget (size outside
        [min_size, max_size]); InsufficientCapacity / QuotaExceeded (the group
        cannot get that many nodes: nothing is applied); CredentialsError.
        """
        ...

    def set_warm_pool(self, group_id: str, size: int, state: WarmState, *, key: str) -> None:
        """Keep `size` prepared nodes in WARM(`state`) beyond the target of `group_id`.

        Asynchronous: nodes are prepared (booted, then stopped/hibernated) or
        removed afterwards. Idempotent by `key`. A warm node is consumed first
        when the target grows.

        Raises NotFound; InvalidTarget (negative size); NotSupported (no warm
        pools for this group, or not in that state); InsufficientCapacity;
        CredentialsError.
        """
        ...

    def terminate(self, node_ids: Sequence[NodeId], *, key: str) -> None:
        """Terminate exactly these nodes (burst picks victims) and decrement their group's desired size.

        Asynchronous: nodes move to TERMINATING and later disappear from
        `nodes()`. Terminating a node already terminating is a no-op.
        Idempotent by `key`.

        Raises NotFound for ids that are unknown or already terminated, after
        terminating the others in the same call: the caller treats those as
        done (terminate is retried, with a new key, until NotFound).
        Raises CredentialsError.
        """
        ...

    def poll_events(self) -> Sequence[ProviderEvent]:
        """Events since the last poll: interruption notices (with deadline), rebalance, launch failures.

        Drained: each event is returned exactly once, in the order it happened.
        Raises CredentialsError.
        """
        ...

    def refresh(self) -> None:
        """Bring the provider's cached view up to date; called once per tick before the reads.

        Raises CredentialsError (the provider is then unhealthy for this tick).
        """
        ...
