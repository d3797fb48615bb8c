"""Step: consolidation, safe for training jobs (Karpenter's Underutilized method, by checkpoint-then-evict).

After placement, each ready on-demand (elastic, not spot) node that runs
jobs is a candidate, dearest GPUs first, then the fewest GPUs in use. Spot
nodes are not: their work is the first to yield on-prem, so bringing it back
there would mostly move it out again (measured on ITP04: it cost more). Its jobs may move only if
every one of them may (`burst.planner.moves.MoveGuard`: fault-tolerant, not
`do_not_disrupt`, within its tenant's disruption budget, not moved again
within the minimum interval) and none spans several nodes. Each job is
given, in turn, the first of:

1. free on-prem GPUs (paid for whatever happens);
2. free GPUs on another ready elastic node that already runs work and is not
   itself being emptied;
3. a cheaper node: the cheapest spot group it may use, when that is cheaper
   per GPU than the node it is on.

When every job has somewhere to go, the saving over `HORIZON_S` (or over the
longest expected remaining run of its jobs, when shorter) is the node's price
less what the jobs pay where they go; the move is made when that saving
exceeds the cost of moving them all (`burst.planner.moves.move_cost_usd`).
The jobs are moved by checkpoint-then-evict with that saving in each reason,
the GPUs they go to are kept for them in this plan, and the emptied node is
released by the scale-down step once idle. Every candidate left alone gets a
hold saying why.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from burst.model import CapacityType, Job, NodeId, Tier
from burst.planner.context import GroupCapacity, PlanContext
from burst.planner.contract import declare
from burst.planner.eligibility import candidate_groups
from burst.planner.moves import CONSOLIDATE_STEP, MoveGuard, move_cost_usd, move_job, spot_hazard_per_h

STEP = CONSOLIDATE_STEP

HORIZON_S = 3600.0
"""How far ahead a consolidation's saving is counted: the emptied node's price over this long (or over its
jobs' longest expected remaining run, when shorter)."""


@dataclass(frozen=True)
class _Destination:
    cap: GroupCapacity
    node_id: NodeId | None  # None: a node to launch
    launch: bool


@declare(writes=("moves", "emptying"), reads=("moves", "spot_barred"))
def consolidate(ctx: PlanContext) -> None:
    """Move the jobs off elastic nodes whose work fits elsewhere for less (see module doc)."""
    elastic = [c for c in ctx.groups.values()
               if c.group.tier is Tier.ELASTIC and c.group.capacity_type is not CapacityType.SPOT and c.free_of]
    if not elastic:
        return
    on_node: dict[NodeId, list[Job]] = defaultdict(list)
    for job in ctx.running_jobs():
        for node_id in job.node_ids:
            on_node[node_id].append(job)
    candidates = [(cap, node_id) for cap in elastic for node_id, free in cap.free_of.items()
                  if on_node.get(node_id) and node_id not in ctx.snapshot.notices]
    if not candidates:
        return
    guard = MoveGuard(ctx)
    candidates.sort(key=lambda c: (-c[0].gpu_price, c[0].gpn - c[0].free_of[c[1]], c[1]))
    receiving: set[NodeId] = set()
    emptied: set[NodeId] = set()
    for cap, node_id in candidates:
        if node_id in receiving:
            continue
        jobs = on_node[node_id]
        why = _refusal(guard, jobs)
        if why is not None:
            ctx.hold(f"node:{node_id}", f"not consolidated: {why}", STEP)
            continue
        room = _room(ctx, cap, node_id, emptied)
        plan = _destinations(ctx, cap, jobs, room)
        if isinstance(plan, str):
            ctx.hold(f"node:{node_id}", f"not consolidated: {plan}", STEP)
            continue
        remaining = {j.id: guard.remaining_s(j)[0] for j in jobs}
        horizon_s = min(HORIZON_S, max(remaining.values()))
        pays = sum(j.gpu_demand * d.cap.gpu_price * min(horizon_s, remaining[j.id]) / 3600.0
                   for j, d in plan if d.launch)
        saving = cap.price_per_node * horizon_s / 3600.0 - pays
        costs = {j.id: move_cost_usd(ctx, j, d.cap, launch=d.launch, remaining_s=remaining[j.id],
                                     hazard_per_h=spot_hazard_per_h(ctx, d.cap)) for j, d in plan}
        cost = sum(c.usd for c in costs.values())
        if saving <= cost:
            ctx.hold(f"node:{node_id}", f"not consolidated: moving its {len(jobs)} job(s) would save ${saving:.2f} over "
                     f"{horizon_s / 3600:.1f} h but cost ${cost:.2f}", STEP)
            continue
        over = guard.set_refusal(jobs)
        if over is not None:
            ctx.hold(f"node:{node_id}", f"not consolidated: {over[0]}: {over[1]}", STEP)
            continue
        for job, dest in plan:
            guard.charge(job)
            if dest.node_id is not None:
                dest.cap.take_on((dest.node_id,), job.whole_gpus)
                receiving.add(dest.node_id)
            target = dest.node_id or f"a new {dest.cap.group.id} node"
            move_job(ctx, job, f"consolidating {node_id} ({cap.group.id}, ${cap.price_per_node:.2f}/h): expected saving "
                     f"${saving:.2f} over {horizon_s / 3600:.1f} h > {costs[job.id].detail} for this job", STEP,
                     then=f"resuming on {target}")
        emptied.add(node_id)


def _refusal(guard: MoveGuard, jobs: list[Job]) -> str | None:
    """Why the node's jobs may not all move, or None."""
    for job in jobs:
        if len(job.node_ids) > 1:
            return f"{job.id} spans {len(job.node_ids)} nodes"
        why = guard.refusal(job)
        if why is not None:
            return f"{job.id}: {why}"
    return None


def _room(ctx: PlanContext, source: GroupCapacity, node_id: NodeId, emptied: set[NodeId]) -> dict[NodeId, int]:
    """Free GPUs where the node's jobs may go: on-prem, and elastic nodes no dearer that already run work."""
    room: dict[NodeId, int] = {}
    for cap in ctx.groups.values():
        steady = cap.group.tier is Tier.STEADY
        if not steady and cap.gpu_price > source.gpu_price:
            continue
        for other, free in cap.free_of.items():
            if other == node_id or other in emptied or free <= 0 or other in ctx.snapshot.notices:
                continue
            if not steady and free >= cap.gpn:
                continue  # an idle node: moving work onto it saves nothing
            room[other] = free
    return room


def _destinations(ctx: PlanContext, source: GroupCapacity, jobs: list[Job],
                  room: dict[NodeId, int]) -> list[tuple[Job, _Destination]] | str:
    """Where each job would go (largest first), or why one has nowhere cheaper."""
    out: list[tuple[Job, _Destination]] = []
    for job in sorted(jobs, key=lambda j: (-j.whole_gpus, j.id)):
        policy = ctx.policy(job.tenant)
        allowed = candidate_groups(ctx, job, policy)
        found: _Destination | None = None
        for cap in allowed:
            if cap.group.tier is Tier.STEADY or cap.gpu_price <= source.gpu_price:
                fits = sorted((free, n) for n, free in room.items() if n in cap.free_of and free >= job.whole_gpus)
                if fits:
                    free, node_id = fits[0]
                    room[node_id] = free - job.whole_gpus
                    found = _Destination(cap, node_id, launch=False)
                    break
        if found is None:
            cheaper = [c for c in allowed if c.group.capacity_type is CapacityType.SPOT
                       and c.gpu_price < source.gpu_price and c.group.id not in ctx.snapshot.unavailable
                       and c.planned_size < c.group.max_size]
            if cheaper:
                found = _Destination(cheaper[0], None, launch=True)
        if found is None:
            return f"{job.id} fits nowhere cheaper (no free on-prem or spare cloud GPUs, no cheaper spot group)"
        out.append((job, found))
    return out


__all__ = ["HORIZON_S", "STEP", "consolidate"]
