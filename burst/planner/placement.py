"""Step: place pending jobs, steady tier first, and scale elastic groups up for what is left.

For each pending job, in fair order (`fairshare.fair_order`), the step tries in turn:

1. free GPUs on ready nodes, steady (on-prem) groups first, then elastic groups by
   price per GPU-hour: a `place_job` action;
2. capacity already booting (or launched earlier in this plan): the job waits
   for it and nothing new is launched;
3. a launch in the cheapest feasible elastic group (of a GPU model offered in
   several node sizes, the one whose launch costs the job least:
   `burst.planner.shapes`): one `scale_up` per group,
   summing every job it is for. A group cooling down after a failed launch or
   a spot interruption (`Snapshot.unavailable`) is passed over, so the job
   falls back to the next group (on-demand after spot) instead of waiting on
   one that keeps failing.

Among spot groups about as cheap as the cheapest, the least interrupted goes
first and a tenant's spot GPUs spread over them (`burst.planner.spot_spread`).

A group is feasible for a job when the tenant's policy allows its provider and
region, the GPU model matches, and, for spot groups, the job is fault-tolerant,
the tenant allows spot, checkpoints often enough, stays within its max spot
share, and has the deadline slack for it (`burst.planner.deadlines`). Quotas
(steady and burst GPUs), group max sizes and hard budgets bound every choice;
a job that fits nowhere becomes a hold naming the reason.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from burst.model import (
    Action,
    ActionKind,
    CapacityType,
    Job,
    JobId,
    NodeGroup,
    NodeId,
    Policy,
    TenantName,
    Tier,
    gpu_demand_of,
)
from burst.planner.context import GroupCapacity, PlanContext, Refusal, budget_refusal
from burst.planner.contract import declare
from burst.planner.eligibility import candidate_groups, spot_allowed, spot_eligible
from burst.planner.fairshare import fair_order
from burst.planner.gpu_scheduler import Binding
from burst.planner.make_room import RoomMaker
from burst.planner.moves import checkpoints_within_notice
from burst.planner.power import saves_power, wake_room
from burst.planner.shapes import by_marginal_cost
from burst.planner.spot_spread import spread_spot, spreads

STEP_PLACE = "place"
STEP_SCALE_UP = "scale_up"


@dataclass
class _LaunchSummary:
    nodes: int = 0
    jobs: int = 0
    gpus: int = 0
    by_tenant: dict[TenantName, int] = field(default_factory=lambda: defaultdict(int))


def never_runs(job: Job, policy: Policy, groups: Iterable[NodeGroup]) -> str | None:
    """Why no node group could ever run `job`, or None if one could (`burst submit` refuses such a job).

    A group could if it has the job's GPU model, the tenant's policy allows
    it, it is not spot for a job that may not use spot, and its max_size
    nodes hold the job's whole GPUs. Budgets, quotas and availability change;
    these do not while the config stands.
    """
    eligible_spot = spot_eligible(job, policy)
    allowed = [
        g for g in groups
        if (job.gpu_model is None or g.shape.gpu_model == job.gpu_model)
        and policy.allows_group(g)
        and (g.capacity_type is not CapacityType.SPOT or eligible_spot)
    ]
    if not allowed:
        return _no_group_reason(job, policy)
    largest = max(allowed, key=lambda g: (g.max_gpus, g.id))
    if job.whole_gpus > largest.max_gpus:
        return (f"{job.whole_gpus} GPUs exceed the largest group tenant {job.tenant} may use "
                f"({largest.id}: {largest.max_size} x {largest.gpus_per_node} GPUs)")
    return None


class _Refusals:
    """Why a job could not be placed; the first reason of the most preferred kind wins."""

    ORDER = tuple(Refusal)

    def __init__(self) -> None:
        self.reasons: dict[str, list[str]] = {}

    def add(self, kind: Refusal, reason: str) -> None:
        found = self.reasons.setdefault(kind, [])
        if reason not in found:
            found.append(reason)

    def best(self) -> tuple[Refusal, str]:
        for kind in self.ORDER:
            if kind in self.reasons:
                return kind, "; ".join(self.reasons[kind])
        return Refusal.NO_GROUP, "no node group is feasible for it"


@declare(writes=("placements", "busy_nodes", "spread_notes", "unserved", "scale_ups"),
         reads=("released", "spot_barred", "spread_notes"))
def place_and_scale_up(ctx: PlanContext) -> None:
    """Place every pending job on existing or booting capacity, or launch for it (see module doc).

    The simulator's baselines run this step as it is (`burst.planner.BASELINE_PIPELINE`); burst runs
    `place_by_marginal_cost`.
    """
    _place_jobs(ctx, fair_order(ctx), None)


@declare(writes=("placements", "busy_nodes", "spread_notes", "unserved", "scale_ups", "moves", "emptying"),
         reads=("released", "spot_barred", "spread_notes", "moves"))
def place_by_marginal_cost(ctx: PlanContext) -> None:
    """Place pending jobs as `place_and_scale_up` does, by what each costs at the margin, aware of what can move.

    Jobs that cannot move (not allowed on spot) are served first, so the steady tier, paid whether used or
    not, goes to them. Jobs that can move (fault-tolerant and allowed on spot) take GPUs already paid for
    (spare on-prem GPUs, free GPUs on a cloud node that already runs other work) and otherwise spot (booting,
    or launched for them); they take an idle or booting on-demand node only when no spot can be launched. When a job that cannot move finds no room on-prem, fault-
    tolerant jobs there are moved to make it (`burst.planner.make_room`) if the on-demand it avoids over its
    expected run, less what they pay elsewhere, exceeds what moving them costs; when it would launch an
    on-demand node, fault-tolerant jobs on running on-demand nodes are moved to spot for it by the same rule. Work that cannot move goes
    first to on-prem nodes already holding such work, so the others stay clearable whole for wide jobs. Of the
    jobs that can move, those a spot reclaim would cost work (checkpoint longer than a notice) take the GPUs
    already paid for first.
    """
    rules = _CostRules(RoomMaker(ctx))
    _place_jobs(ctx, _immovable_first(ctx, rules), rules)


def _immovable_first(ctx: PlanContext, rules: _CostRules) -> Iterator[Job]:
    """Fair order, except that jobs that can move (spot allowed) wait until every job that cannot is served,
    and, among those, jobs that have run before (requeued by a move or an interruption) until new ones are.
    A service's spot replica keeps its place in fair order (its priority): it holds no work a move would cost,
    and a service short of serving replicas is not made to wait for batch.

    Before the first job that can move is served, `rules` learns which of them would lose work to a spot
    reclaim (their checkpoint does not fit the notice, `burst.planner.moves.checkpoints_within_notice`): they
    get the first pick of GPUs already paid for."""
    fresh: list[Job] = []
    resumed: list[Job] = []
    for job in fair_order(ctx):
        if not job.spot_replica and spot_allowed(ctx, job, ctx.policy(job.tenant)):
            (resumed if job.work_done_s > 0 else fresh).append(job)
        else:
            yield job
    rules.spare_first = [j for j in (*fresh, *resumed) if not checkpoints_within_notice(j)]
    yield from fresh
    yield from resumed


class _CostRules:
    """How `place_by_marginal_cost` serves one job (see its docstring)."""

    def __init__(self, room: RoomMaker) -> None:
        self.room = room
        self.spare_first: list[Job] | None = None  # jobs that can move and would lose work to a reclaim
        self._placed_first: set[JobId] = set()

    def _spare_to_those_a_reclaim_hurts(self, ctx: PlanContext, pinned: Callable[[], set[NodeId]]) -> None:
        """Place the jobs of `spare_first`, in fair order, on free GPUs already paid for (on-prem, spare GPUs
        of running cloud nodes), before any job that can move is served: on spot a reclaim would cost them the
        work since their last checkpoint, while the others checkpoint on the notice and lose only a restart.
        The rest of the placement (capacity booting, launches) keeps fair order, so no job is passed over
        for a slot on a booting node it was waiting for."""
        jobs, self.spare_first = self.spare_first or [], None
        for job in jobs:
            policy = ctx.policy(job.tenant)
            if _try_ready(ctx, job, policy, candidate_groups(ctx, job, policy), _Refusals(), elastic_spare=True,
                          prefer=pinned):
                self._placed_first.add(job.id)

    def serve(self, ctx: PlanContext, job: Job, policy: Policy, candidates: list[GroupCapacity],
              refusals: _Refusals, waiting: dict[str, int], launches: dict[str, _LaunchSummary]) -> bool:
        pinned = self.room.pinned  # read only where a placement may prefer them (it indexes the running jobs)
        if spot_allowed(ctx, job, policy):
            if self.spare_first is not None:
                self._spare_to_those_a_reclaim_hurts(ctx, pinned)
            if job.id in self._placed_first:
                return True
            spot = [c for c in candidates if c.group.capacity_type is CapacityType.SPOT]
            return (_try_ready(ctx, job, policy, candidates, refusals, spare_only=True, prefer=pinned)
                    or _try_inflight(ctx, job, policy, spot, refusals, waiting)
                    or _try_launch(ctx, job, policy, spot, refusals, launches)
                    or _try_ready(ctx, job, policy, candidates, refusals)
                    or _try_inflight(ctx, job, policy, candidates, refusals, waiting)
                    or _try_launch(ctx, job, policy, candidates, refusals, launches))
        steady = [c for c in candidates if c.group.tier is Tier.STEADY]
        if _try_ready(ctx, job, policy, steady, refusals, prefer=pinned):
            self.room.pin(ctx.placements[job.id])
            return True

        def admits(cap: GroupCapacity) -> bool:
            return _admits(ctx, job, policy, cap, refusals)

        return (_try_ready(ctx, job, policy, candidates, refusals, spare_only=True)
                or self.room.make_room(job, policy, candidates, admits=admits)
                or _try_ready(ctx, job, policy, candidates, refusals)
                or self.room.make_room(job, policy, candidates, tier=Tier.ELASTIC, admits=admits)
                or _try_inflight(ctx, job, policy, candidates, refusals, waiting)
                or _try_launch(ctx, job, policy, candidates, refusals, launches))


def _place_jobs(ctx: PlanContext, jobs: Iterable[Job], rules: _CostRules | None) -> None:
    """Serve `jobs` in order (see `place_and_scale_up`), by `rules` when given; then the launches and holds."""
    launches: dict[str, _LaunchSummary] = defaultdict(_LaunchSummary)
    waiting: dict[str, int] = defaultdict(int)
    refused: dict[tuple[TenantName, Refusal, str], list[JobId]] = {}  # (tenant, kind, reason) -> jobs left unplanned
    refused_gpus: dict[tuple[TenantName, Refusal, str], int] = {}
    # Per (tenant, GPU model, spot allowed, whole GPUs): the candidate groups (the shapes a job fits depend on its
    # width), and whether the spot spread may reorder them.
    candidates_cache: dict[tuple[TenantName, str | None, bool, int], tuple[list[GroupCapacity], bool]] = {}
    # A refusal depends only on the job's shape and the plan's state, and the state changes only when
    # a job is served: while none has been, a job shaped like one refused before is refused alike.
    served = 0
    refused_shapes: dict[tuple[TenantName, str | None, bool, int, float], tuple[int, Refusal, str]] = {}

    policy_of: dict[TenantName, Policy] = {}
    barred = ctx.spot_barred
    for job in jobs:
        tenant = job.tenant
        policy = policy_of.get(tenant)
        if policy is None:
            policy = policy_of[tenant] = ctx.policy(tenant)
        # spot_allowed, inlined (this runs for every pending job each plan)
        whole = job.gpus or 1  # Job.whole_gpus, inlined
        key = (tenant, job.gpu_model, (job.fault_tolerant or job.spot_replica) and spot_eligible(job, policy)
               and job.id not in barred, whole)
        # The shape is built only once some job has been refused. Demand is read as `gpu_demand_of` does,
        # here and below: caching it on each job of a fresh snapshot costs more than it saves.
        shape = (*key, float(job.gpus or job.gpu_share or 0.0)) if refused_shapes else None
        before = refused_shapes.get(shape) if shape is not None else None
        if before is not None and before[0] == served:
            kind, reason = before[1], before[2]
        else:
            cached = candidates_cache.get(key)
            if cached is None:
                groups = candidate_groups(ctx, job, policy)
                cached = candidates_cache[key] = (groups, spreads(policy, groups))
            candidates = spread_spot(ctx, job, policy, cached[0]) if cached[1] else cached[0]
            refusals = _Refusals()
            if not candidates:
                refusals.add(Refusal.NO_GROUP, _no_group_reason(job, policy))
            if rules is not None and rules.serve(ctx, job, policy, candidates, refusals, waiting, launches) or (
                rules is None and (
                    _try_ready(ctx, job, policy, candidates, refusals)
                    or _try_inflight(ctx, job, policy, candidates, refusals, waiting)
                    or _try_launch(ctx, job, policy, candidates, refusals, launches)
                )
            ):
                served += 1
                continue
            kind, reason = refusals.best()
            refused_shapes[shape or (*key, gpu_demand_of(job))] = (served, kind, reason)
        ctx.refuse(job, kind)
        ids = refused.get((tenant, kind, reason))
        if ids is None:
            ids = refused[(tenant, kind, reason)] = []
        ids.append(job.id)
        refused_gpus[(tenant, kind, reason)] = refused_gpus.get((tenant, kind, reason), 0) + whole

    _launch_and_hold(ctx, launches, waiting, refused, refused_gpus)


def _why_group(ctx: PlanContext, cap: GroupCapacity) -> str:
    """Why a scale-up launched in `cap`'s group: the cheapest per GPU-hour, or, where its GPU model comes in
    several node sizes, the launch that cost its jobs least (`burst.planner.shapes`)."""
    group = cap.group
    sizes = {c.gpn for c in ctx.groups.values()
             if c.group.tier is Tier.ELASTIC and c.group.shape.gpu_model == group.shape.gpu_model}
    if len(sizes) > 1:
        return (f"{group.id} is the cheapest launch for its jobs among the {group.shape.gpu_model} node sizes "
                f"({cap.gpn}-GPU nodes at ${cap.gpu_price * cap.gpn:.2f}/node-h, ${cap.gpu_price:.2f}/GPU-h)")
    return f"{group.id} is the cheapest feasible group at ${cap.gpu_price:.2f}/GPU-h"


def _launch_and_hold(ctx: PlanContext, launches: dict[str, _LaunchSummary], waiting: dict[str, int],
                     refused: dict[tuple[TenantName, Refusal, str], list[JobId]],
                     refused_gpus: dict[tuple[TenantName, Refusal, str], int]) -> None:
    """One scale-up per group launched for, a hold per group waited on, and a hold per (tenant, refusal)."""
    for group_id in sorted(launches):
        summary = launches[group_id]
        cap = ctx.groups[group_id]
        tenants = ", ".join(f"{t}: {n}" for t, n in sorted(summary.by_tenant.items()))
        ctx.add_scale_up(
            Action(
                kind=ActionKind.SCALE_UP,
                target=group_id,
                count=summary.nodes,
                size=cap.target + summary.nodes,
                step=STEP_SCALE_UP,
                reason=(
                    f"{summary.jobs} pending job(s) ({tenants}) need {summary.gpus} GPU(s) that ready and booting "
                    f"capacity cannot hold; "
                    + (f"wake {summary.nodes} powered-off on-prem node(s) of {group_id}" if cap.group.tier is Tier.STEADY
                       else _why_group(ctx, cap) + ctx.spread_notes.get(group_id, ""))
                    + f" ({cap.target} -> {cap.target + summary.nodes} nodes)"
                ),
            )
        )
    for group_id in sorted(waiting):
        ctx.hold(
            f"group:{group_id}",
            f"{waiting[group_id]} pending job(s) wait for capacity already booting in {group_id}; nothing new launched",
            STEP_SCALE_UP,
        )
    for (tenant, kind, reason), job_ids in sorted(refused.items()):
        gpus = refused_gpus[(tenant, kind, reason)]
        ctx.hold(f"tenant:{tenant}", f"{len(job_ids)} pending job(s) ({gpus} GPUs) not planned: {reason}", STEP_SCALE_UP,
                 tenant, tuple(job_ids))


def _no_group_reason(job: Job, policy: Policy) -> str:
    if job.gpu_model is not None:
        return f"no node group allowed for tenant {job.tenant} has GPU model {job.gpu_model}"
    return f"no node group is allowed by tenant {job.tenant}'s policy"


def _quota_ok(ctx: PlanContext, job: Job, policy: Policy, cap: GroupCapacity, refusals: _Refusals) -> bool:
    steady = cap.group.tier is Tier.STEADY
    quota = policy.steady_quota_gpus if steady else policy.burst_quota_gpus
    if quota is None and cap.group.capacity_type is not CapacityType.SPOT:
        return True  # no quota on this tier and no spot share to keep: nothing to check
    usage = ctx.usage_of(job.tenant)
    demand = gpu_demand_of(job)
    used, name = (usage.steady_gpus, "steady_gpus") if steady else (usage.elastic_gpus, "burst_gpus")
    if quota is not None and used + demand > quota:
        refusals.add(Refusal.QUOTA, f"tenant {job.tenant} would hold {used + demand:g} GPUs > quota.{name} {quota}")
        return False
    if cap.group.capacity_type is CapacityType.SPOT:
        share = (usage.spot_gpus + demand) / (usage.elastic_gpus + demand)
        if share > policy.spot.max_share + 1e-9:
            refusals.add(
                Refusal.SPOT_SHARE,
                f"tenant {job.tenant}'s spot share would be {share:.0%} > spot.max_share {policy.spot.max_share:.0%}",
            )
            return False
    return True


def _has_budget(policy: Policy) -> bool:
    """Whether the tenant has a hard budget at all (without one, `_budget_ok` always passes)."""
    return policy.budget.usd_per_hour is not None or policy.budget.usd_per_month is not None


def _budget_ok(ctx: PlanContext, job: Job, policy: Policy, extra_usd_per_hour: float, what: str, refusals: _Refusals) -> bool:
    reason = budget_refusal(ctx, job.tenant, policy, extra_usd_per_hour, what)
    if reason is not None:
        refusals.add(Refusal.BUDGET, reason)
        return False
    return True


def _admits(ctx: PlanContext, job: Job, policy: Policy, cap: GroupCapacity, refusals: _Refusals) -> bool:
    """Whether `job` may take GPUs of `cap` within its tenant's quota and hard budget (`refusals` learn why not):
    what a placement there checks, for room made there."""
    if not _quota_ok(ctx, job, policy, cap, refusals):
        return False
    return not _has_budget(policy) or _budget_ok(ctx, job, policy, gpu_demand_of(job) * cap.gpu_price,
                                                 f"placing on {cap.group.id}", refusals)


def _try_ready(ctx: PlanContext, job: Job, policy: Policy, candidates: list[GroupCapacity], refusals: _Refusals,
               *, spare_only: bool = False, prefer: Callable[[], set[NodeId]] | None = None,
               elastic_spare: bool = False) -> bool:
    """Place the job on free GPUs of ready nodes of the first candidate group that has them.

    `spare_only`: on elastic on-demand groups, only GPUs of nodes that already run other work (an idle
    on-demand node is not paid for whatever happens: it can be released); `elastic_spare`: the same on every
    elastic group (an idle spot node was launched for some job). `prefer`: gives the nodes a single-node job
    goes to first when one of them has room (best fit among them), before best fit over the group; steady
    nodes, so it is called only when a steady group's ready nodes are taken by count.
    """
    budgeted = _has_budget(policy)
    demand = gpu_demand_of(job)
    for cap in candidates:
        if not cap.buckets or not _quota_ok(ctx, job, policy, cap, refusals):
            continue
        spare = (elastic_spare and cap.group.tier is Tier.ELASTIC) or (
            spare_only and cap.group.capacity_type is CapacityType.ON_DEMAND)
        if spare and not cap.has_spare(job.whole_gpus):
            continue
        cost = demand * cap.gpu_price
        if budgeted and not _budget_ok(ctx, job, policy, cost, f"placing on {cap.group.id}", refusals):
            continue
        uuids: tuple[str, ...] = ()
        where = ""
        if cap.group.tier is Tier.STEADY and ctx.snapshot.node_gpus:
            bound = _bind_local(ctx, job, policy, cap, refusals)
            if bound is None:
                continue
            node_ids, uuids, where = bound
        else:
            # the preferred nodes are steady ones: on another group they can be none of its nodes
            preferred = prefer() if prefer is not None and not spare and cap.group.tier is Tier.STEADY else None
            taken = cap.take_ready_among(job.whole_gpus, preferred) if preferred else None
            if taken is None:
                taken = cap.take_spare(job.whole_gpus) if spare else cap.take_ready(job.whole_gpus)
            if taken is None:
                continue
            node_ids = taken
        ctx.usage_of(job.tenant).add(cap.group, demand, cost)
        tier = "steady tier" if cap.group.tier is Tier.STEADY else f"elastic {cap.group.capacity_type.value}"
        ctx.add_placement(
            Action(
                kind=ActionKind.PLACE_JOB,
                target=job.id,
                tenant=job.tenant,
                count=job.whole_gpus,
                node_ids=node_ids,
                gpu_uuids=uuids,
                step=STEP_PLACE,
                reason=f"{job.whole_gpus} free GPU(s) on {', '.join(node_ids)} ({cap.group.id}, {tier}, "
                f"${cap.gpu_price:.2f}/GPU-h){where}{ctx.spread_notes.get(cap.group.id, '')}",
            )
        )
        return True
    return False


def _bind_local(
    ctx: PlanContext, job: Job, policy: Policy, cap: GroupCapacity, refusals: _Refusals
) -> tuple[tuple[NodeId, ...], tuple[str, ...], str] | None:
    """Specific GPUs for `job` on a steady group whose nodes reported theirs (the local GPU scheduler).

    Ready nodes that never reported their GPUs are used by count, after the reported ones.
    """
    book = ctx.gpu_book()
    reported = sorted(n for n in cap.free_of if n in book.nodes)
    if not reported:
        taken = cap.take_ready(job.whole_gpus)
        return None if taken is None else (taken, (), "")
    outcome = book.bind(job, policy, reported)
    if isinstance(outcome, Binding):
        cap.take_on(outcome.node_ids, job.whole_gpus if book.opens_gpu(outcome) else 0)
        return outcome.node_ids, outcome.gpu_uuids, f"; GPUs by the local scheduler: {outcome.reason}"
    refusals.add(Refusal.LOCAL_GPUS, f"{cap.group.id}: {outcome.reason}")
    unreported = sorted(
        (free, n) for n, free in cap.free_of.items() if n not in book.nodes and free >= job.whole_gpus
    )
    if job.whole_gpus > cap.gpn or not unreported:
        return None
    node_id = unreported[0][1]
    cap.take_on((node_id,), job.whole_gpus)
    return (node_id,), (), ""


def _try_inflight(
    ctx: PlanContext,
    job: Job,
    policy: Policy,
    candidates: list[GroupCapacity],
    refusals: _Refusals,
    waiting: dict[str, int],
) -> bool:
    budgeted = _has_budget(policy)
    demand = gpu_demand_of(job)
    for cap in candidates:
        if (cap.group.tier is Tier.STEADY and not saves_power(cap.group)) or not cap.inflight_free:
            continue
        if cap.group.id in ctx.snapshot.unavailable:  # what it shows as booting keeps failing: look elsewhere
            continue
        if not _quota_ok(ctx, job, policy, cap, refusals):
            continue
        slots = cap.find_inflight(job.whole_gpus)
        if slots is None:
            continue
        # A node launched earlier in this plan for the same tenant is already charged to it.
        owned = len(slots) == 1 and cap.inflight_owner[slots[0]] == job.tenant
        cost = 0.0 if owned else demand * cap.gpu_price
        if budgeted and not _budget_ok(
            ctx, job, policy, cost, f"waiting on booting capacity in {cap.group.id}", refusals
        ):
            continue
        cap.commit_inflight(slots, job.whole_gpus)
        ctx.usage_of(job.tenant).add(cap.group, demand, cost)
        if not owned:
            waiting[cap.group.id] += 1
        return True
    return False


def _try_launch(
    ctx: PlanContext,
    job: Job,
    policy: Policy,
    candidates: list[GroupCapacity],
    refusals: _Refusals,
    launches: dict[str, _LaunchSummary],
) -> bool:
    budgeted = _has_budget(policy)
    demand = gpu_demand_of(job)
    for cap in by_marginal_cost(job.whole_gpus, candidates):
        if cap.group.tier is Tier.STEADY and not saves_power(cap.group):
            if job.whole_gpus > cap.gpn * cap.group.max_size:
                refusals.add(Refusal.TOO_LARGE, f"{job.whole_gpus} GPUs exceed {cap.group.id}'s whole size")
            continue
        if cap.group.tier is Tier.STEADY and wake_room(ctx, cap) < -(-job.whole_gpus // cap.gpn):
            continue  # not enough powered-off nodes to wake here: the cloud is next
        unavailable = ctx.snapshot.unavailable.get(cap.group.id)
        if unavailable is not None:
            refusals.add(Refusal.UNAVAILABLE, f"{cap.group.id} is cooling down: {unavailable}")
            continue
        need = -(-job.whole_gpus // cap.gpn)
        if cap.planned_size + need > cap.group.max_size:
            refusals.add(
                Refusal.GROUP_MAX,
                f"{cap.group.id} is at its max_size {cap.group.max_size} "
                f"({cap.planned_size} planned, {need} more needed)",
            )
            continue
        if not _quota_ok(ctx, job, policy, cap, refusals):
            continue
        cost = need * cap.price_per_node
        if budgeted:
            what = f"launch of {need} x {cap.group.instance_type} in {cap.group.id} (${cost:.2f}/h)"
            if not _budget_ok(ctx, job, policy, cost, what, refusals):
                continue
        cap.launched += need
        leftover = need * cap.gpn - job.whole_gpus
        if need == 1 and leftover > 0:
            cap.add_inflight(leftover, job.tenant)
        ctx.usage_of(job.tenant).add(cap.group, demand, cost)
        summary = launches[cap.group.id]
        summary.nodes += need
        summary.jobs += 1
        summary.gpus += job.whole_gpus
        summary.by_tenant[job.tenant] += 1
        return True
    return False


__all__ = ["STEP_PLACE", "STEP_SCALE_UP", "candidate_groups", "never_runs", "place_and_scale_up",
           "place_by_marginal_cost", "spot_allowed", "spot_eligible"]
