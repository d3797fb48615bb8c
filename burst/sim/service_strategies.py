"""The service controllers the simulator compares, each following its documented rules, and their registry.

- `burst`, `burst-no-forecast`, `burst-no-pool`: `burst.planner.services.plan_service` every 15 s tick (as often as
  the HPA syncs), with the forecast track (`burst.sim.service_forecasts`), without it, or with pools off;
  `burst-clairvoyant` (run on request, a reference) with the series' true future rates as its track. A node freed on scale-in
  that no warm pool wants is kept idle for one boot's time (the break-even rule: keeping it longer costs more
  than booting again).
- `reactive`: the Kubernetes HPA v2 with its defaults (`Hpa`): a 15 s sync, a 10% tolerance, scale-up at most
  max(100%, 4 pods) per 15 s, the highest recommendation of the last 300 s on scale-down; pods land on the
  Cluster Autoscaler's cold nodes, a node emptied stays 10 minutes (scale-down-unneeded-time) for reuse. One
  replica fills its node, so of the Cluster Autoscaler's scale-down rules (`burst.sim.strategies`: under 50%
  utilisation and its pods fit elsewhere, one non-empty node at a time) only the empty node's applies here.
- `reactive-overprovision`: `reactive` plus the Cluster Autoscaler's overprovisioning: placeholder pods for
  10% of the P95 replicas of the window's first week keep that many nodes booted, so a new replica only loads
  its model; a placeholder that a replica displaces reboots a node.
- `aws-predictive`: EC2 Auto Scaling predictive scaling with target tracking (`AwsPredictive`).
- `static-peak`: the replicas the window's peak needs, all the time; `static-p50`: the replicas the window's
  median needs (an on-prem tier with no cloud), never more.
- `oracle` (and `floor`): ready replicas equal to the need at every tick, each boot paid before it.
- the Karpenter rows: `reactive`'s HPA on Karpenter's provisioning (a node emptied goes at once);
  `reactive-hotpool`: `reactive` with a stopped warm pool of 10% of the peak's replicas.

Why a registry of its own: `burst.sim.registry`'s strategies build a planner pipeline over job traces
(`StrategyRun`) or a bound over jobs; a service strategy is a controller over one request-rate series. The
names are shared, so a batch run and a service run of the same name meet in one `--json` object.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from burst.model import Service
from burst.planner.services import RecentNeeds, ServiceDecision, ServiceState, carried_counts, plan_service
from burst.planner.surges import SurgeProfile
from burst.sim.service_engine import Controller, Observation, Replay, Target, observed_rates
from burst.sim.service_forecasts import ForecastTrack, clairvoyant_track, forecast_track
from burst.sim.service_setup import ServiceSetup
from burst.sim.service_traces import TICK_S, RateSeries

HPA_SYNC_S = 15.0
HPA_TOLERANCE = 0.1
HPA_UP_PODS = 4
HPA_UP_PERCENT = 1.0
HPA_DOWN_WINDOW_S = 300.0
CA_UNNEEDED_S = 600.0
OVERPROVISION_SHARE = 0.1
OVERPROVISION_WEEK_S = 7 * 86400
AWS_BUFFER_S = 300.0
AWS_MIN_HISTORY_S = 86400.0
AWS_OUT_MINUTES = 3
AWS_IN_MINUTES = 15
AWS_IN_SHARE = 0.9
BURST_PERIOD_S = float(TICK_S)
SURGE_DAYS = 14.0
"""Days of the series before now that burst's surge record covers (as its forecasts' training window)."""
"""burst plans every tick: `plan_service` is cheap, and a surge seen 45 s sooner is served 45 s sooner."""


class Hpa:
    """The Kubernetes HPA v2 with its defaults (module doc), on the Cluster Autoscaler's nodes."""

    def __init__(self, setup: ServiceSetup, initial: int, idle_ttl_s: float = CA_UNNEEDED_S) -> None:
        self.setup = setup
        self.idle_ttl_s = idle_ttl_s
        self.replicas = initial
        self.history: deque[tuple[float, int]] = deque()

    def recommend(self, obs: Observation) -> int:
        """The replicas the metric asks for, before stabilisation and limits: ceil(pods x ratio), where ratio is the
        observed rate per pod over the target per pod; unready pods count as 0 usage when scaling up; a ratio within
        the tolerance of 1 keeps the current count."""
        per_pod = self.setup.capacity_rps * self.setup.service.target_utilisation
        if obs.ready == 0:
            return max(self.replicas, math.ceil(obs.observed_rps / per_pod - 1e-9))
        ratio = obs.observed_rps / (obs.ready * per_pod)
        pods = obs.ready
        if ratio > 1 and obs.starting:
            pods = obs.ready + obs.starting
            ratio = obs.observed_rps / (pods * per_pod)
            if ratio <= 1:
                return self.replicas
        if abs(ratio - 1.0) <= HPA_TOLERANCE:
            return self.replicas
        return math.ceil(ratio * pods - 1e-9)

    def desired(self, obs: Observation) -> int:
        """The HPA's replicas now: the recommendation stabilised over `HPA_DOWN_WINDOW_S` on scale-down, limited
        to max(100%, 4 pods) more per sync on scale-up, within min and max replicas."""
        rec = self.recommend(obs)
        self.history.append((obs.t, rec))
        while self.history and self.history[0][0] < obs.t - HPA_DOWN_WINDOW_S:
            self.history.popleft()
        want = rec
        if want < self.replicas:
            want = min(self.replicas, max(r for _, r in self.history))
        limit = self.replicas + max(math.ceil(HPA_UP_PERCENT * self.replicas), HPA_UP_PODS)
        want = min(want, limit)
        service = self.setup.service
        self.replicas = max(service.min_replicas, 1, min(service.max_replicas, want))
        return self.replicas

    def decide(self, obs: Observation) -> Target | None:
        """Every sync (every tick): the HPA's desired replicas, all on-demand."""
        return Target(self.desired(obs))


