"""Step: checkpoint on notice, when a provider says it will reclaim a spot node, or that one is at risk.

Interruption notices (`Snapshot.notices`: the node goes at a deadline). Every
fault-tolerant job running on a noticed node is moved off it by the rule all
steps that move running jobs share (`burst.planner.evict.checkpoint_then_evict`),
with a budget of the time to the deadline less `SAFETY_MARGIN_S`: when its
measured checkpoint (`checkpoint_duration_s`) fits the budget, it is asked to
checkpoint now (`request_checkpoint`), so it resumes from this moment rather
than from its last periodic checkpoint, and is evicted once the checkpoint has
landed; when it does not fit, or the job never measured one (or its work is
all but saved), it is evicted at once (`evict_job`) and resumes from its last
periodic checkpoint, since running on would only spend GPU time the node no
longer has. Either way it is requeued under the same id and can be placed
elsewhere before the node goes (never on a noticed node). A checkpoint under
way when the notice comes is waited for.

Rebalance recommendations (`Snapshot.rebalances`: elevated risk, no deadline)
start this early, without evicting anything: each fault-tolerant job on a
recommended node (and on no noticed one) is asked, once per recommendation,
for a checkpoint that fits `REBALANCE_BUDGET_S` less the margin
(`burst.planner.evict.checkpoint_early`), and keeps running. When the
interruption follows, its notice finds the work saved as of the
recommendation.
"""

from __future__ import annotations

from burst.planner.context import PlanContext
from burst.planner.contract import declare
from burst.planner.evict import REBALANCE_BUDGET_S, SAFETY_MARGIN_S, checkpoint_early, checkpoint_then_evict

STEP = "checkpoint_on_notice"


@declare(writes=("emptying",))
def checkpoint_on_notice(ctx: PlanContext) -> None:
    """Move fault-tolerant jobs off noticed nodes (checkpointing first when it fits), and ask jobs on nodes
    recommended for rebalance for a checkpoint that fits (see module doc)."""
    notices, rebalances = ctx.snapshot.notices, ctx.snapshot.rebalances
    if not notices and not rebalances:
        return
    for job in ctx.running_jobs():
        if not job.fault_tolerant:
            continue
        deadlines = [notices[n] for n in job.node_ids if n in notices]
        if deadlines:
            deadline = min(deadlines)
            budget = (deadline - ctx.now).total_seconds() - SAFETY_MARGIN_S
            why = f"spot reclaim at {deadline:%H:%M:%S}, {budget:.0f} s left (less a {SAFETY_MARGIN_S:g} s margin)"
            checkpoint_then_evict(ctx, job, why, STEP, then="moving off the reclaimed node", budget_s=budget,
                                  empties=True)
            continue
        recommended = [rebalances[n] for n in job.node_ids if n in rebalances]
        if not recommended:
            continue
        latest = max(recommended)
        asked = job.last_checkpoint_at
        if asked is not None and job.started_at is not None and asked >= max(latest, job.started_at):
            continue  # already asked since this recommendation
        checkpoint_early(ctx, job, f"spot rebalance recommended at {latest:%H:%M:%S}", STEP,
                         budget_s=REBALANCE_BUDGET_S - SAFETY_MARGIN_S)


__all__ = ["REBALANCE_BUDGET_S", "SAFETY_MARGIN_S", "STEP", "checkpoint_on_notice"]
