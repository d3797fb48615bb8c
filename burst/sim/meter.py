"""Metering a simulated run: from each tick's report, the waits, interruptions, time to capacity, the timeline
and the GPU-seconds the cost gap splits (`Meter`), as the simulator collects them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from burst.catalog import COST_LINES, cost_line
from burst.model import Action, ActionKind, CapacityType, GroupId, Job, NodeState, Policy, Snapshot, Tier
from burst.planner.placement import spot_eligible
from burst.reconcile import TickReport
from burst.sim.strategies import StrategyRun
from burst.workloads.base import JobEvents
from providers.sim import SimProvider

_RELEASING = frozenset({ActionKind.SCALE_DOWN, ActionKind.TERMINATE_NODES})
MARKS = ("scale_up", "scale_down", "move", "interruption")
"""What a timeline point counts of its tick: groups scaled up, groups scaled down or nodes terminated, jobs
evicted to move them (checkpoint, evict, resume elsewhere), and runs that lost their nodes."""

@dataclass
class TimelinePoint:
    """One tick as the report draws it: demand, ready capacity, the queue, the bill so far and what the plan did.

    `demand_gpus`: GPUs of every active job (pending or running); `pending_gpus`:
    GPUs of jobs still pending after the tick's plan; `capacity_gpus`: ready GPUs
    per cost line; `spent_usd`: the bill per cost line from the start of the run
    to this tick (the sim provider's, so the last point's lines are the run's
    `cost_by_tier` less its remainder charge, `StrategyResult.remainder_usd`);
    `marks`: counts of `MARKS` at this tick (absent when 0).
    """

    at: datetime
    demand_gpus: float
    capacity_gpus: dict[str, float]
    pending_gpus: float = 0.0
    spent_usd: dict[str, float] = field(default_factory=dict)
    marks: dict[str, int] = field(default_factory=dict)


class Meter:
    """Collects waits, interruptions, time to capacity, the timeline and the cost gap's GPU-seconds from tick reports."""

    def __init__(self, run: StrategyRun, keep_timeline: bool, policies: Mapping[str, Policy] | None = None) -> None:
        self.run = run
        self.groups = {g.id: g for g in run.setup.groups}
        self.policies = policies or {}
        self.requeued_at: dict[str, datetime] = {}  # when each job last went back to the queue
        self.kept_s: dict[str, float] = {}  # work each requeued job kept (its checkpoint) when it went back
        self.completed_at: dict[str, datetime] = {}
        self._eligible: dict[str, bool] = {}  # spot eligibility per job id (fixed for a job)
        # GPU-seconds held by jobs per (group, spot-eligible), and the part of it later lost
        self.held_gpu_s: dict[tuple[GroupId | None, bool], float] = defaultdict(float)
        self.lost_by_group_gpu_s: dict[tuple[GroupId | None, bool], float] = defaultdict(float)
        self._held_rates: tuple[dict[GroupId | None, float], dict[GroupId | None, float]] = ({}, {})  # other, eligible
        self._held_group: dict[str, GroupId | None] = {}  # each held job's group at the last tick
        self.first_start: dict[str, datetime] = {}
        self.interruptions = 0
        self.lost_gpu_s = 0.0
        self.evictions = 0
        self.immovable_stopped = 0  # jobs that cannot move (not fault-tolerant) sent back to the queue
        self.used_gpu_s = 0.0
        self.steady_used_gpu_s = 0.0
        self.seen_unplaced: set[str] = set()
        self.open_ups: list[tuple[GroupId, int, datetime, int]] = []  # (group, size asked, since, gone then)
        self._ready_nodes: dict[str, GroupId] = {}  # nodes ready at the last tick, and their group
        self.empty_gpu_s: dict[GroupId, float] = defaultdict(float)  # GPU-seconds of ready elastic nodes no job held
        self._empty_rates: dict[GroupId, float] = {}
        self.gone: dict[GroupId, int] = defaultdict(int)  # per group, nodes seen ready that have gone since
        self.ttc: list[float] = []
        self.scale_ups = 0
        self.completed = 0
        self.keep_timeline = keep_timeline
        self.timeline: list[TimelinePoint] = []
        self._last_at: datetime | None = None
        self._running_gpus = 0.0
        self._steady_running_gpus = 0.0
        self.warm_node_s = 0.0
        self._warm_nodes = 0
        self.spot_used_gpu_s = 0.0
        self.spot_lost_gpu_s = 0.0
        self.reclaim_lost_gpu_s = 0.0  # work lost by runs whose nodes the cloud reclaimed (an interruption notice)
        self._noticed: set[str] = set()  # nodes that have had an interruption notice
        self.checkpoint_violations = 0
        self._spot_running_gpus = 0.0
        self._on_spot: set[str] = set()
        self._steady_groups = {g.id for g in run.setup.groups if g.tier is Tier.STEADY}
        self._spot_groups = {g.id for g in run.setup.groups if g.capacity_type is CapacityType.SPOT}

    def observe(self, report: TickReport) -> None:
        """Meter one tick: accrue the rates since the last one, count its job events, and scan its nodes and
        jobs for the rates until the next one (each part below, in this order)."""
        now = report.at
        snap = report.snapshot
        assert snap is not None
        self._accrue(now)
        self._noticed.update(snap.notices)
        events = report.job_events
        self._count_events(events, now)
        placed = {a.target: a for a in report.plan.actions if a.kind is ActionKind.PLACE_JOB}
        for job_id in placed:
            self.first_start.setdefault(job_id, now)
        group_of, ready, warm, ready_nodes = self._scan_nodes(snap)
        unplaced_since = self._scan_jobs(snap, placed, group_of, ready_nodes, report.plan.actions)
        self._warm_nodes = warm
        self._track_boots(report, ready, unplaced_since, now)
        if self.keep_timeline:
            self._mark_timeline(report, placed, now)

    def _accrue(self, now: datetime) -> None:
        """Add the GPU-seconds (used, steady, spot, warm, empty, held) at the rates of the last tick up to `now`."""
        if self._last_at is not None:
            dt = (now - self._last_at).total_seconds()
            self.used_gpu_s += self._running_gpus * dt
            self.steady_used_gpu_s += self._steady_running_gpus * dt
            self.warm_node_s += self._warm_nodes * dt
            self.spot_used_gpu_s += self._spot_running_gpus * dt
            for empty_in, empty_gpus in self._empty_rates.items():
                self.empty_gpu_s[empty_in] += empty_gpus * dt
            held = self.held_gpu_s
            for kind, rates_of in enumerate(self._held_rates):
                for group_id, rate in rates_of.items():
                    held[group_id, kind == 1] += rate * dt
        self._last_at = now

    def _count_events(self, events: JobEvents, now: datetime) -> None:
        """Count the tick's completions, requeues and evictions, and the work each lost."""
        self.completed += len(events.completed)
        for done in events.completed:
            # this run began at started_at with the work kept at its last requeue, and ran to the duration
            if done.started_at is not None and done.duration_s is not None:
                rest = done.duration_s - self.kept_s.get(done.id, 0.0)
                self.completed_at[done.id] = done.started_at + timedelta(seconds=max(0.0, rest))
        for job, lost in events.requeued:
            self.interruptions += 1
            self.immovable_stopped += not job.fault_tolerant
            self._lose(job, lost, now)
            if job.id in self._on_spot:
                self.spot_lost_gpu_s += lost * job.gpu_demand
            if not self._noticed.isdisjoint(events.lost_nodes.get(job.id, ())):
                self.reclaim_lost_gpu_s += lost * job.gpu_demand
            if job.fault_tolerant and job.checkpoint_interval_s and lost > job.checkpoint_interval_s + 1e-6:
                self.checkpoint_violations += 1
        for job, lost in events.evicted:
            self.evictions += 1
            self.immovable_stopped += not job.fault_tolerant
            self._lose(job, lost, now)

    def _scan_nodes(self, snap: Snapshot) -> tuple[dict[str, GroupId], dict[GroupId, int], int, dict[str, GroupId]]:
        """One pass over the nodes: each node's group, ready nodes per group, warm nodes, the ready ones by id
        (a ready node gone since the last tick counts against its group)."""
        # One pass over the nodes: each node's group, ready nodes per group, warm nodes.
        group_of: dict[str, GroupId] = {}
        ready: dict[GroupId, int] = defaultdict(int)
        warm = 0
        ready_state, warm_state = NodeState.READY, NodeState.WARM
        ready_nodes: dict[str, GroupId] = {}
        for node in snap.nodes:
            group_id = group_of[node.id] = node.group_id
            state = node.state
            if state is ready_state:
                ready[group_id] += 1
                ready_nodes[node.id] = group_id
            elif state is warm_state:
                warm += 1
        for node_id, group_id in self._ready_nodes.items():
            if node_id not in ready_nodes:
                self.gone[group_id] += 1
        self._ready_nodes = ready_nodes
        return group_of, ready, warm, ready_nodes

    def _scan_jobs(self, snap: Snapshot, placed: Mapping[str, Action], group_of: Mapping[str, GroupId],
                   ready_nodes: Mapping[str, GroupId], actions: Sequence[Action]) -> datetime | None:
        """Set the running, steady, spot, held and empty rates until the next tick from the jobs holding GPUs
        (running, or placed by this plan); the earliest submission among jobs newly unplaced."""
        running = 0.0
        steady_running = 0.0
        spot_running = 0.0
        on_spot: set[str] = set()
        unplaced_since: datetime | None = None  # earliest submission among newly unplaced jobs
        seen_unplaced = self.seen_unplaced
        requeued_at = self.requeued_at
        holding: list[tuple[Job, Sequence[str]]] = [(job, job.node_ids) for job in snap.running_jobs]
        for job in snap.pending_jobs:
            action = placed.get(job.id)
            if action is not None:
                holding.append((job, action.node_ids))
            elif job.id not in seen_unplaced:
                seen_unplaced.add(job.id)
                # a requeued job's demand is new at its requeue, not at its submission
                since = requeued_at.get(job.id, job.submitted_at)
                if unplaced_since is None or since < unplaced_since:
                    unplaced_since = since
        steady_groups, spot_groups = self._steady_groups, self._spot_groups
        rates: tuple[dict[GroupId | None, float], dict[GroupId | None, float]] = ({}, {})  # other, eligible
        held_group: dict[str, GroupId | None] = {}
        eligible_of = self._eligible
        for job, node_ids in holding:
            demand = job.gpu_demand
            running += demand
            if not node_ids:
                continue
            eligible = eligible_of.get(job.id)
            if eligible is None:
                eligible = eligible_of[job.id] = self._spot_eligible(job)
            # on steady (spot) nodes when every node it holds is listed in a steady (spot) group
            if len(node_ids) == 1:  # most jobs: their one node's group, without a set
                held_in = group_of.get(node_ids[0])
                on_steady, on_spot_nodes = held_in in steady_groups, held_in in spot_groups
            else:
                kinds = {group_of.get(n) for n in node_ids}
                held_in = group_of.get(node_ids[0])
                on_steady, on_spot_nodes = steady_groups.issuperset(kinds), spot_groups.issuperset(kinds)
            by_group = rates[eligible]
            by_group[held_in] = by_group.get(held_in, 0.0) + demand
            held_group[job.id] = held_in
            if on_steady:
                steady_running += demand
            elif on_spot_nodes:
                spot_running += demand
                on_spot.add(job.id)
        self._running_gpus, self._steady_running_gpus = running, steady_running
        self._held_rates, self._held_group = rates, held_group
        self._empty_rates = self._empty_gpus(ready_nodes, holding, actions)
        self._spot_running_gpus, self._on_spot = spot_running, on_spot
        return unplaced_since

    def _track_boots(self, report: TickReport, ready: Mapping[GroupId, int], unplaced_since: datetime | None,
                     now: datetime) -> None:
        """Close the scale-ups whose nodes are ready (their time to capacity) and open this plan's."""
        snap = report.snapshot
        assert snap is not None
        still_open = []
        gone = self.gone
        for group_id, size, since, gone_then in self.open_ups:
            asked = size - (gone[group_id] - gone_then)
            if ready[group_id] >= asked:
                self.ttc.append((now - since).total_seconds())
            elif snap.targets.get(group_id, 0) >= asked:
                still_open.append((group_id, size, since, gone_then))
        self.open_ups = still_open
        for action in report.plan.actions:
            if action.kind is ActionKind.SCALE_UP and action.size is not None:
                self.scale_ups += 1
                self.open_ups.append((action.target, action.size, unplaced_since or now, gone[action.target]))

    def _mark_timeline(self, report: TickReport, placed: Mapping[str, Action], now: datetime) -> None:
        """Add this tick's point to the timeline: demand, ready capacity per cost line, pending GPUs, marks."""
        snap = report.snapshot
        assert snap is not None
        events = report.job_events
        capacity: dict[str, float] = defaultdict(float)
        for node in snap.nodes:
            if node.state is NodeState.READY:
                capacity[cost_line(self.groups[node.group_id], warm=False)] += node.gpus
        demand = sum(j.gpu_demand for j in snap.jobs if j.active)
        pending = sum(j.gpu_demand for j in snap.pending_jobs if j.id not in placed)
        marks: dict[str, int] = defaultdict(int)
        for action in report.plan.actions:
            if action.kind is ActionKind.SCALE_UP:
                marks["scale_up"] += 1
            elif action.kind in (ActionKind.SCALE_DOWN, ActionKind.TERMINATE_NODES):
                marks["scale_down"] += 1
            elif action.kind is ActionKind.EVICT_JOB:
                marks["move"] += 1
        if events.requeued:
            marks["interruption"] += len(events.requeued)
        self.timeline.append(TimelinePoint(now, demand, dict(capacity), pending, marks=dict(marks)))

    def _empty_gpus(self, ready_nodes: Mapping[str, GroupId], holding: Sequence[tuple[Job, Sequence[str]]],
                    actions: Sequence[Action]) -> dict[GroupId, float]:
        """GPUs per elastic group on ready nodes that no job holds, is placed on, nor that this tick lets go."""
        used = {n for _, node_ids in holding for n in node_ids}
        used.update(n for a in actions if a.kind in _RELEASING for n in a.node_ids)
        out: dict[GroupId, float] = defaultdict(float)
        steady, groups = self._steady_groups, self.groups
        for node_id, group_id in ready_nodes.items():
            if group_id not in steady and node_id not in used:
                out[group_id] += groups[group_id].gpus_per_node
        return out

    def bill(self, provider: SimProvider) -> None:
        """Put the bill so far per cost line on the latest timeline point (a run that keeps its timeline)."""
        if not self.timeline:
            return
        spent: dict[str, float] = dict.fromkeys(COST_LINES, 0.0)
        catalog = self.run.setup.catalog
        for group_id, (full_s, standby_s) in provider.usage_seconds().items():
            group = self.groups[group_id]
            spent[cost_line(group, warm=False)] += full_s / 3600.0 * catalog.group_price(group)
            spent["hot_pool"] += standby_s / 3600.0 * catalog.standby_price(group)
        self.timeline[-1].spent_usd = spent


    def _spot_eligible(self, job: Job) -> bool:
        policy = self.policies.get(job.tenant)
        return policy is not None and spot_eligible(job, policy)

    def eligible(self, job: Job) -> bool:
        """Whether the job may go to spot (by its tenant's policy), cached per job id."""
        found = self._eligible.get(job.id)
        if found is None:
            found = self._eligible[job.id] = self._spot_eligible(job)
        return found

    def held_in(self, job_id: str) -> GroupId | None:
        """The group of the (first) node a job held at the last tick; None when it held none."""
        return self._held_group.get(job_id)

    def _lose(self, back: Job, lost_s: float, now: datetime) -> None:
        """Count work a job lost (it went back to the queue at `now`, keeping `back.work_done_s`)."""
        lost_gpu_s = lost_s * back.gpu_demand
        self.lost_gpu_s += lost_gpu_s
        eligible = self.eligible(back)
        self.lost_by_group_gpu_s[self._held_group.get(back.id), eligible] += lost_gpu_s
        self.requeued_at[back.id] = now
        self.kept_s[back.id] = back.work_done_s
        self.seen_unplaced.discard(back.id)


__all__ = ["MARKS", "Meter", "TimelinePoint"]
