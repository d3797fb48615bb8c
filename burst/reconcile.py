"""The reconcile loop: observe → plan → actuate → record, one tick at a time.

`Controller.tick()` is the whole loop body and holds no state that matters
between ticks except what is in the store (level triggered: a restart or a
missed event converges on the next tick; what cannot be observed again, such
as a cooldown or a notice already taken off a queue, is `burst.memory`'s,
recorded with each tick). One tick:

1. observe: refresh every provider, drain its events (kept in the store at once:
   reading took them off the cloud's queue), list its nodes and read
   each group's target (capacity still booting, or not yet listed, counts
   toward the target, so a stale listing never causes a second launch);
2. garbage-collect: adopt tagged nodes a target explains, terminate orphans
   and nodes stuck booting (the actuator decides, see `burst.actuator`);
3. jobs: the job source advances its jobs (finished ones complete, ones whose
   nodes are gone are requeued from their last checkpoint); a job outside
   `burst.bounds` is failed there, with a hold saying why, and never planned,
   so one bad job cannot stop the tick for everyone else;
4. plan: the pure planner over a `Snapshot` of known nodes (with how long each
   has been idle), active jobs, targets and month-to-date spend;
5. actuate: job actions go to the job source, provider actions to the actuator;
6. record: the decision log, demand history, cost ledger, job-loss ledger
   (`burst.losses`) and the loop's cross-tick memory (`burst.memory`:
   cooldowns, notices, run times, ...), in one transaction.

`run_loop()` drives ticks: events (a job submitted or finished, a node ready
or lost, an interruption notice) wake it after a short batch window
(`burst.wakeup`), and the interval with jitter is the heartbeat that catches
whatever no event reported; a tick that raises is logged and the next tick
runs; `stop` (set by SIGTERM) ends the loop after the current tick.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from burst import progress
from burst.actuator import EXECUTORS, Actuator, Executor, GcReport, Outcome, sort_unknown
from burst.costing import attribute_costs
from burst.lease import LeaderLease
from burst.losses import job_losses
from burst.memory import ControllerMemory
from burst.model import (
    ANY_MODEL,
    LIVE_NODE_STATES,
    Action,
    ActionKind,
    CapacityType,
    DemandPoint,
    EventKind,
    Forecast,
    GroupId,
    Hold,
    Job,
    JobState,
    Node,
    NodeGpus,
    NodeGroup,
    NodeId,
    NodeState,
    Plan,
    Policy,
    ProviderEvent,
    Snapshot,
    TenantName,
    WarmState,
    month_start,
)
from burst.planner import PIPELINE, PlanIds, Step, plan
from burst.planner.notice import STEP as NOTICE_STEP
from burst.planner.runtime_estimate import RuntimeHistory
from burst.planner.spot_rates import InterruptionObservations
from burst.service_loop import ServiceLoop, ServiceTick
from burst.state import MetaKey, Store
from burst.wakeup import WakeReason, Wakeup
from burst.workloads.base import JobEvents, JobSource
from burst.workloads.replicas import is_replica
from policies.config import DEFAULT_INTERRUPTION_COOLDOWN_S
from providers.base import InsufficientCapacity, Provider, QuotaExceeded

log = logging.getLogger("burst.reconcile")

DEMAND_INTERVAL_S = 300.0
"""Demand history is recorded at most once per this many seconds (forecasts use 5-minute steps or coarser)."""
INTERRUPTIONS_SAVE_S = 300.0
"""The learnt interruption observations are written to the store at most this often, and at once after an
interruption (a restart resumes from the last written; the exposure in between is counted again)."""


class Prices(Protocol):
    """What the loop needs from the price catalog: planning and cost attribution."""

    def group_price(self, group: NodeGroup) -> float: ...

    def standby_price(self, group: NodeGroup) -> float: ...


@dataclass
class TickReport:
    """What one tick saw and did."""

    at: datetime
    plan: Plan
    outcomes: list[Outcome] = field(default_factory=list)
    gc: GcReport = field(default_factory=GcReport)
    job_events: JobEvents = field(default_factory=JobEvents)
    provider_events: list[ProviderEvent] = field(default_factory=list)
    snapshot: Snapshot | None = None
    services: ServiceTick | None = None  # what the services did (None: the daemon runs none)
    standby: bool = False  # another daemon holds the leader lease: nothing was observed or done
    woken_by: tuple[WakeReason, ...] = ()  # the events that woke this tick before its heartbeat; () for the heartbeat


LAUNCH_FAILURE_COOLDOWN_S = 600.0
"""A group whose launch failed (no capacity, a quota) is passed over by the planner for this long."""
INTERRUPTION_COOLDOWN_S = DEFAULT_INTERRUPTION_COOLDOWN_S
"""How long a spot group that just lost a node to an interruption takes no new launches (SkyPilot's eager
move to the next offering): burst.yaml's `spot.interruption_cooldown`, whose default says why it is off."""


