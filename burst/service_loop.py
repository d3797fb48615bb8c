"""The daemon's services: each tick, each service's rate read, forecast, planned and its replicas set.

`ServiceLoop.tick` runs inside `burst.reconcile.Controller.tick`, after the
jobs are observed and before the plan, so the replicas it starts are planned
in the same tick (placed on the steady tier first, bursting to the cloud;
`burst.workloads.replicas`). For each service of each tenant's policy:

1. the offered rate is read from the rate source (`burst.workloads.rates`);
   a source that fails keeps the service's replicas as they are (never a
   scale-in on a missing rate), counts the failure, and leaves a hold naming
   the query and the error; the tick itself goes on;
2. the rate joins the service's history, and the forecast over the next hour
   is taken (`burst.service_forecasts`);
3. the planner's decision (`burst.planner.services.plan_service`) is made
   on what the loop observes: ready and starting replicas, the prices and boot
   of the groups of the service's GPU model, the warm nodes held there;
4. the replica backend runs `decision.running` replicas (the need, and the
   standby ones the decision keeps as hot capacity), `decision.spot` of them
   on spot where the service allows a spot share, a spot group of its GPU
   model is cheaper than on demand, and the backend runs spot replicas
   (`runs_spot`: the embedded queue's replica jobs; a Kubernetes
   Deployment's pods go where its own node selector sends them);
5. the warm nodes the decision keeps (the forecast's spread, and the past
   surges a warm node is worth: `burst.planner.surges`, from the history
   `ServiceForecasts.surges` keeps) are summed per GPU model into
   `ServiceTick.warm_gpus`; the plan's hot-pool step holds at least that many
   warm GPUs in the model's pooled groups (`pools.sizing`).

A backend that refuses a service (`ReplicasRefused`: on Kubernetes, no
Deployment for it, or an autoscaler that owns its count) keeps its replicas
as they are and leaves a hold with the reason; so does each replica set the
backend finds for a service no policy declares (`undeclared`).

What each service saw and decided (`ServiceStatus`) is kept for `burst
services` and the metrics; a decision row goes to the decision log when the
replica count changes (`burst explain TENANT/NAME`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from burst.model import (
    CapacityType,
    GroupId,
    Hold,
    Job,
    NodeGroup,
    Policy,
    RateForecast,
    Service,
    ServiceEvent,
    TenantName,
    Tier,
    WarmState,
)
from burst.planner.service_sizing import forecast_level, replica_capacity_rps
from burst.planner.services import RecentNeeds, ServiceDecision, ServiceState, carried_counts, plan_service
from burst.service_forecasts import ServiceForecasts
from burst.workloads.rates import RateSource, RateUnavailable
from burst.workloads.replicas import ReplicaBackend, ReplicaCounts, ReplicasRefused
from pools.sizing import pool_capacity, pool_state

log = logging.getLogger("burst.services")

STEP = "services"
"""The decision log's step for services' decisions and holds."""


class GroupPrices(Protocol):
    """What the loop needs of the price catalog: a node's price per hour."""

    def group_price(self, group: NodeGroup) -> float: ...

    def standby_price(self, group: NodeGroup) -> float: ...


@dataclass(frozen=True)
class ServiceStatus:
    """One service at one tick: what the loop saw (`observed_rps`, `ready`, `starting`), forecast
    (`forecast_lead_rps`: the median's peak over the lead time; `forecast_hour_rps`: over the hour) and decided
    (`desired`: replicas to run; `standby` of them hot capacity, `spot` of them spot replicas), and why (`reason`; `error` when the rate could
    not be read, `forecast_error` when the forecast could not be made); `capacity_rps` is one replica's
    requests/s at 100%."""

    tenant: str
    name: str
    at: str
    desired: int
    ready: int
    starting: int
    standby: int
    warm_nodes: int
    observed_rps: float | None
    forecast_lead_rps: float | None
    forecast_hour_rps: float | None
    lead_s: float
    reason: str
    capacity_rps: float | None = None
    error: str | None = None
    forecast_error: str | None = None
    spot: int = 0

    @property
    def subject(self) -> str:
        """The decision log's subject for this service."""
        return service_subject(self.tenant, self.name)

    def to_json(self) -> dict[str, Any]:
        """The status as `burst services --json` prints it."""
        return asdict(self)


