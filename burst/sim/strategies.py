"""The strategies the simulator compares: burst itself and the baselines it must beat.

Every strategy runs through the same reconcile loop, sim provider and job
queue; they differ only in their node groups, loop interval, warm pools and the
planner pipeline. `oracle` and `floor` are not simulated: they are bounds
computed from the trace (`burst.sim.oracle`, `burst.sim.floor`). Each strategy
below has one `build_*` function here; `burst.sim.registry` registers it by
name, with whether it runs by default.

- `burst`: the full planner (`burst.planner.PIPELINE`) on the set-up's groups,
  event-driven as the daemon is (a job submitted or finished, a node ready or
  lost, an interruption notice wakes the loop after a 1 s quiet / 10 s batch
  window, `burst.wakeup`; the set-up's loop interval is the heartbeat), with demand forecasts (`burst.sim.forecasts`):
  it places steady-first, bursts to the cheapest feasible group, pre-scales
  on-demand capacity ahead of forecast P90 demand and releases nodes idle past
  their cooldown that the forecast does not need. It gains hot pools and spot
  placement as those land.
  Where the set-up gives groups a hot pool (`burst.sim.setup.with_hot_pool`),
  burst sizes it from the forecast.
- `burst-no-forecast`: the same planner and policies without forecasts, so
  the two side by side measure what forecasting buys.

Run only when named (`burst simulate --strategy` offers `burst-clairvoyant`; the others are for the
benchmarks and the cost what-ifs):
`burst-no-pool` is `burst` with no hot pool at all; `burst-fixed-pool` is
`burst` with a fixed pool of `fixed_pool_nodes` stopped nodes in the cheapest
on-demand group instead of the forecast-sized one; `burst-periodic-only` is
`burst-no-forecast` without checkpoint on notice (jobs resume from their last
periodic checkpoint); `burst-victims-most-recent` and `burst-victims-random` are
`burst-no-forecast` with priority preemption's victims taken most recently
started first (Kueue's default) or in seeded random order rather than least
lost work first; `burst-clairvoyant` is `burst` planning with the trace's true
future demand in place of forecasts, at a one-minute step
(`burst.sim.forecasts.ClairvoyantForecaster`): a reference for what perfect
point forecasts of demand move with burst's forecast-driven steps (not an
upper bound), not a strategy anyone can run.

Every baseline other than `reactive-hotpool` runs without warm pools, and every
baseline runs the frozen `burst.planner.BASELINE_PIPELINE` (today's placement,
blind to fault tolerance, with no moves), so burst's planner changes never move
them.
- `static-peak`: the steady tier sized to the trace's peak demand, no cloud.
- `static-p50`: the steady tier sized to the P50 of demand, no cloud: the
  queueing you get without bursting.
- `reactive`: Kubernetes Cluster Autoscaler semantics (its documented
  defaults): scan every 10 s; scale up when pods are pending and nothing
  upcoming can hold them, with a cold boot, to the cheapest feasible group (the
  `price` expander; spot groups take only pods that tolerate them, as a taint
  would); a node is *unneeded* while its GPU requests are under 50% of its
  GPUs and all its pods can be moved to other nodes (FAQ "How does scale-down
  work?": both conditions; the removal is simulated node by node, least used
  first, pods of one taking room the next cannot use); one unneeded for
  10 min is removed, which evicts its pods (batch pods are evictable by
  default: they lose the work since their last checkpoint and are
  rescheduled); empty nodes go up to 10 at once
  (`--max-scale-down-parallelism` 10) and non-empty ones one at a time
  (`--max-drain-parallelism` "Maximum number of nodes needing drain, that can
  be drained and deleted in parallel", default 1); no scale-down for 10 min
  after a scale-up (`scale-down-delay-after-add`); a node group whose
  scale-up failed is backed off for 5 min
  (`initial-node-group-backoff-duration`); interruptions start no backoff.
  Spot interruption notices are handled as an AWS deployment of the CA
  handles them, by the AWS Node Termination Handler beside it
  (`enableSpotInterruptionDraining`): the noticed node is cordoned and
  drained, each pod with its grace period (a checkpoint that fits lands
  first; a job that cannot checkpoint is evicted at once and rescheduled),
  and the cloud reclaims the node at its deadline.
- `reactive-hotpool`: `reactive` plus a fixed warm pool (an Auto Scaling warm
  pool of stopped instances) of 10% of peak demand in the cheapest on-demand
  group: a scale-up wakes a pooled node in about a minute, and the pool refills.
- `karpenter`: Karpenter v1 with its documented defaults (`burst.sim.karpenter`
  implements each rule; citations are to karpenter.sh/docs, source
  aws/karpenter-provider-aws `website/content/en/docs/`):
  - provisioning batches pending pods, closing a batch after 1 s with no new
    pod or 10 s after it opened (reference/settings.md: `BATCH_IDLE_DURATION`
    "default = 1s", `BATCH_MAX_DURATION` "default = 10s"), then launches the
    cheapest capacity that fits, spot only for pods that tolerate it
    (concepts/nodepools.md "Capacity Type"); a failed offering is skipped for
    3 min (`UnavailableOfferingsTTL`, pkg/cache/cache.go). Placement on
    existing nodes is the frozen baseline step, as `reactive`'s;
  - consolidation with `WhenEmptyOrUnderutilized` and `consolidateAfter: 0s`,
    in the documented order: "Empty Node Consolidation", then "Multi Node
    Consolidation", then "Single Node Consolidation"; candidates with the
    fewest pods, then the lowest priority pods, go first
    (concepts/disruption.md "Consolidation");
  - a node is deleted when its pods fit on other nodes, or replaced by one
    cheaper node (on-demand by spot, for pods that all tolerate spot; no
    spot-to-spot replacement, off by default), the replacement ready before
    the old node is drained (concepts/disruption.md, "Control Flow" step 4);
  - the disruption budget is roundup(10% x nodes) - nodes being deleted -
    NotReady nodes (concepts/disruption.md "NodePool Disruption Budgets":
    default `nodes: 10%`);
  - on a spot interruption warning the node is drained and deleted ahead of
    the deadline and its pods are provisioned for again (concepts/disruption.md
    "Interruption");
  - multi-node consolidation may launch one replacement cheaper than all the
    nodes it removes, and the budget counts initialized nodes only; nodes
    holding a pod of a gang stay out of consolidation, as the simulator
    moves a job whole (the module docstring of `burst.sim.karpenter` cites
    each and says why).
- `karpenter-do-not-disrupt`: `karpenter` with every job annotated
  `karpenter.sh/do-not-disrupt: "true"`, which "excludes nodes from voluntary
  disruption" (only empty nodes are consolidated) but not from interruption
  (concepts/disruption.md "Pod-Level Controls").
- `karpenter-balanced`: `karpenter` with `consolidationPolicy: Balanced`
  (v1.14+): a consolidation that disrupts pods goes ahead only when its
  share of the pool's cost saved is at least half its share of the pool's
  pods disrupted (score >= 1/k, k = 2; aws-samples karpenter-blueprints,
  "Balanced Consolidation Policy").
- `karpenter-ml` and `karpenter-balanced-ml`: `karpenter` and
  `karpenter-balanced` as their docs advise a team running ML to configure
  them: `karpenter.sh/do-not-disrupt` on every job that cannot checkpoint (a
  long batch job that "would need to start over"), and each pod's
  `terminationGracePeriodSeconds` at least its job's checkpoint time, so a
  checkpointing job checkpoints before its node goes (concepts/disruption.md
  "Pod-Level Controls", "TerminationGracePeriod").

Every baseline drains a node it deletes with Kubernetes' graceful termination
(`burst.sim.drain`): `terminationGracePeriodSeconds` of 30 s (the `-ml` rows:
at least each job's checkpoint time), in which a job whose checkpoint fits
checkpoints on SIGTERM and resumes from there; any other job resumes from its
last checkpoint. The 30 s stays for the other rows: it is Kubernetes' default,
what a pod gets unless its team sets one, though few checkpoints (30-300 s
here) fit it. The node waits for those checkpoints and
takes no new pods meanwhile (the autoscaler's NoSchedule taint).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from burst.model import (
    Action,
    ActionKind,
    CapacityType,
    GroupId,
    Job,
    JobState,
    NodeGroup,
    NodeId,
    Tier,
    WarmPoolSettings,
    WarmState,
)
from burst.planner import BASELINE_PIPELINE, PIPELINE, Step
from burst.planner.context import PlanContext
from burst.planner.contract import declare
from burst.planner.preempt import preemption_step
from burst.planner.victims import MOST_RECENT, RANDOM
from burst.reconcile import INTERRUPTION_COOLDOWN_S, LAUNCH_FAILURE_COOLDOWN_S
from burst.sim.drain import sigterm_drain
from burst.sim.forecasts import SimForecasting
from burst.sim.karpenter import LOOP_INTERVAL_S as KARPENTER_LOOP_INTERVAL_S
from burst.sim.karpenter import UNAVAILABLE_OFFERING_S as KARPENTER_UNAVAILABLE_OFFERING_S
from burst.sim.karpenter import KarpenterDisruption, KarpenterProvisioning
from burst.sim.setup import SimSetup
from burst.sim.traces import TraceStats

CLAIRVOYANT_FORECASTING = SimForecasting(step_s=60.0, horizon_s=3600.0, clairvoyant=True)
"""`burst-clairvoyant`'s forecasts: the truth, minute by minute, an hour ahead (pre-scaling and hot pools look a boot
latency and its buffer ahead; the hour keeps the reference quick to replay)."""

CA_SCAN_INTERVAL_S = 10.0
CA_UNNEEDED_TIME_S = 600.0
CA_UTILIZATION_THRESHOLD = 0.5
CA_DELAY_AFTER_ADD_S = 600.0
HOTPOOL_SHARE_OF_PEAK = 0.10
CA_NODE_GROUP_BACKOFF_S = 300.0  # --initial-node-group-backoff-duration: a failed scale-up backs the group off
CA_MAX_SCALE_DOWN_PARALLELISM = 10  # --max-scale-down-parallelism: nodes, empty or drained, deleted at once
CA_MAX_DRAIN_PARALLELISM = 1  # --max-drain-parallelism: non-empty nodes drained and deleted at once


@dataclass(frozen=True)
class StrategyRun:
    """How one strategy is simulated: its set-up, pipeline, warm pools and the timers it waits on."""

    name: str
    setup: SimSetup
    pipeline: Sequence[tuple[str, Step]]
    warm_pools: Mapping[GroupId, tuple[int, WarmState]] = field(default_factory=dict)
    next_due: Callable[[datetime], datetime | None] = lambda now: None  # noqa: E731
    forecasting: SimForecasting | None = None
    launch_failure_cooldown_s: float = LAUNCH_FAILURE_COOLDOWN_S
    interruption_cooldown_s: float = INTERRUPTION_COOLDOWN_S
    event_driven: bool = False  # events wake the loop after their batch window; the loop interval is the heartbeat


@dataclass(frozen=True)
class StrategyRequest:
    """What a strategy is built for: its registered name, the set-up, the trace's demand figures and the options
    some strategies read (`fixed_pool_nodes`: the pool size of `burst-fixed-pool`)."""

    name: str
    setup: SimSetup
    stats: TraceStats
    fixed_pool_nodes: int = 0


Build = Callable[[StrategyRequest], StrategyRun]
"""How a strategy is built: the simulated form of the request's strategy (`burst.sim.registry` maps names to these)."""


