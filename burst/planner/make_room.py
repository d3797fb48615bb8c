"""Making room: move fault-tolerant jobs off GPUs paid for whatever happens for a job that cannot move.

Called by `burst.planner.placement.place_by_marginal_cost` for a pending job
that cannot move (not allowed on spot), twice:

- on-prem, when it finds no free on-prem GPUs and no spare GPUs on a running
  cloud node: without a move it would launch (or take an idle node of)
  on-demand capacity;
- on running on-demand nodes, when no idle node holds it (it would wait for
  a booting node or launch one): fault-tolerant work fills the spare GPUs of
  on-demand nodes already paid for, and yields them to work that cannot move
  (which has nowhere cheaper to go) rather than have on-demand nodes booted
  beside them. Waiting for a booting node instead would lose the claim: each
  plan re-decides, so a job whose room is being made keeps it only if room
  making comes first. Only a job that fits on one node, and only jobs with a
  cheaper group to go to (spot), are moved.

Room is made only in groups where the job's own quota and hard budget let it
be placed (the caller's `admits`, what placing it there checks): the job is
charged for the room it waits for, and moving others for a job its tenant's
limits would then refuse disrupts them for nothing.

For each such node, the cheapest set of fault-tolerant jobs there whose
GPUs, with the node's free ones, would hold the job is priced:

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from burst.model import CapacityType, Job, NodeId, Policy, Tier
from burst.planner.context import GroupCapacity, PlanContext, gpus_per_node_of
from burst.planner.eligibility import candidate_groups
from burst.planner.evict import move_cost_s
from burst.planner.moves import (
    MAKE_ROOM_STEP,
    MoveCost,
    MoveGuard,
    move_cost_usd,
    move_job,
    spot_hazard_per_h,
)

STEP = MAKE_ROOM_STEP


@dataclass(frozen=True)
class _Candidate:
    job: Job
    target: GroupCapacity
    pays_usd: float  # what it pays on its target over its expected run
    cost: MoveCost


@dataclass(frozen=True)
class _Option:
    cap: GroupCapacity
    node_ids: tuple[NodeId, ...]
    moved: tuple[_Candidate, ...]
    pays_usd: float  # what the moved jobs pay where they go
    cost_usd: float  # what moving them costs

    def net(self, avoided: float) -> float:
        return avoided - self.pays_usd - self.cost_usd


def hosts_room(cap: GroupCapacity) -> bool:
    """Whether room may be made on `cap`'s nodes: steady groups, and on-demand elastic groups (paid per node)."""
    return cap.group.tier is Tier.STEADY or cap.group.capacity_type is CapacityType.ON_DEMAND


