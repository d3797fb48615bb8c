"""The service replay: a controller sets replica targets every 15 s tick; the fleet boots, wakes and loads them,
bills them, and interrupts spot replicas; the metrics are computed the same way for every strategy.

Fleet rules (the same for every strategy):

- a new on-demand replica takes, in order, a booted idle node (model load
  only), a stopped warm node (wake, then load) or a cold node (boot, then
  load); a spot replica wakes a stopped spot node when the controller keeps
  some (`Target.warm_spot`), else boots a cold spot node (EC2 stops and
  starts the Spot Instances of a persistent request, and a GCP Spot VM whose
  termination action is STOP restarts; a restart needs spot capacity, which
  the replay always finds);
- a node is billed at its compute price from the moment it is requested
  (boots are paid) until it is terminated or stopped; a stopped warm node pays
  its boot disk; a warm node made from scratch pays one boot first;
- each capacity type is moved to its own target (`spot` spot replicas, the
  rest on demand), so a spot replica lost to a notice is replaced on spot;
  scale-in removes starting replicas before ready ones (latest first); a
  freed on-demand node is stopped into the warm pool while the controller
  wants more warm on-demand nodes, else stays idle for the controller's
  `idle_ttl_s` (the Cluster Autoscaler's unneeded time) where a later replica
  reuses it, else is terminated; a freed spot node is stopped into the spot
  pool while the controller wants more warm spot nodes, else terminated;
- `idle_nodes` in a target are placeholders (the Cluster Autoscaler's
  overprovisioning): booted nodes kept empty, rebooted when a replica takes one;
- each spot replica is interrupted at the set-up's hazard per hour (seeded
  draws); it serves through its notice of `notice_s`, then is gone; what
  replaces it is the controller's next target (burst's: a spot replica, and
  an on-demand stand-in for each one lost beyond its hedge).

Metrics (`metrics`): each series value spread evenly over its step; the rate a
controller sees at t is the requests in [t - 60 s, t) / 60; ready capacity =
ready replicas x capacity (at 100%).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

import numpy as np

from burst.sim.service_setup import ServiceSetup
from burst.sim.service_traces import TICK_S


@dataclass(frozen=True)
class Observation:
    """What a controller sees at a tick: the time, the observed rate, and the fleet."""

    t: float
    at: datetime
    observed_rps: float
    ready: int
    starting: int
    spot_ready: int
    spot_starting: int
    warm_nodes: int
    idle_nodes: int


@dataclass(frozen=True)
class Target:
    """What a controller wants: `replicas` serving or starting (spot and standby included), `spot` of them on
    spot, `warm_nodes` stopped warm nodes (`warm_spot` of them stopped spot nodes), `idle_nodes` booted empty
    placeholder nodes."""

    replicas: int
    spot: int = 0
    warm_nodes: int = 0
    idle_nodes: int = 0
    warm_spot: int = 0


class Controller(Protocol):
    """A strategy's service logic: a target per tick (None holds the last one)."""

    idle_ttl_s: float

    def decide(self, obs: Observation) -> Target | None: ...


def _finished(booting: list[float], t: float) -> tuple[int, list[float]]:
    """How many of the nodes booting until the instants in `booting` are up by `t`, and the instants left."""
    if not booting:
        return 0, booting
    left = [x for x in booting if x > t]
    return len(booting) - len(left), left


@dataclass
class _Start:
    ready_at: float
    node_up_at: float
    spot: bool