@dataclass(frozen=True)
class LoopSettings:
    """How a `Controller` plans, records and cools down: its settings, apart from its collaborators.

    The daemon takes the defaults except the interruption cooldown (burst.yaml);
    the simulator turns off the decision log (and demand history without a
    forecaster), and gives each strategy its pipeline and cooldowns.
    """

    pipeline: tuple[tuple[str, Step], ...] = PIPELINE
    record_costs: bool = True  # the cost ledger
    record_demand: bool = True  # demand history (what forecasts are fitted on)
    record_decisions: bool = True  # the decision log (`burst explain`)
    launch_failure_cooldown_s: float = LAUNCH_FAILURE_COOLDOWN_S
    interruption_cooldown_s: float = INTERRUPTION_COOLDOWN_S


class AgentLink(Protocol):
    """What the loop needs of the on-prem node agents (burst.agent.bridge.AgentBridge provides it)."""

    def node_gpus(self) -> Mapping[NodeId, NodeGpus]:
        """The GPUs each agent last reported, by node id."""
        ...

    def sync(self, now: datetime) -> None:
        """Apply what the agents reported (exits, checkpoint acks) to the jobs."""
        ...

    def forward(self, action: Action, before: Job | None, now: datetime) -> None:
        """Send a plan's job action to the agents of the job's nodes."""
        ...


Forecaster = Callable[[datetime, Sequence[Job]], Sequence[Forecast]]
"""Gives the forecasts a plan at `now` uses (cached by the forecaster; never blocks a tick)."""


