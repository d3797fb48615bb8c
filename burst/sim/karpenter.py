"""Karpenter, as planner steps the simulator runs: provisioning batches, consolidation and interruption handling.

Each rule is Karpenter's documented default (v1 docs, `karpenter.sh/docs`;
source `aws/karpenter-provider-aws`, `website/content/en/docs/`):

- Provisioning (`KarpenterProvisioning`) batches pending pods: a batch closes
  after `BATCH_IDLE_S` with no new pending pod, or `BATCH_MAX_S` after it
  opened, whichever comes first (reference/settings.md: `BATCH_IDLE_DURATION`
  "default = 1s", `BATCH_MAX_DURATION` "default = 10s"). Placement on existing
  nodes and the launch itself are the frozen baseline step, the same as
  `reactive`'s: the cheapest capacity that fits, spot only for pods that
  tolerate it (concepts/nodepools.md: "Karpenter prioritizes Spot offerings if
  the NodePool allows Spot and on-demand instances"; a pod that is not
  fault-tolerant carries no spot toleration).
- Consolidation (`KarpenterDisruption`, concepts/disruption.md "Consolidation")
  with `consolidationPolicy: WhenEmptyOrUnderutilized` and `consolidateAfter:
  0s`: a node is a candidate as soon as it is ready. Three mechanisms, in
  order, one per plan: "Empty Node Consolidation - Delete any entirely empty
  nodes in parallel"; "Multi Node Consolidation - Try to delete two or more
  nodes in parallel, possibly launching a single replacement whose price is
  lower than that of all nodes being removed"; "Single Node Consolidation -
  Try to delete any single node, possibly launching a single replacement
  whose price is lower than that of the node being removed". A node is
  deleted "if all of its pods can run on free capacity of other nodes in the
  cluster", and replaced "if all of its pods can run on a combination of free
  capacity of other nodes in the cluster and a single lower price replacement
  node" (scheduling is simulated: first fit, biggest pod first, spot nodes
  only for spot-eligible pods, on-prem nodes included; the pods left over go
  to the replacement). Multi-node consolidation tries the most candidates the
  budget allows first, then fewer, down to two. Candidates are tried in the
  order that "disrupts your workloads the least": "Nodes running fewer pods",
  then "Nodes with lower priority pods" (node expiry, 720 h, never comes in
  these runs). A replacement may be spot for pods that all tolerate it (an
  on-demand node replaced by a spot one); spot-to-spot replacement is off by
  default (`SpotToSpotConsolidation`, for multi-node consolidation too:
  `computeSpotToSpotConsolidation` returns no command when the gate is off)
  and is not made. The replacement is ready before the old nodes are drained
  (Control Flow step 4: "Pre-spin any replacement nodes needed ... and wait
  for them to become ready").
- Gangs stay out of consolidation: a node holding a pod of a multi-node job
  is not a candidate. Karpenter knows pods, not gangs, and would move such a
  pod when it fits elsewhere while its peers restart in place from their
  checkpoint; the simulator moves a job whole (it is requeued and placed
  again, often on new nodes, while the nodes its peers held empty and go), so
  it would charge Karpenter boots and churn that Karpenter does not cause.
  Measured on itp-cluster02 (14 days) with gang nodes as candidates: 41,001
  USD and 1,631 GPU-h lost (8,488 USD of it booting), against 30,444 USD and
  385 GPU-h with them left out, so they stay out: a baseline is never made
  weaker than its documented behaviour.
  The `-ml` rows' do-not-disrupt covers the gangs that cannot checkpoint as
  their docs advise.
- Disruption budget (concepts/disruption.md "NodePool Disruption Budgets"):
  "If undefined, Karpenter will default to one budget with nodes: 10%", and
  "allowed_disruptions = roundup(total * percentage) - total_deleting -
  total_notready", over the elastic nodes (one NodePool). The total counts
  initialized nodes only: Karpenter's `BuildDisruptionBudgetMapping`
  (pkg/controllers/disruption/helpers.go) skips a node that is not
  initialized ("If a node is launched/registered, but not initialized, pods
  aren't scheduled to the node"), so a node still booting neither adds to the
  total nor uses the budget.
- `do-not-disrupt` (`KarpenterDisruption(do_not_disrupt=True)`, the
  `karpenter-do-not-disrupt` strategy: every job carries
  `karpenter.sh/do-not-disrupt: "true"`, as long training jobs usually do):
  "Nodes with do-not-disrupt pods will be excluded from voluntary disruption",
  so only empty nodes are consolidated; it "does not exclude nodes from
  involuntary disruption methods, i.e. ... Interruption".
- As a team running ML would configure it (`KarpenterDisruption(ml=True)`,
  the `karpenter-ml` and `karpenter-balanced-ml` strategies): the docs advise
  permanent `do-not-disrupt` for "a long batch job (such as you might have
  with machine learning) that would need to start over if it were
  interrupted", so a job that cannot checkpoint carries it (`cannot_checkpoint`)
  and its node is left out of consolidation; every pod's
  `terminationGracePeriodSeconds` is at least its job's checkpoint time
  (`ml_grace_s`), so a checkpointing job checkpoints before its node goes, on
  consolidation and on an interruption warning alike (a reclaim that comes
  first still cuts it short). Everything else is `karpenter`'s or
  `karpenter-balanced`'s.
- Interruption (concepts/disruption.md "Interruption"): on a spot interruption
  warning Karpenter "taints, drains, and terminates the node(s) ahead of the
  interruption event" and "will start a new node as soon as it sees the Spot
  interruption warning": the noticed node is drained and deleted at once, and
  provisioning launches for its evicted pods on the next plan (a batch later).
- Balanced (`KarpenterDisruption(balanced=True)`, the `karpenter-balanced`
  strategy; `consolidationPolicy: Balanced`, v1.14+, aws-samples
  karpenter-blueprints "Balanced Consolidation Policy"): a multi- or
  single-node action goes ahead only when "score = savings_fraction /
  disruption_fraction" is at least 1/k with k = 2, savings over the pool's
  cost per hour and disrupted pods over the pool's pods (each pod counting
  1, Karpenter's default eviction cost). Empty nodes disrupt nothing and
  always go.
- Draining honours `terminationGracePeriodSeconds` (Kubernetes' default, 30 s;
  `GRACE_PERIOD_S`, `sigterm_drain`): a fault-tolerant job whose checkpoint fits
  the grace period checkpoints on SIGTERM and is evicted once it has landed;
  any other job dies with its node and resumes from its last checkpoint. The
  plain rows keep the default, which few checkpoints (30-300 s here) fit: it
  is what a pod gets unless its team sets it, and the NodePool's
  `terminationGracePeriod` (unset by default) only bounds a drain, never
  lengthens a pod's (concepts/disruption.md "TerminationGracePeriod"). The
  `-ml` rows set it per job.
  While a node drains nothing new is placed on it (the `karpenter.sh/disrupted`
  NoSchedule taint).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from burst.model import Action, ActionKind, CapacityType, GroupId, Job, JobState, NodeId, NodeState, Tier
from burst.planner.context import PlanContext
from burst.planner.contract import declare, spec_of
from burst.planner.eligibility import spot_eligible
from burst.planner.preempt import job_priority
from burst.sim.drain import GRACE_PERIOD_S, sigterm_drain

Step = Callable[[PlanContext], None]

BATCH_IDLE_S = 1.0
BATCH_MAX_S = 10.0
BUDGET_NODES_FRACTION = 0.10
BALANCED_K = 2.0
REPLACEMENT_TIMEOUT_S = 900.0
"""A replacement not ready this long after its launch is given up (the old node is kept): Karpenter
un-taints and starts over when a replacement fails to initialize."""
UNAVAILABLE_OFFERING_S = 180.0
"""A failed launch marks its offering unavailable this long, and provisioning falls back to the next offering
(on-demand after spot): concepts/nodepools.md "Capacity Type" (an insufficient-capacity result is cached
"across all attempts to provision EC2 capacity for that instance type and zone"), for
`UnavailableOfferingsTTL = 3 * time.Minute` (aws/karpenter-provider-aws, pkg/cache/cache.go)."""
LOOP_INTERVAL_S = 1.0
"""Karpenter reacts to pod and node events rather than scanning: the simulator looks every second."""

STEP_PROVISION = "karpenter_provisioning"
STEP_DISRUPT = "karpenter_disruption"
STEP_TAINT = "karpenter_taint"
_NOT_READY = frozenset({NodeState.REQUESTED, NodeState.BOOTING, NodeState.WAKING})
_DELETING = frozenset({NodeState.DRAINING, NodeState.TERMINATING, NodeState.INTERRUPTED})
_RUNNING = (JobState.RUNNING, JobState.CHECKPOINTING)


def cannot_checkpoint(job: Job) -> bool:
    """Whether the job would have to start over if its node went: not fault-tolerant, or no checkpoint to take."""
    return not job.fault_tolerant or job.checkpoint_duration_s is None


def ml_grace_s(job: Job) -> float:
    """The `-ml` rows' `terminationGracePeriodSeconds` for a job's pods: its checkpoint time, at least Kubernetes'
    default 30 s."""
    return max(GRACE_PERIOD_S, job.checkpoint_duration_s or 0.0)


@dataclass(frozen=True)
class _Replacement:
    """One cheaper node launched for the pods of `old` that fit nowhere else; `old` is drained once it is ready."""

    group: GroupId
    at: datetime
    before: frozenset[NodeId]  # the group's nodes when it was launched
    need: int  # GPUs it must have free
    old: tuple[NodeId, ...]


@dataclass
class _Batch:
    opened: datetime
    last_new: datetime

    def closes(self) -> datetime:
        return min(self.last_new + timedelta(seconds=BATCH_IDLE_S), self.opened + timedelta(seconds=BATCH_MAX_S))


class KarpenterProvisioning:
    """Karpenter's provisioner: the baseline placement step, whose launches wait for the batch window to close."""

    STEP = STEP_PROVISION

    def __init__(self, place: Step) -> None:
        self.place = place
        self.batch: _Batch | None = None
        self.seen_pending: set[str] = set()
        inner = spec_of(place)
        declare(writes=(*inner.writes, "scale_ups") if inner else ("scale_ups",),
                reads=(*inner.reads, "scale_ups") if inner else ("scale_ups",))(self)

    def next_due(self, now: datetime) -> datetime | None:
        """When the open batch closes (None when none is open)."""
        if self.batch is None:
            return None
        closes = self.batch.closes()
        return closes if closes > now else None

    def __call__(self, ctx: PlanContext) -> None:
        now = ctx.now
        self.place(ctx)
        pending = {j.id for j in ctx.snapshot.pending_jobs}
        new = bool(pending - self.seen_pending)
        self.seen_pending = pending
        if not ctx.scale_ups:  # the place step launched nothing
            self.batch = None
            return
        if self.batch is None:
            self.batch = _Batch(now, now)
        elif new:
            self.batch.last_new = now
        closes = self.batch.closes()
        if now >= closes:
            self.batch = None
            return
        nodes = sum(a.count or 0 for a in ctx.withdraw_scale_ups())
        ctx.hold("karpenter:batch", f"{nodes} node(s) for pending pods wait for the batch window to close at "
                 f"{closes:%H:%M:%S} ({BATCH_IDLE_S:g} s with no new pod, {BATCH_MAX_S:g} s at most)", self.STEP)