@dataclass
class Fleet:
    """The replicas and nodes of one service during a replay (module doc, fleet rules)."""

    setup: ServiceSetup
    rng: np.random.Generator
    idle_ttl_s: float
    ready_od: int = 0
    ready_spot: int = 0
    starting: list[_Start] = field(default_factory=list)
    warm: int = 0
    warm_prep: list[float] = field(default_factory=list)
    warm_spot: int = 0
    warm_spot_prep: list[float] = field(default_factory=list)
    idle: list[float] = field(default_factory=list)
    placeholders: int = 0
    placeholder_prep: list[float] = field(default_factory=list)
    dying: list[float] = field(default_factory=list)
    launches: list[float] = field(default_factory=list)

    @property
    def load_s(self) -> float:
        return self.setup.service.replica_start_s

    def advance(self, t: float) -> None:
        """Promote what finished booting, loading or waking by `t`; let noticed and expired nodes go."""
        if self.starting:
            keep = []
            for s in self.starting:
                if s.ready_at <= t:
                    if s.spot:
                        self.ready_spot += 1
                    else:
                        self.ready_od += 1
                else:
                    keep.append(s)
            self.starting = keep
        done, self.warm_prep = _finished(self.warm_prep, t)
        self.warm += done
        done, self.warm_spot_prep = _finished(self.warm_spot_prep, t)
        self.warm_spot += done
        done, self.placeholder_prep = _finished(self.placeholder_prep, t)
        self.placeholders += done
        if self.dying:
            self.dying = [x for x in self.dying if x > t]
        if self.idle:
            self.idle = [x for x in self.idle if x > t]

    def interrupt(self, t: float, tick_s: float) -> int:
        """Draw this tick's spot interruptions; each noticed replica serves until its notice ends (a starting one
        is gone at once). Returns how many were interrupted."""
        spot_starting = [s for s in self.starting if s.spot]
        n = self.ready_spot + len(spot_starting)
        if n == 0 or self.setup.spot_hazard_per_h <= 0:
            return 0
        k = int(self.rng.binomial(n, -math.expm1(-self.setup.spot_hazard_per_h * tick_s / 3600.0)))
        for _ in range(k):
            if self.rng.random() * (self.ready_spot + len(spot_starting)) < self.ready_spot:
                self.ready_spot -= 1
                self.dying.append(t + self.setup.notice_s)
            else:
                victim = spot_starting.pop(int(self.rng.integers(len(spot_starting))))
                self.starting.remove(victim)
        return k

    def _launch_one(self, t: float, *, spot: bool) -> None:
        if not spot and self.idle:
            self.idle.remove(min(self.idle))
            up = t
        elif not spot and self.placeholders:
            self.placeholders -= 1
            up = t
        elif not spot and self.warm:
            self.warm -= 1
            up = t + self.setup.wake_s
        elif spot and self.warm_spot:
            self.warm_spot -= 1
            up = t + self.setup.wake_s
        else:
            up = t + self.setup.boot_s
        self.starting.append(_Start(up + self.load_s, up, spot))
        self.launches.append(t)

    def _free_node(self, t: float, spot: bool, target: Target) -> None:
        if spot:
            if self.warm_spot + len(self.warm_spot_prep) < target.warm_spot:
                self.warm_spot += 1
            return
        if self.warm + len(self.warm_prep) < target.warm_nodes - target.warm_spot:
            self.warm += 1
        elif self.idle_ttl_s > 0:
            self.idle.append(t + self.idle_ttl_s)

    def _remove_one(self, t: float, spot: bool, target: Target) -> bool:
        """Remove one replica of the capacity type: the latest starting one, else a ready one while the ready
        replicas stay at or above the target (a swap of type keeps its old replica until the new one serves).
        Returns whether one was removed."""
        pool = [s for s in self.starting if s.spot == spot]
        if pool:
            victim = max(pool, key=lambda s: s.ready_at)
            self.starting.remove(victim)
            if victim.node_up_at <= t:
                self._free_node(t, spot, target)
            return True
        if (self.ready_spot if spot else self.ready_od) == 0 or self.ready_spot + self.ready_od <= target.replicas:
            return False
        if spot:
            self.ready_spot -= 1
        else:
            self.ready_od -= 1
        self._free_node(t, spot, target)
        return True

    def apply(self, target: Target, t: float) -> None:
        """Move the fleet toward `target` at `t` (module doc, fleet rules)."""
        spot_now = self.ready_spot + sum(1 for s in self.starting if s.spot)
        od_now = self.ready_od + len(self.starting) - (spot_now - self.ready_spot)
        want_spot = min(target.spot, target.replicas)
        want_od = target.replicas - want_spot
        for _ in range(want_spot - spot_now):
            self._launch_one(t, spot=True)
        for _ in range(want_od - od_now):
            self._launch_one(t, spot=False)
        for spot, surplus in ((False, od_now - want_od), (True, spot_now - want_spot)):  # the dearer type first
            for _ in range(surplus):
                if not self._remove_one(t, spot, target):
                    break
        self._pools(target, t)

    def _pools(self, target: Target, t: float) -> None:
        warm_od = target.warm_nodes - target.warm_spot
        while self.warm + len(self.warm_prep) < warm_od:
            self.warm_prep.append(t + self.setup.boot_s)
        self.warm = min(self.warm, max(warm_od, 0))
        while self.warm_spot + len(self.warm_spot_prep) < target.warm_spot:
            self.warm_spot_prep.append(t + self.setup.boot_s)
        self.warm_spot = min(self.warm_spot, max(target.warm_spot, 0))
        while self.placeholders + len(self.placeholder_prep) < target.idle_nodes:
            self.placeholder_prep.append(t + self.setup.boot_s)
        extra = self.placeholders + len(self.placeholder_prep) - target.idle_nodes
        while extra > 0 and (self.placeholder_prep or self.placeholders):
            if self.placeholder_prep:
                self.placeholder_prep.pop()
            else:
                self.placeholders -= 1
            extra -= 1

    def observe(self, t: float, at: datetime, rate: float) -> Observation:
        """What a controller sees now."""
        spot_starting = sum(1 for s in self.starting if s.spot)
        return Observation(t, at, rate, self.ready_od + self.ready_spot, len(self.starting), self.ready_spot,
                           spot_starting, self.warm + self.warm_spot, len(self.idle) + self.placeholders)

    def serving(self) -> int:
        """Replicas serving now: the ready ones and the noticed spot ones still inside their notice."""
        return self.ready_od + self.ready_spot + len(self.dying)

    def billed(self) -> tuple[int, int, int]:
        """Nodes billed now: (on-demand compute, spot compute, stopped warm)."""
        spot_starting = sum(1 for s in self.starting if s.spot)
        spot = self.ready_spot + spot_starting + len(self.dying) + len(self.warm_spot_prep)
        od = (self.ready_od + len(self.starting) - spot_starting + len(self.idle) + self.placeholders
              + len(self.placeholder_prep) + len(self.warm_prep))
        return od, spot, self.warm + self.warm_spot