class Controller:
    """One cluster's reconcile loop body over its providers, job source and store."""

    def __init__(
        self,
        *,
        providers: Mapping[str, Provider],
        source: JobSource,
        store: Store,
        policies: Callable[[], Mapping[TenantName, Policy]],
        prices: Prices,
        clock: Callable[[], datetime],
        cluster: str,
        actuator: Actuator | None = None,
        forecaster: Forecaster | None = None,
        lease: LeaderLease | None = None,
        agents: AgentLink | None = None,
        settings: LoopSettings = LoopSettings(),
        services: ServiceLoop | None = None,
    ) -> None:
        self.lease = lease
        self.services = services
        self.agents = agents
        self.settings = settings
        self.providers = dict(providers)
        self.source = source
        self.store = store
        self.policies = policies
        self.prices = prices
        self.clock = clock
        self.cluster = cluster
        self.actuator = actuator or Actuator(self.providers, store, cluster=cluster, clock=clock)
        self.forecaster = forecaster
        self.groups: dict[GroupId, NodeGroup] = {}
        self.group_provider: dict[GroupId, Provider] = {}
        for provider in self.providers.values():
            for group in provider.node_groups():
                self.groups[group.id] = group
                self.group_provider[group.id] = provider
        self.started = False
        self.memory = ControllerMemory.load(store)  # what one tick hands the next, kept in the store
        # Caches and per-tick facts, none of which a restart needs:
        self._month_spend: tuple[datetime, dict[TenantName, float]] | None = None
        self.down: dict[str, str] = {}  # providers whose reads failed this tick, and why
        self._interruptions_saved_at: datetime | None = None
        # The plan sequence and the last tick's time, as this leader last wrote them (None: read the store).
        self._plan_seq: int | None = None
        self._last_tick: str | None = None

    def start(self) -> list[Outcome]:
        """Settle the intent journal against the providers; run once before the first plan."""
        outcomes = self.actuator.recover()
        self._plan_seq = self._last_tick = None  # another leader may have ticked meanwhile
        self.memory = ControllerMemory.load(self.store)
        self.started = True
        return outcomes

    @property
    def interruptions(self) -> InterruptionObservations:
        """The interruptions and spot node-hours observed per group (the learnt rates' evidence)."""
        return self.memory.interruptions

    @property
    def runtimes(self) -> RuntimeHistory:
        """Completed jobs' run times, what the planner expects runs from."""
        return self.memory.runtimes

    # ------------------------------------------------------------ the tick

    def tick(self) -> TickReport:
        """Run one observe → plan → actuate → record pass and say what it did.

        With a leader lease, a daemon that does not hold it does nothing but
        say so (a standby), and the actuator is fenced by the lease's epoch.
        """
        now = self.clock()
        if self.lease is not None:
            epoch = self.lease.acquire(now)
            if epoch is None:
                return self._standby(now)
            lease = self.lease
            self.actuator.fence = lambda: lease.check(epoch, self.clock())
        if not self.started:
            self.start()
        observed, events = self._observe(drain_events=True)
        targets = self._targets()
        gc = self.actuator.collect_garbage(observed, targets)
        known = self._known_nodes(observed, now, record=True)
        self.memory.note_events(events, observed, now)
        self._learn_interruptions(events, known, now)
        self._cool_down_on_events(events)
        if self.agents is not None:
            if self.actuator.fence is not None:  # syncing may evict pods: a deposed leader must not
                self.actuator.fence()
            self.agents.sync(now)
        jobs, job_events = self.source.observe(now, {n.id: n for n in known})
        for done in job_events.completed:
            if not is_replica(done):  # a service's replica ends when the service lets it go, not when work is done
                self.memory.record_runtime(done)
        served = self._serve(jobs, now)
        if served is not None:
            jobs = served.jobs
        nodes = with_idle_since(known, jobs, now)
        self.store.put_nodes(nodes, at=now)
        snapshot = self._snapshot(nodes, jobs, targets, now, served.warm_gpus if served is not None else {})
        result = self._plan(snapshot, jobs, now, self._next_plan_id())
        if job_events.failed:
            result = replace(result, holds=(*result.holds, *failed_job_holds(job_events.failed)))
        if served is not None and served.holds:
            result = replace(result, holds=(*result.holds, *served.holds))
        if self.actuator.fence is not None:
            self.actuator.fence()
        apply_job = self._job_applier(result, jobs, job_events, now)
        outcomes = self.actuator.execute(result, apply_job=apply_job, skip=self._down_groups())
        self._cool_down_on_failures(outcomes, now)
        self._record(result, outcomes, snapshot, job_events, now, served)
        return TickReport(
            at=now,
            plan=result,
            outcomes=outcomes,
            gc=gc,
            job_events=job_events,
            provider_events=events,
            snapshot=snapshot,
            services=served,
        )

    def _serve(self, jobs: Sequence[Job], now: datetime) -> ServiceTick | None:
        """This tick's services (`burst.service_loop`): their replicas set before the plan, so it places them."""
        if self.services is None:
            return None
        return self.services.tick(now, jobs, self.policies(), tuple(self.groups.values()), self.prices,
                                  self._warm_pools())

    def _job_applier(
        self, result: Plan, jobs: Sequence[Job], job_events: JobEvents, now: datetime
    ) -> Callable[[Action], None]:
        """How this tick applies a job action: to the job source, counting the work an eviction or requeue
        loses, then forwarded to the agents of the job's nodes."""
        acted_on = {a.target for a in result.actions if EXECUTORS[a.kind] is Executor.JOB_SOURCE}
        before = {j.id: j for j in jobs if j.id in acted_on} if acted_on else {}

        def apply(action: Action) -> None:
            self.source.apply(action, now)
            was = before.get(action.target)
            if action.kind in (ActionKind.EVICT_JOB, ActionKind.REQUEUE_JOB) and was is not None and was.active:
                back, lost = progress.requeue(was, now)
                if action.step == NOTICE_STEP:  # moved off a node being reclaimed: the interruption's loss
                    job_events.requeued.append((back, lost))
                    job_events.lost_nodes[back.id] = was.node_ids
                else:
                    job_events.evicted.append((back, lost))
            if self.agents is not None:
                self.agents.forward(action, was, now)

        return apply

    def _standby(self, now: datetime) -> TickReport:
        assert self.lease is not None
        state = self.lease.current()
        leader = f"{state.holder} (epoch {state.epoch}, lease until {state.expires_at:%H:%M:%S})" if state else "nobody"
        self.started = False  # on taking over, settle the journal first
        hold = Hold(subject="controller", reason=f"standby: {leader} leads; {self.lease.holder} waits", step="lease")
        return TickReport(at=now, plan=Plan(id=f"{self.cluster}-standby", at=now, actions=(), holds=(hold,)), standby=True)

    def preview(self) -> Plan:
        """The plan a tick would make now, without acting or writing anything (`burst plan`)."""
        now = self.clock()
        observed, _ = self._observe(drain_events=False)
        targets = self._targets()
        stored = self.store.node_ids()
        adoptable, _ = sort_unknown(observed, stored, targets, cluster=self.cluster, managed=self.groups)
        known = self._known_nodes(observed, now, record=False, also=adoptable)
        jobs = self.source.peek(now, {n.id: n for n in known})
        nodes = with_idle_since(known, jobs, now)
        seq = int(self.store.get_meta(MetaKey.PLAN_SEQ, "0") or "0") + 1
        return self._plan(self._snapshot(nodes, jobs, targets, now), jobs, now, f"{self.cluster}-dry-{seq:07d}")

    def _targets(self) -> dict[GroupId, int]:
        """Each group's target as its provider last reported it (this tick's, unless the provider is down)."""
        last = self.memory.targets
        return {gid: last[gid] for gid in self.groups if gid in last}

    def _snapshot(
        self, nodes: Sequence[Node], jobs: Sequence[Job], targets: Mapping[GroupId, int], now: datetime,
        service_warm_gpus: Mapping[str, float] | None = None,
    ) -> Snapshot:
        return Snapshot(
            groups=tuple(self.groups.values()),
            nodes=tuple([n for n in nodes if n.state in LIVE_NODE_STATES]),  # Node.live, read inline: every node each tick
            jobs=tuple(jobs),
            targets=targets,
            spend_month_usd=dict(self._spend_this_month(now)),
            warm_pools=self._warm_pools(),
            unavailable={**self.unavailable(now), **self._down_groups()},
            notices=dict(self.memory.notices),
            rebalances=dict(self.memory.rebalances),
            node_gpus=self.agents.node_gpus() if self.agents is not None else {},
            interruption_rates=self.interruptions.rates(self.groups.values()),
            runtimes=self.runtimes.runtimes(),
            service_warm_gpus=dict(service_warm_gpus or {}),
        )

    def _warm_pools(self) -> dict[GroupId, tuple[int, WarmState]]:
        """Each group's warm pool as its provider last reported it (this tick's, unless the provider is down)."""
        last = self.memory.pools
        return {gid: last[gid] for gid in self.groups if gid in last}

    def _cool_down_on_failures(self, outcomes: Sequence[Outcome], now: datetime) -> None:
        """Start a group's cooldown after this tick's launch there failed for capacity or quota (not a
        transient error, which the next tick retries)."""
        for o in outcomes:
            if not o.ok and o.action.kind is ActionKind.SCALE_UP and isinstance(o.error, COOLING_ERRORS):
                self._start_cooldown(o.action.target, now + timedelta(seconds=self.settings.launch_failure_cooldown_s),
                                     f"a launch failed at {now:%H:%M}: {o.detail}")

    def _cool_down_on_events(self, events: Sequence[ProviderEvent]) -> None:
        """Start cooldowns from a reported launch failure or a spot interruption, before this tick plans."""
        for e in events:
            if e.kind is EventKind.LAUNCH_FAILED:
                self._start_cooldown(e.group_id, e.at + timedelta(seconds=self.settings.launch_failure_cooldown_s),
                                     f"a launch failed at {e.at:%H:%M}: {e.detail}")
            elif e.kind is EventKind.INTERRUPTION and self.settings.interruption_cooldown_s > 0:
                self._start_cooldown(e.group_id, e.at + timedelta(seconds=self.settings.interruption_cooldown_s),
                                     f"a spot interruption at {e.at:%H:%M}")

    def _start_cooldown(self, group_id: GroupId, until: datetime, why: str) -> None:
        self.memory.start_cooldown(group_id, until, why)

    def _learn_interruptions(self, events: Sequence[ProviderEvent], known: Sequence[Node], now: datetime) -> None:
        """Count spot node-hours since the last tick (the spot nodes ready then) and this tick's interruption
        notices per group (`burst.planner.spot_rates`), and store them now and then."""
        exposure = self.memory.exposure
        hours = 0.0 if exposure.at is None else max(0.0, (now - exposure.at).total_seconds() / 3600)
        exposure.at = now
        before = exposure.ready_spot
        ready: dict[GroupId, int] = defaultdict(int)
        spot_groups = {gid for gid, group in self.groups.items() if group.capacity_type is CapacityType.SPOT}
        ready_state = NodeState.READY
        for node in known:
            if node.state is ready_state and node.group_id in spot_groups:
                ready[node.group_id] += 1
        exposure.ready_spot = dict(ready)
        interrupted = [e.group_id for e in events if e.kind is EventKind.INTERRUPTION and e.group_id in self.groups]
        if not before and not interrupted and not self.memory.interruptions.node_hours:
            return
        observed = self.memory.interruptions.observe(hours, before, interrupted)
        last = self._interruptions_saved_at
        if interrupted or last is None or (now - last).total_seconds() >= INTERRUPTIONS_SAVE_S:
            self.memory.learnt(observed)  # written with this tick's record
            self._interruptions_saved_at = now
        else:
            self.memory.interruptions = observed

    def unavailable(self, now: datetime) -> dict[GroupId, str]:
        """Groups cooling down at `now`, with why and until when."""
        return self.memory.unavailable(now)

    def cooldown_ends(self, now: datetime) -> list[datetime]:
        """When the cooldowns still running at `now` end (the simulator ticks then)."""
        return self.memory.cooldown_ends(now)

    def _spend_this_month(self, now: datetime) -> dict[TenantName, float]:
        """Month-to-date spend per tenant: read from the ledger once a month, then kept up as costs are recorded."""
        month = month_start(now)
        if self._month_spend is None or self._month_spend[0] != month:
            self._month_spend = (month, self.store.spend_by_tenant(since=month))
        return self._month_spend[1]

    def _plan(self, snapshot: Snapshot, jobs: Sequence[Job], now: datetime, plan_id: str) -> Plan:
        forecasts = self.forecaster(now, jobs) if self.forecaster else ()
        return plan(
            snapshot, forecasts, self.policies(), self.prices, now=now, ids=PlanIds(plan_id), pipeline=self.settings.pipeline
        )

    def drain_events(self) -> list[ProviderEvent]:
        """Read every provider's new events between ticks (the daemon wakes on notices); the next tick gets
        them as if it had polled them itself. Nothing is read by a daemon that does not lead."""
        if not self.started:
            return []
        out: list[ProviderEvent] = []
        for name, provider in self.providers.items():
            try:
                found = list(provider.poll_events())
            except Exception as exc:  # the next tick polls again and marks the provider down if it still fails
                log.debug("event poll between ticks failed", extra={"provider": name, "detail": str(exc)})
                continue
            self.memory.keep_events(self.store, name, found)
            out.extend(found)
        return out

    def _observe(self, *, drain_events: bool) -> tuple[dict[NodeId, Node], list[ProviderEvent]]:
        """Every provider's nodes and events; a provider whose reads fail is down for this tick (see `down`)."""
        observed: dict[NodeId, Node] = {}
        events: list[ProviderEvent] = []
        self.down = {}
        for name, provider in self.providers.items():
            try:
                provider.refresh()
                found = self.memory.keep_events(self.store, name, provider.poll_events()) if drain_events else []
                nodes = provider.nodes()
                states = {gid: provider.group_state(gid) for gid, p in self.group_provider.items() if p is provider}
            except Exception as exc:  # an outage of one backend must not stop the others
                self.down[name] = f"{type(exc).__name__}: {exc}"
                log.warning("provider down for this tick", extra={"provider": name, "detail": self.down[name]})
                continue
            if drain_events:
                self.memory.applied(name)
            events.extend(found)
            observed.update(nodes)
            self.memory.targets.update({gid: s.target for gid, s in states.items()})
            self.memory.pools.update({gid: s.warm_pool for gid, s in states.items()})
        return observed, events

    def _down_groups(self) -> dict[GroupId, str]:
        """Groups whose provider is down this tick, with why: nothing is launched there or sent to them."""
        out: dict[GroupId, str] = {}
        for gid, provider in self.group_provider.items():
            for name, why in self.down.items():
                if self.providers[name] is provider:
                    out[gid] = f"provider {name} is unreachable ({why}); acting on its last known state"
        return out

    def _known_nodes(
        self, observed: Mapping[NodeId, Node], now: datetime, *, record: bool, also: Sequence[Node] = ()
    ) -> list[Node]:
        """Observed nodes the store knows (GC has adopted what a target explains), with stored idle times.

        A known node missing from every listing is recorded as terminated.
        Unknown nodes (orphans inside their grace period) are left out of the
        snapshot, so no job lands on a node about to be collected.
        """
        stored = self.store.live_nodes_by_id()
        stored.update((n.id, n) for n in also)
        known: list[Node] = []
        for node_id, node in observed.items():
            before = stored.get(node_id)
            if before is None:
                continue
            if before.history is node.history and before.state is node.state and before.tags is node.tags:
                known.append(before)  # the same listing as last tick (a provider that reuses its objects)
                continue
            idle_since = before.idle_since if before.state is node.state else node.idle_since
            known.append(node if node.idle_since == idle_since else replace(node, idle_since=idle_since))
        down = self._down_groups()
        known.extend(n for n in stored.values() if n.id not in observed and n.group_id in down and n.live)
        gone = [
            replace(n, state=NodeState.TERMINATED)
            for n in stored.values()
            if n.id not in observed and n.group_id in self.groups and n.group_id not in down
        ]
        if gone and record:
            self.store.put_nodes(gone, at=now)
        return sorted(known, key=lambda n: n.id)

    def _next_plan_id(self) -> str:
        if self._plan_seq is None:
            self._plan_seq = int(self.store.get_meta(MetaKey.PLAN_SEQ, "0") or "0")
        seq = self._plan_seq + 1
        self.store.set_meta(MetaKey.PLAN_SEQ, str(seq))
        self._plan_seq = seq
        return f"{self.cluster}-{seq:07d}"

    # ------------------------------------------------------------ record

    def _record(
        self, result: Plan, outcomes: Sequence[Outcome], snapshot: Snapshot, job_events: JobEvents, now: datetime,
        served: ServiceTick | None = None,
    ) -> None:
        try:
            with self.store.transaction():
                self._record_tick(result, outcomes, snapshot, now, served.rows if served is not None else (),
                                  job_events)
                if served is not None:
                    self.store.set_meta(MetaKey.SERVICES, json.dumps([s.to_json() for s in served.statuses]))
                self.store.record_losses(job_losses(job_events, result, snapshot.jobs, self._group_of, now))
                self.memory.save(self.store)
        except BaseException:
            self._last_tick = None  # rolled back: the stored last tick is the one to count from
            self.memory.unsaved()
            raise

    def _group_of(self, node_id: NodeId) -> GroupId | None:
        node = self.store.get_node(node_id)
        return node.group_id if node is not None else None

    def _record_tick(self, result: Plan, outcomes: Sequence[Outcome], snapshot: Snapshot, now: datetime,
                     service_rows: Iterable[tuple[str, str, str, Mapping[str, Any]]] = (),
                     job_events: JobEvents | None = None) -> None:
        failed = {o.action.id: o.detail for o in outcomes if not o.ok}
        rows: list[tuple[str, str, str, Mapping[str, object]]] = list(service_rows)
        for action in result.actions:
            data = action.to_json()
            if action.id in failed:
                data["failed"] = failed[action.id]
            rows.append((action.target, action.kind.value, action.reason, data))
        for hold in result.holds:
            about: dict[str, object] = {"step": hold.step, "tenant": hold.tenant}
            if hold.job_ids:
                about["job_ids"] = list(hold.job_ids)
            rows.append((hold.subject, "hold", hold.reason, about))
        if self.settings.record_decisions:  # a plan without rows too: it ends the previous plan's holds
            self.store.record_decisions(result.id, now, rows)
        last = self._last_tick if self._last_tick is not None else self.store.get_meta(MetaKey.LAST_TICK)
        self._last_tick = now.isoformat()
        self.store.set_meta(MetaKey.LAST_TICK, self._last_tick)
        if self.settings.record_costs and last is not None:
            since = datetime.fromisoformat(last)
            seconds = (now - since).total_seconds()
            if seconds > 0:
                entries = attribute_costs(
                    self.groups, snapshot.nodes, snapshot.running_jobs, self.prices, seconds=seconds, at=now,
                    ended=ended_since(job_events, since),
                )
                self.store.record_costs(entries)
                spend = self._spend_this_month(now)
                for entry in entries:
                    if entry.tenant is not None:
                        spend[entry.tenant] = spend.get(entry.tenant, 0.0) + entry.usd
        last_demand = self.memory.demand_at
        if self.settings.record_demand and (last_demand is None or (now - last_demand).total_seconds() >= DEMAND_INTERVAL_S):
            self.store.record_demand(demand_points(snapshot.jobs, now))
            self.memory.demand_at = now


