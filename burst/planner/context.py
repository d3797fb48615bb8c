"""The planner's working view of one snapshot: indexes built once, mutated only by the steps of one plan.

`PlanContext` is created fresh inside every `plan()` call, so the steps may
update it as they decide (a placed job uses GPUs, a launch adds booting
capacity) without touching the caller's snapshot.

Steps change what is shared only through its helpers (`add_action`,
`add_placement`, `add_scale_up`, `replace_scale_up`, `release_job`, ...).
What one step hands to a later one is a named field (`HANDOFFS`); each helper
notes the hand-off it writes, so a step that writes one it did not declare
(`burst.planner.contract.declare`) is caught.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from burst.model import (
    Action,
    ActionKind,
    CapacityType,
    Forecast,
    GroupId,
    Hold,
    Job,
    JobId,
    Node,
    NodeGroup,
    NodeId,
    NodeState,
    Policy,
    Snapshot,
    SteadyAdvice,
    TenantName,
    Tier,
    default_policy,
)
from burst.planner.gpu_book import GpuBook


class Refusal(StrEnum):
    """Why placement left a pending job unserved (`PlanContext.unserved`), most telling first."""

    BUDGET = "budget"
    QUOTA = "quota"
    SPOT_SHARE = "spot_share"
    GROUP_MAX = "group_max"
    UNAVAILABLE = "unavailable"
    TOO_LARGE = "too_large"
    LOCAL_GPUS = "local_gpus"
    NO_GROUP = "no_group"


@dataclass(frozen=True)
class HandOff:
    """A field of `PlanContext` one step writes and a later one reads."""

    name: str
    what: str
    every_step: bool = False  # written by `add_action` for whichever step acts, so never declared


HANDOFFS: tuple[HandOff, ...] = (
    HandOff("acted_on", "targets of the plan's actions so far: a job already acted on is left alone", every_step=True),
    HandOff("released", "running jobs this plan takes off their GPUs, and the GPUs freed for placement"),
    HandOff("spot_barred", "pending jobs kept off spot, and why"),
    HandOff("placements", "jobs placed by this plan, and the nodes they take"),
    HandOff("busy_nodes", "nodes with GPUs in use (from `build_context`, then each placement)"),
    HandOff("spread_notes", "spot groups' interruption rates, for reasons"),
    HandOff("unserved", "pending jobs refused, and the refusal's kind"),
    HandOff("moves", "`request_checkpoint` / `evict_job` actions of the move steps: one disruption budget per plan "
            "(`moves.MoveGuard`)"),
    HandOff("emptying", "jobs evicted by a move or a reclaim notice: their nodes are emptied on purpose"),
    HandOff("scale_ups", "this plan's one scale-up per group, which a later launch folds into"),
    HandOff("forecast_spare_gpus", "supply above forecast need per GPU model"),
)
"""Every hand-off between planner steps, in the order the hand-off table lists them."""


class PriceSource(Protocol):
    """What the planner needs from the price catalog (burst.catalog.Catalog provides it)."""

    def group_price(self, group: NodeGroup) -> float:
        """USD per hour of one node of `group`."""
        ...


BUDGET_HORIZON_S = 3600.0
"""A monthly cap is breached by a launch if month-to-date spend plus one hour at
the rate after the launch would exceed it."""


@dataclass
class GroupCapacity:
    """Free GPUs of one group: ready nodes bucketed by free GPU count, plus booting nodes."""

    group: NodeGroup
    price_per_node: float
    target: int
    ready_nodes: int = 0
    buckets: dict[int, list[NodeId]] = field(default_factory=dict)
    free_of: dict[NodeId, int] = field(default_factory=dict)
    inflight_free: list[int] = field(default_factory=list)  # free GPUs of each booting node
    inflight_owner: list[TenantName | None] = field(default_factory=list)
    launched: int = 0
    launched_for: dict[TenantName, int] = field(default_factory=lambda: defaultdict(int))
    _inflight_by_free: dict[int, list[int]] = field(default_factory=dict)  # lazy min-heaps of indexes
    # No non-empty bucket up to `gpn` has more free GPUs than this: a request above it fails at once.
    # Raised whenever a node is added to a bucket (`seal`, `_move`), lowered when a scan finds nothing.
    _free_bound: int = field(default=1 << 30, repr=False, compare=False)
    gpn: int = field(init=False)  # GPUs per node
    gpu_price: float = field(init=False)  # USD per GPU-hour

    def __post_init__(self) -> None:
        self.gpn = self.group.gpus_per_node
        self.gpu_price = self.price_per_node / self.gpn

    @property
    def planned_size(self) -> int:
        return self.target + self.launched

    def seal(self) -> None:
        """Order buckets so that popping gives the lowest node id first (determinism)."""
        for ids in self.buckets.values():
            ids.sort(reverse=True)
        self._free_bound = max((free for free, ids in self.buckets.items() if ids), default=-1)

    def take_ready(self, gpus: int) -> tuple[NodeId, ...] | None:
        """Reserve `gpus` on ready nodes: best fit on one node, or whole free nodes for a multi-node job."""
        if min(gpus, self.gpn) > self._free_bound:
            return None  # no ready node has that many free GPUs (or, for a multi-node job, is wholly free)
        if gpus <= self.gpn:
            buckets = self.buckets
            for free in range(gpus, self.gpn + 1):
                ids = buckets.get(free)
                if ids:
                    node_id = ids.pop()
                    self._move(node_id, free - gpus)
                    return (node_id,)
            self._free_bound = gpus - 1
            return None
        need = -(-gpus // self.gpn)
        whole = self.buckets.get(self.gpn, [])
        if len(whole) < need:
            return None
        taken = tuple(whole.pop() for _ in range(need))
        for node_id in taken:
            self._move(node_id, 0)
        return taken

    def take_ready_among(self, gpus: int, nodes: set[NodeId]) -> tuple[NodeId, ...] | None:
        """Reserve `gpus` on one of `nodes` (best fit, lowest id on ties), or None when none of them has room.

        Single-node requests only: a job wider than a node takes whole free nodes (`take_ready`)."""
        if gpus > self.gpn or gpus > self._free_bound:
            return None
        free_of = self.free_of
        fits = [(free_of[n], n) for n in nodes if free_of.get(n, -1) >= gpus]
        if not fits:
            return None
        _, node_id = min(fits)
        self.take_on((node_id,), gpus)
        return (node_id,)

    def has_spare(self, gpus: int) -> bool:
        """Whether a ready node already running work has `gpus` free (a single-node request)."""
        return gpus < self.gpn and any(self.buckets.get(free) for free in range(gpus, self.gpn))

    def take_spare(self, gpus: int) -> tuple[NodeId, ...] | None:
        """Reserve `gpus` on a ready node already running work (best fit), never on an idle one."""
        if gpus >= self.gpn:
            return None
        for free in range(gpus, self.gpn):
            ids = self.buckets.get(free)
            if ids:
                node_id = ids.pop()
                self._move(node_id, free - gpus)
                return (node_id,)
        return None

    def take_on(self, node_ids: tuple[NodeId, ...], gpus: int) -> None:
        """Reserve `gpus` on these ready nodes (the local GPU scheduler chose them), spread as a job spreads."""
        per_node = -(-gpus // len(node_ids)) if node_ids else 0
        for node_id in node_ids:
            free = self.free_of[node_id]
            self.buckets[free].remove(node_id)
            self._move(node_id, max(0, free - per_node))

    def release(self, node_id: NodeId, gpus: int) -> None:
        """Give back `gpus` on a ready node (a reclaimed job's GPUs)."""
        free = self.free_of.get(node_id)
        if free is None:
            return
        self.buckets[free].remove(node_id)
        self._move(node_id, min(self.gpn, free + gpus))

    def _move(self, node_id: NodeId, free: int) -> None:
        self.free_of[node_id] = free
        if free > self._free_bound:
            self._free_bound = free
        bucket = self.buckets.setdefault(free, [])
        bucket.append(node_id)
        if len(bucket) > 1 and bucket[-2] < node_id:
            bucket.sort(reverse=True)

    def add_inflight(self, free: int, owner: TenantName | None) -> None:
        """Record a booting node (or one launched by this plan) with `free` GPUs still unclaimed."""
        self.inflight_free.append(free)
        self.inflight_owner.append(owner)
        heapq.heappush(self._inflight_by_free.setdefault(free, []), len(self.inflight_free) - 1)

    def _lowest_inflight(self, free: int) -> int | None:
        """The lowest booting-node index with exactly `free` unclaimed GPUs (stale heap entries dropped)."""
        heap = self._inflight_by_free.get(free)
        while heap and self.inflight_free[heap[0]] != free:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def find_inflight(self, gpus: int) -> list[int] | None:
        """Booting nodes (indexes) that could hold `gpus`: the first with room, or enough wholly free ones."""
        if gpus <= self.gpn:
            # The lowest index over every bucket with room (`_lowest_inflight` per bucket, inlined: hot loop).
            by_free, inflight_free = self._inflight_by_free, self.inflight_free
            best: int | None = None
            for free in range(gpus, self.gpn + 1):
                heap = by_free.get(free)
                if not heap:
                    continue
                while heap and inflight_free[heap[0]] != free:
                    heapq.heappop(heap)
                if heap and (best is None or heap[0] < best):
                    best = heap[0]
            return None if best is None else [best]
        need = -(-gpus // self.gpn)
        if self._lowest_inflight(self.gpn) is None:
            return None
        heap = self._inflight_by_free[self.gpn]
        whole = sorted(i for i in set(heap) if self.inflight_free[i] == self.gpn)[:need]
        return whole if len(whole) == need else None

    def commit_inflight(self, slots: list[int], gpus: int) -> None:
        """Reserve `gpus` on the booting nodes `find_inflight` returned."""
        if len(slots) == 1:
            self._set_inflight(slots[0], self.inflight_free[slots[0]] - min(gpus, self.gpn))
        else:
            for i in slots:
                self._set_inflight(i, 0)

    def _set_inflight(self, index: int, free: int) -> None:
        self.inflight_free[index] = free
        heapq.heappush(self._inflight_by_free.setdefault(free, []), index)

    def idle_ready(self) -> list[NodeId]:
        return sorted(n for n, free in self.free_of.items() if free == self.gpn)


@dataclass
class TenantUsage:
    """GPUs and spend one tenant holds, updated as the plan places and launches."""

    steady_gpus: float = 0.0
    elastic_gpus: float = 0.0
    spot_gpus: float = 0.0
    usd_per_hour: float = 0.0
    spot_by_group: dict[GroupId, float] = field(default_factory=dict)  # spot GPUs per spot group (offering)

    @property
    def total_gpus(self) -> float:
        return self.steady_gpus + self.elastic_gpus

    def add(self, group: NodeGroup, gpus: float, usd_per_hour: float) -> None:
        if group.tier is Tier.STEADY:
            self.steady_gpus += gpus
        else:
            self.elastic_gpus += gpus
            if group.capacity_type is CapacityType.SPOT:
                self.spot_gpus += gpus
                self.spot_by_group[group.id] = self.spot_by_group.get(group.id, 0.0) + gpus
        self.usd_per_hour += usd_per_hour


@dataclass
class PlanContext:
    """Everything one `plan()` call works on."""

    snapshot: Snapshot
    forecasts: tuple[Forecast, ...]
    policies: Mapping[TenantName, Policy]
    now: datetime
    groups: dict[GroupId, GroupCapacity]
    nodes: dict[NodeId, Node]
    usage: dict[TenantName, TenantUsage]
    actions: list[Action] = field(default_factory=list)
    holds: list[Hold] = field(default_factory=list)
    advice: list[SteadyAdvice] = field(default_factory=list)
    # The hand-offs (`HANDOFFS`), each written through the helpers below.
    acted_on: set[str] = field(default_factory=set)
    released: dict[JobId, int] = field(default_factory=dict)
    busy_nodes: set[NodeId] = field(default_factory=set)
    placements: dict[JobId, tuple[NodeId, ...]] = field(default_factory=dict)
    unserved: list[tuple[Job, Refusal]] = field(default_factory=list)  # pending jobs placement refused, and why
    forecast_spare_gpus: dict[str, float] = field(default_factory=dict)  # GPU model -> supply above forecast need
    spot_barred: dict[JobId, str] = field(default_factory=dict)  # pending jobs placement keeps off spot, and why
    spread_notes: dict[GroupId, str] = field(default_factory=dict)  # spot groups the spread ranked, and their rate
    moves: list[Action] = field(default_factory=list)
    emptying: set[JobId] = field(default_factory=set)
    scale_ups: dict[GroupId, int] = field(default_factory=dict)  # group -> index of its scale-up in `actions`
    written: set[str] = field(default_factory=set)  # hand-offs written since the running step began
    _policy_of: dict[TenantName, Policy] = field(default_factory=dict)
    _gpu_book: GpuBook | None = None

    def gpu_book(self) -> GpuBook:
        """Which reported on-prem GPUs are taken (built on first use, then kept up to date by placement)."""
        if self._gpu_book is None:
            free_of = {n: f for cap in self.groups.values() if cap.group.tier is Tier.STEADY for n, f in cap.free_of.items()}
            self._gpu_book = GpuBook.build(self.snapshot.node_gpus, self.snapshot.jobs, free_of)
        return self._gpu_book

    def policy(self, tenant: TenantName) -> Policy:
        found = self._policy_of.get(tenant)
        if found is None:
            found = self._policy_of[tenant] = self.policies.get(tenant) or default_policy(tenant)
        return found

    def usage_of(self, tenant: TenantName) -> TenantUsage:
        if tenant not in self.usage:
            self.usage[tenant] = TenantUsage()
        return self.usage[tenant]

    def pending_jobs(self) -> tuple[Job, ...]:
        return self.snapshot.pending_jobs

    def running_jobs(self) -> tuple[Job, ...]:
        return self.snapshot.running_jobs

    def hold(
        self, subject: str, reason: str, step: str, tenant: TenantName | None = None, job_ids: tuple[JobId, ...] = ()
    ) -> None:
        """Say why something was not done (a decision, like an action)."""
        self.holds.append(Hold(subject=subject, reason=reason, step=step, tenant=tenant, job_ids=job_ids))

    def add_advice(self, advice: list[SteadyAdvice]) -> None:
        """Add steady-tier recommendations to the plan."""
        self.advice.extend(advice)

    def add_action(self, action: Action) -> None:
        """Add an action to the plan (`acted_on` learns its target)."""
        self.actions.append(action)
        self.acted_on.add(action.target)

    def add_placement(self, action: Action) -> None:
        """Add a `place_job` action: its nodes are busy (`busy_nodes`) and the job placed on them (`placements`)."""
        self.busy_nodes.update(action.node_ids)
        self.placements[action.target] = action.node_ids
        self.written.update(("busy_nodes", "placements"))
        self.add_action(action)

    def refuse(self, job: Job, kind: Refusal) -> None:
        """Hand on a pending job placement could not serve, and why (`unserved`)."""
        self.unserved.append((job, kind))
        self.written.add("unserved")

    def bar_from_spot(self, job_id: JobId, why: str) -> None:
        """Keep a pending job off spot for the rest of the plan (`spot_barred`)."""
        self.spot_barred[job_id] = why
        self.written.add("spot_barred")

    def note_spread(self, group_id: GroupId, note: str) -> None:
        """Keep a spot group's spread note for the reasons of placements there (`spread_notes`)."""
        self.spread_notes[group_id] = note
        self.written.add("spread_notes")

    def add_move(self, action: Action) -> None:
        """Count a move step's checkpoint or eviction against the plan's one disruption budget (`moves`)."""
        self.moves.append(action)
        self.written.add("moves")

    def mark_emptying(self, job_id: JobId) -> None:
        """Hand on a job evicted to empty its node on purpose (`emptying`): scale-in may release the node now."""
        self.emptying.add(job_id)
        self.written.add("emptying")

    def set_forecast_spare(self, gpu_model: str, gpus: float) -> None:
        """Hand on the supply above forecast need for a GPU model (`forecast_spare_gpus`)."""
        self.forecast_spare_gpus[gpu_model] = gpus
        self.written.add("forecast_spare_gpus")

    def scale_up_of(self, group_id: GroupId) -> Action | None:
        """This plan's scale-up of the group, if any (`scale_ups`)."""
        index = self.scale_ups.get(group_id)
        return None if index is None else self.actions[index]

    def add_scale_up(self, action: Action) -> None:
        """Add a `scale_up` action (`scale_ups`: the first of a group is the one later launches fold into)."""
        self.scale_ups.setdefault(action.target, len(self.actions))
        self.written.add("scale_ups")
        self.add_action(action)

    def replace_scale_up(self, action: Action) -> None:
        """Put `action` in the place of this plan's scale-up of the same group (a later launch folded into it)."""
        self.actions[self.scale_ups[action.target]] = action
        self.written.add("scale_ups")

    def withdraw_scale_ups(self) -> list[Action]:
        """Take every scale-up out of the plan (the capacity stays counted as launched); returns them."""
        withdrawn = [a for a in self.actions if a.kind is ActionKind.SCALE_UP]
        if withdrawn:
            self.actions[:] = [a for a in self.actions if a.kind is not ActionKind.SCALE_UP]
            self.scale_ups.clear()
            self.written.add("scale_ups")
        return withdrawn

    def release_job(self, job: Job) -> None:
        """Give a running job's GPUs back for the rest of the plan, and take it out of its tenant's usage
        (`released`): for a job reclaimed or evicted by this plan."""
        per_node = gpus_per_node_of(job)
        share = len(job.node_ids)
        for node_id in job.node_ids:
            node = self.nodes.get(node_id)
            cap = self.groups.get(node.group_id) if node else None
            if cap is not None:
                cap.release(node_id, per_node)
                self.usage_of(job.tenant).add(cap.group, -job.gpu_demand / share, -job.gpu_demand * cap.gpu_price / share)
        self.released[job.id] = per_node * share
        self.written.add("released")


def budget_refusal(ctx: PlanContext, tenant: TenantName, policy: Policy, extra_usd_per_hour: float, what: str) -> str | None:
    """Why adding `extra_usd_per_hour` to `tenant`'s spend would break a hard budget, or None if it would not."""
    after = ctx.usage_of(tenant).usd_per_hour + extra_usd_per_hour
    cap_h = policy.budget.usd_per_hour
    if cap_h is not None and after > cap_h + 1e-9:
        return f"{what} refused: tenant {tenant} would spend ${after:.2f}/h > budget.usd_per_hour ${cap_h:.2f}"
    cap_m = policy.budget.usd_per_month
    if cap_m is not None:
        spent = ctx.snapshot.spend_month_usd.get(tenant, 0.0)
        if spent + after * BUDGET_HORIZON_S / 3600.0 > cap_m + 1e-9:
            return (
                f"{what} refused: tenant {tenant} has spent ${spent:.2f} this month; one more hour at "
                f"${after:.2f}/h would pass budget.usd_per_month ${cap_m:.2f}"
            )
    return None


def build_context(
    snapshot: Snapshot,
    forecasts: tuple[Forecast, ...],
    policies: Mapping[TenantName, Policy],
    prices: PriceSource,
    now: datetime,
) -> PlanContext:
    """Index a snapshot: free GPUs per ready node, booting capacity per group, usage per tenant.

    A node under an interruption notice offers no free GPUs: nothing new lands on a node about to go.
    """
    nodes = {n.id: n for n in snapshot.nodes}
    groups: dict[GroupId, GroupCapacity] = {}
    for group in snapshot.groups:
        groups[group.id] = GroupCapacity(
            group=group, price_per_node=prices.group_price(group), target=snapshot.target_of(group)
        )
    # One pass over running jobs: GPUs held per node, and each tenant's usage (added in job order).
    used: dict[NodeId, int] = defaultdict(int)
    usage: dict[TenantName, TenantUsage] = {}
    steady_tier, spot_type = Tier.STEADY, CapacityType.SPOT
    for job in snapshot.running_jobs:
        ids = job.node_ids
        if not ids:
            continue
        per_node = -(-(job.gpus or 1) // len(ids))  # gpus_per_node_of, inlined: this runs for every job each tick
        for node_id in ids:
            used[node_id] += per_node
        first = nodes.get(ids[0])
        cap = groups.get(first.group_id) if first else None
        if cap is None:
            continue
        tenant_usage = usage.get(job.tenant)
        if tenant_usage is None:
            tenant_usage = usage[job.tenant] = TenantUsage()
        demand = job.gpu_demand
        # TenantUsage.add, inlined: this runs for every running job each tick
        group = cap.group
        if group.tier is steady_tier:
            tenant_usage.steady_gpus += demand
        else:
            tenant_usage.elastic_gpus += demand
            if group.capacity_type is spot_type:
                tenant_usage.spot_gpus += demand
                by_group = tenant_usage.spot_by_group
                by_group[group.id] = by_group.get(group.id, 0.0) + demand
        tenant_usage.usd_per_hour += demand * cap.gpu_price
    busy = _index_nodes(snapshot, groups, used)
    return PlanContext(
        snapshot=snapshot,
        forecasts=forecasts,
        policies=policies,
        now=now,
        groups=groups,
        nodes=nodes,
        usage=usage,
        busy_nodes=busy,
    )


def _index_nodes(snapshot: Snapshot, groups: dict[GroupId, GroupCapacity], used: Mapping[NodeId, int]) -> set[NodeId]:
    """Bucket each ready node of `groups` by its free GPUs (`used`: GPUs held per node) and count the booting
    ones; returns the nodes with GPUs in use."""
    busy: set[NodeId] = set()
    notices = snapshot.notices
    ready_state, draining_state = NodeState.READY, NodeState.DRAINING
    for node in snapshot.nodes:
        cap = groups.get(node.group_id)
        if cap is None:
            continue
        node_state = node.state
        if node_state is ready_state:
            cap.ready_nodes += 1
            node_id, gpus = node.id, node.gpus
            held = used.get(node_id, 0)
            free = gpus - held if held < gpus and node_id not in notices else 0
            cap.free_of[node_id] = free
            bucket = cap.buckets.get(free)
            if bucket is None:
                cap.buckets[free] = [node_id]
            else:
                bucket.append(node_id)
            if free < gpus:
                busy.add(node_id)
        elif node_state is draining_state:
            cap.ready_nodes += 1
    for cap in groups.values():
        cap.seal()
        booting = max(0, cap.target - cap.ready_nodes)
        for _ in range(booting):
            cap.add_inflight(cap.gpn, None)
    return busy


def gpus_per_node_of(job: Job) -> int:
    """GPUs a running job holds on each of its nodes (spread evenly over them)."""
    if not job.node_ids:
        return 0
    return -(-job.whole_gpus // len(job.node_ids))