@dataclass(frozen=True)
class Replay:
    """What a replay recorded per tick: serving replicas and billed nodes, and the interruptions."""

    serving: np.ndarray
    od_nodes: np.ndarray
    spot_nodes: np.ndarray
    warm_nodes: np.ndarray
    interruptions: int
    launches: int
    starting: np.ndarray | None = None


def observed_rates(setup: ServiceSetup, fine: np.ndarray) -> np.ndarray:
    """The rate a controller sees at each tick's start: requests in the minute before / 60 (the history's last
    minute before the first ticks, spread evenly)."""
    per_tick = fine.sum(axis=1)
    s = setup.series
    lead = 60 // TICK_S
    hist = s.history()
    before = float(hist[-1]) / s.step_s * TICK_S if len(hist) else 0.0
    padded = np.concatenate([np.full(lead, before), per_tick])
    cum = np.concatenate([[0.0], np.cumsum(padded)])
    return np.asarray((cum[lead: lead + len(per_tick)] - cum[: len(per_tick)]) / 60.0)


def replay(setup: ServiceSetup, controller: Controller, *, seed: int = 0, initial: int | None = None) -> Replay:
    """Replay `setup`'s window with `controller` setting targets every tick (module doc). The fleet starts with
    `initial` ready on-demand replicas (default: what the rate observed at the start needs, at least the
    service's minimum), the same for every strategy."""
    fine = setup.series.fine_counts()
    rates = observed_rates(setup, fine)
    n = len(fine)
    if initial is None:
        initial = max(setup.service.min_replicas, int(setup.need(rates[0])) if n else 0)
    fleet = Fleet(setup, np.random.default_rng(seed), controller.idle_ttl_s, ready_od=initial)
    serving = np.zeros(n, dtype=int)
    starting = np.zeros(n, dtype=int)
    billed = np.zeros((n, 3), dtype=int)
    interruptions = 0
    start = setup.series.window_start
    for i in range(n):
        t = float(i * TICK_S)
        fleet.advance(t)
        interruptions += fleet.interrupt(t, TICK_S)
        target = controller.decide(fleet.observe(t, start + timedelta(seconds=t), float(rates[i])))
        if target is not None:
            fleet.apply(target, t)
        serving[i] = fleet.serving()
        starting[i] = len(fleet.starting)
        billed[i] = fleet.billed()
    return Replay(serving, billed[:, 0], billed[:, 1], billed[:, 2], interruptions, len(fleet.launches), starting)


@dataclass(frozen=True)
class ServiceMetrics:
    """One strategy's figures on one service (the `--json` `services` object).

    `unserved_request_share`: requests above ready capacity (per second for a per-second trace, per tick else) over
    all requests. `slo_minutes_missed_share`: minutes whose requests exceed the target utilisation of what their
    ready replicas serve, over all minutes. `cost_usd`: every billed node-second, on-demand and spot, from its
    request (boots, model loads, idle and placeholder nodes included) plus the stopped warm nodes' disks.
    `replica_gpu_hours`: the GPU-hours billed at compute prices. `ttc_p95_s`: P95 of `ttc_samples`.
    """

    unserved_request_share: float
    slo_minutes_missed_share: float
    cost_usd: float
    replica_gpu_hours: float
    ttc_p95_s: float
    requests: float = 0.0
    interruptions: int = 0

    def with_unserved_usd(self, unserved_request_cost_usd: float) -> float:
        """The cost with each unserved request priced at the service's `unserved_request_cost_usd`: the sum the
        policy's newsvendor quantile balances (replicas against requests left unserved)."""
        return self.cost_usd + self.unserved_request_share * self.requests * unserved_request_cost_usd

    def to_json(self) -> dict[str, Any]:
        """The five figures the spec names, plus the request count and spot interruptions."""
        return {"unserved_request_share": self.unserved_request_share,
                "slo_minutes_missed_share": self.slo_minutes_missed_share, "cost_usd": round(self.cost_usd, 2),
                "replica_gpu_hours": round(self.replica_gpu_hours, 3), "ttc_p95_s": self.ttc_p95_s,
                "requests": round(self.requests), "interruptions": self.interruptions}


