"""Checkpoint, then evict: the move every step that takes a running job off its GPUs makes.

Steps that move running jobs (spot reclaim notices, deadlines off spot,
unhealthy GPUs, priority preemption) share one rule, so a job loses no more
than it must whichever step moves it:

1. a job that can checkpoint (it is fault-tolerant, so it resumes from a
   checkpoint, and has a measured `checkpoint_duration_s`, within the step's
   budget when it has one) whose unsaved work is more than
   `FRESH_CHECKPOINT_S` and more than the checkpoint takes is asked to
   (`request_checkpoint`);
2. while that checkpoint runs (less than its duration since it was asked), a
   hold says so and nothing else happens;
3. once its work is saved, or at once when it cannot checkpoint (no measured
   duration, or one longer than the budget), it is evicted (`evict_job`):
   requeued under the same id, it resumes from its last checkpoint.

A step hands on what its moves mean for later steps: `empties` (the job is
evicted to empty its node on purpose: `PlanContext.emptying`) and
`counts_as_move` (a move for money, charged to the plan's one disruption
budget: `PlanContext.moves`).

A warning without a deadline (a rebalance recommendation) takes only the
first part (`checkpoint_early`): a checkpoint worth asking is asked, and the
job keeps running.

Unsaved work is counted by `burst.progress`: a requested checkpoint saves the
work as of the request, and only once its duration has passed. What the move
costs the job (`move_cost_s`) is what victim selection ranks by.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum

from burst import progress
from burst.model import Action, ActionKind, Job, JobState
from burst.planner.context import PlanContext

SAFETY_MARGIN_S = 10.0
"""Seconds of a reclaim notice kept free at its end, so a checkpoint that fits lands before the node goes."""
REBALANCE_BUDGET_S = 120.0
"""A rebalance recommendation has no deadline, but the interruption it warns of comes with a notice of at least
two minutes (AWS, the cloud that sends them): a checkpoint that fits that notice, less the safety margin,
lands even when the notice follows the recommendation at once."""
FRESH_CHECKPOINT_S = 120.0
"""A running job with at most this much unsaved work is evicted without a checkpoint first."""


class Move(Enum):
    """What `checkpoint_then_evict` did to the job in this plan."""

    CHECKPOINT_ASKED = "checkpoint_asked"
    CHECKPOINT_UNDER_WAY = "checkpoint_under_way"
    EVICTED = "evicted"


def checkpoint_then_evict(ctx: PlanContext, job: Job, why: str, step: str, *, then: str,
                          budget_s: float | None = None, empties: bool = False, counts_as_move: bool = False) -> Move:
    """Ask the running job for a checkpoint, wait for it, or evict it (see module doc); returns which.

    `why` starts every reason and hold; `then` says what happens to the job after it is evicted (e.g.
    "moving to on-demand"). A checkpoint longer than `budget_s` is not waited for: the job is evicted at once.
    `empties` and `counts_as_move` say what the step hands on (see module doc).
    """
    takes = job.checkpoint_duration_s
    asked = _seconds_since_ask(job, ctx.now)
    if _under_way(job, asked):
        done = f" ({asked:.0f} of {takes:g} s)" if asked is not None and takes is not None else ""
        ctx.hold(f"job:{job.id}", f"{why}: its checkpoint is under way{done}; then {then}", step, job.tenant)
        return Move.CHECKPOINT_UNDER_WAY
    unsaved = _unsaved_s(job, ctx.now)
    if _worth_a_checkpoint(job, unsaved, budget_s):
        _act(ctx, job, ActionKind.REQUEST_CHECKPOINT, step,
             f"{why}: checkpoint ({takes:g} s) before {then} ({unsaved:.0f} s of work unsaved)",
             counts_as_move=counts_as_move)
        return Move.CHECKPOINT_ASKED
    _act(ctx, job, ActionKind.EVICT_JOB, step,
         f"{why}: {then} ({_no_checkpoint(job, unsaved, budget_s)}; requeued from its last checkpoint)",
         counts_as_move=counts_as_move, empties=empties)
    return Move.EVICTED


def evict_after_checkpoint(ctx: PlanContext, job: Job, why: str, step: str, *, then: str, empties: bool = False,
                           counts_as_move: bool = False) -> Move | None:
    """Evict the job at once when a checkpoint asked of its current run has landed, and landed lately; None
    (nothing done) if not.

    For moves that ask a checkpoint and evict on a later tick: `checkpoint_then_evict` alone would ask
    again once the work since the request outgrows the checkpoint's duration, which a tick interval longer
    than the checkpoint makes happen every time. A checkpoint that landed more than `FRESH_CHECKPOINT_S` of
    work ago (asked for a move that was then not made, or by another step) is not this move's: evicting on it
    would lose all the work since, so the move asks for a checkpoint of its own instead.
    """
    asked, started, takes = job.last_checkpoint_at, job.started_at, job.checkpoint_duration_s
    if asked is None or started is None or takes is None or asked < started or job.state is JobState.CHECKPOINTING:
        return None
    if (ctx.now - asked).total_seconds() < takes:
        return None
    if _unsaved_s(job, ctx.now) > takes + FRESH_CHECKPOINT_S:
        return None
    _act(ctx, job, ActionKind.EVICT_JOB, step,
         f"{why}: {then} (the checkpoint asked at {asked:%H:%M:%S} has landed; requeued from it)",
         counts_as_move=counts_as_move, empties=empties)
    return Move.EVICTED


def checkpoint_early(ctx: PlanContext, job: Job, why: str, step: str, *, budget_s: float) -> Move | None:
    """Ask the running job for a checkpoint now when one is worth taking within `budget_s`, and leave it running.

    For a warning with no deadline yet: the job is not evicted, so it resumes from this checkpoint if the
    warning comes true. The same rule as `checkpoint_then_evict` decides whether a checkpoint is worth asking.
    Returns CHECKPOINT_ASKED, CHECKPOINT_UNDER_WAY (one already runs: nothing more is asked), or None when no
    checkpoint is worth asking (a hold says why).
    """
    if _under_way(job, _seconds_since_ask(job, ctx.now)):
        return Move.CHECKPOINT_UNDER_WAY
    unsaved = _unsaved_s(job, ctx.now)
    if _worth_a_checkpoint(job, unsaved, budget_s):
        _act(ctx, job, ActionKind.REQUEST_CHECKPOINT, step,
             f"{why}: checkpoint ({job.checkpoint_duration_s:g} s) now; it keeps running ({unsaved:.0f} s of work "
             "unsaved)")
        return Move.CHECKPOINT_ASKED
    ctx.hold(f"job:{job.id}", f"{why}: no checkpoint asked ({_no_checkpoint(job, unsaved, budget_s)}); it keeps "
             "running", step, job.tenant)
    return None


def move_cost_s(job: Job, now: datetime, *, budget_s: float | None = None) -> float:
    """Seconds of the job's work that moving it by `checkpoint_then_evict` at `now` costs.

    What is left of a checkpoint under way, the checkpoint's duration when one is worth asking for, else the
    work since the last checkpoint (lost when the job is evicted at once).
    """
    takes = job.checkpoint_duration_s
    asked = _seconds_since_ask(job, now)
    if _under_way(job, asked) and takes is not None and asked is not None:
        return max(0.0, takes - asked)
    unsaved = _unsaved_s(job, now)
    if takes is not None and _worth_a_checkpoint(job, unsaved, budget_s):
        return takes
    return unsaved


def checkpoint_under_way(job: Job, now: datetime) -> bool:
    """Whether a checkpoint asked of the job's current run is still running at `now`."""
    return _under_way(job, _seconds_since_ask(job, now))


