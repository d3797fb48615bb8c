"""Moves of running fault-tolerant jobs: which may move, what a move costs, and the disruption budget.

A move takes a running job off its GPUs by checkpoint-then-evict
(`burst.planner.evict`) so that it resumes elsewhere. Two steps move jobs for
money: placement, to give a job that cannot move the on-prem GPUs a
fault-tolerant job holds (`burst.planner.placement.place_by_marginal_cost`),
and consolidation, to empty elastic nodes (`burst.planner.consolidate`). Both
ask this module:

- whether the job may move at all (`MoveGuard.refusal`): never a job that is
  not fault-tolerant, nor one marked `do_not_disrupt` (on the job, or in its
  tenant's `disruption` policy); not a job that restarted after an earlier
  move less than the tenant's `disruption.min_move_interval_s` ago; and not
  past the tenant's disruption budget: at most `disruption.max_share` of its
  running GPUs moving at once (jobs whose checkpoint is under way count), but
  always one job;
- what the move costs in USD (`move_cost_usd`): the work the checkpoint takes
  (or the unsaved work lost when the job cannot checkpoint), the restart, the
  target's boot when a node must be launched for it, and the work expected
  lost to spot interruptions over its expected remaining run, all at the
  target's price. An interruption costs a restart, plus half a checkpoint
  interval of work unless the job's measured checkpoint fits a reclaim
  notice (`checkpoints_within_notice`: it then checkpoints on the notice and
  loses nothing more).

A move is made only when the saving its step expects exceeds that cost; the
action's reason states both, and every candidate not moved gets a hold.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from burst.model import CapacityType, Job, TenantName
from burst.planner.context import GroupCapacity, PlanContext
from burst.planner.evict import (
    REBALANCE_BUDGET_S,
    SAFETY_MARGIN_S,
    Move,
    checkpoint_then_evict,
    checkpoint_under_way,
    evict_after_checkpoint,
    move_cost_s,
)
from burst.planner.runtime_estimate import RuntimeEstimator
from burst.planner.spot_rates import prior_rate

MAKE_ROOM_STEP = "make_room"
CONSOLIDATE_STEP = "consolidate"

RESTART_S = 60.0
"""Seconds a moved job takes to resume from its checkpoint (load it, warm up), counted as work redone."""


NOTICE_BUDGET_S = REBALANCE_BUDGET_S - SAFETY_MARGIN_S
"""Seconds a checkpoint may take and still land within a two-minute reclaim notice (AWS's, the shortest)."""


def checkpoints_within_notice(job: Job) -> bool:
    """Whether a reclaim notice costs `job` nothing but a restart: its measured checkpoint fits the notice
    (`burst.planner.notice` asks for one and moves it once saved); otherwise it loses the work since its last
    periodic checkpoint (a job that never measured one included). A spot replica holds no work to lose."""
    return job.spot_replica or job.checkpoint_duration_s is not None and job.checkpoint_duration_s <= NOTICE_BUDGET_S


def interruption_loss_s(job: Job, remaining_s: float) -> float:
    """Seconds of work `job` expects to redo per spot interruption: a restart, plus half a checkpoint interval
    (half its remaining run without one) unless its checkpoint fits a notice."""
    if checkpoints_within_notice(job):
        return RESTART_S
    return (job.checkpoint_interval_s or remaining_s) / 2.0 + RESTART_S


@dataclass(frozen=True)
class MoveCost:
    """What moving one job costs, in USD, and the parts it is made of (for reasons)."""

    usd: float
    detail: str


def move_cost_usd(
    ctx: PlanContext, job: Job, target: GroupCapacity, *, launch: bool, remaining_s: float, hazard_per_h: float
) -> MoveCost:
    """The cost of moving `job` onto `target` at `now` (see module doc): checkpoint or lost work, restart, the
    boot of a node launched for it (`launch`), and the interruptions expected over `remaining_s` on a spot target."""
    gpus = job.gpu_demand
    price = target.gpu_price
    checkpoint_s = move_cost_s(job, ctx.now)
    work_s = checkpoint_s + RESTART_S
    nodes = max(1, -(-job.whole_gpus // target.gpn))
    boot_usd = target.group.boot_latency_s / 3600.0 * target.price_per_node * nodes if launch else 0.0
    interruptions = hazard_per_h * remaining_s / 3600.0 * nodes
    lost_s = interruptions * interruption_loss_s(job, remaining_s)
    usd = (work_s + lost_s) * gpus * price / 3600.0 + boot_usd
    return MoveCost(
        usd,
        f"move cost ${usd:.2f}: checkpoint/lost work {checkpoint_s:.0f} s + restart {RESTART_S:.0f} s"
        + (f" + boot ${boot_usd:.2f}" if launch else "")
        + (f" + {interruptions:.2f} expected interruption(s)" if interruptions else ""),
    )


class MoveGuard:
    """Which jobs may move in this plan, with each tenant's disruption budget as moves are made."""

    def __init__(self, ctx: PlanContext) -> None:
        self.ctx = ctx
        self.estimator = RuntimeEstimator(ctx.snapshot.runtimes)
        self.running_gpus: dict[TenantName, float] = defaultdict(float)
        self.in_flight: dict[TenantName, dict[str, float]] = defaultdict(dict)  # tenant -> job id -> GPUs moving
        for job in ctx.running_jobs():
            self.running_gpus[job.tenant] += job.gpu_demand
            if job.fault_tolerant and checkpoint_under_way(job, ctx.now):
                self.in_flight[job.tenant][job.id] = job.gpu_demand
        self.moved: set[str] = set()
        for action in ctx.moves:  # moves an earlier step of this plan made count against the same budgets
            self.moved.add(action.target)
            if action.tenant is not None:
                self.in_flight[action.tenant][action.target] = float(action.count or 0)

    def refusal(self, job: Job) -> str | None:
        """Why `job` may not move now, or None when it may."""
        policy = self.ctx.policy(job.tenant).disruption
        if not job.fault_tolerant:
            return "not fault-tolerant: never moved"
        if job.do_not_disrupt:
            return "marked do_not_disrupt: never moved"
        if policy.do_not_disrupt:
            return f"tenant {job.tenant}'s policy says do_not_disrupt: never moved"
        if job.id in self.moved:
            return "already moving in this plan"
        if job.id in self.in_flight[job.tenant]:
            return None  # a move under way continues: it was budgeted when asked
        if job.work_done_s > 0 and job.started_at is not None:
            since = (self.ctx.now - job.started_at).total_seconds()
            if since < policy.min_move_interval_s:
                return (f"resumed {since:.0f} s ago, under the {policy.min_move_interval_s:.0f} s minimum between "
                        "two moves of one job")
        return self._over_budget(job, sum(self.in_flight[job.tenant].values()))

    def _over_budget(self, job: Job, moving_gpus: float) -> str | None:
        """Why moving `job` too, with `moving_gpus` of its tenant's already moving, would pass the budget."""
        policy = self.ctx.policy(job.tenant).disruption
        budget = math.ceil(policy.max_share * self.running_gpus[job.tenant] - 1e-9)
        if moving_gpus > 0 and moving_gpus + job.gpu_demand > budget:
            return (f"tenant {job.tenant}'s disruption budget is spent: {moving_gpus:g} GPU(s) moving of "
                    f"{budget} allowed ({policy.max_share:.0%} of {self.running_gpus[job.tenant]:g} running)")
        return None

    def set_refusal(self, jobs: list[Job]) -> tuple[str, str] | None:
        """The first of `jobs` (each allowed alone) that moving them all would take past its tenant's
        disruption budget, and why; None when the budget allows them all."""
        moving = {t: dict(ids) for t, ids in self.in_flight.items()}
        for job in jobs:
            mine = moving.setdefault(job.tenant, {})
            if job.id in mine:
                continue
            why = self._over_budget(job, sum(mine.values()))
            if why is not None:
                return job.id, why
            mine[job.id] = job.gpu_demand
        return None

    def charge(self, job: Job) -> None:
        """Count `job` as moving (its tenant's budget pays for it)."""
        self.moved.add(job.id)
        self.in_flight[job.tenant][job.id] = job.gpu_demand

    def remaining_s(self, job: Job) -> tuple[float, str]:
        """The job's expected remaining run (`burst.planner.runtime_estimate`)."""
        return self.estimator.remaining_s(job, self.ctx.now)


def move_job(ctx: PlanContext, job: Job, why: str, step: str, *, then: str) -> Move:
    """Move the job by checkpoint-then-evict: evicted at once once its asked checkpoint has landed.

    Hands on the move (`PlanContext.moves`: one disruption budget per plan) and, once evicted, that its node
    is emptied on purpose (`PlanContext.emptying`)."""
    return (evict_after_checkpoint(ctx, job, why, step, then=then, empties=True, counts_as_move=True)
            or checkpoint_then_evict(ctx, job, why, step, then=then, empties=True, counts_as_move=True))


def spot_hazard_per_h(ctx: PlanContext, cap: GroupCapacity) -> float:
    """The interruption rate per node-hour the planner expects of `cap` (learnt, else 0 for non-spot groups)."""
    if cap.group.capacity_type is not CapacityType.SPOT:
        return 0.0
    learnt = ctx.snapshot.interruption_rates.get(cap.group.id)
    return learnt if learnt is not None else prior_rate(cap.group)


__all__ = ["CONSOLIDATE_STEP", "MAKE_ROOM_STEP", "NOTICE_BUDGET_S", "RESTART_S", "MoveCost", "MoveGuard",
           "checkpoints_within_notice", "interruption_loss_s", "move_cost_usd", "move_job", "spot_hazard_per_h"]
