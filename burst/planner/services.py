"""The planner's decision for one inference service: `plan_service(state) -> ServiceDecision`.

A controller calls it every tick (the simulator every 15 s) with what it observes of a
service (`ServiceState`); the decision says how many replicas should serve or
be starting, how many of them run on spot, and the hot capacity kept beside
them. Pure like the rest of the planner, and cheap: a simulated month calls it
tens of thousands of times per strategy. The sizing arithmetic is
`burst.planner.service_sizing`; this module orders it into rules, each a
function below that writes one line of `reasons` naming itself and its numbers:

| rule | sets | from |
| --- | --- | --- |
| now | the need now | the observed rate, scaled by a declared event that starts after it was measured |
| ahead | the need over the lead time | peaks over [now, now + lead]: the median at the target, the cost-chosen quantile at full capacity |
| replicas | `replicas` | max(now, ahead), within min_replicas .. max_replicas |
| scale-in | `replicas` | when serving + starting exceed it: down only when both needs, and every need of the last 120 s, are below; 10% a tick |
| hot capacity | `warm_nodes`, `standby` | the forecast's spread over the cold lead above `replicas`, read at the quantile a warm node is worth (`margin_quantile`; the top one for standby replicas); warm nodes also for the past surges they are worth (`burst.planner.surges`) |
| spot | `spot`, `hedge`, `fallback`, `warm_spot` | the service's spot share, a 10% hedge (SkyServe's SpotHedge); the same share of the warm nodes |

How a caller counts a decision: it keeps `replicas` serving or starting, of
which `spot - hedge` on spot and `replicas - (spot - hedge)` on demand; beyond
them `hedge` more spot replicas, `fallback` on-demand ones standing for spot
replicas lost to a notice, and `standby` running on-demand replicas as hot
capacity (`ServiceDecision.running` is the sum); and `warm_nodes` stopped
nodes, `warm_spot` of them stopped spot nodes that a new spot replica wakes. It turns surplus serving replicas into standby ones before it stops
any, and promotes standby ones first when `replicas` rises. On the next tick
it reports the standby ones as `standby` and the hedge and fallback ones still
running as `hedge_running`, so that they are not counted against the need.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from burst.model import RateForecast, Service
from burst.planner.service_sizing import (
    ClampedReplicas,
    clamp_replicas,
    event_multiplier,
    forecast_level,
    forecast_quantile,
    lead_time_s,
    may_scale_in,
    needs_standby,
    replicas_for_rate,
)
from burst.planner.surges import SurgeProfile, warm_nodes_for_surges

OBSERVED_WINDOW = timedelta(seconds=60)
"""The span the observed rate is measured over: the requests in [now - 60 s, now) / 60."""
SURGE_MISS_RATIO = 0.5
"""The forecast missed a surge when its median at its first step is below this share of the rate observed now."""
SCALE_IN_STEP_SHARE = 0.1
"""Scale-in releases at most max(1, ceil(this share of the replicas serving or starting)) a tick: a fall of the
need is followed over a few minutes, so one quiet minute does not release what the next one needs back."""
NO_FORECAST_MARGIN_SHARE = 0.1
"""Without a forecast the hot capacity is this share of `replicas`, at least 1 while the service has demand:
the Cluster Autoscaler's overprovisioning share, since there is no spread to size it from."""
STABILISATION_S = 120.0
"""Scale-in keeps the highest need of the decisions over this span: two observed minutes, so a need that dips
in one minute's noisy rate is confirmed by the next independent minute before a replica goes (the Kubernetes
HPA's 300 s window, measured on the services benchmark, held replicas long after spikes: +6% cost on a tweet
series for 4% fewer unserved requests)."""
SPOT_HEDGE_SHARE = 0.1
"""Spot replicas run beyond the spot part of the need: ceil(this share of it), so that one preemption in ten
leaves the need served while its replacement starts (SpotHedge's overprovisioning)."""
_WHOLE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class ServiceState:
    """What the controller observes of one service at `now`.

    `observed_rps` is the requests in [now - 60 s, now) / 60. `ready` replicas
    serve (of them `standby` kept beyond the need as hot capacity and
    `spot_ready` on spot); `starting` replicas wait for their node to boot or
    wake or for their model to load. `warm_nodes` stopped, preconfigured nodes
    are held for the service. `capacity_rps` is one replica's capacity at 100%
    (`service_sizing.replica_capacity_rps`); prices are per replica-hour
    (`spot_replica_hour_usd` None: no spot group offered); `boot_s` a cold
    node's boot, `wake_s` a warm node's wake. `forecast` None sizes from the
    observed rate alone; `pools` False keeps no warm nodes and no standby.
    `hedge_running` counts the replicas of `ready` + `starting` run beyond the
    need (the last decision's `hedge` + `fallback` still running); `spot_lost`
    the spot replicas lost to a notice or a failed launch whose spot
    replacement does not serve yet. `recent_need` is the highest need
    (`ServiceDecision.need`) the caller's decisions gave over the last
    `STABILISATION_S` (`RecentNeeds` keeps it): scale-in keeps that many.
    `surges` is the service's record of past surges and `warm_node_hour_usd`
    a stopped warm node's price: with both, the warm pool also covers the
    surges that record makes worth a warm node (`burst.planner.surges`).
    """

    service: Service
    now: datetime
    observed_rps: float
    ready: int
    starting: int
    warm_nodes: int
    capacity_rps: float
    replica_hour_usd: float
    spot_replica_hour_usd: float | None
    boot_s: float
    wake_s: float
    forecast: RateForecast | None
    standby: int = 0
    spot_ready: int = 0
    pools: bool = True
    hedge_running: int = 0
    spot_lost: int = 0
    recent_need: int = 0
    surges: SurgeProfile | None = None
    warm_node_hour_usd: float | None = None

    def __post_init__(self) -> None:
        if self.now.tzinfo is None:
            raise ValueError(f"service {self.service.name}: now must be timezone-aware (UTC)")
        counts = (self.ready, self.starting, self.warm_nodes, self.standby, self.spot_ready, self.hedge_running,
                  self.spot_lost)
        if min(counts) < 0:
            raise ValueError(f"service {self.service.name}: replica and node counts must be >= 0")
        if self.standby > self.ready or self.spot_ready > self.ready:
            raise ValueError(f"service {self.service.name}: standby and spot replicas are counted within ready")
        if not (math.isfinite(self.observed_rps) and self.observed_rps >= 0):
            raise ValueError(f"service {self.service.name}: observed rate must be a finite number >= 0")
        if not (math.isfinite(self.capacity_rps) and self.capacity_rps > 0):
            raise ValueError(f"service {self.service.name}: capacity per replica must be a finite number > 0")
        if self.replica_hour_usd < 0 or (self.spot_replica_hour_usd or 0.0) < 0 or self.boot_s < 0 or self.wake_s < 0:
            raise ValueError(f"service {self.service.name}: prices and durations must be >= 0")


