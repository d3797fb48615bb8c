"""Step: checkpoint on notice, when a provider says it will reclaim a spot node.

For every fault-tolerant job running on a noticed node, the budget is the
time to the reclaim deadline less `SAFETY_MARGIN_S`. If the job's measured
checkpoint (`checkpoint_duration_s`) fits the budget, the step asks it to
checkpoint now (`request_checkpoint`), so it resumes from this moment rather
than from its last periodic checkpoint; a checkpoint requested for this notice
is not asked again. If it does not fit, or the job never measured one, asking
would only cost GPU time the node no longer has: the job keeps running to the
deadline and resumes from its last periodic checkpoint, and a hold says so.
Either way the job is requeued under the same id when the node goes.
"""

from __future__ import annotations

from burst.model import Action, ActionKind
from burst.planner.context import PlanContext

STEP = "checkpoint_on_notice"
SAFETY_MARGIN_S = 10.0
LONGEST_NOTICE_S = 300.0
"""A checkpoint asked for this close to the deadline was asked for this notice (AWS gives 120 s, GCP 30 s)."""


def checkpoint_on_notice(ctx: PlanContext) -> None:
    """Ask fault-tolerant jobs on noticed nodes to checkpoint when their checkpoint fits before the reclaim."""
    notices = ctx.snapshot.notices
    if not notices:
        return
    for job in ctx.running_jobs():
        deadlines = [notices[n] for n in job.node_ids if n in notices]
        if not deadlines or not job.fault_tolerant:
            continue
        deadline = min(deadlines)
        budget = (deadline - ctx.now).total_seconds() - SAFETY_MARGIN_S
        asked = job.last_checkpoint_at
        if asked is not None and job.started_at is not None and asked >= job.started_at and \
                (deadline - asked).total_seconds() <= LONGEST_NOTICE_S:
            continue  # already asked for this notice
        takes = job.checkpoint_duration_s
        if takes is not None and takes <= budget:
            ctx.actions.append(
                Action(kind=ActionKind.REQUEST_CHECKPOINT, target=job.id, tenant=job.tenant, count=job.whole_gpus,
                       node_ids=job.node_ids, step=STEP,
                       reason=f"spot reclaim at {deadline:%H:%M:%S}: its {takes:g} s checkpoint fits the "
                       f"{budget:.0f} s left (less a {SAFETY_MARGIN_S:g} s margin)")
            )
        else:
            why = "no measured checkpoint duration" if takes is None else f"its {takes:g} s checkpoint does not fit"
            ctx.hold(f"job:{job.id}", f"spot reclaim at {deadline:%H:%M:%S}, {budget:.0f} s left: {why}; it "
                     "resumes from its last periodic checkpoint", STEP, job.tenant)


__all__ = ["LONGEST_NOTICE_S", "SAFETY_MARGIN_S", "STEP", "checkpoint_on_notice"]