# ---------------------------------------------------------------- pure helpers


def ended_since(job_events: JobEvents | None, since: datetime) -> list[tuple[Job, tuple[NodeId, ...], float]]:
    """The jobs that completed since the last tick, each with the nodes it held and the seconds it held them
    after `since` (from its start, when later): what the cost ledger bills their tenants for the interval."""
    if job_events is None:
        return []
    out = []
    for job in job_events.completed:
        nodes, finished = job_events.ended_on.get(job.id, ((), since))
        began = max(since, job.started_at) if job.started_at is not None else since
        if nodes and finished > began:
            out.append((job, nodes, (finished - began).total_seconds()))
    return out

FAILED_JOB_STEP = "intake"
"""The decision log's step for jobs the loop failed because it cannot reason about them (`burst.bounds`)."""


def failed_job_holds(failed: Iterable[tuple[str, str, str]]) -> list[Hold]:
    """The holds that say why each of these jobs (id, tenant, why) was failed instead of planned."""
    holds = []
    for job_id, tenant, why in failed:
        log.warning("job %s of tenant %s failed: %s", job_id, tenant, why)
        holds.append(Hold(subject=f"job:{job_id}", reason=f"failed, not planned: {why}", step=FAILED_JOB_STEP,
                          tenant=tenant))
    return holds


