"""The `floor` bound: the oracle with whole nodes, boots and first-fit placement for work that cannot move.

A reference point computed from the trace like the oracle (`burst.sim.oracle`),
not a proof of optimality: it is what a clairvoyant controller pays once work
that cannot move needs whole nodes. Every job still runs from its submission
for its whole duration (the run's end does not cut it: a simulated run charges
the remainder of what still runs at its end, `burst.sim.engine.remainders`);
then:

- work that cannot move (not spot-eligible: not fault-tolerant, or its tenant
  bars spot) is placed at submission first-fit on whole nodes: the steady
  tier's nodes first, then open on-demand nodes, else a new on-demand node of
  the cheapest shape the job fits (of each node size, the cheapest on-demand
  group's; among the sizes that hold the job on one node, or the widest for a
  job wider than every node, the one whose nodes for it cost least). A job wider than a node takes whole nodes for
  each full node's worth of GPUs and first-fit for the rest, all within one
  tier: on the steady tier when every piece fits there, else every piece in
  the cloud. No controller the floor is measured against can split one job
  across tiers: burst's placement and the frozen baseline's (which Karpenter
  shares) place a job on one group's nodes only (ready, booting or launched
  for it, `burst.planner.placement`), and a gang job spanning on-prem and
  cloud nodes would run over the WAN link between them. A floor that split
  it would be a point no controller can reach;
- each on-demand node pays its group's boot latency before its first job
  (the boot is charged in full, even before the run's start) and is released
  the instant its last such job ends;
- spot-eligible work stays fluid: at every instant it fills spare GPUs of
  nodes already paid for (the steady tier, then open on-demand nodes), and the
  rest runs on spot at the reference spot price, with no boot, interruption
  or move cost.

Prices are the oracle's reference ones (cheapest on-demand and spot per
GPU-hour among the set-up's elastic groups). Past the run's end, as for a
simulated run's remainders, only GPUs that work holds are paid, each at its
node's price per GPU (the steady tier's at its own): no idle GPU, no boot. The floor's spend, split the way
the cost gap reads it (`burst.sim.engine.Spend`), is what every strategy's
waterfall is measured against: `structural` is floor - oracle.

What it is not a bound for: a strategy that stops and restarts work that
cannot move (the plain `karpenter` rows when they consolidate a node under
such a job, `reactive` draining a node on a spot notice): each restart is a
new placement, where the floor places such a job once, at its submission,
first-fit; nor a strategy that holds work past its submission (any queue
wait), which the floor never does. Such a strategy can cost less than the
floor on a window (burst does on philly.csv: `docs/benchmarks/strategies.md`),
so the floor is a reference point, and `(strategy - floor)` can be negative.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from burst.model import CapacityType, Job, NodeGroup, Policy, Tier
from burst.planner.placement import spot_eligible
from burst.sim.engine import Spend, StrategyResult, reference_prices
from burst.sim.oracle import bound_result
from burst.sim.setup import SimSetup

DEFAULT_GPUS_PER_NODE = 8


@dataclass
class _Node:
    """One node of the floor's first-fit: its GPUs, the cannot-move GPUs it holds, and its paid span."""

    gpus: float
    used: float = 0.0
    opened_s: float = 0.0  # when it was opened (seconds from the run's start); cloud nodes only
    cloud: bool = False
    jobs: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class _Shape:
    """A cloud node the floor can open: its GPUs, boot latency (s) and price (USD per node-hour)."""

    gpus: float
    boot_s: float
    usd_per_hour: float