@dataclass
class ServiceTick:
    """What the service loop did in one tick: the jobs after its changes, its holds, decision rows, statuses and
    how many rate queries failed."""

    jobs: list[Job]
    holds: list[Hold] = field(default_factory=list)
    rows: list[tuple[str, str, str, Mapping[str, Any]]] = field(default_factory=list)
    statuses: list[ServiceStatus] = field(default_factory=list)
    rate_failures: int = 0
    warm_gpus: dict[str, float] = field(default_factory=dict)  # GPU model -> GPUs the plans keep warm


def service_subject(tenant: str, name: str) -> str:
    """The decision log's subject for a service."""
    return f"service:{tenant}/{name}"


@dataclass(frozen=True)
class Fleet:
    """What a service's replicas cost and how fast they come, from the groups of its GPU model."""

    replica_hour_usd: float
    boot_s: float
    wake_s: float
    warm_nodes: int
    warm_replica_hour_usd: float | None = None  # a replica's share of a warm node an hour; None: no pool there
    spot_replica_hour_usd: float | None = None  # a replica on the cheapest spot group an hour; None: no spot group


def fleet_for(service: Service, groups: Sequence[NodeGroup], prices: GroupPrices,
              warm_pools: Mapping[GroupId, tuple[int, WarmState]]) -> Fleet | None:
    """Decide the price and lead of a replica of `service` that bursts: the cheapest on-demand elastic group of
    its GPU model (per GPU, times `gpus_per_replica`), its boot, its warm pool's wake and size, and the price of
    one on the cheapest spot group of that model (None without one); None when no group of that model exists
    (the service cannot run)."""
    elastic = [g for g in groups if g.shape.gpu_model == service.gpu_model and g.tier is Tier.ELASTIC
               and g.capacity_type is CapacityType.ON_DEMAND]
    if not elastic:
        elastic = [g for g in groups if g.shape.gpu_model == service.gpu_model]
    if not elastic:
        return None
    group = min(elastic, key=lambda g: (prices.group_price(g) / g.gpus_per_node, g.id))
    per_gpu = prices.group_price(group) / group.gpus_per_node
    held = warm_pools.get(group.id)
    wake = min(group.warm_wake_latency_s.values(), default=group.boot_latency_s)
    warm_usd: float | None = None
    if pool_capacity(group) > 0:
        state, _ = pool_state(group)
        node = prices.group_price(group) if state is WarmState.RUNNING else prices.standby_price(group)
        warm_usd = node / group.gpus_per_node * service.gpus_per_replica
    spot = [prices.group_price(g) / g.gpus_per_node for g in groups
            if g.shape.gpu_model == service.gpu_model and g.capacity_type is CapacityType.SPOT]
    spot_usd = min(spot) * service.gpus_per_replica if spot else None
    return Fleet(per_gpu * service.gpus_per_replica, group.boot_latency_s, wake, held[0] if held else 0, warm_usd,
                 spot_usd)


def peak(forecast: RateForecast | None, now: datetime, seconds: float) -> float | None:
    """The forecast median's highest value over [now, now + seconds] (None without a forecast)."""
    if forecast is None or not forecast.at:
        return None
    level = forecast_level(0.5, forecast.quantiles)
    end = now + timedelta(seconds=seconds)
    values = [forecast.value_at(level, now)]
    values += [v for at, v in zip(forecast.at, forecast.quantiles[level], strict=True) if now < at <= end]
    return max(values)


