"""Where a service's request rate comes from: the `RateSource` protocol, and the quickstart's synthetic one.

The daemon reads each service's **offered** load (arrivals, rejected and
queued requests included, never completions: a saturated service's
completions hide the demand) every tick with `rate`, and its history with
`history` when it starts and when a forecast refit is due. Production reads
Prometheus (`burst.workloads.prometheus.PrometheusRates`); the embedded
quickstart reads `SyntheticRates`, a seeded daily cycle, documented as
synthetic.

A source that cannot answer raises `RateUnavailable` naming the query and
the error: the service then keeps its replicas (no scale-in on a missing
rate), and the tick goes on.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from burst.model import Service


class RateUnavailable(Exception):  # noqa: N818 (a condition the caller handles, not a bug)
    """A service's rate could not be read: `query` names what was asked, the message says why."""

    def __init__(self, query: str, why: str) -> None:
        super().__init__(f"rate query {query!r} failed: {why}")
        self.query = query
        self.why = why


class RateSource(Protocol):
    """Request rates of services, in requests per second."""

    def rate(self, service: Service, now: datetime) -> float:
        """The offered rate at `now` (the requests of the last minute / 60); raises `RateUnavailable`."""
        ...

    def history(self, service: Service, start: datetime, end: datetime, step_s: float) -> list[tuple[datetime, float]]:
        """The offered rate at each step from `start` to `end` (ascending; steps with no sample left out);
        raises `RateUnavailable`."""
        ...


@dataclass(frozen=True)
class DailyCycle:
    """One synthetic service's rate: `base_rps` at the daily mean, a cosine of relative `amplitude` peaking at
    `peak_hour` UTC, and seeded noise of relative size `noise` drawn once per minute."""

    base_rps: float
    amplitude: float = 0.6
    peak_hour: float = 13.0
    noise: float = 0.05

    def __post_init__(self) -> None:
        if not (self.base_rps > 0 and 0 <= self.amplitude < 1 and 0 <= self.noise < 1 and 0 <= self.peak_hour < 24):
            raise ValueError("synthetic rate: base_rps > 0, amplitude and noise in [0, 1), peak_hour in [0, 24)")


class SyntheticRates:
    """burst's own seeded synthetic request rates (the quickstart's): a daily cycle per service, the same at the
    same instant on every run. Not real traffic: real series are what `bench/services.py` replays."""

    def __init__(self, cycles: Mapping[str, DailyCycle], seed: int = 0) -> None:
        self.cycles = dict(cycles)
        self.seed = seed

    def _cycle(self, service: Service) -> DailyCycle:
        key = f"{service.tenant}/{service.name}"
        cycle = self.cycles.get(key) or self.cycles.get(service.name)
        if cycle is None:
            raise RateUnavailable(f"synthetic:{key}", "no synthetic cycle declared for this service")
        return cycle

    def _at(self, cycle: DailyCycle, key: str, at: datetime) -> float:
        hours = at.hour + at.minute / 60 + at.second / 3600
        level = 1 + cycle.amplitude * math.cos(2 * math.pi * (hours - cycle.peak_hour) / 24)
        minute = int(at.timestamp() // 60)
        digest = hashlib.blake2b(f"{self.seed}:{key}:{minute}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "big") / 2**64  # uniform in [0, 1), the same for this minute on every run
        return max(0.0, cycle.base_rps * level * (1 + cycle.noise * (2 * u - 1)))

    def rate(self, service: Service, now: datetime) -> float:
        """The cycle's rate over the minute before `now`."""
        return self._at(self._cycle(service), f"{service.tenant}/{service.name}", now - timedelta(seconds=30))

    def history(self, service: Service, start: datetime, end: datetime, step_s: float) -> list[tuple[datetime, float]]:
        """The cycle's rate at each step in [start, end]."""
        cycle = self._cycle(service)
        key = f"{service.tenant}/{service.name}"
        steps = int((end - start).total_seconds() // step_s)
        return [(t, self._at(cycle, key, t)) for t in (start + timedelta(seconds=k * step_s) for k in range(steps + 1))]
