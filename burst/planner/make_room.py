"""Making room on-prem: move fault-tolerant jobs off the steady tier for a job that cannot move.

Called by `burst.planner.placement.place_by_marginal_cost` for a pending job
that cannot move (not allowed on spot) and finds no free on-prem GPUs and no
spare GPUs on a running cloud node. Without a move it would launch (or take an
idle node of) on-demand capacity. For each ready steady node, the cheapest set
of fault-tolerant jobs there whose GPUs, with the node's free ones, would hold
the job is priced:

- saving: the on-demand the job avoids over its expected run (the cheapest
  elastic group it may use, plus that group's boot when a node must be
  launched), less what the moved jobs pay where they go (the cheapest elastic
  group each may use, spot when allowed) over their own expected runs;
- cost: each moved job's checkpoint, restart, target boot and expected
  interruption loss (`burst.planner.moves.move_cost_usd`).

The node with the largest saving over cost wins, if that is positive. Its
jobs are moved by checkpoint-then-evict (`burst.planner.evict`), each action's
reason stating the expected saving and cost; the job waits for the node (its
free GPUs are kept for it in this plan) with a hold saying so. Expected runs
come from declared durations or the tenant's history
(`burst.planner.runtime_estimate`), never from a job's true duration. Moves
respect `burst.planner.moves.MoveGuard` (fault-tolerant only, never
`do_not_disrupt`, a disruption budget, a minimum time between moves). When
no move pays, a hold on the job says why.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from burst.model import Job, NodeId, Policy, Tier
from burst.planner.context import GroupCapacity, PlanContext
from burst.planner.moves import MoveCost, MoveGuard, move_cost_usd, move_job, spot_hazard_per_h

STEP = "make_room"


@dataclass(frozen=True)
class _Candidate:
    job: Job
    target: GroupCapacity
    pays_usd: float  # what it pays on its target over its expected run
    cost: MoveCost


@dataclass(frozen=True)
class _Option:
    cap: GroupCapacity
    node_id: NodeId
    moved: tuple[_Candidate, ...]
    saving_usd: float
    cost_usd: float


class RoomMaker:
    """Moves fault-tolerant jobs off on-prem nodes for jobs that cannot move (see module doc); one per plan."""

    def __init__(self, ctx: PlanContext) -> None:
        self.ctx = ctx
        self.guard = MoveGuard(ctx)
        self._on_node: dict[NodeId, list[Job]] | None = None
        self._held: set[str] = set()

    def on_node(self) -> dict[NodeId, list[Job]]:
        """Running jobs per steady node (built on first use)."""
        if self._on_node is None:
            steady = {n for c in self.ctx.groups.values() if c.group.tier is Tier.STEADY for n in c.free_of}
            found: dict[NodeId, list[Job]] = defaultdict(list)
            for job in self.ctx.running_jobs():
                if len(job.node_ids) == 1 and job.node_ids[0] in steady:
                    found[job.node_ids[0]].append(job)
            self._on_node = found
        return self._on_node

    def make_room(self, job: Job, policy: Policy, candidates: list[GroupCapacity]) -> bool:
        """Move jobs off an on-prem node for `job` when that pays; True when the job now waits for that node."""
        ctx = self.ctx
        steady = [c for c in candidates if c.group.tier is Tier.STEADY and job.whole_gpus <= c.gpn]
        elastic = [c for c in candidates if c.group.tier is Tier.ELASTIC and c.group.id not in ctx.snapshot.unavailable]
        if not steady or not elastic or not any(self.on_node().get(n) for c in steady for n in c.free_of):
            return False
        alternative = elastic[0]
        expected_s, source = self.guard.remaining_s(job)
        nodes = -(-job.whole_gpus // alternative.gpn)
        avoided = (job.gpu_demand * alternative.gpu_price * expected_s / 3600.0
                   + alternative.group.boot_latency_s / 3600.0 * alternative.price_per_node * nodes)
        best: _Option | None = None
        refused: dict[str, str] = {}
        for cap in steady:
            for node_id in sorted(cap.free_of):
                need = job.whole_gpus - cap.free_of[node_id]
                if need <= 0:
                    continue
                movable = []
                for other in self.on_node().get(node_id, ()):
                    why = self.guard.refusal(other)
                    if why is not None:
                        refused.setdefault(other.id, why)
                        continue
                    found = self._candidate(other)
                    if found is not None:
                        movable.append(found)
                option = _cheapest_cover(cap, node_id, movable, need, avoided)
                over = self.guard.set_refusal([c.job for c in option.moved]) if option is not None else None
                if over is not None:
                    refused.setdefault(*over)
                    continue
                if option is not None and (best is None or option.saving_usd - option.cost_usd
                                           > best.saving_usd - best.cost_usd):
                    best = option
        if best is None or best.saving_usd <= best.cost_usd:
            self._hold_unmoved(job, avoided, expected_s, source, best, refused)
            return False
        self._move(job, best, expected_s, source)
        return True

    def _candidate(self, other: Job) -> _Candidate | None:
        """Where `other` would go if moved (the cheapest elastic group it may use), and what that costs."""
        from burst.planner.placement import candidate_groups

        ctx = self.ctx
        targets = [c for c in candidate_groups(ctx, other, ctx.policy(other.tenant))
                   if c.group.tier is Tier.ELASTIC and c.group.id not in ctx.snapshot.unavailable]
        if not targets:
            return None
        target = targets[0]
        remaining_s, _ = self.guard.remaining_s(other)
        cost = move_cost_usd(ctx, other, target, launch=True, remaining_s=remaining_s,
                             hazard_per_h=spot_hazard_per_h(ctx, target))
        return _Candidate(other, target, other.gpu_demand * target.gpu_price * remaining_s / 3600.0, cost)

    def _move(self, job: Job, option: _Option, expected_s: float, source: str) -> None:
        ctx = self.ctx
        names = ", ".join(c.job.id for c in option.moved)
        for moved in option.moved:
            self.guard.charge(moved.job)
            move_job(
                ctx, moved.job,
                f"moved off on-prem {option.node_id} for {job.id}, which cannot move: expected saving "
                f"${option.saving_usd:.2f} (on-demand avoided over its expected {expected_s / 3600:.1f} h, from "
                f"{source}, less ${moved.pays_usd:.2f} this job pays on {moved.target.group.id}) > {moved.cost.detail}",
                STEP, then=f"resuming on {moved.target.group.id}")
            self.on_node()[option.node_id].remove(moved.job)
        free = option.cap.free_of[option.node_id]
        if free:
            option.cap.take_on((option.node_id,), free)  # kept for the job: nothing else lands there this plan
        ctx.usage_of(job.tenant).add(option.cap.group, job.gpu_demand, job.gpu_demand * option.cap.gpu_price)
        ctx.hold(f"job:{job.id}", f"waits for on-prem {option.node_id}, freed by moving {names} (expected saving "
                 f"${option.saving_usd:.2f} > move cost ${option.cost_usd:.2f})", STEP, job.tenant)

    def _hold_unmoved(self, job: Job, avoided: float, expected_s: float, source: str, best: _Option | None,
                      refused: dict[str, str]) -> None:
        ctx = self.ctx
        if best is not None:
            why = (f"moving {', '.join(c.job.id for c in best.moved)} off {best.node_id} would save "
                   f"${best.saving_usd:.2f} but cost ${best.cost_usd:.2f}")
        elif refused:
            why = "no fault-tolerant job on-prem may move"
        else:
            why = "no set of movable jobs on one on-prem node frees enough GPUs"
        ctx.hold(f"job:{job.id}", f"no room made on-prem (on-demand avoided: ${avoided:.2f} over {expected_s / 3600:.1f} "
                 f"h, from {source}): {why}", STEP, job.tenant)
        for job_id, reason in sorted(refused.items()):
            if job_id not in self._held:
                self._held.add(job_id)
                ctx.hold(f"job:{job_id}", f"not moved to make room on-prem: {reason}", STEP)


def _cheapest_cover(cap: GroupCapacity, node_id: NodeId, movable: list[_Candidate], need: int,
                    avoided: float) -> _Option | None:
    """The set of `movable` jobs freeing at least `need` GPUs with the most saving over cost (greedy, pruned)."""
    def net(c: _Candidate) -> float:
        return -(c.pays_usd + c.cost.usd) / max(c.job.gpu_demand, 1e-9)

    chosen: list[_Candidate] = []
    freed = 0.0
    for c in sorted(movable, key=lambda c: (-net(c), c.job.id)):
        if freed >= need:
            break
        chosen.append(c)
        freed += c.job.whole_gpus
    if freed < need:
        return None
    for c in sorted(chosen, key=lambda c: (net(c), c.job.id)):
        if freed - c.job.whole_gpus >= need:
            chosen.remove(c)
            freed -= c.job.whole_gpus
    saving = avoided - sum(c.pays_usd for c in chosen)
    return _Option(cap, node_id, tuple(chosen), saving, sum(c.cost.usd for c in chosen))


__all__ = ["STEP", "RoomMaker"]