def _burst(request: StrategyRequest, pipeline: Sequence[tuple[str, Step]], *, setup: SimSetup | None = None,
           warm_pools: Mapping[GroupId, tuple[int, WarmState]] | None = None,
           forecasting: SimForecasting | None = None) -> StrategyRun:
    """A burst variant: event-driven, as the daemon is (events wake the loop after their batch window and the
    set-up's loop interval is the heartbeat); every baseline polls at its own interval instead."""
    return StrategyRun(request.name, setup or request.setup, pipeline, dict(warm_pools or {}), forecasting=forecasting,
                       event_driven=True)


def build_burst(request: StrategyRequest) -> StrategyRun:
    """`burst`: the full planner with demand forecasts, its hot pools sized from them."""
    return _burst(request, PIPELINE, forecasting=SimForecasting())


def build_burst_no_forecast(request: StrategyRequest) -> StrategyRun:
    """`burst-no-forecast`: the full planner without forecasts."""
    return _burst(request, PIPELINE)


def build_burst_clairvoyant(request: StrategyRequest) -> StrategyRun:
    """`burst-clairvoyant`: the full planner with the trace's true future demand in place of forecasts."""
    return _burst(request, PIPELINE, forecasting=CLAIRVOYANT_FORECASTING)


def build_burst_periodic_only(request: StrategyRequest) -> StrategyRun:
    """`burst-periodic-only`: `burst-no-forecast` without checkpoint on notice."""
    return _burst(request, tuple((n, s) for n, s in PIPELINE if n != "checkpoint_on_notice"))


