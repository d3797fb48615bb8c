"""Step: priority preemption, for pending jobs that no capacity can serve.

A pending job placement refused for lack of capacity (every group it may
use full, or at its max size) may evict running jobs whose tenants list its
tenant in `preemptible_by`: jobs of lower priority, and jobs of equal
priority of a tenant over its share (`over_share`: with the victim gone, its
tenant still holds at least as many GPUs per unit of `fair_share_weight` as
the preemptor's tenant would with its job placed, the measure fair-share
ordering serves by; a set of victims that would take a tenant below that
is not used, so two tenants never preempt each other back and forth). For
each such job, highest priority first, the step looks at every ready node of
the groups it may use and asks victim selection (`burst.planner.victims`)
for the cheapest set of allowed jobs on that node that frees enough GPUs
beside the node's free ones; the node whose victims lose the least work wins. Victims are
checkpointed, then evicted, by the rule every step that moves running jobs
shares (`burst.planner.evict`), with the reason: a victim with unsaved work
whose checkpoint fits `PREEMPTION_CHECKPOINT_BUDGET_S` is asked for one and
evicted once it has landed (victim selection picks it again on the next
ticks, since its lost work is then least); the others are evicted at once,
requeued to resume from their last checkpoint. The preemptor is placed on a
later tick, once the GPUs are free, and waits with a hold saying so. A job needing more than one node is
not served by preemption (the hold says so). Jobs refused for their own
quota, budget or spot share never preempt: evicting others would not help.
Priorities compare as fair ordering's do (`burst.planner.fairshare`): a
job of another tenant is lower when its tenant's policy priority is lower,
and equal when the tenants' priorities are; a job's own priority (its own,
else its tenant's) compares only with jobs of its own tenant (a tenant that
lists itself in `preemptible_by`). So no field a tenant sets on its jobs lets
them preempt another tenant's.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Mapping

from burst.model import Job, TenantName
from burst.planner.context import PlanContext, Refusal, gpus_per_node_of
from burst.planner.contract import declare
from burst.planner.eligibility import candidate_groups
from burst.planner.evict import Move, checkpoint_then_evict
from burst.planner.victims import LEAST_LOST_WORK, ORDERS, Victim, select_victims

STEP = "preempt"
PREEMPTING_KINDS = frozenset({Refusal.GROUP_MAX, Refusal.NO_GROUP})
PREEMPTION_CHECKPOINT_BUDGET_S = 120.0
"""A victim whose checkpoint takes longer is evicted at once: the preemptor waits at most this long (AWS's
two-minute notice) for the work of the jobs it displaces to be saved."""


def job_priority(ctx: PlanContext, job: Job) -> int:
    """A job's priority among its own tenant's jobs: its own, else its tenant's."""
    return job.priority if job.priority is not None else ctx.policy(job.tenant).priority


def rank(ctx: PlanContext, job: Job) -> tuple[int, int]:
    """What preemption compares: the tenant's policy priority, then (within the tenant) the job's own."""
    return ctx.policy(job.tenant).priority, job_priority(ctx, job)


def _yields(victim: tuple[str, tuple[int, int]], preemptor: tuple[str, tuple[int, int]]) -> str | None:
    """Whether a running job may yield to a waiting one, from their (tenant, rank): "lower" (by priority),
    "peer" (another tenant of equal priority: only while over its share), or None."""
    (v_tenant, (v_tenant_p, v_job_p)), (p_tenant, (p_tenant_p, p_job_p)) = victim, preemptor
    if v_tenant == p_tenant:
        return "lower" if v_job_p < p_job_p else None
    if v_tenant_p < p_tenant_p:
        return "lower"
    return "peer" if v_tenant_p == p_tenant_p else None