class RoomMaker:
    """Moves fault-tolerant jobs off on-prem and running on-demand nodes for jobs that cannot move (see module
    doc); one per plan."""

    def __init__(self, ctx: PlanContext) -> None:
        self.ctx = ctx
        self.guard = MoveGuard(ctx)
        self._on_node: dict[NodeId, list[Job]] | None = None
        self._movable_gpus: dict[NodeId, int] = {}  # GPUs the node's movable jobs hold there
        self._movable: set[NodeId] = set()  # the nodes where that is more than 0
        self._steady: frozenset[NodeId] | None = None  # the steady groups' ready nodes (fixed for the plan)
        self._holding: set[NodeId] = set()  # steady nodes holding a running job that may not move
        self._pinned_now: set[NodeId] | None = None  # `pinned()` as last built (None: changed since)
        self._clearable: set[NodeId] = set()  # nodes whose every job may move
        self._refused: dict[str, str] = {}  # jobs on-prem or on on-demand nodes that may not move, and why
        self._candidates: dict[str, _Candidate | None] = {}
        self._no_room: dict[tuple[object, ...], str] = {}  # job shapes no move served since the last move
        self._held: set[str] = set()
        self._said_none_movable = False
        self._pinned: set[NodeId] = set()  # steady nodes a job that may not move was placed on by this plan

    def on_node(self) -> dict[NodeId, list[Job]]:
        """Running jobs per steady or on-demand node, and which of them may move (built on first use, kept as
        moves are made)."""
        if self._on_node is None:
            notices = self.ctx.snapshot.notices
            hosts = {n for c in self.ctx.groups.values() if hosts_room(c) for n in c.free_of if n not in notices}
            found: dict[NodeId, list[Job]] = defaultdict(list)
            for job in self.ctx.running_jobs():
                if job.node_ids and all(n in hosts for n in job.node_ids):
                    for node_id in job.node_ids:
                        found[node_id].append(job)
            self._on_node = found
            for node_id, jobs in found.items():
                self._index(node_id, jobs)
        return self._on_node

    def _index(self, node_id: NodeId, jobs: list[Job]) -> None:
        movable = 0
        clearable = True
        for job in jobs:
            why = self._refused.get(job.id) or self.guard.refusal(job)
            if why is None:
                movable += gpus_per_node_of(job)
            else:
                self._refused[job.id] = why
                clearable = False
        self._movable_gpus[node_id] = movable
        if movable:
            self._movable.add(node_id)
        else:
            self._movable.discard(node_id)
        if clearable:
            self._clearable.add(node_id)
        else:
            self._clearable.discard(node_id)
        if jobs and not clearable and node_id in self._steady_nodes():
            self._holding.add(node_id)
        else:
            self._holding.discard(node_id)
        self._pinned_now = None

    def _steady_nodes(self) -> frozenset[NodeId]:
        """The steady groups' ready nodes (their set is fixed for the plan; only their free GPUs change)."""
        if self._steady is None:
            self._steady = frozenset(n for c in self.ctx.groups.values() if c.group.tier is Tier.STEADY for n in c.free_of)
        return self._steady

    def pinned(self) -> set[NodeId]:
        """Steady nodes holding a job that may not move (running, or placed by this plan).

        Placement puts work on them first, so the nodes without such a job stay clearable whole for a job
        that cannot move and is wider than what is free."""
        self.on_node()  # indexes the running jobs on first use
        if self._pinned_now is None:  # kept up by `_index` and `pin` (read by every placement: one set per change)
            self._pinned_now = self._holding | self._pinned
        return self._pinned_now

    def pin(self, node_ids: tuple[NodeId, ...]) -> None:
        """A job that may not move was placed on these steady nodes by this plan: they are no longer clearable."""
        self.on_node()  # indexed first, so indexing the running jobs later cannot make them clearable again
        self._pinned.update(node_ids)
        self._clearable.difference_update(node_ids)
        self._pinned_now = None

    def make_room(self, job: Job, policy: Policy, candidates: list[GroupCapacity], *, tier: Tier = Tier.STEADY,
                  admits: Callable[[GroupCapacity], bool] = lambda cap: True) -> bool:
        """Move jobs off on-prem nodes (`tier` steady) or running on-demand nodes (`tier` elastic) for `job` when
        that pays; True when the job now waits for those nodes (charged to its tenant).

        A job wider than a node needs that many nodes cleared whole, in one steady group; on on-demand nodes
        room is made only for a job that fits on one. Room is made only in groups `admits` lets the job take
        (its tenant's quota and hard budget): a move for a job that could not then be placed would disrupt
        others for nothing.
        """
        ctx = self.ctx
        hosts = [c for c in candidates if c.group.tier is tier and hosts_room(c)]
        elastic = [c for c in candidates if c.group.tier is Tier.ELASTIC and c.group.id not in ctx.snapshot.unavailable]
        on_node = self.on_node()
        if not hosts or not elastic:
            return False
        if tier is Tier.ELASTIC and job.whole_gpus > min(c.gpn for c in hosts):
            return False
        where = "on-prem" if tier is Tier.STEADY else "on on-demand nodes"
        if not any(n in c.free_of for n in self._movable for c in hosts):  # no movable GPUs on these hosts
            if tier is Tier.STEADY and not self._said_none_movable:  # nothing on-prem may move: say why, once
                self._said_none_movable = True
                there = {j.id for c in hosts for n in c.free_of for j in on_node.get(n, ())}
                self._hold_refused({j: why for j, why in self._refused.items() if j in there}, where)
            return False
        hosts = [c for c in hosts if admits(c)]
        if not hosts:
            return False
        alternative = elastic[0]
        expected_s, source = self.guard.remaining_s(job)
        nodes = -(-job.whole_gpus // alternative.gpn)
        avoided = (job.gpu_demand * alternative.gpu_price * expected_s / 3600.0
                   + alternative.group.boot_latency_s / 3600.0 * alternative.price_per_node * nodes)
        shape = (tier, job.tenant, job.whole_gpus, job.gpu_demand, round(expected_s),
                 tuple(c.group.id for c in candidates))
        known = self._no_room.get(shape)
        if known is not None:
            ctx.hold(f"job:{job.id}", known, STEP, job.tenant)
            return False
        best: _Option | None = None
        refused: dict[str, str] = {}
        for cap in hosts:
            width = -(-job.whole_gpus // cap.gpn)
            options: list[_Option] = []
            for node_id, free in sorted(cap.free_of.items()):
                if cap.group.tier is Tier.ELASTIC and (not on_node.get(node_id) or free >= cap.gpn):
                    continue  # an idle on-demand node: placement takes it before any launch
                if width == 1:
                    need = job.whole_gpus - free
                    if need <= 0 or self._movable_gpus.get(node_id, 0) < need:
                        continue
                else:
                    need = cap.gpn - free
                    if need <= 0:
                        options.append(_Option(cap, (node_id,), (), 0.0, 0.0))  # already free (a wide job's part)
                        continue
                    if node_id not in self._clearable or not on_node.get(node_id):
                        continue
                movable = self._movable_off(cap, on_node.get(node_id, ()), alternative, refused)
                option = _cheapest_cover(cap, node_id, movable, need)
                if option is not None:
                    options.append(option)
            option = _cheapest_nodes(options, width)
            if option is None:
                continue
            over = self.guard.set_refusal([c.job for c in option.moved])
            if over is not None:
                refused.setdefault(*over)
                continue
            if best is None or option.net(avoided) > best.net(avoided):
                best = option
        if best is None or best.net(avoided) <= 0:
            self._no_room[shape] = self._hold_unmoved(job, avoided, expected_s, source, best, refused, where)
            return False
        self._move(job, best, avoided, expected_s, source, where)
        self._no_room.clear()
        return True

    def _movable_off(self, cap: GroupCapacity, jobs: Iterable[Job], alternative: GroupCapacity,
                     refused: dict[str, str]) -> list[_Candidate]:
        """The jobs of one node of `cap` that may move, each with where it goes; `refused` learns why the others
        may not."""
        movable = []
        for other in jobs:
            why = self._refused.get(other.id) or _slower_than_a_boot(other, alternative, self.ctx.now)
            if why is not None:
                refused.setdefault(other.id, why)
                continue
            found = self._candidate(other)
            if found is not None and cap.group.tier is Tier.ELASTIC and found.target.gpu_price >= cap.gpu_price:
                refused.setdefault(other.id, f"no group cheaper than {cap.group.id} to go to")
            elif found is not None:
                movable.append(found)
        return movable

    def _candidate(self, other: Job) -> _Candidate | None:
        """Where `other` would go if moved (the cheapest elastic group it may use), and what that costs."""
        if other.id not in self._candidates:
            self._candidates[other.id] = self._price_move(other)
        return self._candidates[other.id]

    def _price_move(self, other: Job) -> _Candidate | None:
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

    def _move(self, job: Job, option: _Option, avoided: float, expected_s: float, source: str, where: str) -> None:
        ctx = self.ctx
        names = ", ".join(c.job.id for c in option.moved) or "nothing"
        nodes = ", ".join(option.node_ids)
        off = "off on-prem" if option.cap.group.tier is Tier.STEADY else f"off on-demand node(s) of {option.cap.group.id}"
        saving = avoided - option.pays_usd
        for moved in option.moved:
            self.guard.charge(moved.job)
            move_job(
                ctx, moved.job,
                f"moved {off} {', '.join(moved.job.node_ids)} for {job.id}, which cannot move: expected saving "
                f"${saving:.2f} (on-demand avoided over its expected {expected_s / 3600:.1f} h, from "
                f"{source}, less ${moved.pays_usd:.2f} this job pays on {moved.target.group.id}) > {moved.cost.detail}",
                STEP, then=f"resuming on {moved.target.group.id}")
            for held in moved.job.node_ids:
                self.on_node()[held].remove(moved.job)
                self._index(held, self.on_node()[held])
        for node_id in option.node_ids:
            free = option.cap.free_of[node_id]
            if free:
                option.cap.take_on((node_id,), free)  # kept for the job: nothing else lands there this plan
        ctx.usage_of(job.tenant).add(option.cap.group, job.gpu_demand, job.gpu_demand * option.cap.gpu_price)
        ctx.hold(f"job:{job.id}", f"waits for {where.removeprefix('on ')} {nodes}, freed by moving {names} (expected saving "
                 f"${saving:.2f} > move cost ${option.cost_usd:.2f})", STEP, job.tenant)

    def _hold_unmoved(self, job: Job, avoided: float, expected_s: float, source: str, best: _Option | None,
                      refused: dict[str, str], where: str) -> str:
        """Hold the job, and every job `where` that may not move, with why no room was made; returns the job's
        reason."""
        ctx = self.ctx
        if best is not None:
            why = (f"moving {', '.join(c.job.id for c in best.moved)} off {', '.join(best.node_ids)} would save "
                   f"${avoided - best.pays_usd:.2f} but cost ${best.cost_usd:.2f}")
        elif refused:
            job_id, reason = min(refused.items())
            why = f"{len(refused)} job(s) {where} may not move ({job_id}: {reason})"
        else:
            why = f"no set of movable jobs {where} frees enough GPUs"
        reason = (f"no room made {where} (on-demand avoided: ${avoided:.2f} over {expected_s / 3600:.1f} h, from "
                  f"{source}): {why}")
        ctx.hold(f"job:{job.id}", reason, STEP, job.tenant)
        self._hold_refused(refused, where)
        return reason

    def _hold_refused(self, refused: dict[str, str], where: str) -> None:
        """Hold each job `where` (on-prem, on on-demand nodes) that may not move, with why (once per plan)."""
        for job_id, refusal in sorted(refused.items()):
            if job_id not in self._held:
                self._held.add(job_id)
                self.ctx.hold(f"job:{job_id}", f"not moved to make room {where}: {refusal}", STEP)


def _slower_than_a_boot(job: Job, alternative: GroupCapacity, now: datetime) -> str | None:
    """Why moving `job` would keep the waiting job longer than launching for it would, or None.

    Its checkpoint (or what is left of one under way) must land within a boot of the group the waiting job
    would otherwise launch in, so making room never makes it wait longer than capacity would.
    """
    boot = alternative.group.boot_latency_s
    takes = move_cost_s(job, now)
    if job.checkpoint_duration_s is not None and takes > boot:
        return f"its checkpoint ({takes:.0f} s) takes longer than a boot of {alternative.group.id} ({boot:.0f} s)"
    return None


def _cheapest_cover(cap: GroupCapacity, node_id: NodeId, movable: list[_Candidate], need: int) -> _Option | None:
    """The set of `movable` jobs on one node freeing at least `need` GPUs there at the least cost (greedy, pruned).

    A job spread over several nodes frees its share on this one (and moves whole).
    """
    def frees(c: _Candidate) -> int:
        return gpus_per_node_of(c.job)

    def per_gpu(c: _Candidate) -> float:
        return (c.pays_usd + c.cost.usd) / max(frees(c), 1)

    chosen: list[_Candidate] = []
    freed = 0
    for c in sorted(movable, key=lambda c: (per_gpu(c), c.job.id)):
        if freed >= need:
            break
        chosen.append(c)
        freed += frees(c)
    if freed < need:
        return None
    for c in sorted(chosen, key=lambda c: (-per_gpu(c), c.job.id)):
        if freed - frees(c) >= need:
            chosen.remove(c)
            freed -= frees(c)
    return _Option(cap, (node_id,), tuple(chosen), sum(c.pays_usd for c in chosen), sum(c.cost.usd for c in chosen))


def _cheapest_nodes(options: list[_Option], width: int) -> _Option | None:
    """`width` of the nodes' options at the least cost together, as one (greedy: a job spread over several of
    them moves, and is paid for, once), or None when there are fewer."""
    if len(options) < width:
        return None
    if width == 1:
        return min(options, key=lambda o: (o.pays_usd + o.cost_usd, o.node_ids))
    chosen: list[_Option] = []
    moved: dict[str, _Candidate] = {}
    left = list(options)
    for _ in range(width):
        def extra(o: _Option) -> float:
            return sum(c.pays_usd + c.cost.usd for c in o.moved if c.job.id not in moved)

        pick = min(left, key=lambda o: (extra(o), o.node_ids))
        left.remove(pick)
        chosen.append(pick)
        for c in pick.moved:
            moved.setdefault(c.job.id, c)
    unique = tuple(moved.values())
    return _Option(chosen[0].cap, tuple(n for o in chosen for n in o.node_ids), unique,
                   sum(c.pays_usd for c in unique), sum(c.cost.usd for c in unique))


__all__ = ["STEP", "RoomMaker"]
