"""Step: keep jobs with a deadline off spot once their slack is gone ("uniform progress", Can't Be Late, NSDI '24).

A job with a `deadline` and a known `duration_s` has remaining work
R = duration − progress, with progress counted up to its last checkpoint (what
survives losing its node), and T = time left until the deadline. Its slack is
T − R: how long it can still afford to lose. Spot is allowed while the slack
is at least the tenant's margin (`spot.deadline_margin`; by default one cold
boot of the cheapest on-demand group it may use, `DEFAULT_BOOT_S` if it has
none, plus the job's measured checkpoint duration: the overhead of one move).
Below it, the job must run on on-demand:

1. a pending job is barred from spot for this plan (`PlanContext.spot_barred`):
   placement passes over spot groups for it, and a hold says why;
2. a running job on a spot node with unsaved work (more than
   `FRESH_CHECKPOINT_S` since its last checkpoint) that can checkpoint (it
   has a measured `checkpoint_duration_s`) is asked to (`request_checkpoint`);
   while that checkpoint runs, a hold says so;
3. once its work is saved (or when it cannot checkpoint), it is evicted
   (`evict_job`): requeued from its checkpoint, it is placed on on-demand by
   rule 1 on a later tick. Its GPUs are free for the rest of this plan.

Slack counted from the last checkpoint falls while a job runs and rises when a
checkpoint lands, so a job whose requested checkpoint lifts its slack back to
the margin stays on spot: it was behind only by unsaved work. Jobs without a
deadline or duration, jobs spot never takes, and jobs on a node under an
interruption notice (`checkpoint_on_notice` handles them; they come back pending)
are left alone.
"""

from __future__ import annotations

from burst import progress
from burst.model import Action, ActionKind, CapacityType, Job, JobState, Policy
from burst.planner.context import PlanContext, gpus_per_node_of
from burst.planner.placement import candidate_groups, spot_eligible

STEP = "deadline"
DEFAULT_BOOT_S = 300.0
"""The cold boot counted in the default margin when the job may use no on-demand group."""
FRESH_CHECKPOINT_S = 120.0
"""A running job with at most this much unsaved work is moved without a checkpoint first."""


def slack_s(job: Job, ctx: PlanContext) -> float | None:
    """Time to the job's deadline less its remaining work from its last checkpoint (None: no deadline or duration)."""
    if job.deadline is None or job.duration_s is None:
        return None
    remaining = max(0.0, job.duration_s - progress.checkpointed_work(job, ctx.now))
    return (job.deadline - ctx.now).total_seconds() - remaining


def deadline_margin_s(ctx: PlanContext, job: Job, policy: Policy) -> float:
    """The slack below which `job` must run on on-demand (see the module doc)."""
    if policy.spot.deadline_margin_s is not None:
        return policy.spot.deadline_margin_s
    on_demand = [c for c in candidate_groups(ctx, job, policy) if c.group.capacity_type is CapacityType.ON_DEMAND]
    boot = on_demand[0].group.boot_latency_s if on_demand else DEFAULT_BOOT_S
    return boot + (job.checkpoint_duration_s or 0.0)


def keep_deadlines(ctx: PlanContext) -> None:
    """Bar pending jobs out of slack from spot; checkpoint, then evict, running spot jobs out of slack."""
    acted = {a.target for a in ctx.actions}
    for job in ctx.snapshot.jobs:
        if job.deadline is None or job.duration_s is None or job.id in acted:
            continue
        policy = ctx.policy(job.tenant)
        if not spot_eligible(job, policy):
            continue
        slack = slack_s(job, ctx)
        assert slack is not None
        margin = deadline_margin_s(ctx, job, policy)
        if slack >= margin:
            continue
        why = f"deadline slack {slack:.0f} s < margin {margin:.0f} s"
        if job.state is JobState.PENDING:
            ctx.spot_barred[job.id] = why
            ctx.hold(f"job:{job.id}", f"{why}: placed on on-demand only, not spot", STEP, job.tenant)
        elif job.state in (JobState.RUNNING, JobState.CHECKPOINTING) and _on_spot(ctx, job):
            _move_off_spot(ctx, job, why)


def _on_spot(ctx: PlanContext, job: Job) -> bool:
    if any(n in ctx.snapshot.notices for n in job.node_ids):
        return False
    node = ctx.nodes.get(job.node_ids[0]) if job.node_ids else None
    cap = ctx.groups.get(node.group_id) if node else None
    return cap is not None and cap.group.capacity_type is CapacityType.SPOT


def _move_off_spot(ctx: PlanContext, job: Job, why: str) -> None:
    takes = job.checkpoint_duration_s
    asked = job.last_checkpoint_at
    started = job.started_at
    if job.state is JobState.CHECKPOINTING or (
        takes is not None and asked is not None and started is not None and started <= asked
        and (ctx.now - asked).total_seconds() < takes
    ):
        ctx.hold(f"job:{job.id}", f"{why}: its checkpoint is under way; then it moves to on-demand", STEP, job.tenant)
        return
    unsaved = progress.work_at(job, ctx.now) - progress.checkpointed_work(job, ctx.now)
    if takes is not None and unsaved > FRESH_CHECKPOINT_S:
        _act(ctx, job, ActionKind.REQUEST_CHECKPOINT,
             f"{why}: checkpoint ({takes:g} s) before moving to on-demand ({unsaved:.0f} s of work unsaved)")
        return
    saved = "no checkpoint to take" if takes is None else f"{unsaved:.0f} s of work unsaved"
    _act(ctx, job, ActionKind.EVICT_JOB, f"{why}: moving to on-demand ({saved}; requeued from its last checkpoint)")
    per_node = gpus_per_node_of(job)
    for node_id in job.node_ids:
        node = ctx.nodes.get(node_id)
        cap = ctx.groups.get(node.group_id) if node else None
        if cap is not None:
            cap.release(node_id, per_node)
            share = len(job.node_ids)
            ctx.usage_of(job.tenant).add(cap.group, -job.gpu_demand / share, -job.gpu_demand * cap.gpu_price / share)


def _act(ctx: PlanContext, job: Job, kind: ActionKind, reason: str) -> None:
    ctx.actions.append(Action(kind=kind, target=job.id, tenant=job.tenant, count=job.whole_gpus,
                              node_ids=job.node_ids, step=STEP, reason=reason))


__all__ = ["DEFAULT_BOOT_S", "FRESH_CHECKPOINT_S", "STEP", "deadline_margin_s", "keep_deadlines", "slack_s"]