def _cloud_shapes(setup: SimSetup) -> list[_Shape]:
    """The node shapes cannot-move overflow may open: each node size's cheapest on-demand group (or elastic group,
    without on-demand ones); the steady tier's node without a cloud."""
    elastic: list[NodeGroup] = [g for g in setup.groups if g.tier is Tier.ELASTIC]
    od = [g for g in elastic if g.capacity_type is CapacityType.ON_DEMAND] or elastic
    if not od:
        steady = [g for g in setup.groups if g.tier is Tier.STEADY]
        return [_Shape(float(steady[0].gpus_per_node) if steady else float(DEFAULT_GPUS_PER_NODE), 0.0, 0.0)]
    cheapest: dict[int, NodeGroup] = {}
    for g in sorted(od, key=lambda g: (setup.catalog.group_price(g) / g.gpus_per_node, g.id)):
        cheapest.setdefault(g.gpus_per_node, g)
    return [_Shape(float(g.gpus_per_node), float(g.boot_latency_s), setup.catalog.group_price(g))
            for g in cheapest.values()]


def _cheapest_fitting(shapes: Sequence[_Shape], demand: float) -> _Shape:
    """The shape a new node for a job of `demand` GPUs takes: of those it fits (one node holds it; a job wider than
    every node fits the widest only), the one whose nodes for it cost least per hour, the wider on a tie."""
    widest = max(s.gpus for s in shapes)
    fitting = [s for s in shapes if demand <= s.gpus + 1e-9 or s.gpus == widest]
    return min(fitting, key=lambda s: (math.ceil(demand / s.gpus - 1e-9) * s.usd_per_hour, -s.gpus))


