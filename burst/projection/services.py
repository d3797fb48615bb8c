"""A projection's inference services: their replicas over the horizon, from their request-rate forecasts.

A service's replicas are not batch work. In the history they are taken out
(`without_replicas`): their jobs leave the size and duration mix, and the
GPUs they held leave the demand series, so the batch forecast is of batch
demand alone. Over the horizon each service declared in a tenant's policy
is projected from its own request rate (`service_paths`):

1. its forecast: the daemon's `burst.service_forecasts.ServiceForecasts` on
   the config's rate source (`rates:` in burst.yaml; the quickstart's is
   synthetic), fitted on the 14 days of rates before the start, over the
   whole horizon, the service's declared events included;
2. path k's rate at each step is the forecast's u_k = (k + 0.5) / paths
   quantile there (`rate_at_level`): a path high at one step is high at all,
   so the paths span the band; the forecast it is sized with is the
   forecast scaled to that path (what the daemon's re-anchoring to the last
   hour does when the rate runs above or below the median);
3. the service planner (`burst.planner.services.plan_service`) decides at each
   step as the daemon's service loop does, on the rate of the step before (the
   rate it has just measured), the replicas it asked for at the step before
   counted ready (this projects cost, not serving);
4. each replica's life becomes a job of the service's tenant, its GPUs and
   model, not fault tolerant, at the highest priority, its id a replica's
   (`svc:TENANT/NAME:...`), so the simulated planner places it as the
   daemon's planner places replica jobs: on the steady tier first, moving
   fault-tolerant batch off it, bursting to the cloud otherwise.

A service with a spot share runs the planner's spot split where a spot group
of its GPU model is cheaper than on demand: that many of the replicas at each
step (its hedge included) are spot replicas (`Job.spot_replica`), which the
simulated planner puts on spot as the daemon's does, the rest on demand. A
service whose capacity is a token cost, whose GPU model no group
offers, or whose rate source has under a day of history before the start is
left out, with the reason (`ServicePaths.skipped`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from burst.bounds import MAX_PRIORITY
from burst.model import DemandPoint, Job, NodeGroup, Policy, RateForecast, Service
from burst.planner.service_sizing import replica_capacity_rps
from burst.planner.services import RecentNeeds, ServiceDecision, ServiceState, carried_counts, plan_service
from burst.service_forecasts import STEP_S, ServiceForecasts
from burst.service_loop import Fleet, GroupPrices, fleet_for
from burst.sim.tide import replica_lifetimes
from burst.workloads.rates import RateSource, RateUnavailable
from burst.workloads.replicas import is_replica, replica_stem
from forecasting.paths import quantile


def rate_at_level(forecast: RateForecast, level: float, k: int) -> float:
    """Decide the forecast's `level` quantile at its `k`-th instant: linear between the quantiles it gives,
    extended below the lowest along the line through the two lowest, at most the highest, never below 0."""
    levels = sorted(forecast.quantiles)
    values = [forecast.quantiles[q][k] for q in levels]
    if level >= levels[-1]:
        return max(0.0, values[-1])
    if level <= levels[0] and len(levels) > 1:
        slope = (values[1] - values[0]) / (levels[1] - levels[0])
        return max(0.0, values[0] - slope * (levels[0] - level))
    for lo, hi, a, b in zip(levels, levels[1:], values, values[1:], strict=False):
        if lo <= level <= hi:
            return max(0.0, a + (b - a) * (level - lo) / (hi - lo))
    return max(0.0, values[0])


def scaled_forecast(forecast: RateForecast, rates: Sequence[float]) -> RateForecast:
    """The forecast as a path running at `rates` would see it: every quantile at each instant scaled by that
    path's rate over the median there (the median itself where it is 0)."""
    median = forecast.quantiles[0.5] if 0.5 in forecast.quantiles else forecast.quantiles[min(forecast.quantiles)]
    ratios = [r / m if m > 0 else 1.0 for r, m in zip(rates, median, strict=True)]
    return RateForecast(at=forecast.at, events_included=forecast.events_included,
                        quantiles={q: tuple(v * s for v, s in zip(path, ratios, strict=True))
                                   for q, path in forecast.quantiles.items()})