def unserved(fine: np.ndarray, serving: np.ndarray, capacity_rps: float) -> np.ndarray:
    """Requests above ready capacity per tick: per second-or-tick bin, what exceeds serving x capacity x bin."""
    bin_s = TICK_S / fine.shape[1]
    cap = serving.astype(float)[:, None] * capacity_rps * bin_s
    return np.asarray(np.clip(fine - cap, 0.0, None).sum(axis=1))


def slo_minutes_missed(fine: np.ndarray, serving: np.ndarray, capacity_rps: float, target: float) -> tuple[int, int]:
    """(minutes missed, minutes): a minute is missed when its requests exceed `target` of what its ready
    replicas serve over it (ready replica-seconds x capacity)."""
    per = 60 // TICK_S
    n = len(serving) // per * per
    if n == 0:
        return 0, 0
    demand = fine.sum(axis=1)[:n].reshape(-1, per).sum(axis=1)
    capacity = serving[:n].astype(float).reshape(-1, per).sum(axis=1) * capacity_rps * TICK_S
    return int(np.count_nonzero(demand > target * capacity + 1e-9)), n // per


def ttc_samples(need: np.ndarray, serving: np.ndarray, tick_s: float = TICK_S) -> list[float]:
    """Seconds from a replica being needed to it serving: when the need reaches k, the time until k replicas
    serve (0 when they already do), or until the need falls below k if it does first."""
    out: list[float] = []
    open_: dict[int, int] = {}
    prev = 0
    for i in range(len(need)):
        n, r = int(need[i]), int(serving[i])
        if open_:
            for k in [k for k in open_ if r >= k or n < k]:
                out.append((i - open_.pop(k)) * tick_s)
        for k in range(prev + 1, n + 1):
            if r >= k:
                out.append(0.0)
            else:
                open_.setdefault(k, i)
        prev = n
    out.extend((len(need) - s) * tick_s for s in open_.values())
    return out


def metrics(setup: ServiceSetup, run: Replay, fine: np.ndarray | None = None) -> ServiceMetrics:
    """The figures of one replay (module doc): unserved share, SLO minutes missed, cost, GPU-hours, TTC P95."""
    fine = setup.series.fine_counts() if fine is None else fine
    cap = setup.capacity_rps
    total = float(fine.sum())
    lost = float(unserved(fine, run.serving, cap).sum())
    missed, minutes = slo_minutes_missed(fine, run.serving, cap, setup.service.target_utilisation)
    hours = TICK_S / 3600.0
    gpus = setup.service.gpus_per_replica
    cost = hours * (float(run.od_nodes.sum()) * setup.on_demand_usd_h * gpus
                    + float(run.spot_nodes.sum()) * setup.spot_usd_h * gpus
                    + float(run.warm_nodes.sum()) * setup.warm_node_usd_h)
    need = setup.need(fine.sum(axis=1) / TICK_S)
    samples = ttc_samples(need, run.serving)
    return ServiceMetrics(lost / total if total else 0.0, missed / minutes if minutes else 0.0, cost,
                          hours * gpus * float(run.od_nodes.sum() + run.spot_nodes.sum()),
                          float(np.percentile(samples, 95)) if samples else 0.0, total, run.interruptions)


CAUSES = ("boots too slow", "scale-in too early", "not asked for")


def unserved_causes(setup: ServiceSetup, run: Replay, fine: np.ndarray | None = None) -> dict[str, float]:
    """Why a replay left requests unserved, as shares of its unserved requests, tick by tick: `boots too slow`
    where replicas were starting (asked for, not yet serving); else `scale-in too early` where more replicas
    served within one cold lead time (boot + model load) before; else `not asked for` (the controller did not
    see it coming: a forecast too low, or a surge inside one observation minute)."""
    fine = setup.series.fine_counts() if fine is None else fine
    lost = unserved(fine, run.serving, setup.capacity_rps)
    total = float(lost.sum())
    if total == 0:
        return dict.fromkeys(CAUSES, 0.0)
    lead = math.ceil((setup.boot_s + setup.service.replica_start_s) / TICK_S)
    starting = run.starting if run.starting is not None else np.zeros(len(lost), dtype=int)
    padded = np.concatenate([np.zeros(lead, dtype=int), run.serving])
    recent_max = np.lib.stride_tricks.sliding_window_view(padded, lead)[: len(lost)].max(axis=1)
    slow = starting > 0
    early = ~slow & (recent_max > run.serving)
    return {CAUSES[0]: float(lost[slow].sum()) / total, CAUSES[1]: float(lost[early].sum()) / total,
            CAUSES[2]: float(lost[~slow & ~early].sum()) / total}
