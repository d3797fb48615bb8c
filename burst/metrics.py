"""Prometheus metrics of the controller: what it sees, what it spends, how its ticks and provider calls go.

`ControllerMetrics.observe_tick` reads one `TickReport` (the loop calls it
after every tick); `ControllerMetrics.observe_ledger` adds the cost ledger's
newer tenant rows to the month-to-date usage gauges (the loop calls it after
every tick too; they start again from zero at each UTC month start, and a
restarted daemon reads the month so far back from the ledger); `MeteredProvider` wraps a provider to time every call and
count its errors. Everything lives in one `CollectorRegistry` per daemon (not
prometheus_client's global one), served on the API's `/metrics`.

Metric names (all prefixed `burst_`) follow Prometheus' conventions: base
units (seconds, not hours), counters end in `_total` and leave rates to
PromQL (`rate(burst_spend_usd_total[1h]) * 3600` is USD per hour), and the
month-to-date gauges say so in their names. Every replica exports its own;
`leader` tells them apart by role, Prometheus' `instance` label by name.

| metric | type | labels |
| --- | --- | --- |
| build_info | gauge (1) | version, python |
| leader | gauge | — (1 while this replica leads or runs without a lease, 0 on standby) |
| capacity_gpus | gauge | tier, group, state (ready / booting / warm) |
| demand_gpus | gauge | tenant, state (running / pending) |
| pending_jobs | gauge | tenant |
| queue_wait_seconds | histogram | tenant (observed when a job starts) |
| spend_usd_total | counter | tenant (USD charged to the tenant, from the ledger, while this replica led: the sum over replicas is the spend) |
| budget_remaining_usd | gauge | tenant (month budget less month-to-date spend) |
| month_to_date_gpu_seconds | gauge | tenant, line (cost line: steady / elastic_on_demand / elastic_spot), gpu_model (from the ledger) |
| month_to_date_spend_usd | gauge | tenant (USD charged to the tenant this UTC month, from the ledger) |
| interruptions_total | counter | group |
| lost_gpu_seconds_total | counter | tenant (GPU-seconds of work lost beyond the last checkpoint) |
| forecast_p50_gpus | gauge | tenant, gpu_model (the forecast at the plan's instant) |
| forecast_abs_error_gpus | gauge | tenant, gpu_model (abs(demand now - its forecast P50 now)) |
| forecast_backtest_p90_pinball_gpus | gauge | tenant, gpu_model, model (the serving model's P90 pinball loss in the backtest that chose it) |
| provider_call_seconds | histogram | provider, method |
| provider_errors_total | counter | provider, method, error |
| tick_seconds | histogram | — |
| ticks_total / tick_errors_total | counter | — |
| actions_total | counter | kind, outcome (ok / failed) |
| service_replicas | gauge | tenant, service, state (desired / ready / starting / standby / spot: of desired, on spot) |
| service_observed_requests_per_second | gauge | tenant, service (the offered rate read this tick) |
| service_forecast_requests_per_second | gauge | tenant, service, horizon (lead: the forecast median's peak over the lead time; hour) |
| service_unserved_requests_total | counter | tenant, service (offered rate above ready capacity at 100%, times the seconds since the last tick) |
| service_rate_query_failures_total | counter | tenant, service |
"""

from __future__ import annotations

import platform
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

import burst
from burst.model import (
    ActionKind,
    EventKind,
    Forecast,
    Job,
    JobState,
    Node,
    NodeGroup,
    NodeId,
    NodeState,
    Offering,
    Policy,
    ProviderEvent,
    TenantName,
    WarmState,
    month_start,
)
from burst.reconcile import TickReport
from burst.service_loop import ServiceStatus
from providers.base import GroupState, Provider

T = TypeVar("T")

class TenantLedger(Protocol):
    """What the usage gauges read from the store (`burst.state.Store.tenant_usage`)."""

    def tenant_usage(
        self, since: datetime, until: datetime | None = None, *, after_id: int = 0
    ) -> tuple[dict[tuple[str, str, str | None], tuple[float, float]], int]: ...


WAIT_BUCKETS = (5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200)
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
TICK_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)


