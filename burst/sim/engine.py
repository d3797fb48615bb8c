"""The event-driven simulator: the real reconcile loop and planner over sim groups, on a virtual clock.

One `simulate()` call replays a trace's jobs through a `Controller` (the same
class `burst run` uses) wired to a `SimProvider`, an in-memory job queue fed
by the trace, and an in-memory store. The clock never ticks through idle
time: after each tick it jumps to when the next tick runs (`_next_tick`).
Events (a job arrives or finishes, a checkpoint is acknowledged, a node
boots, wakes, is interrupted or terminates) are seen by an event-driven
strategy (burst, as the daemon: `burst.wakeup`) once their batch window
closes, and by a polling one at its next loop interval; timers (an idle
node's cooldown ends in a group whose idle nodes the scale-down step may let
go, a launch cooldown or strategy timer expires) at the next loop interval,
the heartbeat; a plan that evicted or requeued jobs is followed by a tick one
interval later, where they and the GPUs they freed are placed. Jobs that lose their nodes (spot interruption, a drained node) are
requeued from their last checkpoint by the queue's rules. A plan's checkpoint
request travels over the checkpoint channel real jobs use, answered by the
simulated job (`burst.workloads.sim_channel`): it acknowledges after its
`checkpoint_duration_s` (the clock jumps there too), and only the ack records
the checkpoint; a node lost during the checkpoint loses the work since the
last completed one.

Metric definitions (the `burst simulate --json` contract):

- `cost_usd`, `cost_by_tier` (`steady`, `elastic_on_demand`, `elastic_spot`,
  `hot_pool`): what the sim provider billed, integrated exactly over node
  lifetimes (booting and idle time included; warm stopped nodes at the standby
  price, which is the `hot_pool` line); the steady tier is paid for its nodes
  all the time. `cost_by_tenant`: the controller's cost ledger (GPU-hours each
  tenant's jobs held × the group's price per GPU-hour), sampled at ticks.
- `gpu_hours_used`: GPU-hours jobs held (lost work included);
  `gpu_hours_paid`: GPU-hours of nodes paid at full price.
- `onprem_utilization`: GPU-hours held by jobs on steady nodes / GPU-hours of
  steady nodes.
- waits: from a job's submission to its first start; jobs never started by the
  end of the run count with their wait so far (censored). `slo_violations`:
  jobs whose wait exceeded their tenant's `queue_wait_slo_s`.
- `delay_mean_s`, `delay_p95_s`: a job's delay is completion - submission -
  duration (waits, re-runs of lost work and moves all count); a job not done
  by the end of the run counts end - submission - work done (censored; exact
  for a job whose remainder is charged, which runs on from the end).
- Equal work: once nothing is queued at the end of the run, each running job's
  remainder (duration - work done, × GPUs) is charged at the price per GPU of
  the group whose nodes it holds, without simulating it (`remainders`); it
  counts as held, paid and delivered, on its cost line. The bounds count whole
  jobs too, so every strategy pays for the same work. A run that ends with
  jobs still queued keeps its window (`queued_at_end` > 0: nothing is
  charged). `remainder_usd`, `remainder_gpu_hours`: that charge.
- `jobs_completed`: jobs that ran to their duration (those whose remainder is
  charged included); `work_gpu_hours`: work delivered (each job's progress by
  the end × GPUs plus its charged remainder, lost work not counted).
- `cost_gap`: the cost above the oracle's, split into named parts in USD that
  sum to it (no total key; parts may be negative): see `cost_gap` below for
  each part. The bounds `oracle` and `floor` are computed from the trace
  (`burst.sim.oracle`, `burst.sim.floor`).
- `interruptions`: runs that lost their nodes (spot interruption or a drain);
  `evictions`: runs the plan evicted (priority preemption, unhealthy GPUs);
  `lost_gpu_hours`: the work both lost since their last checkpoint × GPUs;
  `reclaim_lost_gpu_hours`: the part of it lost by runs whose nodes the cloud
  reclaimed (a node that had an interruption notice).
- `warm_nodes_avg`: hot-pool (warm) nodes held on average over the run.
- `checkpoint_violations`: interruptions in which a fault-tolerant job lost
  more than its checkpoint interval of work (must be 0); `checkpoint_acks`,
  `checkpoint_timeouts`: checkpoint requests the simulated jobs acknowledged,
  and those that ended with no ack (a node lost, the job evicted or finished,
  or the deadline passed first); `spot_gpu_hours`:
  GPU-hours paid on spot groups; `goodput`: GPU-hours jobs held on spot nodes,
  less the work they lost there, over `spot_gpu_hours` (0 without spot).
- `forecast_fit_s`, `forecast_fits`, `forecast_models`: wall seconds spent
  fitting forecasts (inside `wall_s`, kept apart from simulated time), how
  many fits, and how many of them each model served (strategies with
  forecasting only).
- `time_to_capacity`: for each scale-up, from the first moment the pending
  demand it answers could not be placed (the earliest submission among the
  jobs first found unplaced at that tick, a requeued job counting from the
  tick that requeued it; the tick itself when it answers older demand) until the group has as many ready nodes as the scale-up asked
  for, less the group's nodes that were ready and have gone since (interrupted, released): a spot node reclaimed
  while the scale-up boots is not capacity it asked for, and its replacement is not what it waits on. A node
  that fails before it is ready earns no such credit (the scale-up waits for its replacement). A scale-up
  overtaken by a scale-down (the group's target, with that credit, falls below what it asked for) is dropped. `time_to_capacity_p95_s` is 0 when the
  strategy made no scale-up.
"""