def planned_replicas(service: Service, forecast: RateForecast, rates: Sequence[float], fleet: Fleet,
                     capacity_rps: float) -> list[tuple[datetime, int, int]]:
    """Decide the replicas to run at each instant of `forecast` when the rate over the step from there is
    `rates`, and how many of them on spot: the service planner's decision (`plan_service`: need, spot split
    and hedge, standby) on the rate of the step before (the daemon sizes on the rate it has just measured; the
    first step on its own), with the replicas asked for at the instant before counted ready and the forecast
    as given. (instant, replicas, spot replicas of them) per instant."""
    out: list[tuple[datetime, int, int]] = []
    recent = RecentNeeds()
    last: ServiceDecision | None = None
    for at, rate in zip(forecast.at, [*rates[:1], *rates[:-1]], strict=True):
        running = last.running if last is not None else 0
        spot = min(last.spot, running) if last is not None else 0
        carried = carried_counts(last, running, 0, spot, 0)
        decision = plan_service(ServiceState(
            service=service, now=at, observed_rps=rate, ready=running, starting=0, warm_nodes=0,
            capacity_rps=capacity_rps, replica_hour_usd=fleet.replica_hour_usd,
            spot_replica_hour_usd=fleet.spot_replica_hour_usd, boot_s=fleet.boot_s, wake_s=fleet.wake_s,
            forecast=forecast, standby=carried.standby, spot_ready=spot, hedge_running=carried.hedge_running,
            recent_need=recent.peak(at)))
        recent.add(at, decision.need)
        last = decision
        out.append((at, decision.running, min(decision.spot, decision.running)))
    return out


@dataclass(frozen=True)
class ServiceOutlook:
    """One service's projection: its forecast's median rate over the horizon, and per path its replica
    GPU-hours and most replicas at once."""

    tenant: str
    name: str
    mean_rps: float
    gpu_hours: tuple[float, ...]
    peak_replicas: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        """The service as `burst cost --json` writes it under `services`."""
        return {"tenant": self.tenant, "name": self.name, "forecast_mean_rps": round(self.mean_rps, 6),
                "replica_gpu_hours": {f"p{round(q * 100)}": round(quantile(list(self.gpu_hours), q), 4)
                                      for q in (0.1, 0.5, 0.9)},
                "peak_replicas_p50": quantile([float(p) for p in self.peak_replicas], 0.5)}


@dataclass(frozen=True)
class ServicePaths:
    """Every service's replica jobs per demand path, what each service came to, and the services left out."""

    jobs: tuple[tuple[Job, ...], ...] = ()
    outlooks: tuple[ServiceOutlook, ...] = ()
    skipped: tuple[str, ...] = ()