@dataclass(frozen=True)
class ServiceDecision:
    """What one service should run (see the module docstring for how a caller counts it).

    `replicas`: serving or starting now (on-demand + spot), within min/max;
    `spot`: of them on spot, plus `hedge` spot replicas beyond them; `standby`:
    running replicas kept beyond `replicas` as hot capacity; `warm_nodes`:
    stopped warm nodes to keep; `fallback`: on-demand replicas beyond
    `replicas` standing for spot replicas lost to a notice; `warm_spot`: of
    `warm_nodes`, the stopped spot nodes; `need`: max(now,
    ahead) within the bounds, before scale-in held any back (what
    `RecentNeeds` keeps); `reasons`: one line per rule, naming it and its
    numbers.
    """

    replicas: int
    spot: int
    standby: int
    warm_nodes: int
    reasons: tuple[str, ...]
    hedge: int = 0
    fallback: int = 0
    need: int = 0
    warm_spot: int = 0

    @property
    def on_demand(self) -> int:
        """On-demand replicas serving the need or standing in for lost spot ones (standby ones apart)."""
        return self.replicas - (self.spot - self.hedge) + self.fallback

    @property
    def running(self) -> int:
        """Replicas to run in all: the need, the spot hedge, the on-demand fallback and standby."""
        return self.replicas + self.hedge + self.fallback + self.standby


