"""One cost projection: a forecast's P50 and P90 paths, as synthetic jobs, through the simulator's real planner.

For the baseline and for each what-if, the same two job sets (from the P50
and the P90 path, `burst.projection.arrivals`; fault tolerance marked by the
baseline's policies, so every scenario sees identical work) are replayed with
`burst.sim.engine.simulate` over [start, start + horizon). Each run gives the
bill per cost line (`steady`, `elastic_on_demand`, `elastic_spot`,
`hot_pool`: the sim provider's, so the lines add up to the total), the
controller's ledger per tenant (GPU-hours each tenant's jobs held at the
node's rate: idle capacity and hot pools are overhead on no tenant, so tenant
figures add up to less than the total) and queue waits.

Spot is priced by `spot_from_history`: the last 30 days' time-weighted
median of the catalog's spot price history per offering, held flat over the
horizon, where the history covers it; the catalog's flat spot price elsewhere.

The P90 figures are those of the P90 path's run, not a quantile of the cost:
a planner's cost is not linear in demand, so this is the cost of a demand
path that the forecast puts at its 90th percentile at every step, an upper
band rather than a calibrated quantile.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from burst.catalog import COST_LINES, SPOT_MEDIAN_WINDOW_S
from burst.model import CapacityType, Forecast, Job, Tier
from burst.projection.arrivals import JobTemplate, synthetic_jobs
from burst.projection.budget import breach_at, spend_points
from burst.projection.capacity import CapacityAdvice, capacity_advice
from burst.projection.whatif import WhatIf, run_for
from burst.sim.engine import StrategyResult, simulate
from burst.sim.setup import SimSetup, with_fault_tolerance
from burst.sim.traces import TraceStats

PATHS = (0.5, 0.9)
BASELINE = "baseline"

Progress = Callable[[str, int, int], None]
"""Called with (what finished, runs done, runs in all)."""


@dataclass
class Scenario:
    """The baseline or one what-if: its P50 and P90 runs and each tenant's budget status."""

    name: str
    p50: StrategyResult
    p90: StrategyResult
    horizon_h: float
    budgets: dict[str, float | None]
    exceeds_at: dict[str, datetime | None]

    def tenants(self) -> list[str]:
        return sorted(set(self.p50.cost_by_tenant) | set(self.p90.cost_by_tenant) | set(self.budgets))

    def to_json(self) -> dict[str, Any]:
        """The `burst cost --json` object of one scenario."""
        return {
            "horizon_h": round(self.horizon_h, 4),
            "total_usd": {"p50": round(self.p50.cost_usd, 4), "p90": round(self.p90.cost_usd, 4)},
            "by_tenant": {
                t: {
                    "p50": round(self.p50.cost_by_tenant.get(t, 0.0), 4),
                    "p90": round(self.p90.cost_by_tenant.get(t, 0.0), 4),
                    "budget_usd_month": self.budgets.get(t),
                    "exceeds_budget_at": (lambda at: at.isoformat() if at else None)(self.exceeds_at.get(t)),
                }
                for t in self.tenants()
            },
            "by_tier": {
                line: {"p50": round(self.p50.cost_by_tier.get(line, 0.0), 4),
                       "p90": round(self.p90.cost_by_tier.get(line, 0.0), 4)}
                for line in COST_LINES
            },
        }

    def usd_per_hour(self) -> float:
        return self.p50.cost_usd / self.horizon_h if self.horizon_h else 0.0


