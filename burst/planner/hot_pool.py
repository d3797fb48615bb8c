"""Step: size each group's hot pool from the forecast (`pools.sizing`) and replace warm nodes past their age.

A pool grows as soon as its target rises; it shrinks
only once the target falls to half its size or less, so the pool does not
churn (prepare, then trim, then prepare again) with every refit. Warm nodes
are drawn by the provider when a scale-up raises the group's size (fastest
state first; an empty pool means a cold launch in the same call, never a
wait), and healthy nodes scaled in go back to the pool while it is below
its size (`warm_pool.reuse_on_scale_in`). A warm node older than
`warm_pool.max_age` is terminated; the provider prepares a fresh one, as the
pool is then below its size.
"""

from __future__ import annotations

from collections import defaultdict

from burst.model import Action, ActionKind, NodeState
from burst.planner.context import PlanContext
from burst.planner.contract import declare
from burst.planner.eligibility import spot_eligible
from pools.sizing import PoolTarget, pool_capacity, warm_pool_targets

STEP = "hot_pool"


@declare()
def size_hot_pools(ctx: PlanContext) -> None:
    """Set each pooled group's warm-pool size where it changes, and rotate warm nodes past their max age."""
    caps = sorted(ctx.groups.values(), key=lambda c: (c.gpu_price, c.group.id))
    if not any(pool_capacity(c.group) for c in caps):
        return
    targets = warm_pool_targets([c.group for c in caps], ctx.forecasts, ctx.policy, ctx.policies, ctx.now,
                                on_demand_share=_on_demand_share(ctx), service_gpus=ctx.snapshot.service_warm_gpus)
    for target in targets:
        _resize(ctx, target)
    _rotate(ctx)


def _on_demand_share(ctx: PlanContext) -> float:
    """The share of today's demanded GPUs (running + pending) that may not go to spot; 1 with no demand."""
    total = spot = 0.0
    for job in ctx.snapshot.jobs:
        if job.active:
            total += job.gpu_demand
            if spot_eligible(job, ctx.policy(job.tenant)):
                spot += job.gpu_demand
    return 1.0 - spot / total if total else 1.0


def _resize(ctx: PlanContext, target: PoolTarget) -> None:
    size, state = ctx.snapshot.warm_pools.get(target.group_id, (0, target.state))
    if target.size > size or (target.size < size and target.size * 2 <= size) or (state is not target.state and target.size):
        ctx.add_action(
            Action(
                kind=ActionKind.SET_WARM_POOL,
                target=target.group_id,
                count=target.size,
                warm_state=target.state,
                step=STEP,
                reason=f"hot pool {size} -> {target.reason}",
            )
        )
    elif target.size < size:
        ctx.hold(f"group:{target.group_id}", f"hot pool kept at {size} (target {target.size} is above half of it)", STEP)


def _rotate(ctx: PlanContext) -> None:
    old: dict[str, list[str]] = defaultdict(list)
    for node in ctx.snapshot.nodes:
        cap = ctx.groups.get(node.group_id)
        if cap is None or node.state is not NodeState.WARM:
            continue
        if (ctx.now - node.created_at).total_seconds() >= cap.group.warm_pool.max_age_s:
            old[node.group_id].append(node.id)
    for group_id in sorted(old):
        days = ctx.groups[group_id].group.warm_pool.max_age_s / 86400
        ctx.add_action(
            Action(
                kind=ActionKind.TERMINATE_NODES,
                target=group_id,
                count=len(old[group_id]),
                node_ids=tuple(sorted(old[group_id])),
                step=STEP,
                reason=f"{len(old[group_id])} warm node(s) older than warm_pool.max_age ({days:g} d): replaced by "
                "fresh ones as the pool refills",
            )
        )


__all__ = ["STEP", "size_hot_pools"]
