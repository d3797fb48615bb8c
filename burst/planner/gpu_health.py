"""Step: move jobs off on-prem GPUs judged unhealthy, checkpoint first.

A GPU whose agent reports it unhealthy (a volatile ECC error, pending page
retirement or row remap, a GPU that fell off the bus) gets no new work (the
local scheduler filters it out), and the jobs bound to it are checkpointed,
then evicted, by the rule every step that moves running jobs shares
(`burst.planner.evict`): asked for a checkpoint when they can take one and
have unsaved work, held while it runs, then evicted to resume from it on
healthy GPUs. A job that cannot checkpoint is evicted at once: the GPU cannot
be trusted, and it resumes from its last checkpoint, if any.
"""

from __future__ import annotations

from burst.planner.context import PlanContext
from burst.planner.contract import declare
from burst.planner.evict import checkpoint_then_evict
from burst.planner.gpu_scheduler import displaced_by_health

STEP = "gpu_health"


@declare()
def move_off_unhealthy_gpus(ctx: PlanContext) -> None:
    """Checkpoint, then evict, the jobs bound to GPUs their node reports unhealthy."""
    if not ctx.snapshot.node_gpus:
        return
    running = {j.id: j for j in ctx.running_jobs() if j.gpu_uuids}
    displaced = displaced_by_health(ctx.snapshot.node_gpus.values(), {j.id: j.gpu_uuids for j in running.values()})
    for job_id, why in displaced.items():
        checkpoint_then_evict(ctx, running[job_id], why, STEP, then="moving to healthy GPUs")