from __future__ import annotations

import bisect
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from burst import progress
from burst.catalog import COST_LINES, cost_line
from burst.model import ActionKind, CapacityType, GroupId, Job, NodeState, Policy, Tier
from burst.planner.scale_down import idle_release_s, release_idle, releases_idle, scale_down_idle
from burst.reconcile import Controller, LoopSettings, TickReport
from burst.sim.forecasts import ClairvoyantForecaster, SimForecaster
from burst.sim.meter import MARKS, Meter, TimelinePoint
from burst.sim.setup import SimSetup
from burst.sim.strategies import StrategyRun
from burst.state import CostEntry, Store
from burst.wakeup import BATCH_MAX_S, batch_end
from burst.workloads.feed import ArrivalFeed
from burst.workloads.queue import MemoryQueue
from burst.workloads.sim_channel import SimCheckpointChannel
from providers.sim import ManualClock, SimProvider

ProgressFn = Callable[[datetime], None]
_EPS = timedelta(microseconds=1)
_REQUEUING = frozenset({ActionKind.EVICT_JOB, ActionKind.REQUEUE_JOB})




@dataclass
class Spend:
    """What a run paid and delivered, split the way the cost gap reads it (USD; GPU-seconds).

    Held GPU-seconds include work later lost; "eligible" means spot-eligible
    work (fault-tolerant, its tenant allowing spot).
    """

    steady_usd: float = 0.0
    booting_usd: float = 0.0  # cloud nodes at full price before they were ready (booting, waking)
    idle_usd: float = 0.0  # cloud nodes at full price holding no job's GPUs (ready, draining, terminating, warm running)
    empty_node_usd: float = 0.0  # the part of idle_usd on ready cloud nodes that held no job at all
    hot_pool_usd: float = 0.0  # warm nodes at the standby price
    rerun_usd: float = 0.0  # lost work: cloud GPU-seconds at their group's price, on-prem ones at the reference cloud price
    spot_work_on_demand_usd: float = 0.0  # kept spot-eligible work on on-demand nodes x (its price - reference spot)
    onprem_eligible_gpu_s: float = 0.0  # held on the steady tier by spot-eligible work
    onprem_other_gpu_s: float = 0.0  # held on the steady tier by work that cannot go to spot
    kept_eligible_gpu_s: float = 0.0  # held anywhere and not lost
    kept_other_gpu_s: float = 0.0
    work_eligible_gpu_s: float = 0.0  # work delivered by the end of the run, exactly (from each job's progress)
    work_other_gpu_s: float = 0.0


GAP_PARTS = (
    "structural",
    "steady_tier",
    "booting",
    "idle",
    "hot_pool",
    "rerun",
    "on_demand_for_spot_work",
    "onprem_shortfall",
    "tick_lag",
    "undelivered",
    "other",
)
"""The cost gap's parts, in waterfall order (see `cost_gap`)."""