class Overprovision(Hpa):
    """`Hpa` plus placeholder pods keeping `placeholders` nodes booted."""

    def __init__(self, setup: ServiceSetup, initial: int, placeholders: int) -> None:
        super().__init__(setup, initial)
        self.placeholders = placeholders

    def decide(self, obs: Observation) -> Target | None:
        """The HPA's replicas, and the placeholder nodes."""
        return Target(self.desired(obs), idle_nodes=self.placeholders)


class HotPoolHpa(Hpa):
    """`Hpa` with a fixed stopped warm pool (the batch `reactive-hotpool` row's service form)."""

    def __init__(self, setup: ServiceSetup, initial: int, warm: int) -> None:
        super().__init__(setup, initial)
        self.warm = warm

    def decide(self, obs: Observation) -> Target | None:
        """The HPA's replicas, and the warm pool."""
        return Target(self.desired(obs), warm_nodes=self.warm)


def overprovision_placeholders(setup: ServiceSetup) -> int:
    """Placeholder pods: ceil(10% of the P95 of the replicas the first week of the window needs)."""
    fine = setup.series.fine_counts()
    week = fine[: OVERPROVISION_WEEK_S // TICK_S].sum(axis=1) / TICK_S
    return math.ceil(OVERPROVISION_SHARE * float(np.percentile(setup.need(week), 95)) - 1e-9) if len(week) else 0


def hour_of_week_forecast(hourly: dict[datetime, float], hour: datetime, history_start: datetime) -> float | None:
    """AWS predictive scaling's stand-in forecast for the clock hour `hour`: the mean rate of the same hour of the
    week over the last two weeks (those of them in `hourly`); with under a week of history, of the same hour of
    the day over the days there are; None with under 24 h of history before `hour`."""
    if (hour - history_start).total_seconds() < AWS_MIN_HISTORY_S:
        return None
    weeks = [hourly[h] for h in (hour - timedelta(days=7), hour - timedelta(days=14)) if h in hourly]
    if weeks:
        return sum(weeks) / len(weeks)
    days = [hourly[h] for d in range(1, 7) if (h := hour - timedelta(days=d)) in hourly]
    return sum(days) / len(days) if days else None


def hourly_rates(setup: ServiceSetup) -> dict[datetime, float]:
    """The series' mean rate per complete clock hour (requests/s), history and window."""
    s = setup.series
    per = 3600 // s.step_s if s.step_s <= 3600 else 1
    out: dict[datetime, list[float]] = {}
    for k in range(s.end):
        at = s.at(k)
        out.setdefault(at.replace(minute=0, second=0, microsecond=0), []).append(float(s.counts[k]))
    return {h: sum(v) / 3600.0 for h, v in out.items() if len(v) >= per}


class AwsPredictive:
    """EC2 Auto Scaling predictive scaling with target tracking, as AWS recommends using them together.

    Predictive: for each clock hour, the capacity its forecast (`hour_of_week_forecast`) needs at the target,
    in force from `AWS_BUFFER_S` (SchedulingBufferTime) before the hour; it only raises the minimum. Target
    tracking, evaluated every minute: scale out to what the observed rate needs after `AWS_OUT_MINUTES`
    consecutive minutes above the target, scale in to it after `AWS_IN_MINUTES` below 90% of the target.
    Instances boot cold; instances removed on scale-in are terminated.
    """

    idle_ttl_s = 0.0

    def __init__(self, setup: ServiceSetup, initial: int) -> None:
        self.setup = setup
        self.hourly = hourly_rates(setup)
        self.history_start = setup.series.origin
        self.capacity = initial
        self.high = 0
        self.low = 0
        self.minimum = 0

    def predicted(self, at: datetime) -> int:
        """The predictive minimum in force at `at`: the forecast of the hour starting within the buffer, else
        of the current hour."""
        hour = (at + timedelta(seconds=AWS_BUFFER_S)).replace(minute=0, second=0, microsecond=0)
        rate = hour_of_week_forecast(self.hourly, hour, self.history_start)
        if rate is None:
            return 0
        return int(self.setup.need(rate))

    def decide(self, obs: Observation) -> Target | None:
        """Each minute: the predictive minimum and the target tracking alarms (class doc)."""
        if obs.t % 60:
            return None
        self.minimum = self.predicted(obs.at)
        need = int(self.setup.need(obs.observed_rps))
        per = self.setup.capacity_rps * self.setup.service.target_utilisation
        current = obs.ready + obs.starting
        self.high = self.high + 1 if obs.observed_rps > per * max(obs.ready, 0) else 0
        self.low = self.low + 1 if obs.observed_rps < AWS_IN_SHARE * per * current else 0
        if self.high >= AWS_OUT_MINUTES and need > self.capacity:
            self.capacity, self.high = need, 0
        elif self.low >= AWS_IN_MINUTES and need < self.capacity:
            self.capacity, self.low = need, 0
        service = self.setup.service
        self.capacity = max(service.min_replicas, min(service.max_replicas, self.capacity))
        return Target(min(service.max_replicas, max(self.capacity, self.minimum)))


class Static:
    """A fixed replica count, all the time."""

    idle_ttl_s = 0.0

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas

    def decide(self, obs: Observation) -> Target | None:
        """The fixed count."""
        return Target(self.replicas)


class Burst:
    """burst's service planner (`plan_service`) every `BURST_PERIOD_S`; `track` None plans without forecasts."""

    def __init__(self, setup: ServiceSetup, track: ForecastTrack | None, pools: bool) -> None:
        self.setup = setup
        self.track = track
        self.pools = pools
        self.idle_ttl_s = setup.boot_s
        self.last: ServiceDecision | None = None
        self.recent = RecentNeeds()
        self.surges: SurgeProfile | None = None
        self.surges_day: int | None = None

    def surge_profile(self, at: datetime) -> SurgeProfile:
        """The series' surges over the `SURGE_DAYS` of whole steps before `at`, remade once a simulated day (as
        the daemon remakes it with its daily history read)."""
        series = self.setup.series
        day = int((at - series.origin).total_seconds() // 86400)
        if self.surges is None or day != self.surges_day:
            k = int((at - series.origin).total_seconds() // series.step_s)
            first = max(0, k - int(SURGE_DAYS * 86400 // series.step_s))
            rates = series.counts[first:k] / series.step_s
            window = self.setup.boot_s + self.setup.service.replica_start_s
            self.surges, self.surges_day = SurgeProfile.of(rates, series.step_s, window), day
        return self.surges

    def state(self, obs: Observation) -> ServiceState:
        """What the planner is told: the fleet as the last decision counts it (the planner's module doc)."""
        carried = carried_counts(self.last, obs.ready, obs.starting, obs.spot_ready, obs.spot_starting)
        s = self.setup
        return ServiceState(
            service=s.service, now=obs.at, observed_rps=obs.observed_rps, ready=obs.ready, starting=obs.starting,
            warm_nodes=obs.warm_nodes, capacity_rps=s.capacity_rps, replica_hour_usd=s.replica_hour_usd,
            spot_replica_hour_usd=s.spot_usd_h * s.service.gpus_per_replica, boot_s=s.boot_s, wake_s=s.wake_s,
            forecast=self.track.at(obs.at) if self.track is not None else None, standby=carried.standby,
            spot_ready=min(obs.spot_ready, obs.ready), pools=self.pools, hedge_running=carried.hedge_running,
            spot_lost=carried.spot_lost,
            recent_need=self.recent.peak(obs.at), surges=self.surge_profile(obs.at) if self.pools else None,
            warm_node_hour_usd=s.warm_node_usd_h)  # a stopped node pays its disk, whatever its GPUs

    def decide(self, obs: Observation) -> Target | None:
        """Every `BURST_PERIOD_S`, the planner's decision as a target: every replica it wants running, spot ones apart."""
        if obs.t % BURST_PERIOD_S:
            return None
        decision = plan_service(self.state(obs))
        self.last = decision
        self.recent.add(obs.at, decision.need)
        return Target(decision.running, spot=decision.spot, warm_nodes=decision.warm_nodes,
                      warm_spot=decision.warm_spot)


def oracle_replay(setup: ServiceSetup) -> Replay:
    """The bound: serving replicas = the need of each minute's mean rate, each added replica's boot and model
    load paid in the ticks before it serves, nothing idle, all on demand."""
    per_tick = setup.series.fine_counts().sum(axis=1)
    per = 60 // TICK_S
    padded = np.concatenate([per_tick, np.zeros((-len(per_tick)) % per)])
    minute = padded.reshape(-1, per).mean(axis=1) / TICK_S
    need = np.repeat(setup.need(minute), per)[: len(per_tick)]
    lead = math.ceil((setup.boot_s + setup.service.replica_start_s) / TICK_S)
    rises = np.diff(need, prepend=need[:1]).clip(min=0)
    ahead = np.concatenate([rises[1:], np.zeros(lead)])
    cum = np.concatenate([[0], np.cumsum(ahead)])
    booting = cum[lead: lead + len(need)] - cum[: len(need)]
    zeros = np.zeros(len(need), dtype=int)
    return Replay(need, need + booting.astype(int), zeros, zeros, 0, int(rises.sum()))


def initial_replicas(setup: ServiceSetup) -> int:
    """The replicas every strategy starts with: what the rate observed at the window's start needs."""
    rates = observed_rates(setup, setup.series.fine_counts()[:1])
    return max(setup.service.min_replicas, int(setup.need(rates[0])) if len(rates) else 0)


def peak_replicas(setup: ServiceSetup) -> int:
    """The replicas the window's peak tick needs."""
    fine = setup.series.fine_counts()
    return int(setup.need(fine.sum(axis=1) / TICK_S).max()) if fine.size else 0


def p50_replicas(setup: ServiceSetup) -> int:
    """The replicas the window's median tick needs."""
    fine = setup.series.fine_counts()
    return max(1, int(np.percentile(setup.need(fine.sum(axis=1) / TICK_S), 50))) if fine.size else 1


@dataclass(frozen=True)
class Context:
    """What a strategy may read when it is built: the forecast track (burst only)."""

    track: ForecastTrack | None = None


Build = Callable[[ServiceSetup, Context], Controller]


@dataclass(frozen=True)
class ServiceStrategy:
    """One service strategy: a controller built per service, or a bound computed from the series; `initial`
    overrides the replicas it starts with; `track` makes the forecast track it reads (None: it reads none)."""

    name: str
    description: str
    build: Build | None = None
    bound: Callable[[ServiceSetup], Replay] | None = None
    initial: Callable[[ServiceSetup], int] | None = None
    track: Callable[[RateSeries, Service], ForecastTrack] | None = None


def _hpa(setup: ServiceSetup, _: Context) -> Controller:
    return Hpa(setup, initial_replicas(setup))


def _karpenter_hpa(setup: ServiceSetup, _: Context) -> Controller:
    return Hpa(setup, initial_replicas(setup), idle_ttl_s=0.0)


SERVICE_STRATEGIES: dict[str, ServiceStrategy] = {s.name: s for s in (
    ServiceStrategy("burst", "plan_service every 15 s with forecasts and hot pools",
                    build=lambda s, c: Burst(s, c.track, pools=True), track=forecast_track),
    ServiceStrategy("burst-no-forecast", "plan_service without forecasts",
                    build=lambda s, c: Burst(s, None, pools=True)),
    ServiceStrategy("burst-no-pool", "plan_service with forecasts, no warm nodes and no standby",
                    build=lambda s, c: Burst(s, c.track, pools=False), track=forecast_track),
    ServiceStrategy("burst-clairvoyant", "a reference run on request: plan_service with the series' true future "
                    "rates in place of forecasts", build=lambda s, c: Burst(s, c.track, pools=True),
                    track=clairvoyant_track),
    ServiceStrategy("reactive", "Kubernetes HPA v2 defaults on the Cluster Autoscaler's cold nodes", build=_hpa),
    ServiceStrategy("reactive-overprovision", "reactive plus CA overprovisioning placeholders (10% of week-1 P95)",
                    build=lambda s, c: Overprovision(s, initial_replicas(s), overprovision_placeholders(s))),
    ServiceStrategy("reactive-hotpool", "reactive with a stopped warm pool of 10% of the peak's replicas",
                    build=lambda s, c: HotPoolHpa(s, initial_replicas(s), math.ceil(0.1 * peak_replicas(s)))),
    ServiceStrategy("aws-predictive", "EC2 predictive scaling (hour-of-week mean) with target tracking",
                    build=lambda s, c: AwsPredictive(s, initial_replicas(s))),
    ServiceStrategy("karpenter", "reactive's HPA on Karpenter nodes (empty nodes removed at once)",
                    build=_karpenter_hpa),
    ServiceStrategy("karpenter-do-not-disrupt", "as karpenter (do-not-disrupt changes nothing for services)",
                    build=_karpenter_hpa),
    ServiceStrategy("karpenter-balanced", "as karpenter (consolidation has no partly empty replica node)",
                    build=_karpenter_hpa),
    ServiceStrategy("static-peak", "the window's peak replicas all the time",
                    build=lambda s, c: Static(peak_replicas(s)), initial=peak_replicas),
    ServiceStrategy("static-p50", "the window's median replicas all the time, no cloud",
                    build=lambda s, c: Static(p50_replicas(s)), initial=p50_replicas),
    ServiceStrategy("oracle", "ready replicas equal the need every tick, each boot paid before", bound=oracle_replay),
    ServiceStrategy("floor", "as oracle (whole replicas are already whole nodes)", bound=oracle_replay),
)}
"""Every service strategy by name (module doc)."""

SERVICE_DEFAULT = ("burst", "burst-no-forecast", "burst-no-pool", "reactive", "reactive-overprovision",
                   "aws-predictive", "static-peak", "oracle")
"""What a service run that names no strategy runs, in report order."""

NOT_RUN = {"burst-fixed-pool": "not yet run on services",
           "burst-periodic-only": "not yet run on services", "burst-victims-most-recent": "not yet run on services",
           "burst-victims-random": "not yet run on services"}
"""Batch strategies with no service form yet, and what a run says of them."""


def service_strategy(name: str) -> ServiceStrategy:
    """The service strategy `name`; an unknown one is a ValueError listing them."""
    found = SERVICE_STRATEGIES.get(name)
    if found is None:
        raise ValueError(f"unknown service strategy {name!r}: expected one of {', '.join(SERVICE_STRATEGIES)}")
    return found
