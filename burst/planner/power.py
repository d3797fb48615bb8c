"""On-prem power saving: how many powered-off steady nodes the plan may wake, and how many it may power off.

A steady group with `power_saving` keeps its idle nodes powered off (warm
nodes in state `powered_off`) rather than burning power: the scale-down step
powers off nodes idle for `suspend_after_s` (the group's cooldown), down to
its `min_size` of always-on nodes; placement wakes them for pending work
before anything is launched in the cloud, and pre-scaling wakes them ahead of
forecast demand, one wake latency early. Slurm's rate limits apply: at most
`suspend_rate` nodes powered off and `resume_rate` woken per minute, counted
from the nodes' own transition times, so the limits hold however often the
loop ticks.
"""

from __future__ import annotations

from datetime import timedelta

from burst.model import NodeGroup, NodeState, Tier, WarmState
from burst.planner.context import GroupCapacity, PlanContext

RATE_WINDOW_S = 60.0


def saves_power(group: NodeGroup) -> bool:
    """Whether `group` is an on-prem group that powers idle nodes off."""
    return group.tier is Tier.STEADY and group.power_saving is not None


def _recent(ctx: PlanContext, group_id: str, state: NodeState) -> int:
    since = ctx.now - timedelta(seconds=RATE_WINDOW_S)
    return sum(
        1
        for n in ctx.snapshot.nodes
        if n.group_id == group_id and any(t.state is state and t.at > since for t in n.history)
    )


def powered_off(ctx: PlanContext, group_id: str) -> int:
    """Powered-off nodes of the group (warm, not yet asked to wake)."""
    return sum(1 for n in ctx.snapshot.nodes if n.group_id == group_id and n.state is NodeState.WARM)


def wake_room(ctx: PlanContext, cap: GroupCapacity) -> int:
    """Nodes this plan may still wake in `cap`'s group: powered-off ones left, within the resume rate."""
    settings = cap.group.power_saving
    if settings is None or cap.group.tier is not Tier.STEADY:
        return 0
    room = min(powered_off(ctx, cap.group.id), cap.group.max_size - cap.target) - cap.launched
    if settings.resume_rate:
        room = min(room, settings.resume_rate - _recent(ctx, cap.group.id, NodeState.WAKING) - cap.launched)
    return max(0, room)


def suspend_room(ctx: PlanContext, group: NodeGroup) -> int | None:
    """Nodes this plan may power off in `group` within the suspend rate (None: no limit)."""
    settings = group.power_saving
    if settings is None or not settings.suspend_rate:
        return None
    return max(0, settings.suspend_rate - _recent(ctx, group.id, NodeState.WARM))


def wake_latency_s(group: NodeGroup) -> float:
    """Seconds a powered-off node of `group` takes to serve (its warm wake latency, else its boot latency)."""
    return group.warm_wake_latency_s.get(WarmState.POWERED_OFF, group.boot_latency_s)