def with_idle_since(nodes: Iterable[Node], jobs: Iterable[Job], now: datetime) -> list[Node]:
    """Nodes with `idle_since` decided: None while any running job holds them, kept while they stay idle.

    A ready node that just lost its last job becomes idle at `now`; one that
    was already idle keeps its earlier instant, so the cooldown counts from it.
    """
    busy: set[NodeId] = set()
    running_state, checkpointing_state = JobState.RUNNING, JobState.CHECKPOINTING
    for job in jobs:
        state = job.state
        if state is running_state or state is checkpointing_state:
            busy.update(job.node_ids)
    out = []
    for node in nodes:
        if node.id in busy:
            out.append(node if node.idle_since is None else replace(node, idle_since=None))
        elif node.state is NodeState.READY and node.idle_since is None:
            out.append(replace(node, idle_since=now))
        else:
            out.append(node)
    return out


COOLING_ERRORS = (InsufficientCapacity, QuotaExceeded)
"""Launch failures that start a cooldown (the typed error on the action's outcome)."""


def demand_points(jobs: Iterable[Job], now: datetime) -> list[DemandPoint]:
    """GPUs demanded per (tenant, GPU model) at `now`: running and pending, one point each."""
    running: dict[tuple[str, str], float] = defaultdict(float)
    pending: dict[tuple[str, str], float] = defaultdict(float)
    for job in jobs:
        key = (job.tenant, job.gpu_model or ANY_MODEL)
        if job.state in (JobState.RUNNING, JobState.CHECKPOINTING):
            running[key] += job.gpu_demand
        elif job.state is JobState.PENDING:
            pending[key] += job.gpu_demand
    return [
        DemandPoint(at=now, tenant=t, gpu_model=m, running_gpus=running.get((t, m), 0.0), pending_gpus=pending.get((t, m), 0.0))
        for t, m in sorted(set(running) | set(pending))
    ]


