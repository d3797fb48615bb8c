"""One cost projection: sampled demand paths, as synthetic jobs, through the simulator's real planner.

The forecast gives each step's demand distribution; `forecasting.paths`
draws `paths` whole demand paths from it (default `DEFAULT_PATHS`, seeded),
correlated across steps as the forecaster's out-of-sample errors were. Each
path becomes synthetic jobs (`burst.projection.arrivals`, fault tolerance
marked by the baseline's policies), each path its own seeded draw of jobs:
which jobs realise a demand path, and which of them may move to spot, moves
a week's bill as much as the demand level does (one large job that cannot
move, on demand for days), so the quantiles take that in too. For the
baseline and for each what-if every path's jobs are replayed with `burst.sim.engine.simulate` over [start, start + horizon), so
every scenario sees identical work. Each run gives the bill per cost line
(`steady`, `elastic_on_demand`, `elastic_spot`, `hot_pool`: the sim
provider's, so the lines add up to the total), the controller's ledger per
tenant (GPU-hours each tenant's jobs held at the node's rate: idle capacity
and hot pools are overhead on no tenant, so tenant figures add up to less
than the total) and queue waits.

A scenario's P10, P50 and P90 are quantiles of those runs' costs: of the
total, and of each cost line and tenant taken on its own (so the lines'
P90s need not add up to the total's). They are not the cost of a quantile
path: a planner's cost is not linear in demand, and a path at its 90th
percentile at every step is far rarer than one in ten. Budget breaches, the
capacity advice and the waits shown are those of the median run (the run
whose total is the P50, the lower of two).

Spot is priced by `spot_from_history`: the last 30 days' time-weighted
median of the catalog's spot price history per offering, held flat over the
horizon, where the history covers it; the catalog's flat spot price elsewhere.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from burst.catalog import COST_LINES, SPOT_MEDIAN_WINDOW_S
from burst.model import Budget, CapacityType, Forecast, Job, Tier
from burst.planner.steady import advice_prices
from burst.projection.arrivals import JobTemplate, usable_mix
from burst.projection.budget import Breach
from burst.projection.capacity import CapacityAdvice, capacity_advice
from burst.projection.runs import Batch, RunSpend, demand_jobs, run_all
from burst.projection.services import ServicePaths, replica_hours_line
from burst.projection.whatif import WhatIf, run_for
from burst.sim.engine import StrategyResult
from burst.sim.setup import SimSetup
from burst.sim.traces import TraceStats
from forecasting.paths import COMONOTONE, DEFAULT_PATHS, Dependence, quantile, sample_paths

BASELINE = "baseline"
QUANTILES = (0.1, 0.5, 0.9)
THIN_HISTORY_S = 7 * 86400.0
"""Below this much demand history a projection says its band is wide (`thin_history`)."""

Progress = Callable[[str, int], None]
"""Called with (option, index of the demand path whose run just finished), once per run."""


def _q(q: float) -> str:
    return f"p{round(q * 100)}"


@dataclass
class Scenario:
    """The baseline or one what-if: its run of every sampled demand path and each tenant's budget status."""

    name: str
    runs: tuple[StrategyResult, ...]  # one per sampled path, in path order, without their ledger rows (`spend`)
    horizon_h: float
    budgets: dict[str, Budget]
    exceeds_at: dict[str, Breach | None]
    spend: tuple[RunSpend, ...] = ()  # per run, in path order: what is kept of its cost ledger

    @property
    def median_index(self) -> int:
        """The index of the run whose total cost is the P50 of the runs' totals (the lower of the two middle ones;
        of two runs with the same total, the earlier path's)."""
        ordered = sorted(range(len(self.runs)), key=lambda i: self.runs[i].cost_usd)
        return ordered[(len(ordered) - 1) // 2]

    @property
    def median_run(self) -> StrategyResult:
        """The run at `median_index`."""
        return self.runs[self.median_index]

    def cost(self, q: float) -> float:
        """The `q` quantile of the runs' total cost."""
        return quantile([r.cost_usd for r in self.runs], q)

    def line_cost(self, line: str, q: float) -> float:
        """The `q` quantile of the runs' cost on cost line `line`."""
        return quantile([r.cost_by_tier.get(line, 0.0) for r in self.runs], q)

    def tenant_cost(self, tenant: str, q: float) -> float:
        """The `q` quantile of the runs' cost held by `tenant`'s jobs."""
        return quantile([r.cost_by_tenant.get(tenant, 0.0) for r in self.runs], q)

    def tenants(self) -> list[str]:
        return sorted({t for r in self.runs for t in r.cost_by_tenant} | set(self.budgets))

    def to_json(self) -> dict[str, Any]:
        """The `burst cost --json` object of one scenario."""
        return {
            "horizon_h": round(self.horizon_h, 4),
            "total_usd": {_q(q): round(self.cost(q), 4) for q in QUANTILES},
            "by_tenant": {
                t: {
                    **{_q(q): round(self.tenant_cost(t, q), 4) for q in QUANTILES},
                    **_budget_json(self.budgets.get(t), self.exceeds_at.get(t)),
                }
                for t in self.tenants()
            },
            "by_tier": {line: {_q(q): round(self.line_cost(line, q), 4) for q in QUANTILES} for line in COST_LINES},
        }

    def usd_per_hour(self) -> float:
        """The P50 total per hour of the horizon."""
        return self.cost(0.5) / self.horizon_h if self.horizon_h else 0.0


def _budget_json(budget: Budget | None, breach: Breach | None) -> dict[str, Any]:
    """A tenant's budgets and its projected breach (the median run's) as `--json` writes them."""
    return {"budget_usd_hour": budget.usd_per_hour if budget else None,
            "budget_usd_month": budget.usd_per_month if budget else None,
            "exceeds_budget_at": breach.at.isoformat() if breach else None,
            "exceeds_budget": breach.budget if breach else None}


@dataclass
class Projection:
    """A whole projection: the forecast and paths it came from, the baseline, the what-ifs and the capacity advice."""

    start: datetime
    horizon_s: float
    forecast: Forecast
    baseline: Scenario
    what_if: dict[str, Scenario] = field(default_factory=dict)
    capacity: CapacityAdvice | None = None
    assumptions: tuple[str, ...] = ()
    spot_from_history: dict[tuple[str, str, str], float] = field(default_factory=dict)
    paths: tuple[tuple[float, ...], ...] = ()
    dependence: Dependence = COMONOTONE
    history_s: float | None = None  # the demand history the forecast was fitted on, when known
    services: ServicePaths = field(default_factory=ServicePaths)

    def to_json(self) -> dict[str, Any]:
        """The `burst cost --json` object: the baseline's keys, `paths`, `what_if`, `spot_from_history` and
        `capacity`, `history` and `services`.

        `paths` is how many demand paths were sampled and how their steps were
        correlated; `spot_from_history` maps "provider/instance_type/region" to
        the spot USD/hour the projection used from the history
        (`spot_from_history`'s rule); offerings not in it were priced at the
        catalog's flat spot price. `history` is how many days of demand history the forecast rests on and,
        below a week, why the band is wide (`thin_history`). `services` lists each service projected from its
        request rate (`ServiceOutlook.to_json`) and those left out, with why. `capacity` is the capacity advice (`CapacityAdvice.to_json`: its
        `steady_tier` has the keys of `burst plan --json`'s, window included), None without a steady tier.
        """
        return {**self.baseline.to_json(), "paths": {"count": len(self.paths), **self.dependence.to_json()},
                "what_if": {n: s.to_json() for n, s in self.what_if.items()},
                "spot_from_history": {"/".join(k): round(v, 6) for k, v in sorted(self.spot_from_history.items())},
                "capacity": None if self.capacity is None else self.capacity.to_json(),
                "history": {"days": None if self.history_s is None else round(self.history_s / 86400.0, 4),
                            "thin": thin_history(self.history_s)},
                "services": {"projected": [o.to_json() for o in self.services.outlooks],
                             "skipped": list(self.services.skipped)}}

    @property
    def thin(self) -> str | None:
        """Why the band is wide when the history is under a week (`thin_history`), else None."""
        return thin_history(self.history_s)

    def scenarios(self) -> list[Scenario]:
        return [self.baseline, *self.what_if.values()]


def thin_history(history_s: float | None) -> str | None:
    """What to say, in the table and the report, of a forecast fitted on under `THIN_HISTORY_S` of history (None
    with a week or more, or when the history's length is not known)."""
    if history_s is None or history_s >= THIN_HISTORY_S:
        return None
    span = f"{history_s / 3600:.0f} hours" if history_s < 2 * 86400 else f"{history_s / 86400:.1f} days"
    unseen = "a weekly or a daily cycle" if history_s < 86400 else "a weekly cycle"
    return (f"thin history: the forecast rests on {span} of demand history, less than a week, so the P10-P90 band is "
            f"wide and rests on little: the forecast cannot see {unseen}, and its quantiles are calibrated on few of "
            "its own past forecasts (none under two days of history)")


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
    """The synthetic jobs of the forecast's `q` quantile path over the horizon (`demand_jobs`)."""
    return demand_jobs(forecast.quantiles[q][:_steps(forecast, horizon_s)], _step_s(forecast), start, mix, setup, seed)


def _steps(forecast: Forecast, horizon_s: float) -> int:
    return max(1, math.ceil(horizon_s / _step_s(forecast) - 1e-9))


def _step_s(forecast: Forecast) -> float:
    if len(forecast.timestamps) < 2:
        return 3600.0
    return (forecast.timestamps[1] - forecast.timestamps[0]).total_seconds()


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
    paths: int = DEFAULT_PATHS,
    dependence: Dependence = COMONOTONE,
    history_s: float | None = None,
    services: ServicePaths | None = None,
) -> Projection:
    """Project the cost of `forecast` over [start, start + horizon_s) from `paths` sampled demand paths (module
    doc); deterministic for a seed, whatever `workers` is (how the runs run: `burst.projection.runs`).
    `history_s` is how much demand history `forecast` was fitted on (`thin_history`); `services` the services'
    replica jobs per path (`burst.projection.services`), one set per sampled path."""
    setup, spot_used = spot_from_history(setup, start)
    demand = [tuple(p) for p in sample_paths(forecast, dependence, paths, seed=seed, steps=_steps(forecast, horizon_s))]
    usable_mix(mix)  # fail on a mix no path can draw jobs from, and on a what-if the set-up cannot take, before any run
    for each in what_ifs:
        run_for(strategy, setup, stats, each)
    names = [BASELINE, *(w.name for w in what_ifs)]
    if len(set(names)) != len(names):
        raise ValueError(f"what-if names must differ from each other and from {BASELINE!r}: {', '.join(names[1:])}")
    batch = Batch(strategy=strategy, setup=setup, stats=stats, options=dict(zip(names, [None, *what_ifs], strict=True)),
                  demand=tuple(demand), step_s=_step_s(forecast), start=start, horizon_s=horizon_s, mix=tuple(mix),
                  seed=seed, prior=tuple(prior), month_to_date=dict(month_to_date or {}),
                  replicas=services.jobs if services is not None else ())
    if services is not None and services.jobs and len(services.jobs) != len(demand):
        raise ValueError(f"services: replica jobs for {len(services.jobs)} paths, {len(demand)} demand paths sampled")
    results = run_all(batch, workers=workers, done=on_progress)
    scenarios: list[Scenario] = []
    for name in names:
        runs = tuple(results[(name, i)][0] for i in range(len(demand)))
        spend = tuple(results[(name, i)][1] for i in range(len(demand)))
        tenants = sorted({t for r in runs for t in r.cost_by_tenant} | set(setup.policies))
        scenario = Scenario(name, runs, horizon_s / 3600.0, {t: setup.policy(t).budget for t in tenants}, {}, spend)
        breaches = spend[scenario.median_index].exceeds_at
        scenario.exceeds_at = {t: breaches.get(t) for t in tenants}
        scenarios.append(scenario)
    baseline = scenarios[0]
    return Projection(
        start=start,
        horizon_s=horizon_s,
        forecast=forecast,
        baseline=baseline,
        what_if={s.name: s for s in scenarios[1:]},
        capacity=_capacity(setup, forecast, horizon_s, baseline.median_run),
        spot_from_history=spot_used,
        paths=tuple(demand),
        dependence=dependence,
        history_s=history_s,
        assumptions=(*setup.assumptions, spot_rule(spot_used),
                     f"demand: {forecast.model} forecast of the pooled history; {len(demand)} demand paths sampled "
                     f"from its per-step quantiles (seed {seed}), steps correlated as its errors were "
                     f"({dependence.source}); jobs drawn from the history's size and duration mix at the rate that "
                     "yields each path's GPUs",
                     f"P10/P50/P90: quantiles of the {len(demand)} paths' simulated costs; budget breaches, waits and "
                     "capacity advice from the median run",
                     f"strategy simulated: {strategy}",
                     *([replica_hours_line(services.outlooks)] if services is not None and services.outlooks else ())),
        services=services or ServicePaths(),
    )