@dataclass(frozen=True)
class Need:
    """Replicas one rule asks for, the rate (requests/s) it sized for and its reason line; `replicas` None
    when the rule had nothing to go on. `shift`: what the `ahead` rule added to the forecast for a surge it
    missed (`surge_check`)."""

    replicas: int | None
    rate: float
    reason: str
    shift: float = 0.0


@dataclass(frozen=True)
class Lead:
    """How long a replica started now takes to serve, and the words that say why."""

    seconds: float
    words: str


def cold_lead(state: ServiceState) -> Lead:
    """Decide the lead of a replica on a cold node: its boot plus the model load."""
    start = state.service.replica_start_s
    return Lead(lead_time_s(state.boot_s, start), f"boot {state.boot_s:g} s + load {start:g} s")


def scale_up_lead(state: ServiceState) -> Lead:
    """Decide the lead of the next replica: a warm node's wake plus the model load when pools are on and a warm
    node is held, else a cold boot's (`cold_lead`)."""
    if not (state.pools and state.warm_nodes > 0):
        return cold_lead(state)
    start = state.service.replica_start_s
    return Lead(lead_time_s(state.wake_s, start), f"wake {state.wake_s:g} s + load {start:g} s")


def _multiplier(state: ServiceState, at: datetime) -> float:
    forecast = state.forecast
    if forecast is not None and forecast.events_included:
        return 1.0
    return event_multiplier(state.service, at)


def need_now(state: ServiceState) -> Need:
    """Rule `now`: decide the replicas the observed rate needs, ceil(rate / (capacity x target)).

    The observed minute already carries any event in force while it was
    measured, so the rate is scaled by the declared multiplier in force now
    over the one in force at the minute's start: a promotion that starts now
    counts at once, one in force all along is not counted twice, and one that
    just ended stops counting.
    """
    service = state.service
    ratio = event_multiplier(service, state.now) / event_multiplier(service, state.now - OBSERVED_WINDOW)
    rate = state.observed_rps * ratio
    replicas = replicas_for_rate(rate, state.capacity_rps, service.target_utilisation)
    event = "" if ratio == 1.0 else f" x {ratio:g} (a declared event's multiplier now over the observed minute's)"
    return Need(replicas, rate, f"now: {state.observed_rps:.4g} req/s observed{event} / ({state.capacity_rps:.4g} "
                                f"req/s x {service.target_utilisation:g}) -> {replicas} replicas")


def forecast_peak(state: ServiceState, forecast: RateForecast, level: float, lead: Lead) -> float:
    """Decide the highest `level` rate the forecast gives over [now, now + lead]: the value in force at now and
    at each instant and declared event start inside the window, each times the event multiplier in force then."""
    now = state.now
    end = now + timedelta(seconds=lead.seconds)
    path = forecast.quantiles[level]
    first = bisect_right(forecast.at, now)
    last = bisect_right(forecast.at, end, first)
    at_now = forecast.value_at(level, now) * _multiplier(state, now)
    if forecast.events_included or not state.service.events:
        return max(at_now, max(path[first:last], default=at_now))
    inside = [path[i] * _multiplier(state, forecast.at[i]) for i in range(first, last)]
    starts = [forecast.value_at(level, e.start) * _multiplier(state, e.start)
              for e in state.service.events if now < e.start <= end]
    return max([at_now, *inside, *starts])


@dataclass(frozen=True)
class SurgeCheck:
    """By how much (requests/s) the forecast is raised because it missed a surge (0.0: it did not), and why."""

    shift: float
    words: str = ""