@dataclass
class Projection:
    """A whole projection: the forecast it came from, the baseline, the what-ifs and the capacity advice."""

    start: datetime
    horizon_s: float
    forecast: Forecast
    baseline: Scenario
    what_if: dict[str, Scenario] = field(default_factory=dict)
    capacity: CapacityAdvice | None = None
    assumptions: tuple[str, ...] = ()
    spot_from_history: dict[tuple[str, str, str], float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The `burst cost --json` object: the baseline's keys, `what_if`, and `spot_from_history`.

        `spot_from_history` maps "provider/instance_type/region" to the spot
        USD/hour the projection used from the history (`spot_from_history`'s rule);
        offerings not in it were priced at the catalog's flat spot price.
        """
        return {**self.baseline.to_json(), "what_if": {n: s.to_json() for n, s in self.what_if.items()},
                "spot_from_history": {"/".join(k): round(v, 6) for k, v in sorted(self.spot_from_history.items())}}

    def scenarios(self) -> list[Scenario]:
        return [self.baseline, *self.what_if.values()]


def spot_from_history(setup: SimSetup, start: datetime) -> tuple[SimSetup, dict[tuple[str, str, str], float]]:
    """The set-up priced for a projection from `start`, and the spot prices the history gave.

    Rule: each offering's spot price over the whole horizon is the
    time-weighted median of its spot price history (cheapest zone at each
    instant) over the 30 days before `start` (`Catalog.projected_spot`); an
    offering the history does not cover there keeps the catalog's flat spot
    price. The simulator bills one price per group, so the price is held flat
    over the horizon rather than following the history inside it.
    """
    catalog, used = setup.catalog.projected_spot(start)
    if not used:
        return setup, used
    return dataclasses.replace(setup, catalog=catalog), used


def spot_rule(used: Mapping[tuple[str, str, str], float]) -> str:
    """The assumption line that states the spot price rule and what it gave."""
    got = "; ".join(f"{'/'.join(k)} {v:g} $/h" for k, v in sorted(used.items())) or "none covered"
    return (f"spot prices: the time-weighted median of the spot price history over the {SPOT_MEDIAN_WINDOW_S / 86400:g} "
            f"days before the start (cheapest zone at each instant), held flat over the horizon ({got}); offerings "
            "without history there keep the catalog's flat spot price")


def path_jobs(forecast: Forecast, q: float, start: datetime, horizon_s: float, mix: Sequence[JobTemplate],
              setup: SimSetup, seed: int) -> list[Job]:
    """The synthetic jobs of the forecast's `q` path over the horizon, fault tolerance marked by `setup`.

    Every path draws from the same seeded stream under the same job ids, so
    the n-th job of the P90 path is the n-th of the P50 path (same tenant,
    size, duration and fault tolerance): a path above another at every step
    owes at least its jobs, tenant by tenant, and differs only by more.
    """
    step_s = _step_s(forecast)
    steps = max(1, math.ceil(horizon_s / step_s - 1e-9))
    path = list(forecast.quantiles[q][:steps])
    jobs = synthetic_jobs(start, step_s, path, mix, seed=seed, prefix="proj")
    return with_fault_tolerance(jobs, setup, seed)


def _step_s(forecast: Forecast) -> float:
    if len(forecast.timestamps) < 2:
        return 3600.0
    return (forecast.timestamps[1] - forecast.timestamps[0]).total_seconds()


def _one_run(strategy: str, setup: SimSetup, stats: TraceStats, what_if: WhatIf | None, jobs: Sequence[Job],
             start: datetime, end: datetime, seed: int, prior: Sequence[Job]) -> StrategyResult:
    run = run_for(strategy, setup, stats, what_if)
    return simulate(run, jobs, start=start, end=end, seed=seed, prior=prior, keep_ledger=True)


def project(
    setup: SimSetup,
    stats: TraceStats,
    forecast: Forecast,
    mix: Sequence[JobTemplate],
    *,
    start: datetime,
    horizon_s: float,
    strategy: str = "burst",
    what_ifs: Sequence[WhatIf] = (),
    seed: int = 0,
    month_to_date: Mapping[str, float] | None = None,
    prior: Sequence[Job] = (),
    workers: int = 1,
    on_progress: Progress | None = None,
) -> Projection:
    """Project the cost of `forecast` over [start, start + horizon_s) (module doc); deterministic for a seed."""
    end = start + timedelta(seconds=horizon_s)
    setup, spot_used = spot_from_history(setup, start)
    jobs = {q: path_jobs(forecast, q, start, horizon_s, mix, setup, seed) for q in PATHS}
    for each in what_ifs:  # fail on a what-if the set-up cannot take before any simulation starts
        run_for(strategy, setup, stats, each)
    names = [BASELINE, *(w.name for w in what_ifs)]
    if len(set(names)) != len(names):
        raise ValueError(f"what-if names must differ from each other and from {BASELINE!r}: {', '.join(names[1:])}")
    cases: list[tuple[str, WhatIf | None, float]] = [(name, w, q) for name, w in zip(names, [None, *what_ifs], strict=True) for q in PATHS]
    results: dict[tuple[str, float], StrategyResult] = {}
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {(n, q): pool.submit(_one_run, strategy, setup, stats, w, jobs[q], start, end, seed, prior)
                       for n, w, q in cases}
            for i, (key, future) in enumerate(futures.items(), start=1):
                results[key] = future.result()
                if on_progress:
                    on_progress(f"{key[0]} P{round(key[1] * 100)}", i, len(cases))
    else:
        for i, (n, w, q) in enumerate(cases, start=1):
            results[(n, q)] = _one_run(strategy, setup, stats, w, jobs[q], start, end, seed, prior)
            if on_progress:
                on_progress(f"{n} P{round(q * 100)}", i, len(cases))
    mtd = dict(month_to_date or {})
    horizon_h = horizon_s / 3600.0
    scenarios: list[Scenario] = []
    for name in names:
        p50, p90 = results[(name, 0.5)], results[(name, 0.9)]
        tenants = sorted(set(p50.cost_by_tenant) | set(p90.cost_by_tenant) | set(setup.policies))
        budgets = {t: setup.policy(t).budget.usd_per_month for t in tenants}
        exceeds = {t: breach_at(spend_points(p50.ledger, t), budgets[t], start=start, month_to_date_usd=mtd.get(t, 0.0))
                   for t in tenants}
        scenarios.append(Scenario(name, p50, p90, horizon_h, budgets, exceeds))
    baseline = scenarios[0]
    return Projection(
        start=start,
        horizon_s=horizon_s,
        forecast=forecast,
        baseline=baseline,
        what_if={s.name: s for s in scenarios[1:]},
        capacity=_capacity(setup, forecast, horizon_s, baseline.p50),
        spot_from_history=spot_used,
        assumptions=(*setup.assumptions, spot_rule(spot_used),
                     f"demand: {forecast.model} forecast of the pooled history; jobs drawn from the history's "
                     f"size and duration mix (seed {seed}) at the rate that yields each path's GPUs",
                     f"strategy simulated: {strategy}"),
    )


def _capacity(setup: SimSetup, forecast: Forecast, horizon_s: float, p50: StrategyResult) -> CapacityAdvice | None:
    steady = [g for g in setup.groups if g.tier is Tier.STEADY]
    if not steady:
        return None
    step_s = _step_s(forecast)
    steps = max(1, math.ceil(horizon_s / step_s - 1e-9))
    steady_gpus = setup.steady_gpus()
    elastic_usd = p50.cost_by_tier.get("elastic_on_demand", 0.0) + p50.cost_by_tier.get("elastic_spot", 0.0)
    elastic_gh = p50.gpu_hours_paid - steady_gpus * horizon_s / 3600.0
    if elastic_usd > 0 and elastic_gh > 0:
        rate = elastic_usd / elastic_gh
    else:
        od = [setup.catalog.gpu_hour_price(g) for g in setup.groups
              if g.tier is Tier.ELASTIC and g.capacity_type is CapacityType.ON_DEMAND]
        rate = min(od) if od else 0.0
    return capacity_advice(forecast.quantiles[0.5][:steps], step_s, steady_gpus, setup.catalog.onprem, rate,
                           gpus_per_node=steady[0].gpus_per_node)


__all__ = ["BASELINE", "PATHS", "Projection", "Scenario", "path_jobs", "project", "spot_from_history", "spot_rule"]