# ---------------------------------------------------------------- the loop


@dataclass
class LoopStats:
    """What `run_loop` did; `gave_up` says why it stopped on its own (ticks failing for too long), else None."""

    ticks: int = 0
    errors: int = 0
    gave_up: str | None = None


class FailingSince:
    """How long every tick has failed, and whether that is longer than `max_s` (None: never too long)."""

    def __init__(self, max_s: float | None) -> None:
        self.max_s = max_s
        self.since: datetime | None = None

    def after(self, ok: bool, now: datetime) -> str | None:
        """Record a tick that succeeded (`ok`) or failed at `now`; why the loop gives up, or None."""
        self.since = None if ok else self.since or now
        if self.since is None or self.max_s is None:
            return None
        failed_for = (now - self.since).total_seconds()
        if failed_for <= self.max_s:
            return None
        return (f"every tick failed for {failed_for:.0f} s since {self.since.isoformat()} "
                f"(loop_max_failing is {self.max_s:g} s); see the log for the errors")


def _tick_once(
    controller: Controller,
    stats: LoopStats,
    woken_by: tuple[WakeReason, ...],
    *,
    on_tick: Callable[[TickReport], None] | None,
    on_timing: Callable[[TickReport | None, float], None] | None,
    known_failure: Callable[[BaseException], str | None] | None,
) -> TickReport | None:
    """Run one tick and its callbacks; the report, or None when the controller raised (logged and counted: a
    known failure in one line, anything else with its traceback)."""
    started = time.perf_counter()
    report: TickReport | None = None
    try:
        report = controller.tick()
        report.woken_by = woken_by
        if on_timing is not None:
            on_timing(report, time.perf_counter() - started)
        if on_tick is not None:
            on_tick(report)
    except Exception as exc:
        stats.errors += 1
        known = known_failure(exc) if known_failure is not None else None
        if known is not None:  # an outage or a lost lease: one line, no traceback
            log.error("tick failed: %s; the next tick runs", known, extra={"tick": stats.ticks + 1})
        else:
            log.exception("tick failed; the next tick runs", extra={"tick": stats.ticks + 1})
        if report is None and on_timing is not None:
            try:
                on_timing(None, time.perf_counter() - started)
            except Exception:
                log.exception("tick listener failed; the next tick runs", extra={"tick": stats.ticks + 1})
    return report