def surge_check(state: ServiceState, forecast: RateForecast, now: Need) -> SurgeCheck:
    """Decide whether the forecast missed a surge: its median (or lowest level above it) now and at its first
    instant after now, the larger of the two, each times the event multiplier then, is below
    `SURGE_MISS_RATIO` of the rate the `now` rule sized for. (Now as well: a forecast that expects the rate
    to fall by the next instant, as at the end of an event, has not missed the rate it expected now.) Then
    every forecast value is raised by the gap, so the forecast keeps its shape and spread but starts from the
    rate seen, and the `ahead` rule never asks for less than the `now` rule."""
    first = bisect_right(forecast.at, state.now)
    if first == len(forecast.at):
        return SurgeCheck(0.0)
    level = forecast_level(0.5, forecast.quantiles)
    expected = max(forecast.quantiles[level][first] * _multiplier(state, forecast.at[first]),
                   forecast.value_at(level, state.now) * _multiplier(state, state.now))
    if expected >= SURGE_MISS_RATIO * now.rate:
        return SurgeCheck(0.0)
    shift = now.rate - expected
    return SurgeCheck(shift, f"; its P{level * 100:g} now and at its next instant, at most {expected:.4g} req/s, is under "
                             f"{SURGE_MISS_RATIO:g} x the {now.rate:.4g} req/s seen (a surge it missed): raised by "
                             f"{shift:.4g} req/s and held at least at the now rule's {now.replicas}")


def _ahead_unavailable(state: ServiceState) -> str | None:
    forecast = state.forecast
    if forecast is None:
        return "ahead: skipped, no forecast"
    if not forecast.at or forecast.at[-1] <= state.now:
        return "ahead: skipped, the forecast has no instant after now"
    return None


def ahead_quantile(state: ServiceState) -> float:
    """Decide the quantile the `ahead` rule sizes at: a missing replica's cost against a spare one's
    (`forecast_quantile`)."""
    service = state.service
    return forecast_quantile(service.unserved_request_cost_usd, state.replica_hour_usd, state.capacity_rps,
                             service.target_utilisation)


def need_ahead(state: ServiceState, now: Need, lead: Lead) -> Need:
    """Rule `ahead`: decide the replicas the forecast needs over the lead time, from its peaks over
    [now, now + lead] (`forecast_peak`), the larger of two sizes:

    - the median at the target utilisation, the operating point the service declares (what a target-tracking
      autoscaler holds for the rate it sees, here for the rate expected when a replica started now serves);
    - the quantile a missing replica's cost against a spare one's picks (`forecast_quantile`, read at
      `forecast_level`) at full capacity: requests go unserved only above 100% of the ready replicas, so the
      newsvendor's quantile is sized against that, and the target's headroom is not added on top of it.

    A forecast that missed a surge is raised to the rate seen (`surge_check`). No forecast, or one that ends
    before now: no figure (`replicas` None)."""
    skipped = _ahead_unavailable(state)
    if skipped is not None or state.forecast is None:
        return Need(None, 0.0, skipped or "")
    forecast = state.forecast
    service = state.service
    target = service.target_utilisation
    quantile = ahead_quantile(state)
    level = forecast_level(quantile, forecast.quantiles)
    median = forecast_level(0.5, forecast.quantiles)
    surge = surge_check(state, forecast, now)
    typical = forecast_peak(state, forecast, median, lead) + surge.shift
    tail = forecast_peak(state, forecast, level, lead) + surge.shift
    at_target = replicas_for_rate(typical, state.capacity_rps, target)
    at_full = replicas_for_rate(tail, state.capacity_rps, 1.0)
    replicas = max(at_target, at_full)
    if surge.shift:
        replicas = max(replicas, now.replicas or 0)
    return Need(replicas, tail if at_full > at_target else typical, (
        f"ahead: over the {lead.seconds:g} s lead ({lead.words}), P{median * 100:g} peaks at {typical:.4g} req/s "
        f"-> {at_target} replicas at the {target:g} target, P{level * 100:g} (quantile {quantile:.3g}: "
        f"${service.unserved_request_cost_usd:g} an unserved request against ${state.replica_hour_usd:.4g} a "
        f"replica-hour) at {tail:.4g} req/s -> {at_full} at full capacity -> {replicas} replicas{surge.words}"),
        surge.shift)