def _capacity(setup: SimSetup, forecast: Forecast, horizon_s: float, p50: StrategyResult) -> CapacityAdvice | None:
    """The capacity advice (`burst.projection.capacity`: `burst plan`'s steady-tier rule) from the forecast's P50
    over the projection's horizon (its first steps), and the cloud rate `p50` (the median run) paid."""
    steady = [g for g in setup.groups if g.tier is Tier.STEADY]
    if not steady or not forecast.timestamps:
        return None
    step_s = _step_s(forecast)
    window = forecast.timestamps[:_steps(forecast, horizon_s)]
    owned: dict[str, int] = defaultdict(int)
    for g in steady:
        owned[g.shape.gpu_model] += setup.initial.get(g.id, 0) * g.gpus_per_node
    steady_gpus = setup.steady_gpus()
    elastic_usd = p50.cost_by_tier.get("elastic_on_demand", 0.0) + p50.cost_by_tier.get("elastic_spot", 0.0)
    elastic_gh = p50.gpu_hours_paid - steady_gpus * horizon_s / 3600.0
    if elastic_usd > 0 and elastic_gh > 0:
        rate = elastic_usd / elastic_gh
    else:
        od = [setup.catalog.gpu_hour_price(g) for g in setup.groups
              if g.tier is Tier.ELASTIC and g.capacity_type is CapacityType.ON_DEMAND]
        rate = min(od) if od else 0.0
    prices = advice_prices((g, setup.catalog.gpu_hour_price(g)) for g in setup.groups)
    return capacity_advice(forecast, owned, setup.catalog.onprem, rate, start=window[0], end=window[-1], step_s=step_s,
                           gpus_per_node=steady[0].gpus_per_node, prices=prices)


__all__ = ["BASELINE", "QUANTILES", "Progress", "Projection", "Scenario", "demand_jobs", "path_jobs", "project",
           "spot_from_history", "spot_rule", "thin_history"]