def _with_victim_order(request: StrategyRequest, order: str) -> StrategyRun:
    """`burst-no-forecast` with priority preemption taking its victims in `order`."""
    step: Step = preemption_step(order)
    return _burst(request, tuple((n, step if n == "preempt" else s) for n, s in PIPELINE))


def build_burst_victims_most_recent(request: StrategyRequest) -> StrategyRun:
    """`burst-victims-most-recent`: preemption's victims most recently started first (Kueue's default)."""
    return _with_victim_order(request, MOST_RECENT)


def build_burst_victims_random(request: StrategyRequest) -> StrategyRun:
    """`burst-victims-random`: preemption's victims in seeded random order."""
    return _with_victim_order(request, RANDOM)


def build_burst_no_pool(request: StrategyRequest) -> StrategyRun:
    """`burst-no-pool`: `burst` with no hot pool at all."""
    return _burst(request, PIPELINE, setup=_without_pools(request.setup), forecasting=SimForecasting())


def build_burst_fixed_pool(request: StrategyRequest) -> StrategyRun:
    """`burst-fixed-pool`: `burst` with `fixed_pool_nodes` stopped nodes in the cheapest on-demand group (capped at
    its max size) in place of the forecast-sized pool; no pool when that is 0 or there is no such group."""
    bare = _without_pools(request.setup)
    pools: dict[GroupId, tuple[int, WarmState]] = {}
    pool_group = _cheapest_on_demand(bare)
    if pool_group is not None and request.fixed_pool_nodes > 0:
        pools[pool_group.id] = (min(request.fixed_pool_nodes, pool_group.max_size), WarmState.STOPPED)
    fixed = tuple((n, s) for n, s in PIPELINE if n != "hot_pool")
    return _burst(request, fixed, setup=bare, warm_pools=pools, forecasting=SimForecasting())