def need_ahead_with_pool(state: ServiceState, now: Need, lead: Lead) -> Need:
    """Rule `ahead` when warm nodes are held (`lead` a wake): the need over the wake lead while the warm nodes
    cover what is needed over a cold boot's lead; when that need exceeds the replicas over the wake lead plus
    the warm nodes, the need over the cold lead (replicas beyond the pool boot cold, so they start a cold lead
    ahead, and replicas started take warm nodes first). Without warm nodes, the need over `lead` alone."""
    ahead = need_ahead(state, now, lead)
    cold = cold_lead(state)
    if lead.seconds >= cold.seconds or ahead.replicas is None:
        return ahead
    beyond = need_ahead(state, now, cold)
    if beyond.replicas is None or beyond.replicas <= ahead.replicas + state.warm_nodes:
        return ahead
    return Need(beyond.replicas, beyond.rate, f"{beyond.reason}: more than {ahead.replicas} over the "
                                              f"{lead.seconds:g} s wake lead + {state.warm_nodes} warm nodes",
                beyond.shift)


def decide_replicas(service: Service, now: Need, ahead: Need) -> tuple[ClampedReplicas, str]:
    """Rule `replicas`: decide the needed count, max(now, ahead), within the service's bounds (naming the bound
    that applied)."""
    needed = max(now.replicas or 0, ahead.replicas or 0)
    clamped = clamp_replicas(service, needed)
    terms = f"max(now {now.replicas}, ahead {ahead.replicas})" if ahead.replicas is not None else "now"
    bound = "" if clamped.bound is None else f" {getattr(service, clamped.bound)}"
    return clamped, f"replicas: {terms} = {needed}, {clamped.reason}{bound} -> {clamped.replicas}"


@dataclass(frozen=True)
class Carried:
    """How a caller tells the planner about its last decision's extra replicas (`ServiceState`'s `standby`,
    `hedge_running` and `spot_lost`)."""

    standby: int
    hedge_running: int
    spot_lost: int


def carried_counts(last: ServiceDecision | None, ready: int, starting: int, spot_ready: int,
                   spot_starting: int) -> Carried:
    """Decide, from the last decision and the replicas seen now, which of them are its extras: its standby
    replicas (within those ready); those it ran beyond the need (its spot hedge and on-demand fallback, and any
    beyond all it asked for: the old replicas a swap between spot and on demand keeps until the new ones serve,
    within the rest that serve or start); and the spot replicas it asked for that neither serve nor start
    (lost to a notice). No last decision: none."""
    if last is None:
        return Carried(0, 0, 0)
    standby = min(last.standby, ready)
    kept = max(0, ready + starting - last.running)
    beyond = min(last.hedge + last.fallback + kept, max(0, ready + starting - standby))
    return Carried(standby, beyond, max(0, last.spot - spot_ready - spot_starting))


def counted_replicas(state: ServiceState) -> int:
    """The replicas counted against the need: ready + starting, less standby ones and those run beyond the need
    (`hedge_running`)."""
    return max(0, state.ready + state.starting - state.standby - state.hedge_running)


def scale_in(state: ServiceState, clamped: ClampedReplicas, now: Need, ahead: Need, lead: Lead) -> tuple[int, str]:
    """Rule `scale-in`: decide the replicas to keep when as many or more serve or start than `clamped` asks.

    A replica goes only when neither the observed rate nor the forecast over
    the lead time needs it (`may_scale_in`: both needs below the current
    count) nor did any decision's need over the last `STABILISATION_S`
    (`state.recent_need`: a scale-down stabilisation, so a need that dips for
    one noisy minute does not stop a replica the next minute starts again),
    and then at most max(1, ceil(10%)) of the current count a tick
    (`SCALE_IN_STEP_SHARE`), down to the needed count. Above max_replicas the
    bound applies at once. Returns the count and its reason: a hold when the
    observed rate alone would release replicas, "" when nothing was to go.
    """
    current = counted_replicas(state)
    now_n = now.replicas or 0
    ahead_n = ahead.replicas or 0
    ceiling = state.service.max_replicas
    if current > ceiling:
        return ceiling, f"scale-in: {current} serving or starting, down to max_replicas {ceiling} at once"
    if not may_scale_in(current, now_n, ahead_n):
        if now_n >= current:
            return clamped.replicas, ""
        return clamped.replicas, (f"scale-in: none, the observed rate needs {now_n} of the {current} serving or "
                                  f"starting but the forecast over the {lead.seconds:g} s lead needs {ahead_n}")
    if state.recent_need >= current > clamped.replicas:
        return current, (f"scale-in: none, the need was {state.recent_need} within the last {STABILISATION_S:g} s "
                         f"(scale-down stabilisation), {current} serving or starting")
    ahead_words = f"the forecast over the {lead.seconds:g} s lead {ahead_n}" if ahead.replicas is not None else \
        "no forecast"
    if current <= clamped.replicas:
        return clamped.replicas, (f"scale-in: none, the observed rate needs {now_n} and {ahead_words}, below the "
                                  f"{current} serving or starting, but min_replicas keeps {clamped.replicas}")
    step = max(1, math.ceil(SCALE_IN_STEP_SHARE * current - _WHOLE_TOLERANCE))
    kept = max(clamped.replicas, current - step, min(state.recent_need, current))
    return kept, (f"scale-in: {current} serving or starting, the observed rate needs {now_n} and {ahead_words}: "
                  f"down by at most max(1, ceil({SCALE_IN_STEP_SHARE:g} x {current})) = {step} a tick -> {kept}")