def service_paths(policies: Mapping[str, Policy], groups: Sequence[NodeGroup], prices: GroupPrices,
                  rates: RateSource, *, start: datetime, horizon_s: float, paths: int) -> ServicePaths:
    """Each declared service's replica jobs on each of `paths` paths over [start, start + horizon_s) (module
    doc), in tenant and service order."""
    jobs: list[list[Job]] = [[] for _ in range(paths)]
    outlooks: list[ServiceOutlook] = []
    skipped: list[str] = []
    forecasts = ServiceForecasts(rates, background=False, horizon_s=horizon_s + STEP_S)
    end = start + timedelta(seconds=horizon_s)
    for tenant in sorted(policies):
        for service in policies[tenant].services:
            label = f"{tenant}/{service.name}"
            fleet = fleet_for(service, groups, prices, {})
            if fleet is None:
                skipped.append(f"{label}: no node group offers its GPU model {service.gpu_model}")
                continue
            try:
                capacity = replica_capacity_rps(service)
                forecasts.observe(service, start, rates.rate(service, start))
            except ValueError:
                skipped.append(f"{label}: its capacity is a token cost, which needs the mean tokens per request")
                continue
            except RateUnavailable as exc:
                skipped.append(f"{label}: its rate could not be read ({exc})")
                continue
            forecast = forecasts.forecast(service, start)
            if forecast is None:
                why = forecasts.errors.get((tenant, service.name)) or "under a day of rate history before the start"
                skipped.append(f"{label}: no rate forecast ({why})")
                continue
            gpu_hours: list[float] = []
            peaks: list[int] = []
            for k in range(paths):
                level = (k + 0.5) / paths
                path = [rate_at_level(forecast, level, i) for i in range(len(forecast.at))]
                counts = planned_replicas(service, scaled_forecast(forecast, path), path, fleet, capacity)
                # the forecast's first instant is the start of the step holding `start`: nothing runs before it
                kinds = {False: [(max(at, start), n - spot) for at, n, spot in counts],
                         True: [(max(at, start), spot) for at, _, spot in counts]}
                stem = replica_stem(service)
                held_s = 0.0
                for on_spot, series in kinds.items():
                    lives = replica_lifetimes(0, series, start, end)
                    mark = "s" if on_spot else ""
                    jobs[k] += [Job(id=f"{stem}proj{k}-{mark}{i:06d}", tenant=tenant, gpus=service.gpus_per_replica,
                                    gpu_model=service.gpu_model, submitted_at=began, priority=MAX_PRIORITY,
                                    duration_s=(stop - began).total_seconds(), spot_replica=on_spot)
                                for i, (began, stop) in enumerate(lives)]
                    held_s += sum((stop - began).total_seconds() for began, stop in lives)
                gpu_hours.append(held_s / 3600.0 * service.gpus_per_replica)
                peaks.append(max((n for at, n, _ in counts if at < end), default=0))
            median = forecast.quantiles[0.5]
            inside = [v for at, v in zip(forecast.at, median, strict=True) if at < end]
            outlooks.append(ServiceOutlook(tenant, service.name, sum(inside) / max(1, len(inside)), tuple(gpu_hours),
                                           tuple(peaks)))
    return ServicePaths(tuple(tuple(j) for j in jobs), tuple(outlooks), tuple(skipped))


def without_replicas(points: Sequence[DemandPoint], replicas: Sequence[Job], ended: Mapping[str, datetime],
                     now: datetime) -> list[DemandPoint]:
    """The demand samples less the GPUs replica jobs held at each: a replica counts from its submission until
    it ended (`ended`, by job id; `now` for one still active), on its tenant's and GPU model's sample, pending
    before it started and running after; no figure goes below 0."""
    held: dict[tuple[str, str | None], list[tuple[datetime, datetime | None, datetime, float]]] = defaultdict(list)
    for job in replicas:
        if is_replica(job):
            held[(job.tenant, job.gpu_model)].append((job.submitted_at, job.started_at, ended.get(job.id, now),
                                                      job.gpu_demand))
    out: list[DemandPoint] = []
    for p in points:
        running = pending = 0.0
        for since, started, until, gpus in held.get((p.tenant, p.gpu_model), ()):
            if since <= p.at < until:
                if started is not None and started <= p.at:
                    running += gpus
                else:
                    pending += gpus
        if running or pending:
            p = DemandPoint(p.at, p.tenant, p.gpu_model, max(0.0, p.running_gpus - running),
                            max(0.0, p.pending_gpus - pending))
        out.append(p)
    return out


def replica_hours_line(outlooks: Sequence[ServiceOutlook]) -> str:
    """The assumption line that says how services were projected, and what each came to."""
    each = "; ".join(f"{o.tenant}/{o.name} {o.mean_rps:.4g} req/s median, "
                     f"{quantile(list(o.gpu_hours), 0.5):,.1f} replica GPU-h at P50" for o in outlooks)
    return ("services: each service's replicas from its request-rate forecast over the horizon, path k at the "
            "forecast's (k + 0.5) / paths quantile, sized at each step by the service planner as the daemon sizes "
            f"them, run on demand at the highest priority; their history is left out of the batch demand ({each})")


__all__ = ["ServiceOutlook", "ServicePaths", "planned_replicas", "rate_at_level",
           "replica_hours_line", "scaled_forecast", "service_paths", "without_replicas"]
