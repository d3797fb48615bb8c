"""Steps: release idle elastic nodes at break-even (burst's), or after a fixed cooldown (the frozen baseline's),
and power off idle on-prem nodes that save power.

Clouds bill per second after a minimum (`burst.catalog.min_billed_s`). An idle
node is worth keeping only until keeping it has cost what booting a new one
would: its group's boot latency of paid time (the ski-rental break-even, which
never pays more than twice what hindsight would have). So:

- with no forecast, an idle cloud node is released once idle for its group's
  boot latency (`idle_release_s`): not knowing whether work comes, waiting
  one boot's worth of paid time bounds the loss either way;
- with a forecast (the prescale step leaves `ctx.forecast_spare_gpus`: supply
  above the forecast's need within the lead time, per GPU model), an idle
  node is kept only while that demand would use it, however long idle; one
  beyond it is released at once, not kept to break-even: the forecast says
  no work comes for it within a boot, which is what break-even waits to
  learn. That is where a forecast saves money;
- a group's `scale_down_cooldown_s` is an explicit override of the idle time
  (on-prem power saving sets it to the suspend time) and applies with a
  forecast too;
- never before the node has been billed its minimum, never below the group's
  min size, never in a group this plan scales up; the oldest-idle go first.
Idle nodes kept are reported as a hold with the reason.

A cloud node this plan empties on purpose (`release_idle` only) goes in the
same plan: every job on it is evicted by a move (`burst.planner.consolidate`,
`burst.planner.make_room`) or off a spot node noticed for reclaim
(`burst.planner.notice`), and nothing is placed on it. Keeping it to
break-even would pay for idle time no demand asked for (the move's saving
counted the node as gone), and a reclaimed node kept to its deadline is
replaced by its group (an Auto Scaling group keeps its desired capacity)
after the planner has already placed its jobs elsewhere. Jobs are evicted
before nodes are terminated (`burst.reconcile`), so nothing on it is lost.
The same limits apply but the minimum billed time, which a noticed node's
reclaim cuts short anyway.

`release_idle` is burst's step (`burst.planner.PIPELINE`). `scale_down_idle`
is the frozen baseline's (`BASELINE_PIPELINE`): an idle node goes after the
group's cooldown, `LEGACY_COOLDOWN_S` when none is set, and the forecast only
bounds how many go.
"""

from __future__ import annotations

import math

from burst.catalog import min_billed_s
from burst.model import Action, ActionKind, NodeGroup, NodeId, Tier
from burst.planner.context import GroupCapacity, PlanContext
from burst.planner.contract import declare
from burst.planner.eligibility import serves
from burst.planner.power import saves_power, suspend_room

STEP = "scale_down"
LEGACY_COOLDOWN_S = 600.0
"""The fixed idle time burst kept nodes for before break-even scale-in; the frozen baseline step still does."""


def releases_idle(group: NodeGroup) -> bool:
    """Whether this step ever lets a group's idle nodes go: elastic groups, and on-prem groups that save power."""
    return group.tier is Tier.ELASTIC or saves_power(group)


def idle_release_s(group: NodeGroup, *, break_even: bool = True) -> float:
    """How long an idle node of `group` is kept with no forecast: the explicit `scale_down_cooldown_s`, else the
    break-even point, the group's boot latency (`LEGACY_COOLDOWN_S` for the frozen baseline step)."""
    if group.scale_down_cooldown_s is not None:
        return group.scale_down_cooldown_s
    return group.boot_latency_s if break_even else LEGACY_COOLDOWN_S


def _rule(group: NodeGroup, break_even: bool) -> str:
    """How the idle time was chosen, for reasons and holds."""
    minutes = f"{idle_release_s(group, break_even=break_even) / 60:g} min"
    if group.scale_down_cooldown_s is not None or not break_even:
        return f"the {minutes} cooldown"
    return f"the {minutes} break-even (one boot latency of paid idle time)"


@declare(reads=("busy_nodes", "placements", "emptying", "scale_ups", "forecast_spare_gpus"))
def release_idle(ctx: PlanContext) -> None:
    """burst's scale-in: release idle nodes (no jobs, none placed this plan) by the rules of the module docstring."""
    _scale_down(ctx, break_even=True)


@declare(reads=("busy_nodes", "scale_ups", "forecast_spare_gpus"))
def scale_down_idle(ctx: PlanContext) -> None:
    """The frozen baseline's scale-in: idle nodes go after the group's cooldown (10 min when none is set)."""
    _scale_down(ctx, break_even=False)


def emptied_nodes(ctx: PlanContext) -> dict[str, list[str]]:
    """Elastic nodes, per group, whose every job this plan evicts by a move or a reclaim notice (`emptying`), and
    on which it places nothing (`placements`): released at once by `release_idle`."""
    evicted = ctx.emptying
    if not evicted:
        return {}
    placed = {n for node_ids in ctx.placements.values() for n in node_ids}
    on_node: dict[str, list[str]] = {}
    for job in ctx.running_jobs():
        for node_id in job.node_ids:
            on_node.setdefault(node_id, []).append(job.id)
    out: dict[str, list[str]] = {}
    for node_id, jobs in sorted(on_node.items()):
        node = ctx.nodes.get(node_id)
        if node is None or node_id in placed or not all(j in evicted for j in jobs):
            continue
        cap = ctx.groups.get(node.group_id)
        if cap is not None and cap.group.tier is Tier.ELASTIC and node_id in cap.free_of:
            out.setdefault(node.group_id, []).append(node_id)
    return out


