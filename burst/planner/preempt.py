"""Step: priority preemption, for pending jobs that no capacity can serve.

A pending job placement refused for lack of capacity (every group it may
use full, or at its max size) may evict running jobs of lower priority whose
tenants list its tenant in `preemptible_by`. For each such job, highest
priority first, the step looks at every ready node of the groups it may use
and asks victim selection (`burst.planner.victims`) for the cheapest set of
allowed jobs on that node that frees enough GPUs beside the node's free
ones; the node whose victims lose the least work wins. Victims are
checkpointed, then evicted, by the rule every step that moves running jobs
shares (`burst.planner.evict`), with the reason: a victim with unsaved work
whose checkpoint fits `PREEMPTION_CHECKPOINT_BUDGET_S` is asked for one and
evicted once it has landed (victim selection picks it again on the next
ticks, since its lost work is then least); the others are evicted at once,
requeued to resume from their last checkpoint. The preemptor is placed on a
later tick, once the GPUs are free, and waits with a hold saying so. A job needing more than one node is
not served by preemption (the hold says so). Jobs refused for their own
quota, budget or spot share never preempt: evicting others would not help.
A job's priority is its own when it has one, else its tenant's.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable

from burst.model import Job
from burst.planner.context import PlanContext, gpus_per_node_of
from burst.planner.evict import Move, checkpoint_then_evict
from burst.planner.placement import candidate_groups
from burst.planner.victims import LEAST_LOST_WORK, ORDERS, Victim, select_victims

STEP = "preempt"
PREEMPTING_KINDS = frozenset({"group_max", "no_group"})
PREEMPTION_CHECKPOINT_BUDGET_S = 120.0
"""A victim whose checkpoint takes longer is evicted at once: the preemptor waits at most this long (AWS's
two-minute notice) for the work of the jobs it displaces to be saved."""


def job_priority(ctx: PlanContext, job: Job) -> int:
    """The priority preemption compares: the job's own, else its tenant's."""
    return job.priority if job.priority is not None else ctx.policy(job.tenant).priority


def preempt_for_priority(ctx: PlanContext, *, order: str = LEAST_LOST_WORK) -> None:
    """Evict the cheapest allowed lower-priority jobs for pending jobs that cannot be served (see module doc).

    `order` is the victim order (`burst.planner.victims.ORDERS`); burst uses least lost work, the others are
    there to be measured against it.
    """
    waiting = [job for job, kind in ctx.unserved if kind in PREEMPTING_KINDS]
    if not waiting:
        return
    running = ctx.running_jobs()
    on_node: dict[str, list[Job]] = defaultdict(list)
    running_gpus: dict[str, float] = defaultdict(float)
    for job in running:
        running_gpus[job.tenant] += job.gpu_demand
        for node_id in job.node_ids:
            on_node[node_id].append(job)
    evicting: set[str] = set()
    disrupted: dict[str, float] = defaultdict(float)
    free: dict[str, float] = {}  # GPUs of a node not yet promised, once preemption has promised some of it
    for job in sorted(waiting, key=lambda j: (-job_priority(ctx, j), j.submitted_at, j.id)):
        priority = job_priority(ctx, job)
        best: tuple[float, str, list[Victim]] | None = None
        groups = [c for c in candidate_groups(ctx, job, ctx.policy(job.tenant)) if job.whole_gpus <= c.gpn]
        for cap in groups:
            for node_id in sorted(cap.free_of):
                need = job.whole_gpus - free.get(node_id, cap.free_of[node_id])
                allowed = [
                    r for r in on_node.get(node_id, ())
                    if r.id not in evicting
                    and job_priority(ctx, r) < priority
                    and job.tenant in ctx.policy(r.tenant).preemptible_by
                ]
                if need <= 0 or not allowed:
                    continue
                victims = select_victims(allowed, need, ctx.now, running_gpus=running_gpus, disrupted_gpus=disrupted,
                                         order=order, checkpoint_budget_s=PREEMPTION_CHECKPOINT_BUDGET_S,
                                         freed_gpus={r.id: gpus_per_node_of(r) for r in allowed},
                                         purpose=f"tenant {job.tenant}'s job {job.id} (priority {priority})")
                cost = sum(v.cost_gpu_s for v in victims)
                if victims and (best is None or cost < best[0]):
                    best = (cost, node_id, victims)
        if best is None:
            if not groups:
                ctx.hold(f"job:{job.id}", "needs more than one node: not served by preemption", STEP, job.tenant)
            continue
        _, node_id, victims = best
        cap_free = ctx.groups[ctx.nodes[node_id].group_id].free_of[node_id]
        free[node_id] = free.get(node_id, cap_free) + sum(gpus_per_node_of(v.job) for v in victims) - job.whole_gpus
        moves = [
            checkpoint_then_evict(ctx, victim.job, f"preempted by priority: {victim.reason}", STEP,
                                  then="yielding its GPUs", budget_s=PREEMPTION_CHECKPOINT_BUDGET_S)
            for victim in victims
        ]
        for victim in victims:
            evicting.add(victim.job.id)
            disrupted[victim.job.tenant] += victim.job.gpu_demand
        names = ", ".join(v.job.id for v in victims)
        if all(m is Move.EVICTED for m in moves):
            ctx.hold(f"job:{job.id}", f"waits for {node_id}, freed by preempting {names}", STEP, job.tenant)
        else:
            ctx.hold(f"job:{job.id}", f"waits for {node_id}, freed by preempting {names} once their checkpoints "
                     "land", STEP, job.tenant)


def preemption_step(order: str) -> Callable[[PlanContext], None]:
    """The preemption step with victims taken in `order` (for the simulator's victim-order comparison)."""
    if order not in ORDERS:
        raise ValueError(f"unknown victim order {order!r}: expected one of {', '.join(ORDERS)}")
    return functools.partial(preempt_for_priority, order=order)


__all__ = ["STEP", "job_priority", "preempt_for_priority", "preemption_step"]