@dataclass(frozen=True)
class HotCapacity:
    """Stopped warm nodes and running standby replicas kept for one service, and why."""

    warm_nodes: int
    standby: int
    reason: str


def margin_quantile(state: ServiceState, levels: Collection[float], lead: Lead, *, warm: bool) -> tuple[float, str]:
    """Decide the forecast quantile the surge margin is read at. A warm node is a newsvendor's unit: made for a
    window of the cold lead, it pays its creation (a boot at the compute price) and its disk over the window;
    when a surge uses it, it saves the requests a cold boot would serve too late (boot - wake seconds at full
    capacity, at the policy's price of an unserved request). It is worth holding while the chance that the need
    reaches it is above cost / saving, so the margin is read at the quantile 1 - cost / saving, never below the
    level the `ahead` rule reads (`forecast_level` of `forecast_quantile`): the warm nodes are what let the
    `ahead` rule size over the wake lead (`need_ahead_with_pool`), so a pool read below it would be replaced by
    running replicas sized over the cold lead. No saving: that level. Standby replicas (`warm` False) or a warm
    node without a price: the top quantile, as before prices are known. `levels`: the forecast's quantiles."""
    top = max(levels)
    if not warm or state.warm_node_hour_usd is None:
        return top, ""
    service = state.service
    floor = forecast_level(ahead_quantile(state), levels)
    saving = max(0.0, state.boot_s - state.wake_s) * state.capacity_rps * service.unserved_request_cost_usd
    cost = state.replica_hour_usd * state.boot_s / 3600.0 + state.warm_node_hour_usd * lead.seconds / 3600.0
    worth = 1.0 - cost / saving if saving > 0 else 0.0
    quantile = min(top, max(floor, worth))
    return quantile, (f" at quantile {quantile:.3g} (a warm node's ${cost:.4g} to make and hold over the lead "
                      f"against ${saving:.4g} saved when a surge uses it, at least the ahead rule's "
                      f"P{floor * 100:g})")


def surge_margin(state: ServiceState, replicas: int, ahead: Need, *, warm: bool = False) -> tuple[int, str]:
    """Decide the replicas a surge may need beyond `replicas` within a cold node's lead: the forecast's peak over
    [now, now + cold lead] at the quantile the margin is worth (`margin_quantile`: for warm nodes, `warm`, the
    newsvendor's; for standby replicas the top one), raised as the `ahead` rule raised it for a missed
    surge, in replicas at full capacity (the margin is for requests that would go unserved, which happens only
    above 100%), less `replicas`, at least 0. The cold lead, not the wake one: the margin covers what a cold
    boot started now would serve too late for, and does not shrink because warm nodes are held. Without a
    usable forecast: `NO_FORECAST_MARGIN_SHARE` of `replicas`, at least 1 while requests arrive, 0 when none do."""
    if _ahead_unavailable(state) is not None or state.forecast is None:
        if state.observed_rps == 0:
            return 0, "no forecast and no requests: margin 0"
        margin = max(1, math.ceil(NO_FORECAST_MARGIN_SHARE * replicas - _WHOLE_TOLERANCE))
        return margin, f"no forecast: max(1, ceil({NO_FORECAST_MARGIN_SHARE:g} x {replicas})) = {margin}"
    forecast = state.forecast
    lead = cold_lead(state)
    quantile, why = margin_quantile(state, forecast.quantiles, lead, warm=warm)
    peak, level = peak_at_quantile(state, forecast, quantile, lead)
    rate = peak + ahead.shift
    at_level = replicas_for_rate(rate, state.capacity_rps, 1.0)
    margin = max(0, at_level - replicas)
    return margin, (f"{level}{why} peaks at {rate:.4g} req/s over the {lead.seconds:g} s cold lead "
                    f"({lead.words}) -> {at_level} replicas at full capacity, {margin} beyond {replicas}")


