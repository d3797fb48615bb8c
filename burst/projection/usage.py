"""Metering from the cost ledger: GPU-hours per tenant by cost line and GPU model, and warm-pool GPU-hours.

A ledger row carries the GPU-hours a tenant's jobs held on one group's nodes
(`CostEntry.gpu_hours`); the group names the GPU model. Warm (hot-pool) rows
belong to no tenant and carry only USD, so warm-pool GPU-hours are derived:
USD / the group's standby USD per node-hour × its GPUs per node (a warm node
kept running is billed at full price and so counts for less here; the
ledger does not tell the two apart). Rows of groups the config no longer has
count under GPU model ``unknown``; their warm GPU-hours cannot be derived
and are left out (`unpriced_hot_pool_usd` says how much).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from burst.model import NodeGroup
from burst.state import CostEntry

UNKNOWN_MODEL = "unknown"


@dataclass
class TenantUsage:
    """One tenant's metered use."""

    gpu_hours: float = 0.0
    usd: float = 0.0
    by_tier: dict[str, float] = field(default_factory=dict)
    by_gpu_model: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu_hours": round(self.gpu_hours, 6),
            "usd": round(self.usd, 6),
            "by_tier": {k: round(v, 6) for k, v in sorted(self.by_tier.items())},
            "by_gpu_model": {k: round(v, 6) for k, v in sorted(self.by_gpu_model.items())},
        }


@dataclass
class Usage:
    """Metering of a ledger window: tenants, and the fleet's warm pools."""

    tenants: dict[str, TenantUsage]
    warm_pool_gpu_hours: float
    warm_pool_usd: float
    unpriced_hot_pool_usd: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The `burst usage --json` object."""
        return {
            "tenants": {t: u.to_json() for t, u in sorted(self.tenants.items())},
            "warm_pool": {"gpu_hours": round(self.warm_pool_gpu_hours, 6), "usd": round(self.warm_pool_usd, 6),
                          "unpriced_usd": round(self.unpriced_hot_pool_usd, 6)},
        }


def meter(
    rows: Iterable[CostEntry],
    groups: Mapping[str, NodeGroup],
    standby_price: Callable[[NodeGroup], float],
    *,
    tenant: str | None = None,
) -> Usage:
    """The usage in `rows` (module doc); with `tenant`, only that tenant's (warm pools are the fleet's)."""
    tenants: dict[str, TenantUsage] = defaultdict(TenantUsage)
    warm_gh = warm_usd = unpriced = 0.0
    for row in rows:
        group = groups.get(row.group_id or "")
        if row.line == "hot_pool" and row.tenant is None:
            warm_usd += row.usd
            price = standby_price(group) if group is not None else 0.0
            if group is not None and price > 0:
                warm_gh += row.usd / price * group.gpus_per_node
            else:
                unpriced += row.usd
            continue
        if row.tenant is None or (tenant is not None and row.tenant != tenant):
            continue
        u = tenants[row.tenant]
        u.gpu_hours += row.gpu_hours
        u.usd += row.usd
        u.by_tier[row.line] = u.by_tier.get(row.line, 0.0) + row.gpu_hours
        model = group.shape.gpu_model if group is not None else UNKNOWN_MODEL
        u.by_gpu_model[model] = u.by_gpu_model.get(model, 0.0) + row.gpu_hours
    return Usage(dict(tenants), warm_gh, warm_usd, unpriced)


__all__ = ["TenantUsage", "Usage", "meter"]