def run_loop(
    controller: Controller,
    *,
    interval_s: float | Callable[[], float],
    wait: Callable[[float], None],
    stop: threading.Event,
    jitter_s: float | Callable[[], float] = 0.0,
    until: datetime | None = None,
    on_tick: Callable[[TickReport], None] | None = None,
    seed: int | None = None,
    on_timing: Callable[[TickReport | None, float], None] | None = None,
    wakeup: Wakeup | None = None,
    max_failing_s: float | None = None,
    known_failure: Callable[[BaseException], str | None] | None = None,
) -> LoopStats:
    """Tick until `stop` is set or the clock passes `until`; `wait(seconds)` paces the ticks.

    With `max_failing_s`, a loop whose ticks have all failed for longer than that (on the controller's clock,
    from the first failure after the last good tick) gives up: it returns with `gave_up` saying so, for the
    daemon to exit non-zero rather than run on without acting. `known_failure` names the failures that are
    not bugs (a store server down, a lease lost) in one line; those are logged without a traceback.

    A tick that raises, in the controller or in a callback, is logged with its
    traceback and counted; the loop goes on. `stop` is checked between ticks,
    so SIGTERM lets the current tick finish. `on_timing(report or None if the
    controller raised, seconds)` sees every tick (metrics), then `on_tick(report)`.
    `interval_s` and `jitter_s` may be callables, read before each wait (a reload re-paces the loop);
    each wait is the interval plus a uniform draw in [0, jitter] from a `seed`ed random source.
    With a `wakeup`, the interval is the heartbeat: events (a job submitted or finished, a node ready or
    lost, an interruption notice) end the wait after their batch window (`burst.wakeup`).
    """
    rng = random.Random(seed)
    stats = LoopStats()
    woken_by: tuple[WakeReason, ...] = ()
    failing = FailingSince(max_failing_s)
    while not stop.is_set():
        if until is not None and controller.clock() >= until:
            break
        report = _tick_once(controller, stats, woken_by, on_tick=on_tick, on_timing=on_timing,
                            known_failure=known_failure)
        stats.ticks += 1
        stats.gave_up = failing.after(report is not None, controller.clock())
        if stats.gave_up is not None:
            log.error("ticks kept failing; stopping", extra={"failing_since": str(failing.since)})
            break
        if stop.is_set():
            break
        interval = interval_s() if callable(interval_s) else interval_s
        jitter = jitter_s() if callable(jitter_s) else jitter_s
        heartbeat = interval + (rng.uniform(0.0, jitter) if jitter > 0 else 0.0)
        if wakeup is None:
            wait(heartbeat)
            continue
        if until is not None:  # ticks woken by events are off the heartbeat's grid: wake at `until`, not past it
            heartbeat = min(heartbeat, max(0.0, (until - controller.clock()).total_seconds()))
        try:
            wakeup.reset(controller.clock())
        except Exception:  # a watch that cannot read: this wait is the heartbeat alone
            log.exception("wake-up watches failed; waiting for the heartbeat", extra={"tick": stats.ticks})
            wait(heartbeat)
            woken_by = ()
            continue
        if report is not None and any(a.kind in (ActionKind.EVICT_JOB, ActionKind.REQUEUE_JOB) for a in report.plan.actions):
            wakeup.notify(WakeReason.JOB_REQUEUED, report.at)
        woken_by = wakeup.wait(heartbeat, wait, stop)
    return stats