class ServiceLoop:
    """Every tenant's services, one tick at a time (module doc)."""

    def __init__(self, rates: RateSource, backend: ReplicaBackend, forecasts: ServiceForecasts,
                 events: Callable[[Service], Sequence[ServiceEvent]] | None = None,
                 undeclared: Callable[[Set[tuple[str, str]], datetime], Sequence[tuple[str, str, str]]] | None = None,
                 ) -> None:
        self.rates = rates
        self.events = events  # events declared through the API, beside the policy's own
        self.undeclared = undeclared  # (tenant, name, why) of replica sets no policy declares, given the declared
        self.backend = backend
        self.forecasts = forecasts
        self.last: dict[tuple[str, str], ServiceDecision] = {}
        self.recent: dict[tuple[str, str], RecentNeeds] = {}
        self.statuses: dict[tuple[str, str], ServiceStatus] = {}
        self.rate_failures = 0

    def tick(self, now: datetime, jobs: Sequence[Job], policies: Mapping[TenantName, Policy],
             groups: Sequence[NodeGroup], prices: GroupPrices,
             warm_pools: Mapping[GroupId, tuple[int, WarmState]]) -> ServiceTick:
        """Read, forecast, plan and scale every service at `now` (module doc); the jobs as they are after."""
        out = ServiceTick(jobs=list(jobs))
        declared: set[tuple[str, str]] = set()
        for tenant in sorted(policies):
            for declared_service in policies[tenant].services:
                service = self._with_events(declared_service)
                declared.add((service.tenant, service.name))
                self._one(service, now, out, groups, prices, warm_pools)
        if self.undeclared is not None:
            for tenant, name, why in self.undeclared(declared, now):
                out.holds.append(Hold(subject=service_subject(tenant, name), reason=why, step=STEP, tenant=tenant))
        for gone in set(self.statuses) - declared:  # a service taken out of its policy keeps its replicas' jobs
            self.statuses.pop(gone)
            self.last.pop(gone, None)
            self.recent.pop(gone, None)
        return out

    def _with_events(self, service: Service) -> Service:
        """The service with the events declared through the API added to its policy's own (in start order)."""
        extra = self.events(service) if self.events is not None else ()
        if not extra:
            return service
        return replace(service, events=tuple(sorted((*service.events, *extra), key=lambda e: (e.start, e.end))))

    def _one(self, service: Service, now: datetime, out: ServiceTick, groups: Sequence[NodeGroup],
             prices: GroupPrices, warm_pools: Mapping[GroupId, tuple[int, WarmState]]) -> None:
        key = (service.tenant, service.name)
        subject = service_subject(*key)
        try:
            counts = self.backend.counts(service, out.jobs, now)
        except ReplicasRefused as exc:
            self._hold(out, service, now, exc.counts, exc.reason, error=exc.reason)
            return
        fleet = fleet_for(service, groups, prices, warm_pools)
        if fleet is None:
            why = f"no node group offers its GPU model {service.gpu_model}: the service cannot run"
            self._hold(out, service, now, counts, why, error=why)
            return
        try:
            capacity = replica_capacity_rps(service)
        except ValueError:
            why = ("its capacity is a token cost, which needs the mean tokens per request: declare requests_per_s "
                   "for the daemon (the simulator reads the tokens from the trace)")
            self._hold(out, service, now, counts, why, error=why)
            return
        try:
            rate = self.rates.rate(service, now)
        except RateUnavailable as exc:
            self.rate_failures += 1
            out.rate_failures += 1
            why = f"{exc}; keeping {counts.total} replicas (no scale-in without a rate)"
            log.warning("service rate unavailable", extra={"service": subject, "detail": str(exc)})
            self._hold(out, service, now, counts, why, error=str(exc))
            return
        self.forecasts.observe(service, now, rate)
        forecast = self.forecasts.forecast(service, now)
        decision = plan_service(self._state(service, now, rate, counts, fleet, forecast, capacity))
        previous = self.last.get(key)
        self.last[key] = decision
        self.recent.setdefault(key, RecentNeeds()).add(now, decision.need)
        if decision.warm_nodes:
            gpus = decision.warm_nodes * service.gpus_per_replica
            out.warm_gpus[service.gpu_model] = out.warm_gpus.get(service.gpu_model, 0.0) + gpus
        # a decision row when the plan changes (not when an HPA's count differs from it, in capacity mode)
        before = previous.running if previous is not None else counts.total
        try:
            out.jobs = self.backend.scale(service, decision.running, out.jobs, now, spot=decision.spot)
        except ReplicasRefused as exc:
            self._hold(out, service, now, exc.counts, exc.reason, error=exc.reason)
            return
        lead = fleet.boot_s + service.replica_start_s
        status = ServiceStatus(
            tenant=service.tenant, name=service.name, at=now.isoformat(), desired=decision.running,
            ready=counts.ready, starting=counts.starting, standby=decision.standby, warm_nodes=fleet.warm_nodes,
            observed_rps=rate, forecast_lead_rps=peak(forecast, now, lead), forecast_hour_rps=peak(forecast, now, 3600),
            lead_s=lead, reason="; ".join(decision.reasons), capacity_rps=capacity,
            forecast_error=self.forecasts.errors.get(key), spot=decision.spot if self.backend.runs_spot else 0)
        self.statuses[key] = status
        out.statuses.append(status)
        if decision.running != before:
            kind = "scale_service_up" if decision.running > before else "scale_service_down"
            out.rows.append((subject, kind, f"{before} -> {decision.running} replicas: {status.reason}",
                             {"step": STEP, "tenant": service.tenant, "from": before, "to": decision.running,
                              "observed_rps": rate, "forecast_lead_rps": status.forecast_lead_rps}))

    def _state(self, service: Service, now: datetime, rate: float, counts: ReplicaCounts, fleet: Fleet,
               forecast: RateForecast | None, capacity: float) -> ServiceState:
        key = (service.tenant, service.name)
        carried = carried_counts(self.last.get(key), counts.ready, counts.starting, counts.spot_ready,
                                 counts.spot_starting)
        return ServiceState(
            service=service, now=now, observed_rps=rate, ready=counts.ready, starting=counts.starting,
            warm_nodes=fleet.warm_nodes, capacity_rps=capacity, replica_hour_usd=fleet.replica_hour_usd,
            spot_replica_hour_usd=fleet.spot_replica_hour_usd if self.backend.runs_spot else None,
            boot_s=fleet.boot_s, wake_s=fleet.wake_s, forecast=forecast, standby=carried.standby,
            spot_ready=min(counts.spot_ready, counts.ready), hedge_running=carried.hedge_running,
            spot_lost=carried.spot_lost,
            recent_need=self.recent[key].peak(now) if key in self.recent else 0,
            surges=self.forecasts.surges(service, now, fleet.boot_s + service.replica_start_s),
            warm_node_hour_usd=fleet.warm_replica_hour_usd)

    def _hold(self, out: ServiceTick, service: Service, now: datetime, counts: ReplicaCounts, why: str, *,
              error: str) -> None:
        """Keep the service as it is, and say why in a hold and its status."""
        key = (service.tenant, service.name)
        out.holds.append(Hold(subject=service_subject(*key), reason=why, step=STEP, tenant=service.tenant))
        before = self.statuses.get(key)
        status = ServiceStatus(
            tenant=service.tenant, name=service.name, at=now.isoformat(), desired=before.desired if before else
            counts.total, ready=counts.ready, starting=counts.starting, standby=before.standby if before else 0,
            warm_nodes=before.warm_nodes if before else 0, observed_rps=None,
            forecast_lead_rps=before.forecast_lead_rps if before else None,
            forecast_hour_rps=before.forecast_hour_rps if before else None, lead_s=before.lead_s if before else 0.0,
            reason=why, capacity_rps=before.capacity_rps if before else None, error=error,
            spot=before.spot if before else 0)
        self.statuses[key] = status
        out.statuses.append(status)