class ControllerMetrics:
    """The controller's metrics in `registry` (see the module docstring for the names)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.capacity = Gauge("burst_capacity_gpus", "GPUs by tier, group and node state", ["tier", "group", "state"], registry=r)
        self.demand = Gauge("burst_demand_gpus", "GPUs demanded by tenant: running and pending", ["tenant", "state"], registry=r)
        self.pending = Gauge("burst_pending_jobs", "Jobs waiting for GPUs, by tenant", ["tenant"], registry=r)
        self.queue_wait = Histogram("burst_queue_wait_seconds", "Wait from submission to start, by tenant", ["tenant"],
                                    buckets=WAIT_BUCKETS, registry=r)
        self.build_info = Gauge("burst_build_info", "burst's version and Python (always 1)", ["version", "python"],
                                registry=r)
        self.build_info.labels(burst.__version__, platform.python_version()).set(1)
        self.leader = Gauge("burst_leader", "1 while this replica leads (or runs without a lease), 0 on standby",
                            registry=r)
        self.spend = Counter("burst_spend_usd", "USD charged to each tenant (from the cost ledger), since start",
                             ["tenant"], registry=r)
        self.budget_left = Gauge("burst_budget_remaining_usd", "Monthly budget less month-to-date spend", ["tenant"], registry=r)
        self.interruptions = Counter("burst_interruptions", "Spot interruption notices, by group", ["group"], registry=r)
        self.lost = Counter("burst_lost_gpu_seconds", "GPU-seconds of work lost beyond the last checkpoint", ["tenant"],
                            registry=r)
        self.forecast = Gauge("burst_forecast_p50_gpus", "Forecast P50 demand now", ["tenant", "gpu_model"], registry=r)
        self.forecast_score = Gauge("burst_forecast_backtest_p90_pinball_gpus",
                                    "The serving model's P90 pinball loss in the backtest that chose it",
                                    ["tenant", "gpu_model", "model"], registry=r)
        self.forecast_error = Gauge("burst_forecast_abs_error_gpus", "abs(demand now - forecast P50 now)",
                                    ["tenant", "gpu_model"], registry=r)
        self.call_seconds = Histogram("burst_provider_call_seconds", "Provider call latency", ["provider", "method"],
                                      buckets=CALL_BUCKETS, registry=r)
        self.call_errors = Counter("burst_provider_errors", "Provider calls that raised", ["provider", "method", "error"], registry=r)
        self.tick_seconds = Histogram("burst_tick_seconds", "Duration of one reconcile tick", buckets=TICK_BUCKETS, registry=r)
        self.ticks = Counter("burst_ticks", "Reconcile ticks run", registry=r)
        self.tick_errors = Counter("burst_tick_errors", "Reconcile ticks that raised", registry=r)
        self.actions = Counter("burst_actions", "Provider actions executed, by kind and outcome", ["kind", "outcome"], registry=r)
        self.gpu_seconds_month = Gauge("burst_month_to_date_gpu_seconds", "GPU-seconds tenants' jobs held this UTC "
                                       "month, by cost line and GPU model (from the cost ledger)",
                                       ["tenant", "line", "gpu_model"], registry=r)
        self.spend_month = Gauge("burst_month_to_date_spend_usd", "USD charged to each tenant this UTC month (from the "
                                 "cost ledger)", ["tenant"], registry=r)
        self.service_replicas = Gauge("burst_service_replicas", "Replicas of each service, by state (desired / ready "
                                      "/ starting / standby / spot)", ["tenant", "service", "state"], registry=r)
        self.service_rate = Gauge("burst_service_observed_requests_per_second", "The offered request rate read this "
                                  "tick", ["tenant", "service"], registry=r)
        self.service_forecast = Gauge("burst_service_forecast_requests_per_second", "The forecast median's peak over "
                                      "the lead time (horizon=lead) and the next hour (horizon=hour)",
                                      ["tenant", "service", "horizon"], registry=r)
        self.service_unserved = Counter("burst_service_unserved_requests", "Requests offered above ready capacity "
                                        "(at 100%), counted between ticks", ["tenant", "service"], registry=r)
        self.service_rate_failures = Counter("burst_service_rate_query_failures", "Rate queries that failed",
                                             ["tenant", "service"], registry=r)
        self._service_at: dict[tuple[str, str], datetime] = {}
        self._spend_started = False
        self._known_tenants: set[str] = set()
        self._ledger_month: datetime | None = None
        self._ledger_cursor = 0
        self._month_gh: dict[tuple[str, str, str], float] = defaultdict(float)
        self._month_usd: dict[str, float] = defaultdict(float)

    def observe_tick(
        self,
        report: TickReport,
        *,
        seconds: float,
        policies: Mapping[TenantName, Policy] | None = None,
        forecasts: Sequence[Forecast] = (),
        spend_month_usd: Mapping[TenantName, float] | None = None,
        prices: Callable[[NodeGroup], float] | None = None,
    ) -> None:
        """Update every tick-driven metric from one tick's report."""
        self.ticks.inc()
        self.tick_seconds.observe(seconds)
        self.leader.set(0 if report.standby else 1)
        snapshot = report.snapshot
        if snapshot is not None:
            self._capacity(snapshot.groups, snapshot.nodes)
            self._demand(snapshot.jobs)
            self._forecasts(forecasts, snapshot.jobs, report.at)
        if snapshot is not None:
            placed = {a.target for a in report.plan.actions if a.kind is ActionKind.PLACE_JOB}
            for job in snapshot.jobs:
                if job.id in placed and job.state is JobState.PENDING:
                    self.queue_wait.labels(job.tenant).observe(max(0.0, (report.at - job.submitted_at).total_seconds()))
        for job, lost_s in [*report.job_events.requeued, *report.job_events.evicted]:
            self.lost.labels(job.tenant).inc(lost_s * job.gpu_demand)
        self._events(report.provider_events)
        if report.services is not None:
            self._services(report.services.statuses)
        for outcome in report.outcomes:
            self.actions.labels(outcome.action.kind.value, "ok" if outcome.ok else "failed").inc()
        for tenant, policy in (policies or {}).items():
            cap = policy.budget.usd_per_month
            if cap is not None:
                self.budget_left.labels(tenant).set(cap - (spend_month_usd or {}).get(tenant, 0.0))

    def _services(self, statuses: Iterable[ServiceStatus]) -> None:
        """Each service's replicas, rate and forecast; requests above ready capacity since its last tick."""
        for st in statuses:
            key = (st.tenant, st.name)
            for state, count in (("desired", st.desired), ("ready", st.ready), ("starting", st.starting),
                                 ("standby", st.standby), ("spot", st.spot)):
                self.service_replicas.labels(st.tenant, st.name, state).set(count)
            at = datetime.fromisoformat(st.at)
            last, self._service_at[key] = self._service_at.get(key), at
            if st.error is not None and st.observed_rps is None:
                self.service_rate_failures.labels(st.tenant, st.name).inc()
                continue
            self.service_rate_failures.labels(st.tenant, st.name)
            rate = st.observed_rps or 0.0
            self.service_rate.labels(st.tenant, st.name).set(rate)
            for horizon, value in (("lead", st.forecast_lead_rps), ("hour", st.forecast_hour_rps)):
                if value is not None:
                    self.service_forecast.labels(st.tenant, st.name, horizon).set(value)
            unserved = self.service_unserved.labels(st.tenant, st.name)
            if last is not None and st.capacity_rps is not None and at > last:
                unserved.inc(max(0.0, rate - st.ready * st.capacity_rps) * (at - last).total_seconds())

    def observe_ledger(
        self, ledger: TenantLedger, at: datetime, groups: Iterable[NodeGroup] = (), *, leading: bool = True
    ) -> None:
        """Add the ledger's tenant rows newer than the last call to the month-to-date usage gauges.

        `groups` name each row's GPU model (rows of groups not among them count
        under ``unknown``). At the first call of a UTC month the totals start
        again from zero (the last month's label sets are removed), and the
        month so far is read back from the ledger. The spend counter counts
        the new rows only while `leading`, so each row is counted by one replica.
        """
        month = month_start(at)
        if month != self._ledger_month:
            self.gpu_seconds_month.clear()
            self.spend_month.clear()
            self._month_gh.clear()
            self._month_usd.clear()
            self._ledger_month, self._ledger_cursor = month, 0
        model = {g.id: g.shape.gpu_model for g in groups}
        rows, self._ledger_cursor = ledger.tenant_usage(month, after_id=self._ledger_cursor)
        for (tenant, line, group_id), (gpu_hours, usd) in rows.items():
            self._month_gh[(tenant, line, model.get(group_id or "", "unknown"))] += gpu_hours
            self._month_usd[tenant] += usd
            if self._spend_started and leading:  # the month so far, read back at start, was not spent here
                self.spend.labels(tenant).inc(usd)
            else:
                self.spend.labels(tenant)
        self._spend_started = True
        for labels, value in self._month_gh.items():
            self.gpu_seconds_month.labels(*labels).set(value * 3600.0)
        for tenant, value in self._month_usd.items():
            self.spend_month.labels(tenant).set(value)

    def tick_failed(self, seconds: float) -> None:
        """Count a tick that raised."""
        self.ticks.inc()
        self.tick_errors.inc()
        self.tick_seconds.observe(seconds)

    def _capacity(self, groups: Sequence[NodeGroup], nodes: Sequence[Node]) -> None:
        counts: dict[tuple[str, str, str], float] = {}
        for g in groups:
            for state in ("ready", "booting", "warm"):
                counts[(g.tier.value, g.id, state)] = 0.0
        tier_of = {g.id: g.tier.value for g in groups}
        for n in nodes:
            state = {NodeState.READY: "ready", NodeState.WARM: "warm"}.get(
                n.state, "booting" if n.state in (NodeState.REQUESTED, NodeState.BOOTING, NodeState.WAKING) else ""
            )
            if state and n.group_id in tier_of:
                counts[(tier_of[n.group_id], n.group_id, state)] += n.gpus
        for labels, value in counts.items():
            self.capacity.labels(*labels).set(value)

    def _demand(self, jobs: Sequence[Job]) -> None:
        running: dict[str, float] = defaultdict(float)
        pending: dict[str, float] = defaultdict(float)
        count: dict[str, int] = defaultdict(int)
        for job in jobs:
            if job.state is JobState.PENDING:
                pending[job.tenant] += job.gpu_demand
                count[job.tenant] += 1
            elif job.state in (JobState.RUNNING, JobState.CHECKPOINTING):
                running[job.tenant] += job.gpu_demand
        for tenant in set(running) | set(pending) | set(self._known_tenants):
            self.demand.labels(tenant, "running").set(running.get(tenant, 0.0))
            self.demand.labels(tenant, "pending").set(pending.get(tenant, 0.0))
            self.pending.labels(tenant).set(count.get(tenant, 0))
        self._known_tenants = set(running) | set(pending) | set(self._known_tenants)

    def _forecasts(self, forecasts: Sequence[Forecast], jobs: Sequence[Job], now: datetime) -> None:
        demand: dict[tuple[str, str], float] = defaultdict(float)
        for job in jobs:
            if job.active:
                demand[(job.tenant, job.gpu_model or "any")] += job.gpu_demand
        if forecasts:
            self.forecast_score.clear()  # a series whose model changed keeps no stale label set
        for f in forecasts:
            if f.backtest_p90_pinball is not None:
                self.forecast_score.labels(f.tenant, f.gpu_model, f.model.split(" (")[0]).set(f.backtest_p90_pinball)
            p50 = f.now_value(0.5, now)
            self.forecast.labels(f.tenant, f.gpu_model).set(p50)
            self.forecast_error.labels(f.tenant, f.gpu_model).set(abs(demand.get((f.tenant, f.gpu_model), 0.0) - p50))

    def _events(self, events: Sequence[ProviderEvent]) -> None:
        for e in events:
            if e.kind is EventKind.INTERRUPTION:
                self.interruptions.labels(e.group_id).inc()


