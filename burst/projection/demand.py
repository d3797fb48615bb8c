"""The demand a projection forecasts from: a trace's jobs or the store's demand history, pooled into one series.

The series is every tenant's and GPU model's demand summed (GPUs of jobs
submitted and not yet done, for a trace; running + pending GPUs, for the
store), at `STEP_S`, over the `HISTORY_S` before the cutoff. It is fitted with
the forecaster the daemon runs (`forecasting.select.SelectingForecaster`: the
model a backtest on the series' own past chose, its quantiles calibrated per
horizon step, with its fallbacks and guardrails) over the horizon, and the
dependence of that model's errors across steps is learnt from the same
backtest (`forecasting.paths`), so demand paths can be sampled from it.

Under a day of history (`MIN_HISTORY_S`) the forecaster falls back to holding
the last value with a band of the history's hour-to-hour changes, and with no
past forecasts to learn from every step moves together. On a bursty
history the band's foot is then 0 at every step (the quickstart's 11 hours:
last hour 28.8 GPUs, a 10th-percentile hourly change of -32.9), so one path in
ten or more owes nothing for the whole horizon and every tenant's P10 comes
out $0, though no hour of the history was below 8.9 GPUs. There, each
step's quantiles are floored at the lowest demand the history held
(`floored`): the projection does not forecast a week below anything its
history showed on the strength of a few hours' swings.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from burst.model import DemandPoint, Forecast, Job
from burst.sim.forecasts import trace_demand
from forecasting.models import MIN_HISTORY_S, DemandSeries
from forecasting.paths import Dependence, forecast_with_dependence

STEP_S = 3600.0
HISTORY_S = 30 * 86400.0

def series_of_jobs(jobs: Iterable[Job], cutoff: datetime, *, step_s: float = STEP_S, history_s: float = HISTORY_S) -> DemandSeries:
    """The pooled unconstrained demand of `jobs` over [cutoff - history_s, cutoff), from the step of their first
    submission on: before it the jobs say nothing, which is not zero demand (a run of zeros there would read as a
    rising trend)."""
    jobs = list(jobs)
    since = cutoff - timedelta(seconds=history_s)
    first = min((j.submitted_at for j in jobs), default=since)
    points = trace_demand(jobs, since, cutoff, step_s)
    return _summed([p for p in points if p.at > first - timedelta(seconds=step_s)], since, cutoff, step_s)


def series_of_points(points: Iterable[DemandPoint], cutoff: datetime, *, step_s: float = STEP_S,
                     history_s: float = HISTORY_S) -> DemandSeries:
    """The store's demand samples, summed over tenants and models and averaged per step, over the history window."""
    since = cutoff - timedelta(seconds=history_s)
    return _summed([p for p in points if since <= p.at < cutoff], since, cutoff, step_s)


def _summed(points: Sequence[DemandPoint], since: datetime, cutoff: datetime, step_s: float) -> DemandSeries:
    if not points:
        raise ValueError("no demand history before the cutoff")
    first = min(p.at for p in points)
    origin = since + timedelta(seconds=((first - since).total_seconds() // step_s) * step_s)
    n = int(round((cutoff - origin).total_seconds() / step_s))
    totals: dict[int, float] = defaultdict(float)
    stamps: dict[int, set[datetime]] = defaultdict(set)
    for p in points:
        k = int((p.at - origin).total_seconds() // step_s)
        if 0 <= k < n:
            totals[k] += p.demand_gpus
            stamps[k].add(p.at)
    values = [totals[k] / max(1, len(stamps[k])) for k in range(n)]  # mean of the instants sampled in the step
    times = tuple(origin + timedelta(seconds=step_s * k) for k in range(n))
    return DemandSeries("all", "any", times, tuple(values), step_s)


def fit_forecast(series: DemandSeries, horizon_s: float) -> tuple[Forecast, Dependence]:
    """The forecast of `series` over `horizon_s` after its last step (its P10 to P99 paths) and how its errors are
    correlated across steps; under `MIN_HISTORY_S` of history, its quantiles floored at the history's lowest demand
    (module doc)."""
    forecast, dependence = forecast_with_dependence(series, horizon_s)
    if series.history_s < MIN_HISTORY_S and series.values:
        forecast = floored(forecast, min(series.values))
    return forecast, dependence


def floored(forecast: Forecast, floor: float) -> Forecast:
    """`forecast` with no quantile at any step below `floor` GPUs (said in its model name when that moved one)."""
    quantiles = {q: tuple(max(floor, v) for v in path) for q, path in forecast.quantiles.items()}
    if quantiles == dict(forecast.quantiles):
        return forecast
    return dataclasses.replace(forecast, quantiles=quantiles,
                               model=f"{forecast.model}, floored at the history's lowest demand ({floor:g} GPUs)")


__all__ = ["HISTORY_S", "STEP_S", "fit_forecast", "floored", "series_of_jobs", "series_of_points"]
