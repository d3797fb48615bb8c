"""Capacity planning: on-prem GPUs worth buying when forecast P50 demand sits above the steady tier.

The rule is the steady-tier advice `burst plan` shows (`burst.planner.steady`):
GPUs to own = the median, over the window, of the forecast P50 demand
(`steady_advice`); GPUs to add = that size above the steady tier's GPUs,
rounded up to whole nodes (`gpus_to_add`). A size above the steady tier
means P50 demand above it for at least half of the window's steps
(`above_share` reports the share). The window is the projection's horizon;
`burst plan`'s is the daemon's forecast horizon, so the two show different
figures when their windows (or the forecasts over them) differ, never by rule,
and both print their window.

Break-even for `n` added GPUs, per month of `HOURS_PER_MONTH` hours:

- cloud avoided = Σ over the window's steps of min(n, max(0, P50 - steady))
  × step hours, scaled to a month, × the cloud USD per GPU-hour (what the
  projection's elastic tier paid per GPU-hour; the cheapest on-demand price
  when it burst nothing);
- on-prem running cost = n × (power + operations per GPU-hour, from the
  catalog's `OnPremCost`) × HOURS_PER_MONTH (owned GPUs are paid busy or idle);
- months to pay back = n × capex per GPU / (cloud avoided - running cost),
  None (never) when the saving is not positive.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from burst.catalog import OnPremCost
from burst.model import Forecast, SteadyAdvice
from burst.planner.steady import gpus_to_add, steady_advice

HOURS_PER_MONTH = 730.0


@dataclass(frozen=True)
class CapacityAdvice:
    """What the capacity plan recommends (module doc); add_gpus 0 means buy nothing.

    `steady_tier` is the steady-tier advice it was decided from (`burst plan`'s figures: GPUs to own,
    utilisation, window); None only for a bare `break_even`.
    """

    steady_gpus: int
    above_share: float
    add_gpus: int
    cloud_usd_per_gpu_hour: float
    cloud_avoided_usd_month: float
    onprem_running_usd_month: float
    capex_usd: float
    payback_months: float | None
    steady_tier: SteadyAdvice | None = None

    def to_json(self) -> dict[str, Any]:
        """The `capacity` object of `burst cost --json`; `steady_tier` has the keys of `burst plan --json`'s."""
        out: dict[str, Any] = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()
                               if k != "steady_tier"}
        out["steady_tier"] = None if self.steady_tier is None else self.steady_tier.to_json()
        return out


def capacity_advice(
    forecast: Forecast,
    steady_gpus: Mapping[str, int],
    onprem: OnPremCost,
    cloud_usd_per_gpu_hour: float,
    *,
    start: datetime,
    end: datetime,
    step_s: float,
    gpus_per_node: int = 8,
    prices: tuple[float, float] | None = None,
) -> CapacityAdvice | None:
    """The advice for `forecast`'s P50 over [start, end] against the steady GPUs owned per GPU model (module doc
    for every figure); None when no forecast step falls in the window. `prices` (owned, on-demand USD per
    GPU-hour) add the cost-optimal size to `steady_tier`, as in `burst plan`."""
    found = steady_advice([forecast], steady_gpus, start, end, prices=prices)
    if not found:
        return None
    (advice,) = found
    owned = advice.steady_gpus or 0
    first, last = forecast.steps_within(start, end)
    over = [max(0.0, v - owned) for v in forecast.quantiles[0.5][first:last]]
    share = sum(1 for v in over if v > 0) / len(over)
    add = gpus_to_add(advice, gpus_per_node)
    return dataclasses.replace(break_even(over, step_s, owned, add, onprem, cloud_usd_per_gpu_hour, share),
                               steady_tier=advice)


def break_even(
    over: Sequence[float],
    step_s: float,
    steady_gpus: int,
    add_gpus: int,
    onprem: OnPremCost,
    cloud_usd_per_gpu_hour: float,
    above_share: float = 0.0,
) -> CapacityAdvice:
    """Payback of `add_gpus` owned GPUs against bursting the demand `over` the steady tier (module doc)."""
    span_h = len(over) * step_s / 3600.0
    absorbed_h = sum(min(float(add_gpus), v) for v in over) * step_s / 3600.0
    avoided = absorbed_h * HOURS_PER_MONTH / span_h * cloud_usd_per_gpu_hour if span_h else 0.0
    running = add_gpus * (onprem.power_usd_per_gpu_hour + onprem.ops_usd_per_gpu_hour) * HOURS_PER_MONTH
    capex = add_gpus * onprem.capex_usd_per_gpu
    saving = avoided - running
    payback = capex / saving if add_gpus and saving > 0 else None
    return CapacityAdvice(steady_gpus, above_share, add_gpus, cloud_usd_per_gpu_hour, avoided, running, capex, payback)


__all__ = ["HOURS_PER_MONTH", "CapacityAdvice", "break_even", "capacity_advice"]
