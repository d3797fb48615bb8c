"""The pure planner: `plan(snapshot, forecasts, policies, prices, now=..., ids=...) -> Plan`.

No clock, no I/O, no randomness: everything comes in as arguments, so the
daemon, `burst plan`, the simulator and `burst cost` all run this same code.
The pipeline is a fixed list of small steps (`PIPELINE`); each action and
hold names the step that produced it. Running a step gives what it decided
and what it handed on (`burst.planner.contract.run_step` -> `StepResult`);
a step changes what is shared only through `PlanContext`'s helpers, and a
hand-off it writes without declaring it is refused.

What a step hands to a later one, on the `PlanContext`, as each step of
`PIPELINE` declares it (`burst.planner.contract.declare`; this table is
`contract.handoff_table(PIPELINE)`, and a test holds it to the declarations):

| written by | what | read by |
| --- | --- | --- |
| every step (`add_action`) | `acted_on`: targets of the plan's actions so far: a job already acted on is left alone | deadline |
| reclaim, deadline | `released`: running jobs this plan takes off their GPUs, and the GPUs freed for placement | place+scale_up |
| deadline | `spot_barred`: pending jobs kept off spot, and why | place+scale_up, preempt, consolidate |
| place+scale_up | `placements`: jobs placed by this plan, and the nodes they take | scale_down |
| place+scale_up | `busy_nodes`: nodes with GPUs in use (from `build_context`, then each placement) | scale_down |
| place+scale_up | `spread_notes`: spot groups' interruption rates, for reasons | place+scale_up |
| place+scale_up | `unserved`: pending jobs refused, and the refusal's kind | preempt |
| place+scale_up, consolidate | `moves`: `request_checkpoint` / `evict_job` actions of the move steps: one disruption budget per plan (`moves.MoveGuard`) | place+scale_up, consolidate |
| checkpoint_on_notice, place+scale_up, consolidate | `emptying`: jobs evicted by a move or a reclaim notice: their nodes are emptied on purpose | scale_down |
| place+scale_up, prescale | `scale_ups`: this plan's one scale-up per group, which a later launch folds into | prescale, scale_down |
| prescale | `forecast_spare_gpus`: supply above forecast need per GPU model | scale_down |

`BASELINE_PIPELINE` is the planner as it stood before cost-aware placement
and moves: the simulator's baselines (`reactive`, `reactive-hotpool`, the
static strategies) run it, so a change to burst's own `PIPELINE` never moves
the figures burst is compared against. Its steps are frozen: burst's new
behaviour goes into new steps, never into these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from burst.model import Forecast, Plan, Policy, Snapshot, TenantName
from burst.planner.consolidate import consolidate
from burst.planner.context import PriceSource, build_context
from burst.planner.contract import Step, StepResult, run_pipeline
from burst.planner.deadlines import keep_deadlines, keep_declared_deadlines
from burst.planner.gpu_health import move_off_unhealthy_gpus
from burst.planner.hot_pool import size_hot_pools
from burst.planner.notice import checkpoint_on_notice
from burst.planner.placement import place_and_scale_up, place_by_marginal_cost
from burst.planner.preempt import preempt_for_priority
from burst.planner.prescale import prescale_elastic
from burst.planner.reclaim import reclaim_overdue
from burst.planner.scale_down import release_idle, scale_down_idle
from burst.planner.steady import advise_steady_tier

BASELINE_PIPELINE: tuple[tuple[str, Step], ...] = (
    ("checkpoint_on_notice", checkpoint_on_notice),
    ("gpu_health", move_off_unhealthy_gpus),
    ("reclaim", reclaim_overdue),
    ("deadline", keep_deadlines),
    ("place+scale_up", place_and_scale_up),
    ("preempt", preempt_for_priority),
    ("prescale", prescale_elastic),
    ("hot_pool", size_hot_pools),
    ("scale_down", scale_down_idle),
    ("steady_advice", advise_steady_tier),
)
"""The frozen planner the simulator's baselines run: fair-share placement blind to fault tolerance, no moves."""

PIPELINE: tuple[tuple[str, Step], ...] = (
    ("checkpoint_on_notice", checkpoint_on_notice),
    ("gpu_health", move_off_unhealthy_gpus),
    ("reclaim", reclaim_overdue),
    ("deadline", keep_declared_deadlines),
    ("place+scale_up", place_by_marginal_cost),
    ("preempt", preempt_for_priority),
    ("consolidate", consolidate),
    ("prescale", prescale_elastic),
    ("hot_pool", size_hot_pools),
    ("scale_down", release_idle),
    ("steady_advice", advise_steady_tier),
)
"""burst's planner: every entry point (daemon, `burst plan`, simulator, `burst cost`) runs it. It is the
baseline with placement by marginal cost, aware of what can move (`place_by_marginal_cost`, which moves
fault-tolerant jobs off on-prem for jobs that cannot move when that pays), consolidation of elastic
nodes by checkpoint-then-evict moves (`consolidate`), deadlines judged on declared durations only
(`keep_declared_deadlines`): no step of it reads a job's true duration, and scale-in at break-even
(`release_idle`) where the baseline keeps a fixed cooldown."""


@dataclass(frozen=True)
class PlanIds:
    """Where a plan's ids come from: the caller names the plan; actions are numbered within it."""

    plan_id: str


def plan(
    snapshot: Snapshot,
    forecasts: Sequence[Forecast],
    policies: Mapping[TenantName, Policy],
    prices: PriceSource,
    *,
    now: datetime,
    ids: PlanIds,
    pipeline: Sequence[tuple[str, Step]] = PIPELINE,
) -> Plan:
    """Decide what to do about `snapshot` at `now`: a deterministic function of its arguments.

    `pipeline` is burst's `PIPELINE` everywhere but in the simulator's baseline
    strategies, which swap steps to stand for other autoscalers.
    """
    if now.tzinfo is None:
        raise ValueError("plan(): now must be timezone-aware (UTC)")
    ctx = build_context(snapshot, tuple(forecasts), policies, prices, now)
    run_pipeline(ctx, pipeline)
    actions = tuple(replace(a, id=f"{ids.plan_id}.{i}") for i, a in enumerate(ctx.actions, start=1))
    return Plan(id=ids.plan_id, at=now, actions=actions, holds=tuple(ctx.holds), advice=tuple(ctx.advice))


__all__ = ["BASELINE_PIPELINE", "PIPELINE", "PlanIds", "PriceSource", "Step", "StepResult", "plan"]
