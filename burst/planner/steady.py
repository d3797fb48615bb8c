"""Step: the steady (on-prem) tier's capacity recommendation from the forecast.

On-prem GPUs are bought, not launched, so this step decides no action: it
adds one `SteadyAdvice` per GPU model to the plan, which `burst plan` and
`burst forecast` show. GPUs to own = the P50, over the planning window (the
forecasts' horizon), of the forecast P50 demand summed over tenants; the
utilisation today's steady tier would see under that demand gives the
green / yellow / red status (< 60% / 60-80% / > 80%).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime

from burst.model import ANY_MODEL, Forecast, SteadyAdvice, Tier, utilisation_status
from burst.planner.context import PlanContext

STEP = "steady_advice"


def steady_advice(
    forecasts: Iterable[Forecast],
    steady_gpus: Mapping[str, int] | None,
    start: datetime,
    end: datetime | None = None,
) -> list[SteadyAdvice]:
    """Decide, per GPU model, how many steady GPUs the forecast P50 demand over [start, end] calls for.

    `steady_gpus` is the on-prem GPUs owned today per GPU model (None: not
    known, so no utilisation or status); demand for `ANY_MODEL` counts against
    all of them. `end` defaults to the forecasts'
    last step. Models without forecast steps in the window get no advice.
    """
    demand: dict[str, dict[datetime, float]] = defaultdict(lambda: defaultdict(float))
    for f in forecasts:
        for ts, v in zip(f.timestamps, f.quantiles[0.5], strict=True):
            if ts >= start and (end is None or ts <= end):
                demand[f.gpu_model][ts] += v
    out = []
    for model in sorted(demand):
        path = [demand[model][ts] for ts in sorted(demand[model])]
        recommended = math.ceil(statistics.median(path) - 1e-9)
        owned: int | None = None
        utilisation: float | None = None
        if steady_gpus is not None:
            owned = sum(steady_gpus.values()) if model == ANY_MODEL else steady_gpus.get(model, 0)
            utilisation = _utilisation(path, owned)
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
            )
        )
    return out


def advise_steady_tier(ctx: PlanContext) -> None:
    """Add the steady-tier recommendation for today's on-prem GPUs to the plan (no actions)."""
    if not ctx.forecasts:
        return
    owned: dict[str, int] = defaultdict(int)
    for cap in ctx.groups.values():
        if cap.group.tier is Tier.STEADY:
            owned[cap.group.shape.gpu_model] += cap.ready_nodes * cap.gpn
    ctx.advice.extend(steady_advice(ctx.forecasts, owned, ctx.now))


def _utilisation(path: list[float], gpus: int) -> float:
    """Mean share of `gpus` that demand `path` keeps busy; 1.0 for no GPUs against positive demand."""
    if gpus <= 0:
        return 1.0 if any(v > 0 for v in path) else 0.0
    return sum(min(v, gpus) for v in path) / (len(path) * gpus)