def build_static_peak(request: StrategyRequest) -> StrategyRun:
    """`static-peak`: the steady tier sized to the trace's peak demand, no cloud."""
    setup = _static(_without_pools(request.setup), request.stats.peak_gpus)
    return StrategyRun(request.name, setup, BASELINE_PIPELINE)


def build_static_p50(request: StrategyRequest) -> StrategyRun:
    """`static-p50`: the steady tier sized to the P50 of demand, no cloud."""
    setup = _static(_without_pools(request.setup), request.stats.p50_gpus)
    return StrategyRun(request.name, setup, BASELINE_PIPELINE)


def build_reactive(request: StrategyRequest) -> StrategyRun:
    """`reactive`: the Cluster Autoscaler's rules, without warm pools."""
    return _cluster_autoscaler(request, hot_pool=False)


def build_reactive_hotpool(request: StrategyRequest) -> StrategyRun:
    """`reactive-hotpool`: `reactive` with a fixed warm pool of 10% of peak demand in the cheapest on-demand group."""
    return _cluster_autoscaler(request, hot_pool=True)


def _cluster_autoscaler(request: StrategyRequest, *, hot_pool: bool) -> StrategyRun:
    """The Cluster Autoscaler on the set-up without warm pools, with one fixed pool where `hot_pool` says so."""
    setup = _without_pools(request.setup)
    scale_down = ClusterAutoscalerScaleDown()
    pipeline: tuple[tuple[str, Step], ...] = (
        ("ca_taint", scale_down.taint),
        *_baseline_steps(),
        (ClusterAutoscalerScaleDown.STEP, scale_down),
    )
    reactive = dataclasses.replace(setup, loop_interval_s=CA_SCAN_INTERVAL_S)
    pools: dict[GroupId, tuple[int, WarmState]] = {}
    if hot_pool:
        pool_group = _cheapest_on_demand(setup)
        if pool_group is not None:
            size = max(1, math.ceil(HOTPOOL_SHARE_OF_PEAK * request.stats.peak_gpus / pool_group.gpus_per_node))
            pools[pool_group.id] = (min(size, pool_group.max_size), WarmState.STOPPED)
    return StrategyRun(request.name, reactive, pipeline, pools, scale_down.next_due,
                       launch_failure_cooldown_s=CA_NODE_GROUP_BACKOFF_S, interruption_cooldown_s=0.0)