def cost_gap(
    cost_usd: float, spend: Spend | None, *, oracle_usd: float, floor_usd: float, floor: Spend, prices: tuple[float, float]
) -> dict[str, float]:
    """Split a strategy's cost above the oracle (`cost_usd - oracle_usd`) into named parts in USD.

    `floor` is the floor bound's spend (`burst.sim.floor`) and `prices` the
    reference (on-demand, spot) USD per GPU-hour; `spend` None is the oracle
    itself (every part 0). Parts may be negative; they sum to the gap exactly:

    - `structural`: floor - oracle, what whole nodes, boots and first-fit
      placement of work that cannot move cost any controller;
    - `steady_tier`: the steady tier paid beyond the floor's: a static
      strategy's own tier, and past the run's end the steady GPUs that
      charged remainders hold (`remainders`) against the floor's;
    - `booting`: cloud nodes paid at full price before they were ready (booting,
      waking), beyond the floor's one boot per node;
    - `idle`: cloud GPUs paid at full price while no job held them (ready,
      draining, terminating, warm and running), beyond the floor's;
    - `hot_pool`: warm nodes at the standby price;
    - `rerun`: GPU-hours of work later lost, at the cloud price they were paid
      (on-prem ones at the reference cloud price: they pushed work out);
    - `on_demand_for_spot_work`: on-demand GPU-hours used by spot-eligible work,
      at the on-demand premium over spot, beyond the floor's (which only uses
      on-demand GPUs already paid for);
    - `onprem_shortfall`: work the floor ran on the steady tier that this run
      did not, at the reference cloud price of its kind (spot for eligible work,
      on-demand for the rest): on-prem GPUs idle while the cloud served work;
    - `tick_lag`: GPU-hours jobs held beyond the work they delivered (a job
      holds its GPUs until the tick that sees it finish or lose its node),
      at the same prices;
    - `undelivered`: work the floor delivers (every job whole) that this run
      did not (negative: queued work costs nothing); 0 once remainders are
      charged, so only a run that ends with jobs queued has it;
    - `other`: what the parts leave (prices of groups other than the
      reference ones).
    """
    parts = dict.fromkeys(GAP_PARTS, 0.0)
    if spend is None:
        return parts
    p_od, p_spot = prices[0] / 3600.0, prices[1] / 3600.0  # USD per GPU-second
    parts["structural"] = floor_usd - oracle_usd
    parts["steady_tier"] = spend.steady_usd - floor.steady_usd
    parts["booting"] = spend.booting_usd - floor.booting_usd
    parts["idle"] = spend.idle_usd - floor.idle_usd
    parts["hot_pool"] = spend.hot_pool_usd - floor.hot_pool_usd
    parts["rerun"] = spend.rerun_usd - floor.rerun_usd
    parts["on_demand_for_spot_work"] = spend.spot_work_on_demand_usd - floor.spot_work_on_demand_usd
    parts["onprem_shortfall"] = (p_spot * (floor.onprem_eligible_gpu_s - spend.onprem_eligible_gpu_s)
                                 + p_od * (floor.onprem_other_gpu_s - spend.onprem_other_gpu_s))
    parts["tick_lag"] = (p_spot * (spend.kept_eligible_gpu_s - spend.work_eligible_gpu_s)
                         + p_od * (spend.kept_other_gpu_s - spend.work_other_gpu_s))
    parts["undelivered"] = -(p_spot * (floor.work_eligible_gpu_s - spend.work_eligible_gpu_s)
                             + p_od * (floor.work_other_gpu_s - spend.work_other_gpu_s))
    parts["other"] = (cost_usd - oracle_usd) - sum(parts.values())
    return parts


def reference_prices(setup: SimSetup) -> tuple[float, float]:
    """The cheapest per-GPU-hour (on-demand, spot) prices among the set-up's elastic groups (the bounds' prices)."""
    catalog = setup.catalog
    elastic = [g for g in setup.groups if g.tier is Tier.ELASTIC]
    od = [catalog.group_price(g) / g.gpus_per_node for g in elastic if g.capacity_type is CapacityType.ON_DEMAND]
    spot = [catalog.group_price(g) / g.gpus_per_node for g in elastic if g.capacity_type is CapacityType.SPOT]
    p_od = min(od) if od else (min(spot) if spot else float("inf"))
    p_spot = min(spot) if spot else p_od
    return p_od, min(p_spot, p_od)


