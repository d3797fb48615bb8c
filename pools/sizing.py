"""Warm-pool targets: how many nodes each node group keeps warm, in which state, and why. Pure.

A warm (hot-pool) node is prepared ahead and parked: stopped (pays only its
storage, ready in about a minute), running idle (pays full price, ready in
seconds), or hibernated where the instance family supports it. A scale-up
wakes warm nodes before it launches cold ones, so a burst waits a wake instead
of a boot.

Default sizing, per GPU model: the surge the forecast allows within one
boot latency, i.e. for each tenant that uses hot pools (policy
`hot_pool.enabled`) its largest forecast P90 over the next boot latency less
its forecast P50 now, summed, times the share of today's demand that cannot
go to spot (spot-eligible work bursts to spot, which has no pool), in nodes
of the
cheapest on-demand elastic group with a pool; what does not fit in a group's
pool goes to the next. Capacity already ready is not subtracted: at steady
state it is busy with today's demand, and the pool is for the next surge. (Sizing
to the gap between P90 and ready capacity, tried first, kept the pool empty
exactly when a surge arrived: a fixed pool of the same average size cut P95
wait on Philly from 349 s to 134 s where it did not move it.) Never less than the tenants' `hot_pool.min_gpus`
(summed, on the cheapest pool group) nor the group's `warm_pool.min_size`,
never more than `warm_pool.max_prepared` (a group with neither has no pool).
Spot groups have no pool: AWS refuses warm pools on Spot or mixed-instances
groups, and a Spot node can be reclaimed while it waits.

Hibernation: AWS cannot hibernate most GPU instance families and GCP cannot
suspend VMs with GPUs attached, so a GPU group configured `hibernated` is
pooled `stopped`, and the target says so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from burst.model import (
    ANY_MODEL,
    CapacityType,
    Forecast,
    GroupId,
    NodeGroup,
    Policy,
    TenantName,
    Tier,
    WarmState,
)

POOL_QUANTILE = 0.9


@dataclass(frozen=True)
class PoolTarget:
    """One group's warm pool: `size` nodes in `state`, and the reason."""

    group_id: GroupId
    size: int
    state: WarmState
    reason: str


def pool_capacity(group: NodeGroup) -> int:
    """The most nodes `group` may hold warm (0: the group has no pool)."""
    if group.tier is not Tier.ELASTIC or group.capacity_type is CapacityType.SPOT:
        return 0
    return max(group.warm_pool.min_size, group.warm_pool.max_prepared)


def pool_state(group: NodeGroup) -> tuple[WarmState, str]:
    """The warm state `group`'s pool can use, and why when it is not the configured one."""
    state = group.warm_pool.state
    if state is WarmState.HIBERNATED and group.gpus_per_node > 0:
        return WarmState.STOPPED, (
            "hibernated is not available with GPUs attached (AWS GPU families, GCP VMs with GPUs): stopped instead; "
        )
    return state, ""


def warm_pool_targets(
    groups: Sequence[NodeGroup],
    forecasts: Iterable[Forecast],
    policy: Callable[[TenantName], Policy],
    tenants: Iterable[TenantName],
    now: datetime,
    on_demand_share: float = 1.0,
    service_gpus: Mapping[str, float] | None = None,
) -> list[PoolTarget]:
    """Decide every pooled group's warm-pool target (see the module doc).

    `groups` come cheapest per GPU-hour first; `tenants` are those whose
    `hot_pool.min_gpus` count; `on_demand_share` is the share of demand that
    cannot go to spot (a spot-eligible job bursts to spot, which has no
    pool), by which the surge is scaled. `service_gpus` are the GPUs per
    model the services' plans keep warm (`burst.planner.services`: the
    forecast's spread and past surges); a model's pool holds the larger of
    the two asks, as a service's replicas are part of the demand the
    forecasts see.
    """
    pooled = [g for g in groups if pool_capacity(g) > 0]
    if not pooled:
        return []
    forecasts = list(forecasts)
    need: dict[str, float] = defaultdict(float)
    window = timedelta(seconds=min(g.boot_latency_s for g in pooled))
    for f in forecasts:
        if policy(f.tenant).hot_pool.enabled and POOL_QUANTILE in f.quantiles:
            need[f.gpu_model] += max(0.0, f.max_over(POOL_QUANTILE, now, now + window) - f.now_value(0.5, now))
    floor = float(sum(policy(t).hot_pool.min_gpus for t in set(tenants) if policy(t).hot_pool.enabled))
    sizes = {g.id: g.warm_pool.min_size for g in pooled}
    why: dict[GroupId, list[str]] = {g.id: [f"min_size {g.warm_pool.min_size}"] if g.warm_pool.min_size else []
                                     for g in pooled}
    for model in sorted(need):
        gap = need[model] * on_demand_share
        if gap <= 0:
            continue
        _fill(pooled, model, gap, sizes, why,
              f"a forecast surge of {need[model]:.1f} {model} GPU(s) (P90 within {window.total_seconds() / 60:g} min "
              f"over P50 now) x {on_demand_share:.2f} on-demand share")
    for model, asked in sorted((service_gpus or {}).items()):
        held = sum(sizes[g.id] * g.gpus_per_node for g in pooled if g.shape.gpu_model == model)
        if asked > held:
            _fill(pooled, model, asked - held, sizes, why,
                  f"services' hot capacity of {asked:g} {model} GPU(s) ({held:g} warm for the forecast)")
    if floor > 0:
        _fill(pooled, ANY_MODEL, floor - sum(sizes[g.id] * g.gpus_per_node for g in pooled), sizes, why,
              f"tenants' hot_pool.min_gpus {floor:g}")
    out = []
    for g in pooled:
        state, note = pool_state(g)
        reason = "; ".join(why[g.id]) or "no forecast gap and no minimum"
        out.append(PoolTarget(g.id, sizes[g.id], state, f"{note}{sizes[g.id]} warm node(s): {reason}"))
    return out


def _fill(
    pooled: Sequence[NodeGroup], model: str, gpus: float, sizes: dict[GroupId, int], why: dict[GroupId, list[str]],
    reason: str,
) -> None:
    """Add nodes for `gpus` to the pools of the groups serving `model`, cheapest first, within max_prepared."""
    for g in pooled:
        if gpus <= 0:
            return
        if model != ANY_MODEL and g.shape.gpu_model != model:
            continue
        room = pool_capacity(g) - sizes[g.id]
        nodes = min(room, math.ceil(gpus / g.gpus_per_node - 1e-9))
        if nodes <= 0:
            continue
        sizes[g.id] += nodes
        why[g.id].append(f"+{nodes} for {reason}")
        gpus -= nodes * g.gpus_per_node


__all__ = ["POOL_QUANTILE", "PoolTarget", "pool_capacity", "pool_state", "warm_pool_targets"]