def build_karpenter(request: StrategyRequest) -> StrategyRun:
    """`karpenter`: Karpenter v1 with its documented defaults."""
    return _karpenter(request, KarpenterDisruption())


def build_karpenter_do_not_disrupt(request: StrategyRequest) -> StrategyRun:
    """`karpenter-do-not-disrupt`: `karpenter` with every job annotated `karpenter.sh/do-not-disrupt`."""
    return _karpenter(request, KarpenterDisruption(do_not_disrupt=True))


def build_karpenter_balanced(request: StrategyRequest) -> StrategyRun:
    """`karpenter-balanced`: `karpenter` with `consolidationPolicy: Balanced`."""
    return _karpenter(request, KarpenterDisruption(balanced=True))


def build_karpenter_ml(request: StrategyRequest) -> StrategyRun:
    """`karpenter-ml`: `karpenter` as its docs advise for ML: do-not-disrupt on jobs that cannot checkpoint, and a
    grace period at least each job's checkpoint time."""
    return _karpenter(request, KarpenterDisruption(ml=True))


def build_karpenter_balanced_ml(request: StrategyRequest) -> StrategyRun:
    """`karpenter-balanced-ml`: `karpenter-balanced` configured as `karpenter-ml` is."""
    return _karpenter(request, KarpenterDisruption(balanced=True, ml=True))


def _karpenter(request: StrategyRequest, disruption: KarpenterDisruption) -> StrategyRun:
    """Karpenter's provisioning and the given disruption on the set-up without warm pools."""
    steps = [(n, KarpenterProvisioning(s) if n == PLACE_STEP else s) for n, s in _baseline_steps()]
    provisioning = next(s for _, s in steps if isinstance(s, KarpenterProvisioning))
    pipeline: tuple[tuple[str, Step], ...] = (("karpenter_taint", disruption.taint), *steps,
                                             (KarpenterDisruption.STEP, disruption))

    def next_due(now: datetime) -> datetime | None:
        due = [t for t in (provisioning.next_due(now), disruption.next_due(now)) if t is not None]
        return min(due) if due else None

    karpenter = dataclasses.replace(_without_pools(request.setup), loop_interval_s=KARPENTER_LOOP_INTERVAL_S)
    return StrategyRun(request.name, karpenter, pipeline, {}, next_due,
                       launch_failure_cooldown_s=KARPENTER_UNAVAILABLE_OFFERING_S, interruption_cooldown_s=0.0)


PLACE_STEP = "place+scale_up"


def _baseline_steps() -> list[tuple[str, Step]]:
    """The frozen placement pipeline the baselines share, without burst's own notice, prescale, pool and
    scale-down steps (each baseline brings its own scale-down)."""
    return [(n, s) for n, s in BASELINE_PIPELINE if n not in ("checkpoint_on_notice", "prescale", "hot_pool", "scale_down")]


