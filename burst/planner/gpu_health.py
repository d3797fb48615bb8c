"""Step: move jobs off on-prem GPUs judged unhealthy, checkpoint first.

A GPU whose agent reports it unhealthy (a volatile ECC error, pending page
retirement or row remap, a GPU that fell off the bus) gets no new work (the
local scheduler filters it out), and the jobs bound to it are moved:

1. a job that can checkpoint (it has a measured `checkpoint_duration_s`) and
   has no fresh checkpoint is asked for one (`request_checkpoint`);
2. once that checkpoint has had its duration to complete, or when the last
   checkpoint is fresh anyway (completed within `FRESH_CHECKPOINT_S`), the job
   is evicted (`evict_job`): it is requeued and resumes from the checkpoint on
   healthy GPUs;
3. a job that cannot checkpoint is evicted at once: the GPU cannot be
   trusted, and it resumes from its last checkpoint, if any.

While a requested checkpoint runs, a hold says so.
"""

from __future__ import annotations

from burst.model import Action, ActionKind, Job
from burst.planner.context import PlanContext
from burst.planner.gpu_scheduler import displaced_by_health

STEP = "gpu_health"
FRESH_CHECKPOINT_S = 120.0
"""A checkpoint completed this recently is fresh: evicting now loses at most this much work."""


def move_off_unhealthy_gpus(ctx: PlanContext) -> None:
    """Checkpoint, then evict, the jobs bound to GPUs their node reports unhealthy."""
    if not ctx.snapshot.node_gpus:
        return
    running = {j.id: j for j in ctx.running_jobs() if j.gpu_uuids}
    displaced = displaced_by_health(ctx.snapshot.node_gpus.values(), {j.id: j.gpu_uuids for j in running.values()})
    for job_id, why in displaced.items():
        job = running[job_id]
        takes = job.checkpoint_duration_s
        age = _checkpoint_age(ctx, job)
        if takes is not None and (age is None or age > takes + FRESH_CHECKPOINT_S):
            _act(ctx, job, ActionKind.REQUEST_CHECKPOINT, f"{why}: checkpoint before it is moved ({takes:g} s)")
        elif takes is not None and age is not None and age < takes:
            ctx.hold(f"job:{job.id}", f"{why}: its checkpoint is under way ({age:.0f} of {takes:g} s)", STEP, job.tenant)
        else:
            done = "no checkpoint to take" if takes is None else f"checkpointed {age:.0f} s ago"
            _act(ctx, job, ActionKind.EVICT_JOB, f"{why}: {done}; requeued to resume on healthy GPUs")


def _checkpoint_age(ctx: PlanContext, job: Job) -> float | None:
    if job.last_checkpoint_at is None or job.started_at is None or job.last_checkpoint_at < job.started_at:
        return None
    return (ctx.now - job.last_checkpoint_at).total_seconds()


def _act(ctx: PlanContext, job: Job, kind: ActionKind, reason: str) -> None:
    ctx.actions.append(
        Action(kind=kind, target=job.id, tenant=job.tenant, count=job.whole_gpus, node_ids=job.node_ids,
               gpu_uuids=job.gpu_uuids, step=STEP, reason=reason)
    )
