"""Request-rate forecasts for the daemon's services: each service's history kept at its step, forecast each tick.

`ServiceForecasts.forecast(service, now)` is what the service loop calls. A
service's history is read from its rate source (`RateSource.history`, the
last `training_days` plus an hour, at `step_s`) when it is first seen and
again once a day (as forecasts are refitted), and kept up in between from the
rates the loop observes (each step's mean, once the step is complete).
Forecasts are burst's `forecasting.rates.RateForecaster` (refitted at most
daily, re-anchored to the last hour on every call), one per service and
declared events, so a policy reload that changes a service's events starts a
fresh one.

`ServiceForecasts.surges` is the service's record of past surges from the
same history (`burst.planner.surges`), remade once a day, by which the warm
pool is also sized.

In the daemon (`background=True`) the forecaster runs in a worker thread and
the tick takes the latest forecast made (a refit never blocks a tick); with a
simulated clock it runs in the tick, so a run is deterministic.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from burst.model import RateForecast, Service
from burst.planner.surges import SurgeProfile
from burst.workloads.rates import RateSource, RateUnavailable
from forecasting.models import SeriesError
from forecasting.rates import RateForecaster

log = logging.getLogger("burst.services")

STEP_S = 300.0
"""The step rates are kept and forecast at (5 minutes: request volumes forecast an hour ahead from 5-minute data)."""
HORIZON_S = 3600.0
"""How far each forecast reaches: past the longest lead time, and the hour `burst services` shows."""
TRAINING_DAYS = 14.0
"""History a refit reads."""
REREAD_S = 86400.0
"""How often a service's history is read again from its source (as often as its forecast is refitted)."""
MIN_HISTORY_S = 86400.0
"""History a forecast needs: under a day, the service sizes from the observed rate alone."""

Key = tuple[str, str]


@dataclass
class RateHistory:
    """One service's mean rate per complete step, and the step being filled."""

    step_s: float
    times: list[datetime] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    _bucket: tuple[datetime, float, int] | None = None

    def _start(self, at: datetime) -> datetime:
        stamp = at.timestamp()
        return datetime.fromtimestamp(math.floor(stamp / self.step_s) * self.step_s, tz=at.tzinfo)

    def seed(self, points: list[tuple[datetime, float]]) -> None:
        """Take a source's history: one value per step (the last one given for a step wins)."""
        by_step: dict[datetime, float] = {}
        for at, value in points:
            by_step[self._start(at)] = value
        for at in sorted(by_step):
            if not self.times or at > self.times[-1]:
                self.times.append(at)
                self.values.append(by_step[at])

    def add(self, at: datetime, rate: float) -> None:
        """Fold a rate observed at `at` into its step's mean; a step is kept once a later one starts."""
        start = self._start(at)
        bucket = self._bucket
        if bucket is not None and bucket[0] == start:
            self._bucket = (start, bucket[1] + rate, bucket[2] + 1)
            return
        if bucket is not None and (not self.times or bucket[0] > self.times[-1]):
            self.times.append(bucket[0])
            self.values.append(bucket[1] / bucket[2])
        self._bucket = (start, rate, 1)
        keep = int((TRAINING_DAYS * 86400 + 2 * HORIZON_S) / self.step_s)
        if len(self.times) > 2 * keep:  # trim now and then, not every step
            del self.times[:-keep], self.values[:-keep]

    def carry(self, older: RateHistory) -> None:
        """Take the step `older` was filling, and its complete steps after the last one this history holds."""
        last = self.times[-1] if self.times else None
        for at, value in zip(older.times, older.values, strict=True):
            if last is None or at > last:
                self.times.append(at)
                self.values.append(value)
        self._bucket = older._bucket

    def span_s(self) -> float:
        """Seconds of complete history kept."""
        return (self.times[-1] - self.times[0]).total_seconds() + self.step_s if self.times else 0.0