def _without_pools(setup: SimSetup) -> SimSetup:
    """The set-up with every group's warm-pool settings cleared (no pool, nothing kept on scale-in)."""
    groups = tuple(dataclasses.replace(g, warm_pool=WarmPoolSettings()) for g in setup.groups)
    return dataclasses.replace(setup, groups=groups)


def _static(setup: SimSetup, gpus: float) -> SimSetup:
    """The set-up with no elastic groups and the first steady group holding `gpus` (rounded up to nodes)."""
    steady = [g for g in setup.groups if g.tier is Tier.STEADY]
    if not steady:
        raise ValueError("static strategies need a steady (on-prem) group in the set-up")
    first, rest = steady[0], steady[1:]
    others = sum(setup.initial.get(g.id, 0) * g.gpus_per_node for g in rest)
    nodes = max(0, math.ceil(max(0.0, gpus - others) / first.gpus_per_node))
    resized = dataclasses.replace(first, min_size=nodes, max_size=max(nodes, 0))
    initial = {g.id: setup.initial.get(g.id, 0) for g in rest} | {first.id: nodes}
    return dataclasses.replace(setup, groups=(resized, *rest), initial=initial)


def _cheapest_on_demand(setup: SimSetup) -> NodeGroup | None:
    groups = [g for g in setup.groups if g.tier is Tier.ELASTIC and g.capacity_type is CapacityType.ON_DEMAND]
    return min(groups, key=lambda g: (setup.catalog.group_price(g) / g.gpus_per_node, g.id), default=None)