@declare(reads=("unserved", "spot_barred"))
def preempt_for_priority(ctx: PlanContext, *, order: str = LEAST_LOST_WORK) -> None:
    """Evict the cheapest allowed jobs (lower priority, or equal priority over their tenant's share) for pending
    jobs that cannot be served (see module doc).

    `order` is the victim order (`burst.planner.victims.ORDERS`); burst uses least lost work, the others are
    there to be measured against it.
    """
    if not ctx.unserved:
        return
    running = ctx.running_jobs()
    widest = max((cap.gpn for cap in ctx.groups.values()), default=0)
    if not any(ctx.policy(t).preemptible_by for t in {job.tenant for job in running}):
        # No running job may yield: only the holds of jobs wider than any node are left to say.
        # (job.gpus or 1) is Job.whole_gpus, read inline: this filters every unserved job of each plan
        for job in _preemptor_order(ctx, [job for job, kind in ctx.unserved
                                          if kind in PREEMPTING_KINDS and (job.gpus or 1) > widest]):
            _hold_too_wide(ctx, job)
        return
    waiting = [job for job, kind in ctx.unserved if kind in PREEMPTING_KINDS]
    if not waiting:
        return
    on_node, running_gpus = _running_index(running)
    priority_of = {job.id: rank(ctx, job) for job in running}
    # The (tenant, rank) pairs running: a waiting job none of them may yield to skips the node scan.
    running_kinds = {(job.tenant, priority_of[job.id]) for job in running}
    evicting: set[str] = set()
    disrupted: dict[str, float] = defaultdict(float)
    promised: dict[str, float] = defaultdict(float)  # GPUs preemption frees for each tenant's waiting jobs
    free: dict[str, float] = {}  # GPUs of a node not yet promised, once preemption has promised some of it
    may_preempt: dict[tuple[str, tuple[int, int]], bool] = {}
    for job in _preemptor_order(ctx, waiting):
        priority = rank(ctx, job)
        best: tuple[float, str, list[Victim]] | None = None
        kind = (job.tenant, priority)
        if kind not in may_preempt:
            may_preempt[kind] = any(_yields(running_kind, kind) is not None
                                    and job.tenant in ctx.policy(running_kind[0]).preemptible_by
                                    for running_kind in running_kinds)
        if not may_preempt[kind] and job.whole_gpus <= widest:
            continue  # no running job may yield to this one
        groups = [c for c in candidate_groups(ctx, job, ctx.policy(job.tenant)) if job.whole_gpus <= c.gpn]
        for cap in groups:
            for node_id in sorted(cap.free_of):
                need = job.whole_gpus - free.get(node_id, cap.free_of[node_id])
                allowed = [
                    r for r in on_node.get(node_id, ())
                    if r.id not in evicting
                    and job.tenant in ctx.policy(r.tenant).preemptible_by
                    and ((yields := _yields((r.tenant, priority_of[r.id]), kind)) == "lower" or yields == "peer"
                         and over_share(ctx, r.tenant, disrupted[r.tenant] + r.gpu_demand, job, promised))
                ]
                if need <= 0 or not allowed:
                    continue
                victims = select_victims(allowed, need, ctx.now, running_gpus=running_gpus, disrupted_gpus=disrupted,
                                         order=order, checkpoint_budget_s=PREEMPTION_CHECKPOINT_BUDGET_S,
                                         freed_gpus={r.id: gpus_per_node_of(r) for r in allowed},
                                         purpose=f"tenant {job.tenant}'s job {job.id} (priority {priority[1]})")
                if not _keeps_shares(ctx, victims, job, kind, priority_of, disrupted, promised):
                    by_priority = [r for r in allowed if _yields((r.tenant, priority_of[r.id]), kind) == "lower"]
                    victims = select_victims(by_priority, need, ctx.now, running_gpus=running_gpus,
                                             disrupted_gpus=disrupted, order=order,
                                             checkpoint_budget_s=PREEMPTION_CHECKPOINT_BUDGET_S,
                                             freed_gpus={r.id: gpus_per_node_of(r) for r in by_priority},
                                             purpose=f"tenant {job.tenant}'s job {job.id} (priority {priority[1]})")
                cost = sum(v.cost_gpu_s for v in victims)
                if victims and (best is None or cost < best[0]):
                    best = (cost, node_id, victims)
        if best is None:
            if not groups:
                _hold_too_wide(ctx, job)
            continue
        _, node_id, victims = best
        cap_free = ctx.groups[ctx.nodes[node_id].group_id].free_of[node_id]
        free[node_id] = free.get(node_id, cap_free) + sum(gpus_per_node_of(v.job) for v in victims) - job.whole_gpus
        _preempt(ctx, job, kind, node_id, victims, priority_of, promised)
        for victim in victims:
            evicting.add(victim.job.id)
            disrupted[victim.job.tenant] += victim.job.gpu_demand


def _running_index(running: tuple[Job, ...]) -> tuple[dict[str, list[Job]], dict[str, float]]:
    """Running jobs per node, and running GPUs per tenant."""
    on_node: dict[str, list[Job]] = defaultdict(list)
    running_gpus: dict[str, float] = defaultdict(float)
    for job in running:
        running_gpus[job.tenant] += job.gpu_demand
        for node_id in job.node_ids:
            on_node[node_id].append(job)
    return on_node, running_gpus


