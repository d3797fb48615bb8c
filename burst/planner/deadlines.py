"""Step: keep jobs with a deadline off spot when they fall behind ("uniform progress", Can't Be Late, NSDI '24).

A job with a `deadline` and a known duration (burst's step, `keep_declared_deadlines`: the duration its
submitter declared, `declared_duration_s`; the frozen baseline's `keep_deadlines`: its `duration_s`) has
remaining work R = duration − progress, with progress counted up to its last checkpoint (what
survives losing its node), and T = time left until the deadline. Its slack is
T − R: how long it can still afford to lose. Spot is allowed while the slack
is at least the tenant's margin (`spot.deadline_margin`; by default one cold
boot of the cheapest on-demand group it may use, `DEFAULT_BOOT_S` if it has
none, plus the job's measured checkpoint duration: the overhead of one move).
Below it, the job must run on on-demand. A pending job must also be on
schedule: uniform progress asks that by time t a job submitted at S with a
deadline D have done (t − S) / (D − S) of its work, so that spot's risk is
spread over the whole window rather than spent first, as a greedy "spot
until the slack is gone" would; a pending job behind that line by more than
the margin (the overhead of one move, the paper's restart overhead) goes to
on-demand. A running job is held to the slack rule alone: it gains on the
line while it runs, so moving it for a lag between two checkpoints would only
add a move.

1. a pending job is barred from spot for this plan (`PlanContext.spot_barred`):
   placement passes over spot groups for it, and a hold says why;
2. a running job on a spot node is checkpointed, then evicted, by the rule
   every step that moves running jobs shares (`burst.planner.evict`): asked
   for a checkpoint when it has unsaved work and can take one, held while it
   runs, then evicted; requeued from its checkpoint, it is placed on
   on-demand by rule 1 on a later tick. Its GPUs are free for the rest of
   the plan once it is evicted.

Slack counted from the last checkpoint falls while a job runs and rises when a
checkpoint lands, so a job whose requested checkpoint lifts its slack back to
the margin stays on spot: it was behind only by unsaved work. Jobs without a
deadline or duration, jobs spot never takes, and jobs on a node under an
interruption notice (`checkpoint_on_notice` handles them; they come back pending)
are left alone.
"""

from __future__ import annotations

from collections.abc import Callable

from burst import progress
from burst.model import CapacityType, Job, JobState, Policy
from burst.planner.context import PlanContext
from burst.planner.contract import declare
from burst.planner.eligibility import candidate_groups, spot_eligible
from burst.planner.evict import Move, checkpoint_then_evict

STEP = "deadline"
DEFAULT_BOOT_S = 300.0
"""The cold boot counted in the default margin when the job may use no on-demand group."""


Length = Callable[[Job], "float | None"]
"""Where a deadline step reads a job's length from."""


def duration_field(job: Job) -> float | None:
    """`Job.duration_s`: what the frozen baseline reads (in the simulator, the trace's true duration)."""
    return job.duration_s


def declared_length(job: Job) -> float | None:
    """`Job.declared_duration_s`: the length its submitter declared, all burst's planner may know."""
    return job.declared_duration_s


def slack_s(job: Job, ctx: PlanContext, length: Length = duration_field) -> float | None:
    """Time to the job's deadline less its remaining work from its last checkpoint (None: no deadline or duration)."""
    total = length(job)
    if job.deadline is None or total is None:
        return None
    remaining = max(0.0, total - progress.checkpointed_work(job, ctx.now))
    return (job.deadline - ctx.now).total_seconds() - remaining


def uniform_lag_s(job: Job, ctx: PlanContext, length: Length = duration_field) -> float | None:
    """Work (s) the job is behind uniform progress: due by now on a straight line from submission to deadline,
    less its work to its last checkpoint (None: no deadline or duration; negative: ahead)."""
    total = length(job)
    if job.deadline is None or total is None:
        return None
    window = (job.deadline - job.submitted_at).total_seconds()
    elapsed = (ctx.now - job.submitted_at).total_seconds()
    due = total if window <= 0 else total * min(1.0, max(0.0, elapsed / window))
    return due - progress.checkpointed_work(job, ctx.now)


def deadline_margin_s(ctx: PlanContext, job: Job, policy: Policy) -> float:
    """The slack below which `job` must run on on-demand (see the module doc)."""
    if policy.spot.deadline_margin_s is not None:
        return policy.spot.deadline_margin_s
    on_demand = [c for c in candidate_groups(ctx, job, policy) if c.group.capacity_type is CapacityType.ON_DEMAND]
    boot = on_demand[0].group.boot_latency_s if on_demand else DEFAULT_BOOT_S
    return boot + (job.checkpoint_duration_s or 0.0)


@declare(writes=("spot_barred", "released"), reads=("acted_on",))
def keep_deadlines(ctx: PlanContext) -> None:
    """Bar pending jobs out of slack from spot; checkpoint, then evict, running spot jobs out of slack.

    The frozen baseline's step: a job's length is its `duration_s` field. burst runs `keep_declared_deadlines`.
    """
    _keep(ctx, duration_field)


@declare(writes=("spot_barred", "released"), reads=("acted_on",))
def keep_declared_deadlines(ctx: PlanContext) -> None:
    """`keep_deadlines`, with a job's length from its declared duration only (never its true one)."""
    _keep(ctx, declared_length)


def _keep(ctx: PlanContext, length: Length) -> None:
    acted = set(ctx.acted_on)  # jobs earlier steps act on (notice, unhealthy GPUs, reclaim) are theirs
    for job in ctx.snapshot.jobs:
        if job.deadline is None or length(job) is None or job.id in acted:
            continue
        policy = ctx.policy(job.tenant)
        if not spot_eligible(job, policy):
            continue
        slack = slack_s(job, ctx, length)
        assert slack is not None
        margin = deadline_margin_s(ctx, job, policy)
        why = f"deadline slack {slack:.0f} s < margin {margin:.0f} s"
        if slack >= margin and job.state is JobState.PENDING:
            lag = uniform_lag_s(job, ctx, length)
            assert lag is not None
            if lag <= margin:
                continue
            why = f"behind uniform progress to its deadline by {lag:.0f} s of work > margin {margin:.0f} s"
        elif slack >= margin:
            continue
        if job.state is JobState.PENDING:
            ctx.bar_from_spot(job.id, why)
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
    if checkpoint_then_evict(ctx, job, why, STEP, then="moving to on-demand") is Move.EVICTED:
        ctx.release_job(job)


__all__ = ["DEFAULT_BOOT_S", "STEP", "deadline_margin_s", "declared_length", "duration_field", "keep_declared_deadlines",
           "keep_deadlines", "slack_s", "uniform_lag_s"]
