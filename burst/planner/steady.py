"""Step: the steady (on-prem) tier's capacity recommendation from the forecast.

On-prem GPUs are bought, not launched, so this step decides no action: it
adds one `SteadyAdvice` per GPU model to the plan, which `burst plan` and
`burst forecast` show. GPUs to own = the P50, over the planning window (the
forecasts' horizon), of the forecast P50 demand summed over tenants; the
utilisation today's steady tier would see under that demand gives the
green / yellow / red status (< 60% / 60-80% / > 80%). GPUs to buy
(`gpus_to_add`) = that size above the GPUs owned today, in whole nodes.
`burst plan` and `burst cost` both decide by these two functions; they
differ only in the window (`burst plan`: the daemon's forecast horizon;
`burst cost`: the projection's horizon) and in the forecast they read, and
each states its window beside the figures.

Given the owned and on-demand USD per GPU-hour, it also gives the
cost-optimal owned size: the (1 - owned / on-demand) quantile of the same
demand path. An owned GPU is paid every hour; one more of them saves an
on-demand GPU-hour in every hour demand exceeds the size, so it pays while
P(demand > size) > owned / on-demand (the newsvendor critical ratio). The
forecast is taken as demand that cannot move: fault-tolerant demand that
runs on spot, below the owned cost, would lower the size. Each size's cost
for a year is owned GPUs x owned price x 8760 h plus the mean on-demand
overflow over the window x on-demand price x 8760 h.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from burst.model import ANY_MODEL, CapacityType, Forecast, NodeGroup, SteadyAdvice, Tier, utilisation_status
from burst.planner.context import PlanContext
from burst.planner.contract import declare

STEP = "steady_advice"


def steady_advice(
    forecasts: Iterable[Forecast],
    steady_gpus: Mapping[str, int] | None,
    start: datetime,
    end: datetime | None = None,
    prices: tuple[float, float] | None = None,
) -> list[SteadyAdvice]:
    """Decide, per GPU model, how many steady GPUs the forecast P50 demand over [start, end] calls for.

    `steady_gpus` is the on-prem GPUs owned today per GPU model (None: not
    known, so no utilisation or status); demand for `ANY_MODEL` counts against
    all of them. Where every owned GPU is of one model, demand for that model
    and for any model fall on the same GPUs: they are one path, advised as
    `ANY_MODEL`. `end` defaults to the forecasts'
    last step. Models without forecast steps in the window get no advice.
    `prices` is (owned, on-demand) USD per GPU-hour for the cost-optimal size.
    """
    demand: dict[str, dict[datetime, float]] = defaultdict(lambda: defaultdict(float))
    for f in forecasts:
        first, last = f.steps_within(start, end)
        if first < last:
            by_step = demand[f.gpu_model]
            for ts, v in zip(f.timestamps[first:last], f.quantiles[0.5][first:last], strict=True):
                by_step[ts] += v
    if steady_gpus is not None and len(steady_gpus) == 1 and ANY_MODEL in demand:
        for ts, v in demand.pop(next(iter(steady_gpus)), {}).items():
            demand[ANY_MODEL][ts] += v
    out = []
    for model in sorted(demand):
        path = [demand[model][ts] for ts in sorted(demand[model])]
        recommended = math.ceil(statistics.median(path) - 1e-9)
        owned: int | None = None
        utilisation: float | None = None
        if steady_gpus is not None:
            owned = sum(steady_gpus.values()) if model == ANY_MODEL else steady_gpus.get(model, 0)
            utilisation = _utilisation(path, owned)
        q = optimal = year_rec = year_opt = None
        if prices is not None and 0 < prices[0] < prices[1]:
            q = 1.0 - prices[0] / prices[1]
            optimal = math.ceil(_quantile(sorted(path), q) - 1e-9)
            year_rec, year_opt = (year_usd(path, size, *prices) for size in (recommended, optimal))
        out.append(
            SteadyAdvice(
                gpu_model=model,
                steady_gpus=owned,
                recommended_gpus=recommended,
                utilisation=utilisation,
                utilisation_at_recommended=_utilisation(path, recommended),
                status=None if utilisation is None else utilisation_status(utilisation),
                window_start=min(demand[model]),
                window_end=max(demand[model]),
                cost_optimal_quantile=q,
                cost_optimal_gpus=optimal,
                year_usd_at_recommended=year_rec,
                year_usd_at_cost_optimal=year_opt,
            )
        )
    return out


def gpus_to_add(advice: SteadyAdvice, gpus_per_node: int = 1) -> int:
    """Decide how many on-prem GPUs to buy on `advice`: its recommended size above the GPUs owned today,
    rounded up to whole nodes of `gpus_per_node`; 0 when they already hold it or are not known."""
    if advice.steady_gpus is None or advice.recommended_gpus <= advice.steady_gpus:
        return 0
    nodes = -(-(advice.recommended_gpus - advice.steady_gpus) // max(1, gpus_per_node))
    return nodes * max(1, gpus_per_node)


HOURS_PER_YEAR = 8760.0


def year_usd(path: Sequence[float], size: int, owned_usd: float, on_demand_usd: float) -> float:
    """A year of owning `size` GPUs with demand like `path`, the overflow on on-demand (module doc)."""
    overflow = sum(max(0.0, v - size) for v in path) / len(path) if path else 0.0
    return (size * owned_usd + overflow * on_demand_usd) * HOURS_PER_YEAR


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q quantile of sorted values (linear interpolation)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@declare()
def advise_steady_tier(ctx: PlanContext) -> None:
    """Add the steady-tier recommendation for today's on-prem GPUs to the plan (no actions)."""
    if not ctx.forecasts:
        return
    owned: dict[str, int] = defaultdict(int)
    for cap in ctx.groups.values():
        if cap.group.tier is Tier.STEADY:
            owned[cap.group.shape.gpu_model] += cap.ready_nodes * cap.gpn
    prices = advice_prices((c.group, c.gpu_price) for c in ctx.groups.values())
    ctx.add_advice(_LAST_ADVICE.advice(ctx.forecasts, owned, ctx.now, prices))