def _release_emptied(ctx: PlanContext, cap: GroupCapacity, emptied: list[NodeId]) -> None:
    """Release the group's nodes this plan empties on purpose at once, down to its min size."""
    now_empty = emptied[: max(0, cap.target - cap.group.min_size)]
    if now_empty:
        ctx.add_action(Action(
            kind=ActionKind.SCALE_DOWN, target=cap.group.id, count=len(now_empty), size=cap.target - len(now_empty),
            node_ids=tuple(now_empty), step=STEP,
            reason=(f"{len(now_empty)} node(s) emptied by this plan's moves or reclaim notices released now, "
                    f"not kept idle to break-even ({cap.target} -> {cap.target - len(now_empty)} nodes)")))
        cap.target -= len(now_empty)


def _idle(ctx: PlanContext, cap: GroupCapacity) -> list[tuple[float, float, NodeId]]:
    """The group's idle ready nodes, none placed on by this plan: (seconds idle, age in seconds, id)."""
    idle = []
    for node_id in cap.idle_ready():
        if node_id in ctx.busy_nodes:
            continue
        node = ctx.nodes[node_id]
        since = node.idle_since or node.entered_state_at
        idle.append(((ctx.now - since).total_seconds(), (ctx.now - node.created_at).total_seconds(), node_id))
    return idle


def _scale_down(ctx: PlanContext, *, break_even: bool) -> None:
    scaled_up = set(ctx.scale_ups)
    emptied = emptied_nodes(ctx) if break_even else {}
    spare_left = dict(ctx.forecast_spare_gpus)  # what the forecast needs is counted down as nodes go
    for group_id in sorted(ctx.groups):
        cap = ctx.groups[group_id]
        group = cap.group
        if not releases_idle(group) or group_id in scaled_up:
            continue
        _release_emptied(ctx, cap, emptied.get(group_id, []))
        power = saves_power(group)
        idle = _idle(ctx, cap)
        if not idle:
            continue
        idle.sort(key=lambda item: (-item[0], item[2]))
        removable = max(0, cap.target - group.min_size)
        spares = {m: spare for m, spare in spare_left.items() if serves(group, m)}
        forecast_bound = min((max(0, math.floor(spare / cap.gpn + 1e-9)) for spare in spares.values()), default=removable)
        keep_s = idle_release_s(group, break_even=break_even)
        by_forecast = break_even and bool(spares) and group.scale_down_cooldown_s is None
        if by_forecast:
            keep_s = 0.0  # the forecast decides: what it needs is kept (forecast_bound), the rest goes now
        billed_s = min_billed_s(group) if break_even else 0.0
        due = [node_id for seconds, age, node_id in idle if seconds >= keep_s and age >= billed_s]
        held_for_forecast = len(due) > forecast_bound and forecast_bound < removable
        limit = min(removable, forecast_bound)
        rate = suspend_room(ctx, group) if power else None
        rated = rate is not None and rate < min(limit, len(due))
        due = due[: limit if rate is None else min(limit, rate)]
        for m in spares:
            spare_left[m] -= len(due) * cap.gpn
        if due:
            if power:
                reason = (f"power off {len(due)} on-prem node(s) idle for at least the "
                          f"{keep_s / 60:g} min suspend time ({cap.target} -> "
                          f"{cap.target - len(due)} nodes on)")
            elif by_forecast:
                reason = (f"{len(due)} idle node(s) that forecast demand within the pre-scaling lead time would "
                          f"not use, released now rather than kept to break-even "
                          f"({cap.target} -> {cap.target - len(due)} nodes)")
            else:
                reason = (f"{len(due)} node(s) idle for at least {_rule(group, break_even)} "
                          f"({cap.target} -> {cap.target - len(due)} nodes)")
            ctx.add_action(
                Action(
                    kind=ActionKind.SCALE_DOWN,
                    target=group_id,
                    count=len(due),
                    size=cap.target - len(due),
                    node_ids=tuple(sorted(due)),
                    step=STEP,
                    reason=reason,
                )
            )
        kept = [(s, a) for s, a, n in idle if n not in due]
        if kept:
            if held_for_forecast:
                why = "forecast demand within the pre-scaling lead time needs them"
            elif rated:
                why = f"power-off rate limit ({group.power_saving.suspend_rate if group.power_saving else 0}/min)"
            elif all(s >= keep_s and a >= billed_s for s, a in kept):
                why = f"group is at its min_size {group.min_size}"
            elif all(s >= keep_s for s, a in kept):
                left = min(billed_s - a for s, a in kept if a < billed_s)
                why = f"inside the provider's {billed_s:g} s minimum billed time (next due in {left:.0f} s)"
            else:
                left = min(keep_s - s for s, a in kept if s < keep_s)
                why = f"inside {_rule(group, break_even)} (next due in {left / 60:.1f} min)"
            ctx.hold(f"group:{group_id}", f"{len(kept)} idle node(s) kept: {why}", STEP)