@dataclass
class StrategyResult:
    """What one strategy did over the replay (see the module docstring for each metric)."""

    name: str
    cost_usd: float
    cost_by_tier: dict[str, float]
    cost_by_tenant: dict[str, float]
    gpu_hours_used: float
    gpu_hours_paid: float
    onprem_utilization: float
    wait_p50_s: float
    wait_p95_s: float
    wait_p99_s: float
    slo_violations: int
    interruptions: int
    lost_gpu_hours: float
    time_to_capacity_p95_s: float
    scale_ups: int = 0
    jobs: int = 0
    jobs_started: int = 0
    jobs_completed: int = 0
    ticks: int = 0
    simulated_hours: float = 0.0
    wall_s: float = 0.0
    forecast_fit_s: float = 0.0
    forecast_fits: int = 0
    forecast_models: dict[str, int] = field(default_factory=dict)
    warm_nodes_avg: float = 0.0
    checkpoint_violations: int = 0
    checkpoint_acks: int = 0
    checkpoint_timeouts: int = 0
    evictions: int = 0
    immovable_stopped: int = 0  # jobs that cannot move (not fault-tolerant) evicted or requeued
    spot_gpu_hours: float = 0.0
    goodput: float = 0.0
    delay_mean_s: float = 0.0
    delay_p95_s: float = 0.0
    work_gpu_hours: float = 0.0
    reclaim_lost_gpu_hours: float = 0.0
    remainder_usd: float = 0.0
    remainder_gpu_hours: float = 0.0
    queued_at_end: int = 0  # jobs still queued when the run ended: the run keeps its window, no remainder charged
    spend: Spend | None = field(default=None, repr=False)  # None for the oracle
    cost_gap: dict[str, float] = field(default_factory=dict)  # filled by `burst.sim.compare`
    waits_s: list[float] = field(default_factory=list, repr=False)
    timeline: list[TimelinePoint] = field(default_factory=list, repr=False)
    ledger: list[CostEntry] = field(default_factory=list, repr=False)  # the run's cost ledger, with keep_ledger

    def to_json(self) -> dict[str, Any]:
        """The contract keys plus run counters; the wait list and timeline stay out."""
        return {
            "cost_usd": round(self.cost_usd, 4),
            "cost_by_tier": {k: round(v, 4) for k, v in self.cost_by_tier.items()},
            "cost_by_tenant": {k: round(v, 4) for k, v in sorted(self.cost_by_tenant.items())},
            "gpu_hours_used": round(self.gpu_hours_used, 4),
            "gpu_hours_paid": round(self.gpu_hours_paid, 4),
            "onprem_utilization": round(self.onprem_utilization, 6),
            "wait_p50_s": round(self.wait_p50_s, 3),
            "wait_p95_s": round(self.wait_p95_s, 3),
            "wait_p99_s": round(self.wait_p99_s, 3),
            "delay_mean_s": round(self.delay_mean_s, 3),
            "delay_p95_s": round(self.delay_p95_s, 3),
            "slo_violations": self.slo_violations,
            "interruptions": self.interruptions,
            "lost_gpu_hours": round(self.lost_gpu_hours, 4),
            "reclaim_lost_gpu_hours": round(self.reclaim_lost_gpu_hours, 4),
            "time_to_capacity_p95_s": round(self.time_to_capacity_p95_s, 3),
            "scale_ups": self.scale_ups,
            "jobs": self.jobs,
            "jobs_started": self.jobs_started,
            "jobs_completed": self.jobs_completed,
            "work_gpu_hours": round(self.work_gpu_hours, 4),
            "remainder_usd": round(self.remainder_usd, 4),
            "remainder_gpu_hours": round(self.remainder_gpu_hours, 4),
            "queued_at_end": self.queued_at_end,
            "cost_gap": {k: round(v, 2) for k, v in self.cost_gap.items()},
            "ticks": self.ticks,
            "simulated_hours": round(self.simulated_hours, 3),
            "wall_s": round(self.wall_s, 3),
            "forecast_fit_s": round(self.forecast_fit_s, 3),
            "forecast_fits": self.forecast_fits,
            "forecast_models": dict(sorted(self.forecast_models.items())),
            "warm_nodes_avg": round(self.warm_nodes_avg, 3),
            "checkpoint_violations": self.checkpoint_violations,
            "checkpoint_acks": self.checkpoint_acks,
            "checkpoint_timeouts": self.checkpoint_timeouts,
            "evictions": self.evictions,
            "spot_gpu_hours": round(self.spot_gpu_hours, 4),
            "goodput": round(self.goodput, 6),
        }


TIERS = COST_LINES


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-quantile (0..1) of `values` by linear interpolation; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


class _Arrivals:
    """Trace jobs as an arrival function over [start, end), by binary search on submission time."""

    def __init__(self, jobs: Sequence[Job]) -> None:
        self.jobs = sorted(jobs, key=lambda j: (j.submitted_at, j.id))
        self.times = [j.submitted_at for j in self.jobs]

    def __call__(self, start: datetime, end: datetime) -> list[Job]:
        return self.jobs[bisect.bisect_left(self.times, start) : bisect.bisect_left(self.times, end)]

    def between(self, start: datetime, end: datetime) -> list[datetime]:
        """Submission instants in [start, end]."""
        return self.times[bisect.bisect_left(self.times, start) : bisect.bisect_right(self.times, end)]

    def next_after(self, at: datetime) -> datetime | None:
        """The first submission strictly after `at` (a tick at `at` has taken the jobs submitted then)."""
        i = bisect.bisect_right(self.times, at)
        return self.times[i] if i < len(self.times) else None


