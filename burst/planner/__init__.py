"""The pure planner: `plan(snapshot, forecasts, policies, prices, now=..., ids=...) -> Plan`.

No clock, no I/O, no randomness: everything comes in as arguments, so the
daemon, `burst plan`, the simulator and `burst cost` all run this same code.
The pipeline is a fixed list of small steps (`PIPELINE`); each action and
hold names the step that produced it.

What a step hands to a later one, on the `PlanContext`:

| written by | what | read by |
| --- | --- | --- |
| deadline | `spot_barred`: pending jobs kept off spot, and why | placement |
| placement | `unserved`: pending jobs refused, and the refusal's kind | preempt |
| placement (and `build_context`) | `busy_nodes`: nodes with GPUs in use | scale_down |
| placement (spot spread) | `spread_notes`: spot groups' interruption rates, for reasons | placement |
| prescale | `forecast_spare_gpus`: supply above forecast need per GPU model | scale_down |
| placement (make_room), consolidate | moves: `request_checkpoint` / `evict_job` actions of the move steps | consolidate (`moves.MoveGuard`: one disruption budget per plan) |

`BASELINE_PIPELINE` is the planner as it stood before cost-aware placement
and moves: the simulator's baselines (`reactive`, `reactive-hotpool`, the
static strategies) run it, so a change to burst's own `PIPELINE` never moves
the figures burst is compared against. Its steps are frozen: burst's new
behaviour goes into new steps, never into these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from burst.model import Forecast, Plan, Policy, Snapshot, TenantName
from burst.planner.consolidate import consolidate
from burst.planner.context import PlanContext, PriceSource, build_context
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

Step = Callable[[PlanContext], None]

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
    for _name, step in pipeline:
        step(ctx)
    actions = tuple(replace(a, id=f"{ids.plan_id}.{i}") for i, a in enumerate(ctx.actions, start=1))
    return Plan(id=ids.plan_id, at=now, actions=actions, holds=tuple(ctx.holds), advice=tuple(ctx.advice))


__all__ = ["BASELINE_PIPELINE", "PIPELINE", "PlanIds", "PriceSource", "Step", "plan"]
