"""Step: release elastic nodes idle past their group's cooldown, and power off idle on-prem nodes that save power."""

from __future__ import annotations

import math

from burst.model import Action, ActionKind, NodeGroup, Tier
from burst.planner.context import PlanContext
from burst.planner.power import saves_power, suspend_room
from burst.planner.prescale import serves

STEP = "scale_down"


def releases_idle(group: NodeGroup) -> bool:
    """Whether this step ever lets a group's idle nodes go: elastic groups, and on-prem groups that save power."""
    return group.tier is Tier.ELASTIC or saves_power(group)


def scale_down_idle(ctx: PlanContext) -> None:
    """Terminate idle elastic nodes (no jobs, none placed this plan) idle for at least the cooldown.

    Never below the group's min size, never in a group this plan scales up,
    never into capacity the forecast needs within its lead time (the spare the
    prescale step left, `ctx.forecast_spare_gpus`), and the oldest-idle nodes
    go first. Idle nodes kept are reported as a hold with the reason.
    """
    scaled_up = {a.target for a in ctx.actions if a.kind is ActionKind.SCALE_UP}
    for group_id in sorted(ctx.groups):
        cap = ctx.groups[group_id]
        group = cap.group
        if not releases_idle(group) or group_id in scaled_up:
            continue
        power = saves_power(group)
        idle = []
        for node_id in cap.idle_ready():
            if node_id in ctx.busy_nodes:
                continue
            node = ctx.nodes[node_id]
            since = node.idle_since or node.entered_state_at
            idle.append(((ctx.now - since).total_seconds(), node_id))
        if not idle:
            continue
        idle.sort(key=lambda item: (-item[0], item[1]))
        removable = max(0, cap.target - group.min_size)
        spares = {m: spare for m, spare in ctx.forecast_spare_gpus.items() if serves(group, m)}
        forecast_bound = min((max(0, math.floor(spare / cap.gpn + 1e-9)) for spare in spares.values()), default=removable)
        due = [node_id for seconds, node_id in idle if seconds >= group.scale_down_cooldown_s]
        held_for_forecast = len(due) > forecast_bound and forecast_bound < removable
        limit = min(removable, forecast_bound)
        rate = suspend_room(ctx, group) if power else None
        rated = rate is not None and rate < min(limit, len(due))
        due = due[: limit if rate is None else min(limit, rate)]
        for m in spares:
            ctx.forecast_spare_gpus[m] -= len(due) * cap.gpn
        if due:
            ctx.actions.append(
                Action(
                    kind=ActionKind.SCALE_DOWN,
                    target=group_id,
                    count=len(due),
                    size=cap.target - len(due),
                    node_ids=tuple(sorted(due)),
                    step=STEP,
                    reason=(f"power off {len(due)} on-prem node(s) idle for at least the "
                            f"{group.scale_down_cooldown_s / 60:g} min suspend time ({cap.target} -> "
                            f"{cap.target - len(due)} nodes on)") if power else
                    f"{len(due)} node(s) idle for at least the {group.scale_down_cooldown_s / 60:g} min cooldown "
                    f"({cap.target} -> {cap.target - len(due)} nodes)",
                )
            )
        kept = [(s, n) for s, n in idle if n not in due]
        if kept:
            if held_for_forecast:
                why = "forecast demand within the pre-scaling lead time needs them"
            elif rated:
                why = f"power-off rate limit ({group.power_saving.suspend_rate if group.power_saving else 0}/min)"
            elif all(s >= group.scale_down_cooldown_s for s, _ in kept):
                why = f"group is at its min_size {group.min_size}"
            else:
                left = min(group.scale_down_cooldown_s - s for s, _ in kept if s < group.scale_down_cooldown_s)
                why = f"inside the {group.scale_down_cooldown_s / 60:g} min cooldown (next due in {left / 60:.1f} min)"
            ctx.hold(f"group:{group_id}", f"{len(kept)} idle node(s) kept: {why}", STEP)
