"""Capacity planning: on-prem GPUs worth buying when forecast P50 demand sits above the steady tier.

Sustained: the forecast P50 is above the steady tier's GPUs for at least
`SUSTAINED_SHARE` of the horizon's steps. The recommendation is the median,
over the horizon, of the P50 demand above the steady tier (rounded up to
whole nodes): GPUs that would be busy at least half of the time.

Break-even for `n` added GPUs, per month of `HOURS_PER_MONTH` hours:

- cloud avoided = Σ over the forecast steps of min(n, max(0, P50 - steady))
  × step hours, scaled to a month, × the cloud USD per GPU-hour (what the
  projection's elastic tier paid per GPU-hour; the cheapest on-demand price
  when it burst nothing);
- on-prem running cost = n × (power + operations per GPU-hour, from the
  catalog's `OnPremCost`) × HOURS_PER_MONTH (owned GPUs are paid busy or idle);
- months to pay back = n × capex per GPU / (cloud avoided - running cost),
  None (never) when the saving is not positive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from burst.catalog import OnPremCost

HOURS_PER_MONTH = 730.0
SUSTAINED_SHARE = 0.5


@dataclass(frozen=True)
class CapacityAdvice:
    """What the capacity plan recommends (module doc); add_gpus 0 means buy nothing."""

    steady_gpus: int
    above_share: float
    add_gpus: int
    cloud_usd_per_gpu_hour: float
    cloud_avoided_usd_month: float
    onprem_running_usd_month: float
    capex_usd: float
    payback_months: float | None

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def capacity_advice(
    p50_gpus: Sequence[float],
    step_s: float,
    steady_gpus: int,
    onprem: OnPremCost,
    cloud_usd_per_gpu_hour: float,
    *,
    gpus_per_node: int = 8,
    sustained_share: float = SUSTAINED_SHARE,
) -> CapacityAdvice:
    """The advice for a forecast P50 path against `steady_gpus` (module doc for every figure)."""
    over = [max(0.0, v - steady_gpus) for v in p50_gpus]
    share = sum(1 for v in over if v > 0) / len(over) if over else 0.0
    add = 0
    if over and share >= sustained_share:
        median = sorted(over)[(len(over) - 1) // 2]
        add = math.ceil(median / gpus_per_node - 1e-9) * gpus_per_node if median > 0 else 0
    return break_even(over, step_s, steady_gpus, add, onprem, cloud_usd_per_gpu_hour, share)


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