def simulate(
    run: StrategyRun,
    jobs: Sequence[Job],
    *,
    start: datetime,
    end: datetime,
    seed: int = 0,
    on_progress: ProgressFn | None = None,
    keep_timeline: bool = False,
    prior: Sequence[Job] = (),
    keep_ledger: bool = False,
) -> StrategyResult:
    """Replay `jobs` (submitted in [start, end)) under `run` and measure it; the run stops at `end`.

    `prior` are jobs from before `start`: the forecast history of a strategy
    that forecasts (with `jobs` submitted before `start`, if any). With
    `keep_ledger` the result carries the controller's cost ledger rows
    (`StrategyResult.ledger`: spend over time, per tenant and line).

    Deterministic for a given (run, jobs, start, end, seed): the sim provider's
    spot interruptions are drawn from `seed`.
    """
    wall0 = time.perf_counter()
    setup = run.setup
    catalog = setup.catalog
    clock = ManualClock(start)
    provider = _sim_provider(run, clock, seed)
    arrivals = _Arrivals([j for j in jobs if start <= j.submitted_at < end])
    queue = MemoryQueue(complete_by_duration=True, ack_checkpoints=True)
    channel = SimCheckpointChannel(queue, provider.node)
    feed = _arrival_feed(arrivals, queue, start)
    policies = setup.policies_for({j.tenant for j in arrivals.jobs})
    store = Store.open(":memory:")
    forecaster = None
    if run.forecasting:
        kind = ClairvoyantForecaster if run.forecasting.clairvoyant else SimForecaster
        forecaster = kind(run.forecasting, store, [*prior, *jobs], setup.groups, start)
    controller = Controller(
        providers={"sim": provider},
        source=feed,
        store=store,
        policies=lambda: policies,
        prices=catalog,
        clock=clock,
        cluster=setup.cluster,
        forecaster=forecaster,
        agents=channel,
        settings=LoopSettings(
            pipeline=tuple(run.pipeline),
            record_demand=forecaster is not None,
            record_decisions=False,
            launch_failure_cooldown_s=run.launch_failure_cooldown_s,
            interruption_cooldown_s=run.interruption_cooldown_s,
        ),
    )
    meter = Meter(run, keep_timeline, policies)
    ticks = 0
    try:
        while True:
            report = controller.tick()
            ticks += 1
            meter.observe(report)
            if keep_timeline:
                meter.bill(provider)
            now = clock()
            if on_progress is not None:
                on_progress(now)
            if now >= end:
                break
            due = _next_tick(run, report, queue, provider, arrivals, now, forecaster, controller.cooldown_ends(now),
                             channel)
            clock.advance_to(end if due is None else min(end, due))
        result = _result(run, meter, provider, store, queue, arrivals.jobs, policies, start, end, ticks, wall0, forecaster)
        _settle(result, run, meter, queue, channel, end)
        if keep_ledger:
            result.ledger = store.costs(since=start)
        return result
    finally:
        store.close()


def _settle(result: StrategyResult, run: StrategyRun, meter: Meter, queue: MemoryQueue, channel: SimCheckpointChannel,
            end: datetime) -> None:
    """Finish a run's result at its end: checkpoint and reclaim counts, and, once nothing is queued, the
    remainders of what still runs (`charge_remainders`)."""
    result.checkpoint_acks, result.checkpoint_timeouts = len(channel.acks), len(channel.timeouts)
    result.reclaim_lost_gpu_hours = meter.reclaim_lost_gpu_s / 3600.0
    result.queued_at_end = len(queue.jobs) - len(queue.running)
    if not result.queued_at_end:
        charge_remainders(result, remainders(queue.running.values(), meter, end), run.setup)


def _sim_provider(run: StrategyRun, clock: ManualClock, seed: int) -> SimProvider:
    """The sim groups of `run`'s set-up at catalog prices, with its spot hazards (drawn from `seed`), initial
    sizes, capacity limits and warm pools."""
    setup, catalog = run.setup, run.setup.catalog
    provider = SimProvider(
        setup.groups,
        clock=clock,
        cluster=setup.cluster,
        prices={g.id: catalog.group_price(g) for g in setup.groups},
        standby_prices={g.id: catalog.standby_price(g) for g in setup.groups},
        spot_hazard_per_hour={g.id: setup.spot_hazard_per_hour.get(g.id, 0.0) for g in setup.groups},
        seed=seed,
        initial=setup.initial,
        capacity={g.id: setup.capacity[g.id] for g in setup.groups if g.id in setup.capacity} or None,
    )
    for group_id, (size, state) in run.warm_pools.items():
        provider.set_warm_pool(group_id, size, state, key=f"sim-warm-pool:{group_id}")
    return provider


def _arrival_feed(arrivals: _Arrivals, queue: MemoryQueue, start: datetime) -> ArrivalFeed:
    """The job source the controller reads: the trace's arrivals fed into `queue` as the clock passes them."""
    cursor: list[datetime | None] = [None]

    def save_cursor(at: datetime) -> None:
        cursor[0] = at

    # The feed takes [cursor, now); shifted by a microsecond, a job submitted exactly at a tick is seen by it.
    def arrived(a: datetime, b: datetime) -> list[Job]:
        return arrivals(a + _EPS, b + _EPS)

    return ArrivalFeed(queue, arrived, start=start - _EPS, load_cursor=lambda: cursor[0], save_cursor=save_cursor)


def _next_tick(
    run: StrategyRun,
    report: TickReport,
    queue: MemoryQueue,
    provider: SimProvider,
    arrivals: _Arrivals,
    now: datetime,
    forecaster: SimForecaster | None = None,
    cooldown_ends: Sequence[datetime] = (),
    channel: SimCheckpointChannel | None = None,
) -> datetime | None:
    """When the next tick runs after `now`: None when nothing can change any more.

    Events (a job submitted or finished, a checkpoint acknowledged, the sim
    provider's next change: a node ready or lost, an interruption notice) and
    timers (cooldowns, strategy timers, forecast refits) are found apart. A
    polling strategy sees either at its next loop interval; an event-driven
    one (burst) serves events after their batch window (`burst.wakeup`) and
    timers at its next heartbeat, as the daemon does.
    """
    interval = run.setup.loop_interval_s
    events, timers = _upcoming(run, report, queue, provider, arrivals, now, forecaster, cooldown_ends, channel)
    timer = min(timers, default=None)
    if timer is not None:  # a timer is seen at the first heartbeat at or after it
        timer = _first_loop_at_or_after(now, timer, interval)
    first = min(events, default=None)
    if first is None:
        return timer
    if not run.event_driven:
        due = _first_loop_at_or_after(now, first, interval)
        return due if timer is None else min(due, timer)
    window = first + timedelta(seconds=BATCH_MAX_S)
    in_window = sorted(
        [e for e in events if e <= window] + arrivals.between(first, window) + queue_finishes(queue, first, window)
    )
    batched = batch_end(in_window)
    assert batched is not None
    return batched if timer is None else min(batched, timer)