def _preempt(ctx: PlanContext, job: Job, kind: tuple[str, tuple[int, int]], node_id: str, victims: list[Victim],
             priority_of: Mapping[str, tuple[int, int]], promised: dict[str, float]) -> None:
    """Checkpoint, then evict, `victims` for `job`, which waits for `node_id` (a hold says so)."""
    moves = [
        checkpoint_then_evict(ctx, victim.job, f"{_why(ctx, victim.job, job, kind, priority_of, promised)}: "
                              f"{victim.reason}", STEP, then="yielding its GPUs",
                              budget_s=PREEMPTION_CHECKPOINT_BUDGET_S)
        for victim in victims
    ]
    promised[job.tenant] += job.gpu_demand
    names = ", ".join(v.job.id for v in victims)
    if all(m is Move.EVICTED for m in moves):
        ctx.hold(f"job:{job.id}", f"waits for {node_id}, freed by preempting {names}", STEP, job.tenant)
    else:
        ctx.hold(f"job:{job.id}", f"waits for {node_id}, freed by preempting {names} once their checkpoints "
                 "land", STEP, job.tenant)


def _preemptor_order(ctx: PlanContext, waiting: list[Job]) -> list[Job]:
    """The order waiting jobs look for victims in: highest tenant priority first, then (within a tenant) the
    job's own, then first submitted."""
    return sorted(waiting, key=lambda j: (-ctx.policy(j.tenant).priority, -job_priority(ctx, j), j.submitted_at, j.id))


def _hold_too_wide(ctx: PlanContext, job: Job) -> None:
    ctx.hold(f"job:{job.id}", "needs more than one node: not served by preemption", STEP, job.tenant)


def over_share(ctx: PlanContext, tenant: TenantName, giving_gpus: float, job: Job,
               promised: Mapping[TenantName, float]) -> bool:
    """Whether `tenant`, giving up `giving_gpus`, still holds at least the share `job`'s tenant holds with `job`
    placed: GPUs held per unit of `fair_share_weight`, the preemptor's counting what preemption already freed for
    it in this plan."""
    mine = ctx.usage_of(job.tenant).total_gpus + promised.get(job.tenant, 0.0) + job.gpu_demand
    theirs = ctx.usage_of(tenant).total_gpus - giving_gpus
    return mine / _weight(ctx, job.tenant) <= theirs / _weight(ctx, tenant) + 1e-9


def _weight(ctx: PlanContext, tenant: TenantName) -> float:
    return max(ctx.policy(tenant).fair_share_weight, 1e-9)


def _keeps_shares(ctx: PlanContext, victims: list[Victim], job: Job, kind: tuple[str, tuple[int, int]],
                  priority_of: Mapping[str, tuple[int, int]], disrupted: Mapping[TenantName, float],
                  promised: Mapping[TenantName, float]) -> bool:
    """Whether every tenant yielding a job of `job`'s priority stays over its share with all its victims gone."""
    giving: dict[TenantName, float] = defaultdict(float)
    peers: set[TenantName] = set()
    for v in victims:
        giving[v.job.tenant] += v.job.gpu_demand
        if _yields((v.job.tenant, priority_of[v.job.id]), kind) != "lower":
            peers.add(v.job.tenant)
    return all(over_share(ctx, t, disrupted.get(t, 0.0) + giving[t], job, promised) for t in peers)


def _why(ctx: PlanContext, victim: Job, job: Job, kind: tuple[str, tuple[int, int]],
         priority_of: Mapping[str, tuple[int, int]], promised: Mapping[TenantName, float]) -> str:
    """How a victim's eviction is allowed: a lower priority, or its tenant's share."""
    if _yields((victim.tenant, priority_of[victim.id]), kind) == "lower":
        return "preempted by priority"
    mine = ctx.usage_of(job.tenant).total_gpus + promised.get(job.tenant, 0.0) + job.gpu_demand
    return (f"preempted for fair share: tenant {victim.tenant} holds {ctx.usage_of(victim.tenant).total_gpus:g} "
            f"GPU(s) at weight {ctx.policy(victim.tenant).fair_share_weight:g}, tenant {job.tenant} "
            f"{mine:g} with its job at weight {ctx.policy(job.tenant).fair_share_weight:g}")


def preemption_step(order: str) -> Callable[[PlanContext], None]:
    """The preemption step with victims taken in `order` (for the simulator's victim-order comparison)."""
    if order not in ORDERS:
        raise ValueError(f"unknown victim order {order!r}: expected one of {', '.join(ORDERS)}")
    return functools.partial(preempt_for_priority, order=order)


__all__ = ["STEP", "job_priority", "over_share", "preempt_for_priority", "preemption_step", "rank"]
