"""Step: reclaim running jobs that have outlived their tenant's max runtime."""

from __future__ import annotations

from burst.model import Action, ActionKind
from burst.planner.context import PlanContext
from burst.planner.contract import declare

STEP = "reclaim"


@declare(writes=("released",))
def reclaim_overdue(ctx: PlanContext) -> None:
    """Plan a reclaim for every running job past `max_job_runtime`, freeing its GPUs for this plan."""
    running = ctx.running_jobs()
    limits = {t: ctx.policy(t).max_job_runtime_s for t in {job.tenant for job in running}}
    if all(limit is None for limit in limits.values()):
        return
    for job in running:
        limit = limits[job.tenant]
        if limit is None or job.started_at is None:
            continue
        ran = (ctx.now - job.started_at).total_seconds()
        if ran <= limit:
            continue
        ctx.add_action(
            Action(
                kind=ActionKind.RECLAIM_JOB,
                target=job.id,
                tenant=job.tenant,
                count=job.whole_gpus,
                node_ids=job.node_ids,
                step=STEP,
                reason=f"ran {ran / 3600:.1f} h, over tenant {job.tenant}'s max_job_runtime of {limit / 3600:.1f} h",
            )
        )
        ctx.release_job(job)