def _first_loop_at_or_after(now: datetime, instant: datetime, interval: float) -> datetime:
    """The first loop tick at or after `instant` of a loop ticking every `interval` seconds from `now` (never `now`)."""
    return now + timedelta(seconds=interval * max(1, math.ceil((instant - now).total_seconds() / interval - 1e-9)))


def queue_finishes(queue: MemoryQueue, start: datetime, end: datetime) -> list[datetime]:
    """When running jobs finish within [start, end]."""
    out = []
    for job in queue.running.values():
        finish = job.finishes_at
        if finish is not None and start <= finish <= end:
            out.append(finish)
    return out


def _upcoming(
    run: StrategyRun,
    report: TickReport,
    queue: MemoryQueue,
    provider: SimProvider,
    arrivals: _Arrivals,
    now: datetime,
    forecaster: SimForecaster | None,
    cooldown_ends: Sequence[datetime],
    channel: SimCheckpointChannel | None,
) -> tuple[list[datetime], list[datetime]]:
    """The first instant after `now` of each kind of event, and every timer due after `now`."""
    events: list[datetime] = []
    timers: list[datetime] = []
    if any(not o.ok for o in report.outcomes):
        timers.append(now + _EPS)  # a failed call is retried at the next heartbeat
    requeued = any(a.kind in _REQUEUING for a in report.plan.actions)
    if requeued and not run.event_driven:
        timers.append(now + _EPS)  # evicted jobs and the GPUs they free are placed at the next loop interval
    arrival = arrivals.next_after(now)
    if arrival is not None:
        events.append(arrival)
    finishes = [job.finishes_at for job in queue.running.values()]  # read directly: every running job each tick
    finish = min((f for f in finishes if f is not None and f > now), default=None)
    if finish is not None:
        events.append(finish)
    ack_due = channel.next_event_at() if channel is not None else None
    if ack_due is not None:
        events.append(ack_due)
    sim_due = provider.next_event_at()
    if sim_due is not None:
        events.append(sim_due)
    snap = report.snapshot
    steps = [step for _, step in run.pipeline]
    if snap is not None and (release_idle in steps or scale_down_idle in steps):
        # Only the cooldowns of groups whose idle nodes the scale-down step may let go: another group's end decides nothing.
        break_even = release_idle in steps
        cooldowns = {g.id: timedelta(seconds=idle_release_s(g, break_even=break_even))
                     for g in snap.groups if releases_idle(g)}
        ends: dict[GroupId, datetime] = {}  # per group, the first idle cooldown still to end
        ready_state = NodeState.READY
        for node in snap.nodes:
            if node.idle_since is not None and node.state is ready_state:
                cooldown = cooldowns.get(node.group_id)
                if cooldown is None:
                    continue
                end = node.idle_since + cooldown
                if end > now and (node.group_id not in ends or end < ends[node.group_id]):
                    ends[node.group_id] = end
        timers.extend(ends.values())
    timers.extend(cooldown_ends)
    for due in (run.next_due(now), forecaster.next_due(now) if forecaster else None):
        if due is not None:
            timers.append(due)
    # an event-driven loop's own evictions wake it, as `run_loop` notifies them: the requeued work is placed next
    return [e for e in events if e > now] + ([now] if requeued and run.event_driven else []), [t for t in timers if t > now]