class ServiceForecasts:
    """Each service's rate history and forecaster (module doc)."""

    def __init__(self, rates: RateSource, *, background: bool, step_s: float = STEP_S,
                 horizon_s: float = HORIZON_S) -> None:
        self.rates = rates
        self.background = background
        self.step_s = step_s
        self.horizon_s = horizon_s  # how far each forecast reaches (a cost projection asks for its whole horizon)
        self.histories: dict[Key, RateHistory] = {}
        self.forecasters: dict[tuple[Key, tuple[object, ...]], RateForecaster] = {}
        self.latest: dict[Key, RateForecast] = {}
        self.read_at: dict[Key, datetime] = {}  # when each service's history was last read from its source
        self.errors: dict[Key, str] = {}
        self._threads: dict[Key, threading.Thread] = {}
        self._lock = threading.Lock()
        self._surges: dict[Key, tuple[datetime, float, SurgeProfile]] = {}  # made at, window, profile

    def observe(self, service: Service, now: datetime, rate: float) -> None:
        """Keep the rate observed at `now`; the first time, and once a day after (as forecasts are refitted), read
        the service's history from its source first, so steps the loop missed (a restart, an outage of the
        source) are filled from the source's own record."""
        key = (service.tenant, service.name)
        history = self.histories.get(key)
        read_at = self.read_at.get(key)
        if history is None or read_at is None or (now - read_at).total_seconds() >= REREAD_S:
            fresh = RateHistory(self.step_s)
            start = now - timedelta(days=TRAINING_DAYS, seconds=HORIZON_S)
            try:
                fresh.seed(self.rates.history(service, start, now - timedelta(seconds=self.step_s), self.step_s))
            except RateUnavailable as exc:  # forecasts go on from what the loop observes
                self.errors[key] = f"history: {exc}"
                fresh = history if history is not None else fresh
            else:
                if history is not None:
                    fresh.carry(history)
            self.read_at[key] = now
            history = self.histories[key] = fresh
        history.add(now, rate)

    def forecast(self, service: Service, now: datetime) -> RateForecast | None:
        """The forecast the service is sized with at `now`: None under `MIN_HISTORY_S` of history or before the
        first forecast is made (in the background, the latest one made)."""
        key = (service.tenant, service.name)
        history = self.histories.get(key)
        if history is None or history.span_s() < MIN_HISTORY_S:
            return None
        forecaster = self._forecaster(service)
        times, values = list(history.times), list(history.values)
        if not self.background:
            self._make(key, forecaster, times, values, now, bool(service.events))
            return self.latest.get(key)
        with self._lock:
            running = self._threads.get(key)
            if running is None or not running.is_alive():
                thread = threading.Thread(target=self._make, args=(key, forecaster, times, values, now, bool(service.events)),
                                          name=f"rate-forecast-{service.tenant}-{service.name}", daemon=True)
                self._threads[key] = thread
                thread.start()
            latest = self.latest.get(key)
        return latest if latest is not None and latest.at and latest.at[-1] > now else None

    def surges(self, service: Service, now: datetime, window_s: float) -> SurgeProfile | None:
        """The service's record of past surges over `window_s` (`burst.planner.surges`), made from its kept
        history and remade once a day or when the window changes; None before any history is kept."""
        key = (service.tenant, service.name)
        history = self.histories.get(key)
        if history is None or not history.values:
            return None
        made = self._surges.get(key)
        if made is None or made[1] != window_s or (now - made[0]).total_seconds() >= REREAD_S:
            made = (now, window_s, SurgeProfile.of(history.values, self.step_s, window_s))
            self._surges[key] = made
        return made[2]

    def _forecaster(self, service: Service) -> RateForecaster:
        key = ((service.tenant, service.name), tuple(service.events))
        forecaster = self.forecasters.get(key)
        if forecaster is None:
            stale = [k for k in self.forecasters if k[0] == key[0]]
            for k in stale:
                del self.forecasters[k]
            forecaster = self.forecasters[key] = RateForecaster(self.step_s, events=service.events,
                                                                 training_days=TRAINING_DAYS)
        return forecaster

    def _make(self, key: Key, forecaster: RateForecaster, times: list[datetime], values: list[float],
              now: datetime, events_included: bool) -> None:
        try:
            stamps, quantiles = forecaster.forecast(times, values, now, self.horizon_s)
        except (SeriesError, ValueError) as exc:
            self.errors[key] = f"forecast: {exc}"
            log.warning("rate forecast failed", extra={"service": "/".join(key), "detail": str(exc)})
            return
        made = RateForecast(at=stamps, quantiles=quantiles, events_included=events_included)
        with self._lock:
            self.latest[key] = made
            self.errors.pop(key, None)

    def wait(self) -> None:
        """Wait for the forecasts being made in the background (tests, shutdown)."""
        for thread in list(self._threads.values()):
            thread.join()
