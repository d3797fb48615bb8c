"""Forecasts in the simulator: the daemon's `ForecastService`, refitting synchronously on the sim clock.

The `burst` strategy plans with forecasts exactly as the daemon does: the
controller records demand history (running + pending GPUs, every 5 simulated
minutes) in its store, and a `ForecastService` with `background=False` refits
from it every `refit_every_s` of simulated time, cached by (series, cutoff),
so a run is deterministic; the seconds spent fitting are counted apart from
the simulation (`fit_s`).

Two choices differ from a daemon's defaults, and the report states them:

- history before the replay window comes from the trace itself: the GPUs of
  the jobs submitted before it, as if each ran from its submission for its
  duration (the trace's unconstrained demand), so the forecaster starts with
  the weeks of history a running daemon would have (from the trace's first
  job on: before it the trace says nothing, which is not zero demand);
- forecasts are pooled (`ALL_TENANTS`): one series per GPU model for all
  tenants (at the daemon's default 15-minute step). A trace has dozens of
  tenants, and fitting each every six simulated hours would make the
  benchmark slow without changing much of what pre-scaling does, which sums
  tenants anyway.

`ClairvoyantForecaster` is a reference, not a forecaster: every quantile of
its forecasts is the trace's true unconstrained demand over the horizon (from
the first step at or after `now` on), and it reports the best backtest a
forecast can have, so every forecast-driven step trusts it. Planning with it
measures what perfect point forecasts of demand move with this planner's
forecast-driven steps. It is not an upper bound on what forecasts could do:
the steps are heuristics, a point forecast says nothing of which jobs will be
fault-tolerant, and a forecast with a spread can lead them elsewhere. The
`burst-clairvoyant` strategy runs it (`burst.sim.strategies`).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from burst.model import (
    ALL_TENANTS,
    ANY_MODEL,
    QUANTILES,
    CapacityType,
    DemandPoint,
    Forecast,
    Job,
    NodeGroup,
    Tier,
    default_policy,
)
from burst.planner.prescale import lead_time_s
from burst.state import Store
from forecasting.select import SelectingForecaster
from forecasting.service import ForecastService

HISTORY_S = 30 * 86400.0


@dataclass(frozen=True)
class SimForecasting:
    """How the simulator forecasts for a strategy that plans with forecasts."""

    step_s: float = 900.0
    horizon_s: float = 48 * 3600.0
    refit_every_s: float = 6 * 3600.0
    history_s: float = HISTORY_S
    clairvoyant: bool = False  # plan with the trace's true future demand (`ClairvoyantForecaster`), a reference


def trace_demand(jobs: Iterable[Job], since: datetime, until: datetime, step_s: float) -> list[DemandPoint]:
    """The pooled unconstrained demand of `jobs` in [since, until): GPUs of jobs submitted and not yet done, per step."""
    events: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
    for job in jobs:
        if job.submitted_at >= until or job.duration_s is None:
            continue
        done = job.submitted_at + timedelta(seconds=job.duration_s)
        if done <= since:
            continue
        model = job.gpu_model or ANY_MODEL
        events[model].append((job.submitted_at, job.gpu_demand))
        events[model].append((done, -job.gpu_demand))
    out: list[DemandPoint] = []
    for model, changes in sorted(events.items()):
        changes.sort()
        times = [t for t, _ in changes]
        level = 0.0
        i = 0
        at = since
        while at < until:
            j = bisect.bisect_right(times, at)
            for _, delta in changes[i:j]:
                level += delta
            i = max(i, j)
            out.append(DemandPoint(at=at, tenant=ALL_TENANTS, gpu_model=model, running_gpus=max(0.0, level), pending_gpus=0.0))
            at += timedelta(seconds=step_s)
    out.sort(key=lambda p: (p.at, p.gpu_model))
    return out


def pooled(points: Iterable[DemandPoint]) -> list[DemandPoint]:
    """Demand samples summed over tenants: one point per (instant, GPU model) for `ALL_TENANTS`."""
    total: dict[tuple[datetime, str], list[float]] = {}
    for p in points:
        row = total.setdefault((p.at, p.gpu_model), [0.0, 0.0])
        row[0] += p.running_gpus
        row[1] += p.pending_gpus
    return [DemandPoint(at, ALL_TENANTS, model, r, q) for (at, model), (r, q) in sorted(total.items())]


class SimForecaster:
    """The controller's forecaster in a simulation, and the times a tick must run for it."""

    def __init__(
        self, settings: SimForecasting, store: Store, jobs: Sequence[Job], groups: Sequence[NodeGroup], start: datetime
    ) -> None:
        self.settings = settings
        self.start = start
        since = start - timedelta(seconds=settings.history_s)
        first = min((j.submitted_at for j in jobs), default=since)
        if first > since:  # a trace says nothing before its first job: that is no history, not zero demand
            since += timedelta(seconds=settings.step_s * ((first - since).total_seconds() // settings.step_s))
        self.prior = trace_demand(jobs, since, start, settings.step_s)
        self.store = store
        self._recorded: list[DemandPoint] = []  # pooled samples the store holds, read as far as `_read_until`
        self._read_until = start
        self.service = ForecastService(
            self._history,
            step_s=settings.step_s,
            horizon_s=settings.horizon_s,
            refit_every_s=settings.refit_every_s,
            background=False,
            fit=SelectingForecaster(),
        )
        policy = default_policy(ALL_TENANTS)
        leads = [
            lead_time_s(g, policy)
            for g in groups
            if g.tier is Tier.ELASTIC and g.capacity_type is CapacityType.ON_DEMAND
        ]
        self.lead = timedelta(seconds=min(leads, default=0.0))

    def __call__(self, now: datetime, jobs: Sequence[Job] = ()) -> tuple[Forecast, ...]:
        """The forecasts a tick at `now` plans with (refitting first when one is due)."""
        return self.service.forecasts(now)

    def next_due(self, now: datetime) -> datetime | None:
        """The next instant a tick could decide something new from forecasts: a refit, or a step entering the lead time."""
        refit = self.service.next_refit_at()
        due = [refit] if refit is not None else []
        for f in self.service.latest():
            i = bisect.bisect_right(f.timestamps, now + self.lead)
            if i < len(f.timestamps):
                due.append(f.timestamps[i] - self.lead)
        later = [d for d in due if d > now]
        return min(later) if later else None

    def _history(self, now: datetime) -> list[DemandPoint]:
        """The trace's demand before the replay, then what the controller recorded, over the last `history_s`.

        Only the samples recorded since the last refit are read from the store;
        those before the window are dropped as it moves on.
        """
        since = now - timedelta(seconds=self.settings.history_s)
        if now > self._read_until:
            self._recorded += pooled(self.store.demand_history(since=self._read_until, until=now))
            self._read_until = now
        first = bisect.bisect_left(self._recorded, since, key=lambda p: p.at)
        del self._recorded[:first]
        return [p for p in self.prior if p.at >= since] + self._recorded


class ClairvoyantForecaster(SimForecaster):
    """The simulator's forecaster with the trace's future in place of forecasts (see the module doc)."""

    def __init__(
        self, settings: SimForecasting, store: Store, jobs: Sequence[Job], groups: Sequence[NodeGroup], start: datetime
    ) -> None:
        super().__init__(settings, store, jobs, groups, start)
        ends = [j.submitted_at + timedelta(seconds=j.duration_s) for j in jobs if j.duration_s is not None]
        until = max([start, *ends]) + timedelta(seconds=settings.horizon_s + settings.step_s)
        self.truth: dict[str, list[DemandPoint]] = defaultdict(list)
        for p in trace_demand(jobs, start, until, settings.step_s):
            self.truth[p.gpu_model].append(p)
        self._steps = int(settings.horizon_s // settings.step_s)
        self._until = until

    def __call__(self, now: datetime, jobs: Sequence[Job] = ()) -> tuple[Forecast, ...]:
        """The true demand from the first step at or after `now` over the horizon, as every quantile of a forecast.

        Starting at or after `now`, the forecast's value now holds the jobs about to arrive within a step rather
        than miss those that arrived since the step before: a job is never counted both in the demand now and in
        the rise.
        """
        k = max(0, math.ceil((now - self.start).total_seconds() / self.settings.step_s - 1e-9))
        out = []
        for model, series in sorted(self.truth.items()):
            path = series[k:k + self._steps]
            if path:
                out.append(Forecast(
                    tenant=ALL_TENANTS, gpu_model=model, timestamps=tuple(p.at for p in path),
                    quantiles=dict.fromkeys(QUANTILES, tuple(p.running_gpus for p in path)), model=CLAIRVOYANT,
                    history_s=self.settings.history_s, backtest_p90_pinball=0.0, backtest_rise_skill=0.0))
        return tuple(out)

    def next_due(self, now: datetime) -> datetime | None:
        """The next instant a step enters the lead time (the truth changes step by step, never by refit); None
        once the truth has no step left to enter it."""
        step = self.settings.step_s
        ahead = (now + self.lead - self.start).total_seconds()
        due = self.start + timedelta(seconds=(ahead // step + 1) * step) - self.lead
        return due if due + self.lead < self._until else None


CLAIRVOYANT = "clairvoyant"
"""The model name a `ClairvoyantForecaster`'s forecasts carry."""