@declare(writes=("scale_ups",), reads=("placements",))
class KarpenterDisruption:
    """Karpenter's disruption controller: interruption, then consolidation (see the module docstring).

    Keeps, as Karpenter does, the nodes it is draining and the replacements it waits for between plans.
    `taint` is a step to run before placement: it keeps pods off the nodes being drained.
    """

    STEP = STEP_DISRUPT

    def __init__(self, *, do_not_disrupt: bool = False, balanced: bool = False, ml: bool = False) -> None:
        self.do_not_disrupt = do_not_disrupt
        self.balanced = balanced
        self.ml = ml
        self.draining: dict[NodeId, str] = {}  # node -> why
        self.replacing: dict[NodeId, _Replacement] = {}  # old node -> the replacement it waits for

    def protected(self, job: Job) -> bool:
        """Whether the job's pods carry `karpenter.sh/do-not-disrupt`: every job's, or under `ml` those of a job
        that cannot checkpoint."""
        return self.do_not_disrupt or (self.ml and cannot_checkpoint(job))

    def grace_s(self, job: Job) -> float:
        """The job's `terminationGracePeriodSeconds`: Kubernetes' 30 s, or under `ml` at least its checkpoint time."""
        return ml_grace_s(job) if self.ml else GRACE_PERIOD_S

    @declare()
    def taint(self, ctx: PlanContext) -> None:
        """The `karpenter.sh/disrupted` NoSchedule taint: no free GPU of a node being drained is offered."""
        for cap in ctx.groups.values():
            for node_id in [n for n in cap.free_of if n in self.draining or n in self.replacing]:
                free = cap.free_of[node_id]
                if free > 0:
                    cap.take_on((node_id,), free)

    def next_due(self, now: datetime) -> datetime | None:
        """Consolidation acts on every event; a replacement's timeout is the only timer."""
        due = [r.at + timedelta(seconds=REPLACEMENT_TIMEOUT_S) for r in self.replacing.values()]
        later = [t for t in due if t > now]
        return min(later) if later else None

    def __call__(self, ctx: PlanContext) -> None:
        view = _View.of(ctx)
        self.draining = {n: why for n, why in self.draining.items() if n in view.live}
        for node_id in sorted(ctx.snapshot.notices):
            if node_id in view.elastic and node_id not in self.draining:
                self.draining[node_id] = "spot interruption warning (involuntary: budgets and do-not-disrupt do not apply)"
                self.replacing.pop(node_id, None)
        self._replacements_ready(ctx, view)
        if not self.draining and not self.replacing:
            self._consolidate(ctx, view)
        self._drain(ctx, view)

    # ---------------------------------------------------------------- consolidation

    def _consolidate(self, ctx: PlanContext, view: _View) -> None:
        allowed = view.allowed_disruptions(len(self.draining))
        if allowed <= 0:
            if view.candidates:
                ctx.hold("karpenter:budget", f"no node disrupted: the budget allows {allowed} (roundup(10% x "
                         f"{view.total} initialized nodes) - deleting)", self.STEP)
            return
        empty = [n for n in view.candidates if not view.jobs_on[n]]
        if empty:
            for node_id in empty[:allowed]:
                self.draining[node_id] = "empty node consolidation"
            return
        protected = {n for n in view.candidates if any(self.protected(j) for j in view.jobs_on[n])}
        if protected:
            ctx.hold("karpenter:do-not-disrupt", f"{len(protected)} node(s) running do-not-disrupt pods are excluded "
                     "from consolidation", self.STEP)
        movable = [n for n in view.candidates if view.movable(n) and n not in protected]
        order = sorted(movable, key=lambda n: view.disruption_cost(ctx, n))
        for k in range(min(len(order), allowed), 1, -1):
            if self._consolidate_nodes(ctx, view, order[:k], "multi node consolidation"):
                return
        for node_id in order:
            if self._consolidate_nodes(ctx, view, [node_id], "single node consolidation"):
                return

    def _consolidate_nodes(self, ctx: PlanContext, view: _View, chosen: Sequence[NodeId], method: str) -> bool:
        """Delete `chosen` when their pods fit on other nodes, or replace them with one cheaper node that takes the
        pods that do not; whether either was done (Balanced may decline both)."""
        jobs = [j for n in chosen for j in view.jobs_on[n]]
        left = view.unplaced(ctx, jobs, set(chosen))
        if not left:
            if not self._pays(ctx, view, chosen, 0.0):
                return False
            for node_id in chosen:
                self.draining[node_id] = f"{method} (its pods fit on other nodes)"
            return True
        found = view.replacement(ctx, chosen, left)
        if found is None:
            return False
        group_id, need = found
        cap = ctx.groups[group_id]
        if not self._pays(ctx, view, chosen, cap.price_per_node):
            return False
        old_usd_h = sum(ctx.groups[view.group_of[n]].price_per_node for n in chosen)
        replacement = _Replacement(group_id, ctx.now, frozenset(cap.free_of), need, tuple(chosen))
        for node_id in chosen:
            self.replacing[node_id] = replacement
        ctx.add_scale_up(Action(
            kind=ActionKind.SCALE_UP, target=group_id, count=1, size=cap.planned_size + 1, step=self.STEP,
            reason=f"{method}: replace {', '.join(chosen)} (${old_usd_h:.2f}/h) with one {group_id} node "
                   f"(${cap.price_per_node:.2f}/h) for the pods that fit nowhere else; drained once it is ready"))
        cap.launched += 1
        return True

    def _pays(self, ctx: PlanContext, view: _View, nodes: Sequence[NodeId], replacement_usd_h: float) -> bool:
        """Under the Balanced policy, whether the action's savings outweigh its disruption: score =
        (savings / the pool's cost) / (pods disrupted / the pool's pods) >= 1/k, k = 2 (each pod costs 1)."""
        if not self.balanced:
            return True
        pool_usd_h, pool_pods = view.pool(ctx)
        pods = sum(len(view.jobs_on[n]) for n in nodes)
        savings = sum(ctx.groups[view.group_of[n]].price_per_node for n in nodes) - replacement_usd_h
        if savings <= 0 or pool_usd_h <= 0:
            return False
        if pods == 0 or pool_pods == 0:
            return True
        score = (savings / pool_usd_h) / (pods / pool_pods)
        if score >= 1 / BALANCED_K:
            return True
        ctx.hold(f"node:{nodes[0]}", f"Balanced consolidation declined: score {score:.2f} < 1/{BALANCED_K:g} "
                 f"(saves ${savings:.2f}/h of ${pool_usd_h:.2f}/h, disrupts {pods} of {pool_pods} pods)", self.STEP)
        return False

    def _replacements_ready(self, ctx: PlanContext, view: _View) -> None:
        for replacement in sorted(set(self.replacing.values()), key=lambda r: r.old):
            old = [n for n in replacement.old if n in view.live]
            cap = ctx.groups[replacement.group]
            fresh = [n for n in cap.free_of if n not in replacement.before and cap.free_of[n] >= replacement.need]
            timed_out = (ctx.now - replacement.at).total_seconds() >= REPLACEMENT_TIMEOUT_S
            if old and not fresh and not timed_out:
                continue
            for node_id in replacement.old:
                self.replacing.pop(node_id, None)
            if fresh:
                for node_id in old:
                    self.draining[node_id] = f"consolidation: replaced by {fresh[0]}, now ready"
            elif old:
                ctx.hold(f"node:{old[0]}", f"replacement in {replacement.group} not ready after "
                         f"{REPLACEMENT_TIMEOUT_S:g} s: consolidation gives it up", self.STEP)

    # ---------------------------------------------------------------- drain and delete

    def _drain(self, ctx: PlanContext, view: _View) -> None:
        gone: dict[GroupId, list[NodeId]] = defaultdict(list)
        drained: dict[str, bool] = {}  # job -> whether it is off its nodes (a gang's pods span several nodes)
        for node_id, why in sorted(self.draining.items()):
            if node_id not in view.elastic:
                continue
            for job in view.jobs_on[node_id]:
                if job.id not in drained:
                    drained[job.id] = sigterm_drain(ctx, [job], self.STEP, f"{why}: drain {node_id}", self.grace_s)
            if all(drained[j.id] for j in view.jobs_on[node_id]):
                gone[view.group_of[node_id]].append(node_id)
        for group_id, node_ids in sorted(gone.items()):
            cap = ctx.groups[group_id]
            ctx.add_action(Action(
                kind=ActionKind.SCALE_DOWN, target=group_id, count=len(node_ids), size=max(0, cap.target - len(node_ids)),
                node_ids=tuple(node_ids), step=self.STEP,
                reason="; ".join(f"{n}: {self.draining[n]}" for n in node_ids)
                + f" (Karpenter; {cap.target} -> {max(0, cap.target - len(node_ids))} nodes)"))
            for node_id in node_ids:
                del self.draining[node_id]