def _result(
    run: StrategyRun,
    meter: Meter,
    provider: SimProvider,
    store: Store,
    queue: MemoryQueue,
    jobs: Sequence[Job],
    policies: Mapping[str, Policy],
    start: datetime,
    end: datetime,
    ticks: int,
    wall0: float,
    forecaster: SimForecaster | None,
) -> StrategyResult:
    groups = {g.id: g for g in run.setup.groups}
    catalog = run.setup.catalog
    by_tier: dict[str, float] = dict.fromkeys(TIERS, 0.0)
    paid_gpu_s = 0.0
    steady_gpu_s = 0.0
    spot_paid_gpu_s = 0.0
    for group_id, (full_s, standby_s) in provider.usage_seconds().items():
        group = groups[group_id]
        by_tier[cost_line(group, warm=False)] += full_s / 3600.0 * catalog.group_price(group)
        by_tier["hot_pool"] += standby_s / 3600.0 * catalog.standby_price(group)
        paid_gpu_s += full_s * group.gpus_per_node
        if group.tier is Tier.STEADY:
            steady_gpu_s += (full_s + standby_s) * group.gpus_per_node
        if group.capacity_type is CapacityType.SPOT:
            spot_paid_gpu_s += full_s * group.gpus_per_node
    waits: list[float] = []
    violations = 0
    for job in jobs:
        started = meter.first_start.get(job.id)
        wait = ((started or end) - job.submitted_at).total_seconds()
        waits.append(wait)
        if wait > policies[job.tenant].queue_wait_slo_s:
            violations += 1
    final = {j.id: j for j in queue.finished}
    final.update(queue.jobs)
    delays = _delays(jobs, final, meter.completed_at, end)
    spend = _spend(run, meter, provider, by_tier, final.values(), end)
    return StrategyResult(
        name=run.name,
        cost_usd=sum(by_tier.values()),
        cost_by_tier=by_tier,
        cost_by_tenant=store.spend_by_tenant(since=start),
        gpu_hours_used=meter.used_gpu_s / 3600.0,
        gpu_hours_paid=paid_gpu_s / 3600.0,
        onprem_utilization=meter.steady_used_gpu_s / steady_gpu_s if steady_gpu_s else 0.0,
        wait_p50_s=percentile(waits, 0.50),
        wait_p95_s=percentile(waits, 0.95),
        wait_p99_s=percentile(waits, 0.99),
        slo_violations=violations,
        interruptions=meter.interruptions,
        lost_gpu_hours=meter.lost_gpu_s / 3600.0,
        time_to_capacity_p95_s=percentile(meter.ttc, 0.95),
        scale_ups=meter.scale_ups,
        jobs=len(jobs),
        jobs_started=len(meter.first_start),
        jobs_completed=meter.completed,
        ticks=ticks,
        simulated_hours=(end - start).total_seconds() / 3600.0,
        wall_s=time.perf_counter() - wall0,
        forecast_fit_s=forecaster.service.fit_s if forecaster else 0.0,
        forecast_fits=forecaster.service.fits if forecaster else 0,
        checkpoint_violations=meter.checkpoint_violations,
        spot_gpu_hours=spot_paid_gpu_s / 3600.0,
        evictions=meter.evictions,
        immovable_stopped=meter.immovable_stopped,
        goodput=(meter.spot_used_gpu_s - meter.spot_lost_gpu_s) / spot_paid_gpu_s if spot_paid_gpu_s else 0.0,
        warm_nodes_avg=meter.warm_node_s / max(1.0, (end - start).total_seconds()),
        forecast_models=dict(forecaster.service.models_fitted) if forecaster else {},
        delay_mean_s=sum(delays) / len(delays) if delays else 0.0,
        delay_p95_s=percentile(delays, 0.95),
        work_gpu_hours=(spend.work_eligible_gpu_s + spend.work_other_gpu_s) / 3600.0,
        spend=spend,
        waits_s=waits,
        timeline=meter.timeline,
    )


def _delays(jobs: Sequence[Job], final: Mapping[str, Job], completed_at: Mapping[str, datetime], end: datetime) -> list[float]:
    """Each job's delay: completion - submission - duration; a job not done by `end` counts (end - submission -
    work done), censored there."""
    out: list[float] = []
    for job in jobs:
        done_at = completed_at.get(job.id)
        if done_at is not None and job.duration_s is not None:
            out.append(max(0.0, (done_at - job.submitted_at).total_seconds() - job.duration_s))
            continue
        state = final.get(job.id, job)
        out.append(max(0.0, (end - job.submitted_at).total_seconds() - progress.work_at(state, end)))
    return out