def _chunks(demand: float, per_node: float) -> list[float]:
    """A job's GPUs as per-node pieces: whole nodes for each full node's worth, then the rest."""
    whole = int(demand // per_node) if demand > per_node else 0
    rest = demand - whole * per_node
    return [per_node] * whole + ([rest] if rest > 1e-9 else [])


def _first_fit(nodes: Sequence[_Node], pieces: Sequence[float], *, opens: bool) -> list[_Node | None] | None:
    """Each piece's host among `nodes`, first-fit in order. A piece that fits nowhere gets None (a new node) when
    the tier `opens` nodes (the cloud); on a fixed tier (the steady one) the whole job does not fit: None."""
    free = [n.gpus - n.used for n in nodes]
    hosts: list[_Node | None] = []
    for piece in pieces:
        at = next((k for k, f in enumerate(free) if f >= piece - 1e-9), None)
        if at is None:
            if not opens:
                return None
            hosts.append(None)
            continue
        free[at] -= piece
        hosts.append(nodes[at])
    return hosts


@dataclass
class _Span:
    """The kept jobs of a run as sweep events: (t, 0 for an end / 1 for a start, job index), sorted so ends come
    first at one instant (a freed GPU serves a start); which jobs are spot-eligible; their GPU-seconds of work
    inside the span (by eligibility) and how many complete inside it."""

    kept: list[Job]
    events: list[tuple[float, int, int]]
    eligible: list[bool]
    work: dict[bool, float]
    completed: int


def _span(setup: SimSetup, jobs: Sequence[Job], start: datetime, end: datetime) -> _Span:
    """The jobs submitted in [start, end) as sweep events, each run whole."""
    policies: dict[str, Policy] = {}
    events: list[tuple[float, int, int]] = []
    kept = [j for j in jobs if start <= j.submitted_at < end]
    eligible: list[bool] = []
    work = {True: 0.0, False: 0.0}
    completed = 0
    for i, job in enumerate(kept):
        t0 = (job.submitted_at - start).total_seconds()
        t1 = t0 + (job.duration_s or 0.0)
        policy = policies.setdefault(job.tenant, setup.policy(job.tenant))
        eligible.append(spot_eligible(job, policy))
        if t1 <= t0:
            continue
        completed += 1
        work[eligible[i]] += job.gpu_demand * (t1 - t0)
        events += [(t0, 1, i), (t1, 0, i)]
    events.sort()
    return _Span(kept, events, eligible, work, completed)


@dataclass
class _Sweep:
    """The floor's state while it walks the events: the steady tier's nodes, the open on-demand nodes (in
    opening order), where each cannot-move job sits, and the GPU-seconds accrued so far on each part."""

    onprem: list[_Node]
    shapes: list[_Shape]
    steady_gpus: float
    cloud: list[_Node] = field(default_factory=list)
    cloud_gpus: float = 0.0  # GPUs of the open cloud nodes
    boot_gpu_s: float = 0.0  # GPU-seconds of the cloud nodes' boots
    placed: dict[int, list[tuple[_Node, float]]] = field(default_factory=dict)
    eligible_now: float = 0.0
    onprem_used: float = 0.0  # cannot-move GPUs held on the steady tier
    cloud_used: float = 0.0  # cannot-move GPUs held on open cloud nodes
    span_s: float = float("inf")  # the run's end: past it only held GPUs are paid
    acc: dict[str, float] = field(default_factory=lambda: {
        "onprem_n": 0.0, "onprem_e": 0.0, "od_e": 0.0, "od_n": 0.0, "od_open": 0.0, "spot_e": 0.0,
        "steady_tail": 0.0, "od_tail": 0.0})
    boots: int = 0
    last: float = 0.0

    def accrue(self, t: float) -> None:
        """Charge the time since the last event: spot-eligible work fills spare steady GPUs, then spare GPUs of
        open cloud nodes, then spot. Open cloud nodes are paid whole until the run's end, past it the GPUs held
        on them and on the steady tier are (`od_tail`, `steady_tail`)."""
        if self.last < self.span_s < t:
            self.accrue(self.span_s)
        dt = t - self.last
        if dt <= 0:
            return
        acc = self.acc
        spare_onprem = max(0.0, self.steady_gpus - self.onprem_used)
        spare_cloud = max(0.0, self.cloud_gpus - self.cloud_used)
        on_onprem = min(self.eligible_now, spare_onprem)
        on_cloud = min(self.eligible_now - on_onprem, spare_cloud)
        acc["onprem_n"] += self.onprem_used * dt
        acc["onprem_e"] += on_onprem * dt
        acc["od_n"] += self.cloud_used * dt
        acc["od_e"] += on_cloud * dt
        if self.last < self.span_s:
            acc["od_open"] += self.cloud_gpus * dt
        else:
            acc["od_tail"] += (self.cloud_used + on_cloud) * dt
            acc["steady_tail"] += (self.onprem_used + on_onprem) * dt
        acc["spot_e"] += max(0.0, self.eligible_now - on_onprem - on_cloud) * dt
        self.last = t

    def release(self, i: int) -> None:
        """Job `i` ended: free its GPUs; a cloud node left with no job closes."""
        for node, gpus in self.placed.pop(i, []):
            node.used -= gpus
            node.jobs.discard(i)
            if node.cloud:
                self.cloud_used -= gpus
                if not node.jobs:
                    self.cloud.remove(node)
                    self.cloud_gpus -= node.gpus
            else:
                self.onprem_used -= gpus

    def place(self, i: int, demand: float, t: float) -> None:
        """Job `i` starts: first-fit on the steady tier when every piece fits there, else on open cloud nodes,
        opening (and booting) a node of the cheapest shape the job fits (`_cheapest_fitting`) for each piece that
        fits nowhere. Pieces are that shape's nodes' worth."""
        shape = _cheapest_fitting(self.shapes, demand)
        pieces = _chunks(demand, shape.gpus)
        hosts = _first_fit(self.onprem, pieces, opens=False) or _first_fit(self.cloud, pieces, opens=True)
        assert hosts is not None  # the cloud always opens what it lacks
        spots: list[tuple[_Node, float]] = []
        for piece, host in zip(pieces, hosts, strict=True):
            if host is None:
                host = _Node(shape.gpus, opened_s=t, cloud=True)
                self.cloud.append(host)
                self.cloud_gpus += shape.gpus
                self.boot_gpu_s += shape.boot_s * shape.gpus
                self.boots += 1
            host.used += piece
            host.jobs.add(i)
            if host.cloud:
                self.cloud_used += piece
            else:
                self.onprem_used += piece
            spots.append((host, piece))
        self.placed[i] = spots


def floor(setup: SimSetup, jobs: Sequence[Job], *, start: datetime, end: datetime) -> StrategyResult:
    """The floor bound (see the module docstring) for `jobs` submitted in [start, end), billed over [start, end)."""
    steady_groups = [g for g in setup.groups if g.tier is Tier.STEADY]
    steady_rate = sum(setup.catalog.group_price(g) * setup.initial.get(g.id, 0) for g in steady_groups)
    span_s = (end - start).total_seconds()
    onprem = [_Node(float(g.gpus_per_node)) for g in steady_groups for _ in range(setup.initial.get(g.id, 0))]
    span = _span(setup, jobs, start, end)
    sweep = _Sweep(onprem, _cloud_shapes(setup), sum(n.gpus for n in onprem), span_s=span_s)
    for t, kind, i in span.events:
        sweep.accrue(t)
        demand = span.kept[i].gpu_demand
        if span.eligible[i]:
            sweep.eligible_now += demand if kind == 1 else -demand
        elif kind == 0:
            sweep.release(i)
        else:
            sweep.place(i, demand, t)
    sweep.accrue(span_s)  # a run whose work all ends before its end still pays the steady tier and open nodes to it
    # every job has ended at the last event, so no node is open after it
    steady_per_gpu_s = steady_rate / sweep.steady_gpus / 3600.0 if sweep.steady_gpus else 0.0
    return _result(setup, span, sweep, steady_usd=steady_rate * span_s / 3600.0
                   + steady_per_gpu_s * sweep.acc["steady_tail"], span_s=span_s, boot_gpu_s=sweep.boot_gpu_s)


def _result(setup: SimSetup, span: _Span, sweep: _Sweep, *, steady_usd: float, span_s: float,
            boot_gpu_s: float) -> StrategyResult:
    """The floor's spend, split the way the cost gap reads it, from the sweep's accrued GPU-seconds."""
    acc, work = sweep.acc, span.work
    p_od, p_spot = reference_prices(setup)
    od_gpu_s = acc["od_open"] + acc["od_tail"]
    per_od, per_spot = p_od / 3600.0, p_spot / 3600.0
    od_usd = (od_gpu_s + boot_gpu_s) * per_od if od_gpu_s + boot_gpu_s > 0 else 0.0
    spot_usd = acc["spot_e"] * per_spot if acc["spot_e"] > 0 else 0.0
    by_tier = {"steady": steady_usd, "elastic_on_demand": od_usd, "elastic_spot": spot_usd, "hot_pool": 0.0}
    spend = Spend(
        steady_usd=steady_usd,
        booting_usd=boot_gpu_s * per_od if boot_gpu_s else 0.0,
        idle_usd=(od_gpu_s - acc["od_n"] - acc["od_e"]) * per_od if od_gpu_s else 0.0,
        spot_work_on_demand_usd=acc["od_e"] * (per_od - per_spot) if acc["od_e"] else 0.0,
        onprem_eligible_gpu_s=acc["onprem_e"],
        onprem_other_gpu_s=acc["onprem_n"],
        kept_eligible_gpu_s=work[True],
        kept_other_gpu_s=work[False],
        work_eligible_gpu_s=work[True],
        work_other_gpu_s=work[False],
    )
    used_gpu_s = work[True] + work[False]
    onprem_used_s = acc["onprem_n"] + acc["onprem_e"] - acc["steady_tail"]  # within the run, as its utilisation
    return bound_result(
        "floor",
        by_tier,
        used_gpu_s=used_gpu_s,
        paid_gpu_s=sweep.steady_gpus * span_s + acc["steady_tail"] + od_gpu_s + boot_gpu_s + acc["spot_e"],
        steady_used_s=onprem_used_s,
        steady_gpus=sweep.steady_gpus,
        span_s=span_s,
        jobs=len(span.kept),
        completed=span.completed,
        spot_gpu_s=acc["spot_e"],
        scale_ups=sweep.boots,  # capacity is there at submission: each boot is paid before its first job
        spend=spend,
    )


__all__ = ["floor"]