def advice_prices(priced: Iterable[tuple[NodeGroup, float]]) -> tuple[float, float] | None:
    """The (owned, on-demand) USD per GPU-hour the cost-optimal size weighs, from (group, USD per GPU-hour)
    pairs: the cheapest steady group's and the cheapest on-demand elastic group's; None without both."""
    steady: list[float] = []
    on_demand: list[float] = []
    for group, usd in priced:
        if group.tier is Tier.STEADY:
            steady.append(usd)
        elif group.capacity_type is CapacityType.ON_DEMAND:
            on_demand.append(usd)
    return (min(steady), min(on_demand)) if steady and on_demand else None


class _LastAdvice:
    """The advice of the last plan, served again while its inputs stay the same.

    Forecasts change only when they are refitted, and the window moves only
    when a step drops out of it, while the loop plans every tick: between
    those, the same forecasts (the same objects), GPUs owned and first steps
    in the window give the same advice.
    """

    def __init__(self) -> None:
        self._last: tuple[tuple[Forecast, ...], tuple[tuple[int, int], ...], tuple[tuple[str, int], ...],
                          tuple[float, float] | None, tuple[SteadyAdvice, ...]] | None = None

    def advice(self, forecasts: Sequence[Forecast], owned: Mapping[str, int], now: datetime,
               prices: tuple[float, float] | None = None) -> list[SteadyAdvice]:
        """`steady_advice(forecasts, owned, now, prices=prices)`, reused when nothing it reads has changed."""
        windows = tuple(f.steps_within(now) for f in forecasts)
        held = tuple(sorted(owned.items()))
        last = self._last
        if (
            last is not None
            and len(last[0]) == len(forecasts)
            and all(a is b for a, b in zip(last[0], forecasts, strict=True))
            and last[1] == windows
            and last[2] == held
            and last[3] == prices
        ):
            return list(last[4])
        out = steady_advice(forecasts, owned, now, prices=prices)
        self._last = (tuple(forecasts), windows, held, prices, tuple(out))
        return out


_LAST_ADVICE = _LastAdvice()


def _utilisation(path: list[float], gpus: int) -> float:
    """Mean share of `gpus` that demand `path` keeps busy; 1.0 for no GPUs against positive demand."""
    if gpus <= 0:
        return 1.0 if any(v > 0 for v in path) else 0.0
    return sum(min(v, gpus) for v in path) / (len(path) * gpus)