def _spend(
    run: StrategyRun, meter: Meter, provider: SimProvider, by_tier: Mapping[str, float], final: Iterable[Job], end: datetime
) -> Spend:
    """The run's spend as the cost gap reads it (`Spend`), from the provider's billing and the meter's GPU-seconds."""
    setup = run.setup
    catalog = setup.catalog
    p_od, p_spot = (p / 3600.0 for p in reference_prices(setup))  # USD per GPU-second
    spend = Spend(steady_usd=by_tier.get("steady", 0.0), hot_pool_usd=by_tier.get("hot_pool", 0.0))
    held, lost = meter.held_gpu_s, meter.lost_by_group_gpu_s
    groups = {g.id: g for g in setup.groups}
    phases = provider.full_price_phases()
    for group_id, (full_s, _standby_s) in provider.usage_seconds().items():
        group = groups[group_id]
        if group.tier is Tier.STEADY:
            continue
        per_gpu_s = catalog.group_price(group) / group.gpus_per_node / 3600.0
        booting_gpu_s = phases[group_id][0] * group.gpus_per_node
        held_gpu_s = held.get((group_id, True), 0.0) + held.get((group_id, False), 0.0)
        spend.booting_usd += per_gpu_s * booting_gpu_s
        spend.idle_usd += per_gpu_s * (full_s * group.gpus_per_node - booting_gpu_s - held_gpu_s)
        spend.empty_node_usd += per_gpu_s * meter.empty_gpu_s.get(group_id, 0.0)
    for (held_in, eligible), gpu_s in held.items():
        where = groups.get(held_in) if held_in is not None else None
        if where is not None and where.tier is Tier.STEADY:
            if eligible:
                spend.onprem_eligible_gpu_s += gpu_s
            else:
                spend.onprem_other_gpu_s += gpu_s
        elif where is not None and eligible and where.capacity_type is CapacityType.ON_DEMAND:
            premium = catalog.group_price(where) / where.gpus_per_node / 3600.0 - p_spot
            spend.spot_work_on_demand_usd += premium * max(0.0, gpu_s - lost.get((held_in, True), 0.0))
    for (held_in, eligible), gpu_s in lost.items():
        where = groups.get(held_in) if held_in is not None else None
        if where is not None and where.tier is Tier.ELASTIC:
            spend.rerun_usd += gpu_s * catalog.group_price(where) / where.gpus_per_node / 3600.0
        else:
            spend.rerun_usd += gpu_s * (p_spot if eligible else p_od)
    for eligible in (True, False):
        kept = sum(v for (_, e), v in held.items() if e is eligible) - sum(v for (_, e), v in lost.items() if e is eligible)
        if eligible:
            spend.kept_eligible_gpu_s = kept
        else:
            spend.kept_other_gpu_s = kept
    for job in final:
        work = progress.work_at(job, end) * job.gpu_demand
        if meter.eligible(job):
            spend.work_eligible_gpu_s += work
        else:
            spend.work_other_gpu_s += work
    return spend


Held = dict[tuple[GroupId | None, bool], float]
"""GPU-seconds per (group whose nodes held them, spot-eligible work)."""


def remainders(running: Iterable[Job], meter: Meter, end: datetime) -> tuple[Held, int]:
    """The work the `running` jobs still have at `end` (duration - work done, x GPUs), by the group they hold and
    their spot eligibility, and how many jobs have any: what equal work charges without simulating it."""
    tail: Held = defaultdict(float)
    jobs = 0
    for job in running:
        if job.duration_s is None:
            continue
        left = job.duration_s - progress.work_at(job, end)
        if left > 0:
            tail[meter.held_in(job.id), meter.eligible(job)] += left * job.gpu_demand
            jobs += 1
    return dict(tail), jobs


def charge_remainders(result: StrategyResult, charged: tuple[Held, int], setup: SimSetup) -> None:
    """Charge a run's remainders (`remainders`) as if its jobs ran them on the nodes they hold: each GPU-second at
    its group's price per GPU (work held on no known group at the reference price of its kind), on the group's
    cost line, held, paid and delivered. The cost gap's parts read them as held work: none is idle or booting."""
    tail, jobs = charged
    groups = {g.id: g for g in setup.groups}
    catalog = setup.catalog
    p_od, p_spot = (p / 3600.0 for p in reference_prices(setup))  # USD per GPU-second
    spend = result.spend
    for (held_in, eligible), gpu_s in tail.items():
        group = groups.get(held_in) if held_in is not None else None
        per_gpu_s = catalog.group_price(group) / group.gpus_per_node / 3600.0 if group else (p_spot if eligible else p_od)
        usd = per_gpu_s * gpu_s
        line = cost_line(group, warm=False) if group else ("elastic_spot" if eligible else "elastic_on_demand")
        result.cost_by_tier[line] += usd
        result.remainder_usd += usd
        result.remainder_gpu_hours += gpu_s / 3600.0
        if group is not None and group.capacity_type is CapacityType.SPOT:
            result.spot_gpu_hours += gpu_s / 3600.0
        if spend is None:
            continue
        if group is not None and group.tier is Tier.STEADY:
            spend.steady_usd += usd
            if eligible:
                spend.onprem_eligible_gpu_s += gpu_s
            else:
                spend.onprem_other_gpu_s += gpu_s
        elif group is not None and eligible and group.capacity_type is CapacityType.ON_DEMAND:
            spend.spot_work_on_demand_usd += (per_gpu_s - p_spot) * gpu_s
        if eligible:
            spend.kept_eligible_gpu_s += gpu_s
            spend.work_eligible_gpu_s += gpu_s
        else:
            spend.kept_other_gpu_s += gpu_s
            spend.work_other_gpu_s += gpu_s
    result.cost_usd = sum(result.cost_by_tier.values())
    result.gpu_hours_used += result.remainder_gpu_hours
    result.gpu_hours_paid += result.remainder_gpu_hours
    result.work_gpu_hours += result.remainder_gpu_hours
    result.jobs_completed += jobs


__all__ = ["MARKS", "StrategyResult", "TimelinePoint", "charge_remainders", "percentile", "remainders", "simulate"]
