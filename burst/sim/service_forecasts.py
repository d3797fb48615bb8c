"""Request-rate forecasts for the service replay, issued at fixed simulated times so results are deterministic.

burst's controller reads, at each instant, the last forecast issued at or before it. Forecasts are issued at
every step of the series inside the window (5 or 30 minutes; a minute for a per-second trace), from the history
before then, by `forecasting.rates.RateForecaster` (refitted once a simulated day on at most 14 days). A series
with under a day of history before an issue time gets no forecast then (the Azure hour never has one): burst
sizes from the observed rate alone there. A track depends only on the series and the service's events, so the
strategies of one run share it (`forecast_track` caches it).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from burst.model import QUANTILES, RateForecast, Service
from burst.sim.service_traces import RateSeries
from forecasting.models import SeriesError
from forecasting.rates import RateForecaster

HORIZON_S = 3600.0
"""How far each forecast reaches: past the longest lead time (a cold boot plus the model load)."""
MIN_HISTORY_S = 86400.0
"""History a forecast needs before its issue time."""
FORECAST_STEP_S = 60
"""A per-second trace is forecast on per-minute means."""

Forecaster = Callable[[list[datetime], list[float], datetime, float], tuple[tuple[datetime, ...], dict[float, tuple[float, ...]]]]


def rate_forecaster(step_s: float, service: Service) -> Forecaster:
    """The forecaster the replay uses for one series: burst's `RateForecaster` with the service's events."""
    return RateForecaster(step_s, events=service.events).forecast


@dataclass(frozen=True)
class ForecastTrack:
    """Forecasts issued at `issued` (ascending); `at(now)` is the last one issued at or before `now`."""

    issued: tuple[datetime, ...]
    forecasts: tuple[RateForecast | None, ...]

    def at(self, now: datetime) -> RateForecast | None:
        """The forecast in force at `now` (None before the first, or where none could be made)."""
        i = bisect_right(self.issued, now)
        return self.forecasts[i - 1] if i else None


def _series_rates(series: RateSeries) -> tuple[int, list[datetime], list[float], int]:
    """The series as mean rates at its forecast step: (step_s, step starts, rates, index of the window start)."""
    if series.step_s >= FORECAST_STEP_S:
        times = [series.at(k) for k in range(series.end)]
        return series.step_s, times, list(series.counts[: series.end] / series.step_s), series.start
    per = FORECAST_STEP_S // series.step_s
    counts = series.counts[: series.end]
    n = len(counts) // per
    rates = counts[: n * per].reshape(n, per).sum(axis=1) / FORECAST_STEP_S
    times = [series.origin + timedelta(seconds=k * FORECAST_STEP_S) for k in range(n)]
    return FORECAST_STEP_S, times, list(np.asarray(rates, dtype=float)), series.start // per


def build_track(series: RateSeries, service: Service, forecaster: Forecaster | None = None) -> ForecastTrack:
    """Issue a forecast at every step of the window (module doc)."""
    step, times, rates, start = _series_rates(series)
    forecast = forecaster or rate_forecaster(step, service)
    issued: list[datetime] = []
    out: list[RateForecast | None] = []
    for k in range(start, len(times)):
        now = times[k]
        issued.append(now)
        if (now - times[0]).total_seconds() < MIN_HISTORY_S:
            out.append(None)
            continue
        try:
            at, quantiles = forecast(times, rates, now, HORIZON_S)
        except (SeriesError, ValueError):
            out.append(None)
            continue
        out.append(RateForecast(at, quantiles, events_included=bool(service.events)))
    return ForecastTrack(tuple(issued), tuple(out))


def clairvoyant_track(series: RateSeries, service: Service) -> ForecastTrack:
    """A reference track: at every issue time of `build_track`, the series' true rates over the next
    `HORIZON_S` from the step in progress (as `RateForecaster.forecast` starts), every quantile equal to them (no spread), so the warm pool is sized from past surges alone.
    What burst's steps make of a perfect point forecast: a reference, not a bound (the steps are heuristics)."""
    step, times, rates, start = _series_rates(series)
    steps = max(1, int(math.ceil(HORIZON_S / step)))
    issued: list[datetime] = []
    out: list[RateForecast | None] = []
    for k in range(start, len(times)):
        issued.append(times[k])
        future = tuple(rates[k: k + steps])
        out.append(RateForecast(tuple(times[k: k + steps]), dict.fromkeys(QUANTILES, future), events_included=True))
    return ForecastTrack(tuple(issued), tuple(out))


_CACHE: dict[tuple[str, int, int, tuple[object, ...]], ForecastTrack] = {}


def _key(series: RateSeries, service: Service) -> tuple[str, int, int, tuple[object, ...]]:
    return (str(series.path), series.start, series.end, service.events)


def forecast_track(series: RateSeries, service: Service) -> ForecastTrack:
    """`build_track` with burst's forecaster, cached per (series, window, events) for the life of the process."""
    key = _key(series, service)
    if key not in _CACHE:
        _CACHE[key] = build_track(series, service)
    return _CACHE[key]


def remember_track(series: RateSeries, service: Service, track: ForecastTrack) -> None:
    """Put a track made earlier for this series and service (a benchmark's saved one) where `forecast_track`
    finds it."""
    _CACHE[_key(series, service)] = track
