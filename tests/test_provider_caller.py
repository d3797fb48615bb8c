"""The retry caller, its settings and BackendUnavailable exist once, in providers/base, for every cloud adapter."""

from __future__ import annotations

from datetime import timedelta

import pytest
from builders import T0

import providers.aws
import providers.gcp
import providers.libcloud
from providers import base
from providers.base import (
    BackendUnavailable,
    Caller,
    CircuitBreaker,
    ErrorMapping,
    QuotaExceeded,
    RetrySettings,
)
from providers.sim import ManualClock


class Throttled(Exception):
    pass


class Refused(Exception):
    pass


ERRORS = ErrorMapping(
    backend="Fake",
    sdk_errors=(Throttled, Refused),
    is_transient=lambda exc: isinstance(exc, Throttled),
    map_error=lambda exc, what: QuotaExceeded(f"{what}: quota") if isinstance(exc, Refused)
    else BackendUnavailable(f"{what}: throttled"),
    describe=lambda exc: type(exc).__name__,
)
FAST = RetrySettings(attempts=3, initial_wait_s=0.0001, max_wait_s=0.0002)


def test_every_cloud_adapter_uses_the_one_caller_and_its_errors() -> None:
    for module in (providers.aws, providers.gcp, providers.libcloud):
        assert module.BackendUnavailable is base.BackendUnavailable
        assert module.RetrySettings is base.RetrySettings
    for name in ("aws", "gcp", "libcloud"):
        errors = __import__(f"providers.{name}.errors", fromlist=["x"])
        assert not hasattr(errors, "Caller") and not hasattr(errors, "RetrySettings")


def test_a_transient_failure_is_retried_with_the_hook_before_each_retry() -> None:
    tries: list[str] = []
    rereads: list[int] = []

    def flaky() -> str:
        tries.append("x")
        if len(tries) < 3:
            raise Throttled()
        return "done"

    assert Caller(FAST, ERRORS).run("Create", flaky, before_retry=lambda: rereads.append(len(tries))) == "done"
    assert (len(tries), rereads) == (3, [1, 2])


def test_sdk_errors_are_typed_and_open_the_breaker_only_when_the_backend_is_unavailable() -> None:
    clock = ManualClock(T0)
    breaker = CircuitBreaker(clock, failure_threshold=2, cool_off_s=60, backend="Fake")
    caller = Caller(FAST, ERRORS, breaker=breaker)

    def refuse() -> None:
        raise Refused()

    def throttle() -> None:
        raise Throttled()

    with pytest.raises(QuotaExceeded):
        caller.run("Grow", refuse)
    assert breaker.state == "closed"
    for _ in range(2):
        with pytest.raises(BackendUnavailable, match="throttled"):
            caller.run("Grow", throttle)
    with pytest.raises(BackendUnavailable, match="Fake circuit breaker open"):
        caller.run("Grow", lambda: None)
    clock.advance(timedelta(seconds=61).total_seconds())
    assert caller.run("Grow", lambda: "ok") == "ok" and breaker.state == "closed"
    with pytest.raises(KeyError):  # not the backend's error: a bug, raised as it is
        caller.run("Grow", lambda: {}["missing"])