class MeteredProvider:
    """A provider whose every call is timed and whose errors are counted (same contract as the one it wraps)."""

    def __init__(self, inner: Provider, metrics: ControllerMetrics) -> None:
        self.inner = inner
        self.metrics = metrics
        self.name = inner.name

    def _call(self, method: str, fn: Callable[[], T]) -> T:
        start = time.perf_counter()
        try:
            return fn()
        except Exception as exc:
            self.metrics.call_errors.labels(self.name, method, type(exc).__name__).inc()
            raise
        finally:
            self.metrics.call_seconds.labels(self.name, method).observe(time.perf_counter() - start)

    def node_groups(self) -> Sequence[NodeGroup]:
        return self._call("node_groups", self.inner.node_groups)

    def offerings(self, group_id: str) -> Sequence[Offering]:
        return self._call("offerings", lambda: self.inner.offerings(group_id))

    def nodes(self) -> Mapping[NodeId, Node]:
        return self._call("nodes", self.inner.nodes)

    def group_state(self, group_id: str) -> GroupState:
        return self._call("group_state", lambda: self.inner.group_state(group_id))

    def set_target(self, group_id: str, size: int, *, key: str) -> None:
        self._call("set_target", lambda: self.inner.set_target(group_id, size, key=key))

    def set_warm_pool(self, group_id: str, size: int, state: WarmState, *, key: str) -> None:
        self._call("set_warm_pool", lambda: self.inner.set_warm_pool(group_id, size, state, key=key))

    def terminate(self, node_ids: Sequence[NodeId], *, key: str) -> None:
        self._call("terminate", lambda: self.inner.terminate(node_ids, key=key))

    def poll_events(self) -> Sequence[ProviderEvent]:
        return self._call("poll_events", self.inner.poll_events)

    def refresh(self) -> None:
        self._call("refresh", self.inner.refresh)