def peak_at_quantile(state: ServiceState, forecast: RateForecast, quantile: float, lead: Lead) -> tuple[float, str]:
    """Decide the forecast's peak over the lead at `quantile` (`forecast_peak`), interpolated linearly between
    the two levels it gives around it (their peaks), or at the level itself, the lowest, or the highest; and the
    words naming what was read."""
    levels = sorted(forecast.quantiles)
    above = next((q for q in levels if q >= quantile), None)
    below = max((q for q in levels if q < quantile), default=None)
    if above is None or below is None or above == quantile:
        level = forecast_level(quantile, levels)
        return forecast_peak(state, forecast, level, lead), f"P{level * 100:g}"
    low, high = forecast_peak(state, forecast, below, lead), forecast_peak(state, forecast, above, lead)
    share = (quantile - below) / (above - below)
    return low + share * (high - low), f"P{below * 100:g}..P{above * 100:g}"


def hot_capacity(state: ServiceState, replicas: int, ahead: Need) -> HotCapacity:
    """Rule `hot capacity`: decide warm nodes and standby replicas from the surge margin (`surge_margin`),
    capped at max_replicas - replicas. The margin is kept as stopped warm nodes, or as running standby replicas
    when even a warm node would serve later than `ready_within` (`needs_standby` on wake + model load). With
    pools off there is neither."""
    if not state.pools:
        return HotCapacity(0, 0, "hot capacity: pools off, no warm nodes and no standby replicas")
    room = max(0, state.service.max_replicas - replicas)
    wake = lead_time_s(state.wake_s, state.service.replica_start_s)
    ready_within = state.service.ready_within_s
    standby = needs_standby(state.service, wake)
    margin, words = surge_margin(state, replicas, ahead, warm=not standby)
    if not standby and state.surges is not None and state.warm_node_hour_usd is not None:
        pool = warm_nodes_for_surges(
            state.surges, replicas=replicas, capacity_rps=state.capacity_rps,
            warm_node_hour_usd=state.warm_node_hour_usd, saved_s=max(0.0, state.boot_s - state.wake_s),
            unserved_request_cost_usd=state.service.unserved_request_cost_usd)
        margin, words = max(margin, pool.warm_nodes), f"{words}; {pool.reason}"
    if margin > room:
        words += f", capped at max_replicas - replicas = {room}"
        margin = room
    if standby:
        return HotCapacity(0, margin, f"hot capacity: {words}; a warm node would serve after wake + load = {wake:g} s "
                                      f"> ready_within {ready_within:g} s, so {margin} standby replicas, no warm nodes")
    return HotCapacity(margin, 0, f"hot capacity: {words}; a warm node serves within ready_within ({wake:g} s <= "
                                  f"{ready_within:g} s), so {margin} warm nodes, no standby replicas")


@dataclass(frozen=True)
class SpotSplit:
    """Spot replicas (the spot part of the need plus the hedge), the hedge alone, on-demand replicas standing
    for lost spot ones, and why."""

    spot: int
    hedge: int
    fallback: int
    reason: str
    warm_spot: int = 0