def _under_way(job: Job, asked: float | None) -> bool:
    takes = job.checkpoint_duration_s
    return job.state is JobState.CHECKPOINTING or (takes is not None and asked is not None and asked < takes)


def _unsaved_s(job: Job, now: datetime) -> float:
    return max(0.0, progress.work_at(job, now) - progress.checkpointed_work(job, now))


def _worth_a_checkpoint(job: Job, unsaved: float, budget_s: float | None) -> bool:
    takes = job.checkpoint_duration_s
    return (job.fault_tolerant and takes is not None and (budget_s is None or takes <= budget_s)
            and unsaved > max(FRESH_CHECKPOINT_S, takes))


def _no_checkpoint(job: Job, unsaved: float, budget_s: float | None) -> str:
    """Why no checkpoint is asked of the job, for a reason or hold."""
    takes = job.checkpoint_duration_s
    if takes is None:
        return "no checkpoint to take"
    if budget_s is not None and takes > budget_s and unsaved > max(FRESH_CHECKPOINT_S, takes):
        return f"its {takes:g} s checkpoint exceeds the {budget_s:.0f} s budget; {unsaved:.0f} s of work unsaved"
    return f"{unsaved:.0f} s of work unsaved"


def _seconds_since_ask(job: Job, now: datetime) -> float | None:
    """Seconds since the checkpoint asked of this run (None: none asked since the job started)."""
    asked, started = job.last_checkpoint_at, job.started_at
    if asked is None or started is None or asked < started:
        return None
    return (now - asked).total_seconds()


def _act(ctx: PlanContext, job: Job, kind: ActionKind, step: str, reason: str, *, counts_as_move: bool = False,
         empties: bool = False) -> None:
    action = Action(kind=kind, target=job.id, tenant=job.tenant, count=job.whole_gpus, node_ids=job.node_ids,
                    gpu_uuids=job.gpu_uuids, step=step, reason=reason)
    ctx.add_action(action)
    if counts_as_move:
        ctx.add_move(action)
    if empties and kind is ActionKind.EVICT_JOB:
        ctx.mark_emptying(job.id)


__all__ = ["FRESH_CHECKPOINT_S", "REBALANCE_BUDGET_S", "SAFETY_MARGIN_S", "Move", "checkpoint_early", "checkpoint_under_way", "evict_after_checkpoint", "checkpoint_then_evict", "move_cost_s"]