@declare(reads=("scale_ups", "placements"))
class ClusterAutoscalerScaleDown:
    """The Cluster Autoscaler's scale-down, as a planner step (see the module docstring for its rules).

    It keeps the CA's own timers between ticks (when each node became
    unneeded, when the last scale-up happened), as the CA does in memory.
    """

    STEP = "ca_scale_down"

    def __init__(
        self,
        *,
        unneeded_time_s: float = CA_UNNEEDED_TIME_S,
        utilization_threshold: float = CA_UTILIZATION_THRESHOLD,
        delay_after_add_s: float = CA_DELAY_AFTER_ADD_S,
    ) -> None:
        self.unneeded_time_s = unneeded_time_s
        self.utilization_threshold = utilization_threshold
        self.delay_after_add_s = delay_after_add_s
        self.unneeded_since: dict[NodeId, datetime] = {}
        self.last_scale_up: datetime | None = None
        self.draining: dict[GroupId, set[NodeId]] = {}  # chosen nodes whose jobs checkpoint on SIGTERM first

    def taint(self, ctx: PlanContext) -> None:
        """The CA's `ToBeDeletedByClusterAutoscaler` NoSchedule taint on the nodes it drains, and the Node
        Termination Handler's cordon on spot nodes with an interruption notice: nothing is placed on them."""
        noticed = [n for n in ctx.snapshot.notices if n in ctx.nodes]
        for cap in ctx.groups.values():
            draining = self.draining.get(cap.group.id, set())
            for node_id in [n for n in cap.free_of if n in draining or n in noticed]:
                free = cap.free_of[node_id]
                if free > 0:
                    cap.take_on((node_id,), free)

    def next_due(self, now: datetime) -> datetime | None:
        """When a CA timer next expires after `now` (a node's unneeded time, the delay after a scale-up)."""
        due = [t + timedelta(seconds=self.unneeded_time_s) for t in self.unneeded_since.values()]
        if self.last_scale_up is not None:
            due.append(self.last_scale_up + timedelta(seconds=self.delay_after_add_s))
        later = [t for t in due if t > now]
        return min(later) if later else None

    def __call__(self, ctx: PlanContext) -> None:
        now = ctx.now
        if ctx.scale_ups:  # this plan launches (the hand-off, not a scan of other steps' actions)
            self.last_scale_up = now
        self._drain_noticed(ctx)
        if self.draining:
            self._finish_drains(ctx)
        used, unneeded = self._unneeded(ctx)
        seen = {n for ids in unneeded.values() for n in ids}
        self.unneeded_since = {n: self.unneeded_since.get(n, now) for n in seen}
        if self.last_scale_up is not None and (now - self.last_scale_up).total_seconds() < self.delay_after_add_s:
            return
        self._remove(ctx, used, unneeded)

    def _unneeded(self, ctx: PlanContext) -> tuple[dict[NodeId, int], dict[GroupId, list[NodeId]]]:
        """GPUs in use on each ready elastic node after this plan's placements, and the unneeded nodes per group:
        under the utilisation threshold and with every pod fitting on other nodes, nodes found unneeded before
        taking none of them (the CA's removal simulation, least used first)."""
        nodes = ctx.nodes
        used: dict[NodeId, int] = {}
        under: list[tuple[int, NodeId, GroupId]] = []
        for cap in ctx.groups.values():
            if cap.group.tier is not Tier.ELASTIC:
                continue
            draining = self.draining.get(cap.group.id, ())
            for node_id, free_gpus in cap.free_of.items():
                if node_id in draining or node_id in ctx.snapshot.notices:
                    continue
                gpus = nodes[node_id].gpus
                used[node_id] = gpus - free_gpus
                if gpus - free_gpus < self.utilization_threshold * gpus:
                    under.append((gpus - free_gpus, node_id, cap.group.id))
        unneeded: dict[GroupId, list[NodeId]] = {}
        free = {n: f for c in ctx.groups.values() for n, f in c.free_of.items()}  # where pods may go, steady too
        going: set[NodeId] = set()
        for _, node_id, group_id in sorted(under):
            if self._pods_fit_elsewhere(ctx, node_id, free, going | {node_id}):
                going.add(node_id)
                unneeded.setdefault(group_id, []).append(node_id)
        return used, unneeded

    def _remove(self, ctx: PlanContext, used: dict[NodeId, int], unneeded: dict[GroupId, list[NodeId]]) -> None:
        """Remove the nodes unneeded for `unneeded_time_s`: empty ones up to `--max-scale-down-parallelism`, and
        one non-empty node at a time (`--max-drain-parallelism`), its pods evicted with their grace period."""
        now = ctx.now
        in_flight = sum(len(v) for v in self.draining.values())
        deletes_left = CA_MAX_SCALE_DOWN_PARALLELISM - in_flight
        drains_left = CA_MAX_DRAIN_PARALLELISM - in_flight
        removing: set[NodeId] = set()
        free: dict[NodeId, int] | None = None  # free GPUs of every ready node, steady ones too: where pods may go
        for group_id in sorted(unneeded):
            cap = ctx.groups[group_id]
            due = sorted(
                (n for n in unneeded[group_id] if (now - self.unneeded_since[n]).total_seconds() >= self.unneeded_time_s),
                key=lambda n: (used.get(n, 0), n),
            )
            chosen: list[NodeId] = []
            if due and free is None:
                free = {n: f for c in ctx.groups.values() for n, f in c.free_of.items()}
            for node_id in due:
                empty = not _jobs_on(ctx, node_id)
                if cap.target - len(chosen) <= cap.group.min_size or deletes_left <= 0:
                    break
                if not empty and drains_left <= 0:
                    continue
                assert free is not None
                if self._pods_fit_elsewhere(ctx, node_id, free, removing | {node_id}):
                    chosen.append(node_id)
                    removing.add(node_id)
                    deletes_left -= 1
                    drains_left -= 0 if empty else 1
            # pods get SIGTERM: a node whose jobs checkpoint within the grace period goes once they have
            waiting = [n for n in chosen if not sigterm_drain(ctx, _jobs_on(ctx, n), self.STEP,
                                                              f"cluster-autoscaler scale-down of {n}")]
            if waiting:
                self.draining.setdefault(group_id, set()).update(waiting)
                chosen = [n for n in chosen if n not in waiting]
            if chosen:
                evicting = sum(1 for n in chosen if used.get(n, 0))
                ctx.add_action(
                    Action(
                        kind=ActionKind.SCALE_DOWN,
                        target=group_id,
                        count=len(chosen),
                        size=cap.target - len(chosen),
                        node_ids=tuple(sorted(chosen)),
                        step=self.STEP,
                        reason=f"{len(chosen)} node(s) under {self.utilization_threshold:.0%} GPU requests for "
                        f"{self.unneeded_time_s / 60:g} min (cluster-autoscaler rule); {evicting} drained with "
                        f"their pods rescheduled ({cap.target} -> {cap.target - len(chosen)} nodes)",
                    )
                )
                for n in chosen:
                    self.unneeded_since.pop(n, None)

    def _drain_noticed(self, ctx: PlanContext) -> None:
        """The AWS Node Termination Handler: a spot node with an interruption notice is cordoned (`taint`) and
        drained, each pod evicted with its grace period (a checkpoint that fits it lands first); the node itself
        goes when the cloud reclaims it."""
        for node_id in sorted(n for n in ctx.snapshot.notices if n in ctx.nodes):
            sigterm_drain(ctx, _jobs_on(ctx, node_id), self.STEP,
                          f"spot interruption notice: aws-node-termination-handler drains {node_id}", evict_others=True)

    def _finish_drains(self, ctx: PlanContext) -> None:
        """Remove the drained nodes whose jobs' SIGTERM checkpoints have landed (and forget vanished ones)."""
        live = {n.id for n in ctx.snapshot.nodes if n.live}
        for group_id in sorted(self.draining):
            nodes = {n for n in self.draining[group_id] if n in live}
            done = sorted(n for n in nodes if sigterm_drain(ctx, _jobs_on(ctx, n), self.STEP,
                                                            f"cluster-autoscaler scale-down of {n}"))
            self.draining[group_id] = nodes - set(done)
            if not self.draining[group_id]:
                del self.draining[group_id]
            cap = ctx.groups.get(group_id)
            if done and cap is not None:
                ctx.add_action(Action(
                    kind=ActionKind.SCALE_DOWN, target=group_id, count=len(done), size=cap.target - len(done),
                    node_ids=tuple(done), step=self.STEP,
                    reason=f"{len(done)} drained node(s) removed: their jobs' checkpoints on SIGTERM have landed "
                           f"(cluster-autoscaler rule; {cap.target} -> {cap.target - len(done)} nodes)"))

    @staticmethod
    def _pods_fit_elsewhere(ctx: PlanContext, node_id: NodeId, free: dict[NodeId, int], excluded: set[NodeId]) -> bool:
        """Whether every job on `node_id` fits (first fit) on free GPUs of ready nodes not being removed (a gang
        whole, as the simulator moves it: see `burst.sim.karpenter`); on success the GPUs they take are taken from
        `free`."""
        jobs = _jobs_on(ctx, node_id)
        room = {n: f for n, f in free.items() if n not in excluded}
        for need in sorted((j.whole_gpus for j in jobs), reverse=True):
            host = next((n for n, f in sorted(room.items()) if f >= need), None)
            if host is None:
                return False
            room[host] -= need
        for n, f in room.items():
            free[n] = f
        return True


def _jobs_on(ctx: PlanContext, node_id: NodeId) -> list[Job]:
    """The jobs running on a node, and those this plan placed there."""
    jobs = [j for j in ctx.snapshot.jobs if node_id in j.node_ids and j.state in (JobState.RUNNING, JobState.CHECKPOINTING)]
    jobs += [
        j for job_id, node_ids in ctx.placements.items() if node_id in node_ids
        for j in ctx.snapshot.jobs if j.id == job_id
    ]
    return jobs


__all__ = [
    "Build",
    "ClusterAutoscalerScaleDown",
    "StrategyRequest",
    "StrategyRun",
    "build_burst",
    "build_burst_clairvoyant",
    "build_burst_fixed_pool",
    "build_burst_no_forecast",
    "build_burst_no_pool",
    "build_burst_periodic_only",
    "build_burst_victims_most_recent",
    "build_burst_victims_random",
    "build_karpenter",
    "build_karpenter_balanced",
    "build_karpenter_balanced_ml",
    "build_karpenter_do_not_disrupt",
    "build_karpenter_ml",
    "build_reactive",
    "build_reactive_hotpool",
    "build_static_p50",
    "build_static_peak",
]