def spot_split(state: ServiceState, replicas: int, standby: int, warm_nodes: int = 0) -> SpotSplit:
    """Rule `spot` (SkyServe's SpotHedge): decide how many replicas run on spot.

    When the service allows a spot share and a spot group is offered cheaper
    than on demand: floor(replicas x spot_share) of the need on spot (the
    on-demand part never below replicas - that), plus a hedge of
    ceil(`SPOT_HEDGE_SHARE` x it) spot replicas beyond the need, within
    max_replicas with the standby ones. Spot replicas lost to a notice beyond
    the hedge are replaced on demand (`fallback`) until their spot
    replacements serve. The same share of the warm nodes is kept as stopped
    spot nodes (`warm_spot`), so that the spot part of a rise wakes as the
    on-demand part does instead of booting cold. The caller spreads spot
    replicas across spot groups.
    """
    service = state.service
    spot_price = state.spot_replica_hour_usd
    if service.spot_share <= 0:
        return SpotSplit(0, 0, 0, "spot: none, the service allows no spot share")
    if spot_price is None:
        return SpotSplit(0, 0, 0, "spot: none, no spot group offered")
    if spot_price >= state.replica_hour_usd:
        return SpotSplit(0, 0, 0, f"spot: none, ${spot_price:.4g} a spot replica-hour is no cheaper than "
                                  f"${state.replica_hour_usd:.4g} on demand")
    base = math.floor(replicas * service.spot_share + _WHOLE_TOLERANCE)
    hedge = min(math.ceil(SPOT_HEDGE_SHARE * base - _WHOLE_TOLERANCE), max(0, service.max_replicas - replicas - standby))
    fallback = min(base, max(0, state.spot_lost - hedge))
    lost = "" if not state.spot_lost else (f"; {state.spot_lost} lost to a notice, {fallback} beyond the hedge "
                                           f"replaced on demand")
    warm_spot = math.floor(warm_nodes * service.spot_share + _WHOLE_TOLERANCE)
    return SpotSplit(base + hedge, hedge, fallback, (
        f"spot: floor({replicas} x {service.spot_share:g}) = {base} of the need on spot, {replicas - base} on demand, "
        f"+ a hedge of {hedge} (ceil({SPOT_HEDGE_SHARE:g} x {base}) within max_replicas) -> {base + hedge} spot "
        f"({state.spot_ready} serving now){lost}; {warm_spot} of the {warm_nodes} warm nodes stopped spot nodes"),
        warm_spot)


def plan_service(state: ServiceState) -> ServiceDecision:
    """Decide what one service should run at `state.now`: the rules `now`, `ahead`, `replicas`, `scale-in`,
    `hot capacity` and `spot` in turn (module docstring), each figure explained by a reason line."""
    now = need_now(state)
    lead = scale_up_lead(state)
    ahead = need_ahead_with_pool(state, now, lead)
    clamped, replicas_reason = decide_replicas(state.service, now, ahead)
    replicas, scale_in_reason = scale_in(state, clamped, now, ahead, lead)
    hot = hot_capacity(state, replicas, ahead)
    spot = spot_split(state, replicas, hot.standby, hot.warm_nodes)
    reasons = (now.reason, ahead.reason, replicas_reason, scale_in_reason, hot.reason, spot.reason)
    return ServiceDecision(replicas=replicas, spot=spot.spot, standby=hot.standby, warm_nodes=hot.warm_nodes,
                           reasons=tuple(r for r in reasons if r), hedge=spot.hedge, fallback=spot.fallback,
                           need=clamped.replicas, warm_spot=spot.warm_spot)


class RecentNeeds:
    """The needs (`ServiceDecision.need`) a caller's decisions gave over the last `window_s`: `peak(now)` is
    what it passes as `ServiceState.recent_need`."""

    def __init__(self, window_s: float = STABILISATION_S) -> None:
        self.window = timedelta(seconds=window_s)
        self.needs: deque[tuple[datetime, int]] = deque()

    def add(self, at: datetime, need: int) -> None:
        """Keep the need decided at `at`."""
        self.needs.append((at, need))

    def peak(self, now: datetime) -> int:
        """Decide the highest need kept from the window before `now` (0 with none)."""
        while self.needs and self.needs[0][0] < now - self.window:
            self.needs.popleft()
        return max((n for _, n in self.needs), default=0)


__all__ = [
    "Carried",
    "RateForecast",
    "RecentNeeds",
    "ServiceDecision",
    "ServiceState",
    "carried_counts",
    "plan_service",
]