@dataclass
class _View:
    """What the disruption controller reads from a plan: elastic nodes, their jobs, free GPUs after placement."""

    elastic: set[NodeId]
    live: set[NodeId]
    group_of: dict[NodeId, GroupId]
    jobs_on: dict[NodeId, list[Job]]
    free: dict[NodeId, int]  # free GPUs of every ready node (steady ones too), after this plan's placements
    candidates: list[NodeId]  # ready elastic nodes, not noticed, in id order
    total: int  # initialized elastic nodes (booting ones are left out, as Karpenter's budget leaves them out)
    deleting: int
    span: dict[str, int]  # job -> how many nodes its pods hold (a gang holds several)
    hosts: list[NodeId]  # ready nodes with free GPUs, in id order (where pods may be rescheduled)
    spot_nodes: set[NodeId]
    _pool: tuple[float, int] | None = None

    @classmethod
    def of(cls, ctx: PlanContext) -> _View:
        snap = ctx.snapshot
        elastic_groups = {g.id for g in snap.groups if g.tier is Tier.ELASTIC}
        group_of = {n.id: n.group_id for n in snap.nodes}
        live = {n.id for n in snap.nodes if n.live}
        elastic = {n.id for n in snap.nodes if n.group_id in elastic_groups and n.live}
        jobs_on: dict[NodeId, list[Job]] = defaultdict(list)
        span: dict[str, int] = {}
        for job in snap.running_jobs:
            if job.state in _RUNNING:
                span[job.id] = len(job.node_ids)
                for node_id in job.node_ids:
                    jobs_on[node_id].append(job)
        by_id = {j.id: j for j in snap.pending_jobs}
        for job_id, node_ids in ctx.placements.items():
            if job_id in by_id:
                span[job_id] = len(node_ids)
                for node_id in node_ids:
                    jobs_on[node_id].append(by_id[job_id])
        free = {n: f for cap in ctx.groups.values() for n, f in cap.free_of.items()}
        candidates = sorted(n for n in elastic if n in free and n not in snap.notices)
        states = [n.state for n in snap.nodes if n.id in elastic and n.state not in _NOT_READY]
        hosts = sorted(n for n, f in free.items() if f > 0)
        spot_groups = {g.id for g in snap.groups if g.capacity_type is CapacityType.SPOT}
        spot_nodes = {n for n in hosts if group_of.get(n) in spot_groups}
        return cls(elastic, live, group_of, jobs_on, free, candidates, len(states),
                   sum(1 for s in states if s in _DELETING), span, hosts, spot_nodes)

    def pool(self, ctx: PlanContext) -> tuple[float, int]:
        """The candidate nodes' cost per hour and pod count (computed once per plan)."""
        if self._pool is None:
            self._pool = (sum(ctx.groups[self.group_of[n]].price_per_node for n in self.candidates),
                          sum(len(self.jobs_on[n]) for n in self.candidates))
        return self._pool

    def allowed_disruptions(self, draining: int) -> int:
        """roundup(10% x initialized nodes) - nodes being deleted (a ready node is never NotReady here)."""
        return math.ceil(BUDGET_NODES_FRACTION * self.total) - self.deleting - draining

    def movable(self, node_id: NodeId) -> bool:
        """Whether every job on the node may be rescheduled (jobs on one node only: see the module docstring)."""
        return all(self.span.get(j.id, 1) <= 1 for j in self.jobs_on[node_id])

    def disruption_cost(self, ctx: PlanContext, node_id: NodeId) -> tuple[int, int, str]:
        """Fewer pods first, then lower priority pods (then id, for determinism)."""
        jobs = self.jobs_on[node_id]
        return len(jobs), max((job_priority(ctx, j) for j in jobs), default=0), node_id

    def unplaced(self, ctx: PlanContext, jobs: Sequence[Job], excluded: set[NodeId]) -> list[Job]:
        """The pods of `jobs` that do not fit (first fit, biggest first) on free GPUs of ready nodes outside
        `excluded`; spot nodes take only spot-tolerant pods."""
        hosts = [n for n in self.hosts if n not in excluded]
        room = {n: self.free[n] for n in hosts}
        left: list[Job] = []
        for job in sorted(jobs, key=lambda j: (-j.whole_gpus, j.id)):
            gpus = job.whole_gpus
            may_spot = spot_eligible(job, ctx.policy(job.tenant))
            host = next((n for n in hosts if room[n] >= gpus and (may_spot or n not in self.spot_nodes)), None)
            if host is None:
                left.append(job)
            else:
                room[host] -= gpus
        return left

    def replacement(self, ctx: PlanContext, chosen: Sequence[NodeId], left: Sequence[Job]) -> tuple[GroupId, int] | None:
        """One node, cheaper than all of `chosen` together, that holds the pods `left` over: its group and the GPUs
        it must have free (the cheapest; None if none). Spot only for pods that all tolerate it, and never for
        spot nodes alone (`SpotToSpotConsolidation` is off by default, for multi-node consolidation too)."""
        need = sum(j.whole_gpus for j in left)
        old_usd_h = sum(ctx.groups[self.group_of[n]].price_per_node for n in chosen)
        all_spot = all(ctx.groups[self.group_of[n]].group.capacity_type is CapacityType.SPOT for n in chosen)
        may_spot = not all_spot and all(spot_eligible(j, ctx.policy(j.tenant)) for j in left)
        kinds = {CapacityType.ON_DEMAND, CapacityType.SPOT} if may_spot else {CapacityType.ON_DEMAND}
        options = [c for c in ctx.groups.values() if c.group.tier is Tier.ELASTIC and c.group.capacity_type in kinds
                   and c.price_per_node < old_usd_h and c.gpn >= need and c.planned_size < c.group.max_size
                   and c.group.id not in ctx.snapshot.unavailable]
        best = min(options, key=lambda c: (c.price_per_node, c.group.id), default=None)
        return (best.group.id, need) if best is not None else None
