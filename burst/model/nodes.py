"""Nodes, the groups they are scaled in and their lifecycle table; what providers offer and report."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from burst.model.base import GroupId, NodeId


class Tier(StrEnum):
    """Which side of the fleet a node group sits on."""

    STEADY = "steady"  # owned, on-prem
    ELASTIC = "elastic"  # cloud


class CapacityType(StrEnum):
    """How a node's capacity is bought."""

    ONPREM = "onprem"
    ON_DEMAND = "on_demand"
    SPOT = "spot"


class WarmState(StrEnum):
    """The sub-state of a node held in a hot pool."""

    STOPPED = "stopped"
    RUNNING = "running"
    HIBERNATED = "hibernated"
    POWERED_OFF = "powered_off"


class NodeState(StrEnum):
    """A node's lifecycle state (DESIGN.md's transition table)."""

    REQUESTED = "requested"
    BOOTING = "booting"
    WARM = "warm"
    WAKING = "waking"
    READY = "ready"
    DRAINING = "draining"
    INTERRUPTED = "interrupted"
    TERMINATING = "terminating"
    TERMINATED = "terminated"
    FAILED = "failed"


NODE_TRANSITIONS: Mapping[NodeState, frozenset[NodeState]] = {
    NodeState.REQUESTED: frozenset({NodeState.BOOTING, NodeState.FAILED}),
    NodeState.BOOTING: frozenset({NodeState.READY, NodeState.WARM, NodeState.FAILED}),
    NodeState.WARM: frozenset({NodeState.WAKING, NodeState.TERMINATING}),
    NodeState.WAKING: frozenset({NodeState.READY, NodeState.FAILED}),
    NodeState.READY: frozenset({NodeState.DRAINING, NodeState.INTERRUPTED}),
    NodeState.DRAINING: frozenset({NodeState.WARM, NodeState.TERMINATING, NodeState.INTERRUPTED}),
    NodeState.INTERRUPTED: frozenset({NodeState.TERMINATING}),
    NodeState.TERMINATING: frozenset({NodeState.TERMINATED}),
    NodeState.TERMINATED: frozenset(),
    NodeState.FAILED: frozenset({NodeState.TERMINATING}),
}
"""Allowed node transitions; anything else raises `InvalidTransition`."""

NODE_STATE_TIMEOUT_S: Mapping[NodeState, float | None] = {
    NodeState.REQUESTED: 600.0,
    NodeState.BOOTING: 1200.0,
    NodeState.WARM: None,
    NodeState.WAKING: 600.0,
    NodeState.READY: None,
    NodeState.DRAINING: 3600.0,
    NodeState.INTERRUPTED: 300.0,
    NodeState.TERMINATING: 900.0,
    NodeState.TERMINATED: None,
    NodeState.FAILED: 300.0,
}
"""Default time a node may stay in each state before it counts as stuck (garbage collection replaces a node
stuck requested, booting or waking)."""


def _shortest_paths(
    table: Mapping[NodeState, frozenset[NodeState]],
) -> dict[tuple[NodeState, NodeState], tuple[NodeState, ...]]:
    """For every (from, to) the table connects, the states of the shortest walk (ties broken by state name)."""
    paths: dict[tuple[NodeState, NodeState], tuple[NodeState, ...]] = {}
    for start in table:
        seen: dict[NodeState, tuple[NodeState, ...]] = {start: ()}
        queue = collections.deque([start])
        while queue:
            here = queue.popleft()
            for nxt in sorted(table[here], key=lambda s: s.value):
                if nxt not in seen:
                    seen[nxt] = (*seen[here], nxt)
                    queue.append(nxt)
        paths.update(((start, end), path) for end, path in seen.items())
    return paths


NODE_PATHS: Mapping[tuple[NodeState, NodeState], tuple[NodeState, ...]] = _shortest_paths(NODE_TRANSITIONS)
"""The walk `Node.walk_to` takes from one state to another (absent: the table has none)."""

LIVE_NODE_STATES = frozenset(
    {NodeState.REQUESTED, NodeState.BOOTING, NodeState.WARM, NodeState.WAKING, NodeState.READY, NodeState.DRAINING}
)
"""States whose nodes count toward a group's size."""


class InvalidTransition(ValueError):
    """A node was asked to move along an edge the transition table does not have."""


@dataclass(frozen=True)
class Transition:
    """One timestamped step in a node's history; `resync` says why a step the table has no path to was taken
    (a provider reported the state: an observed re-sync, see `Node.walk_to`)."""

    state: NodeState
    at: datetime
    resync: str = ""


@dataclass(frozen=True)
class GpuShape:
    """What each node of a group carries."""

    gpu_model: str
    gpus_per_node: int
    gpu_memory_gib: float = 0.0

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1:
            raise ValueError(f"gpus_per_node must be >= 1, got {self.gpus_per_node}")


@dataclass(frozen=True)
class WarmPoolSettings:
    """A node group's hot-pool settings (see pools/)."""

    min_size: int = 0
    max_prepared: int = 0
    state: WarmState = WarmState.STOPPED
    reuse_on_scale_in: bool = True
    max_age_s: float = 30 * 86400.0  # warm nodes older than this are replaced (image drift; GCP's 60-day limit)


@dataclass(frozen=True)
class PowerSaving:
    """On-prem power saving (Slurm's SuspendTime / SuspendRate / ResumeRate): idle nodes powered off, woken on demand.

    A powered-off node is a warm node in state `powered_off`; waking it takes the
    group's `warm_wake_latency_s[powered_off]`. At most `suspend_rate` nodes are
    powered off and `resume_rate` woken per minute (0: no limit).
    """

    suspend_after_s: float = 1800.0
    suspend_rate: int = 0
    resume_rate: int = 0


@dataclass(frozen=True)
class NodeGroup:
    """A set of identical nodes scaled as one unit (ASG, MIG, on-prem rack)."""

    id: GroupId
    provider: str
    region: str
    tier: Tier
    capacity_type: CapacityType
    shape: GpuShape
    instance_type: str
    min_size: int = 0
    max_size: int = 0
    zone: str = ""
    boot_latency_s: float = 300.0
    warm_wake_latency_s: Mapping[WarmState, float] = field(default_factory=dict)
    warm_pool: WarmPoolSettings = field(default_factory=WarmPoolSettings)
    scale_down_cooldown_s: float | None = None  # idle time before scale-in; None: the break-even rule (scale_down)
    power_saving: PowerSaving | None = None  # on-prem only: idle nodes powered off, woken on demand
    interruption_band: str | None = None  # spot only: the cloud's published monthly interruption band, e.g. "<5%"

    @property
    def gpus_per_node(self) -> int:
        return self.shape.gpus_per_node

    def with_power_saving(self, saving: PowerSaving) -> NodeGroup:
        """This steady group, saving power under `saving`: its powered-off nodes are its warm pool.

        Every node scaled in is parked powered off (reuse on scale-in, up to the
        whole rack); the pool never prepares new nodes (size 0: on-prem has none
        to buy); the suspend time is the scale-down cooldown; waking takes
        `warm_wake_latency_s[powered_off]` (the boot latency unless given).
        """
        if self.tier is not Tier.STEADY:
            raise ValueError(f"group {self.id}: power saving applies to on-prem (steady) groups only")
        wake = dict(self.warm_wake_latency_s)
        wake.setdefault(WarmState.POWERED_OFF, self.boot_latency_s)
        return dataclasses.replace(
            self,
            power_saving=saving,
            scale_down_cooldown_s=saving.suspend_after_s,
            warm_wake_latency_s=wake,
            warm_pool=WarmPoolSettings(min_size=0, max_prepared=self.max_size, state=WarmState.POWERED_OFF,
                                       reuse_on_scale_in=True, max_age_s=self.warm_pool.max_age_s),
        )

    @property
    def max_gpus(self) -> int:
        return self.max_size * self.shape.gpus_per_node


@dataclass(frozen=True)
class Node:
    """One machine. Its state changes only through `transition`, which checks the table."""

    id: NodeId
    group_id: GroupId
    state: NodeState
    gpus: int
    created_at: datetime
    history: tuple[Transition, ...] = ()
    warm_state: WarmState | None = None
    idle_since: datetime | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    key: str = ""

    @staticmethod
    def requested(node_id: NodeId, group_id: GroupId, gpus: int, at: datetime, **kw: Any) -> Node:
        """A node that has just been asked for."""
        return Node(
            id=node_id,
            group_id=group_id,
            state=NodeState.REQUESTED,
            gpus=gpus,
            created_at=at,
            history=(Transition(NodeState.REQUESTED, at),),
            **kw,
        )

    def transition(self, to: NodeState, at: datetime, *, warm_state: WarmState | None = None) -> Node:
        """Move to `to`, or raise `InvalidTransition` if the table forbids it."""
        if to not in NODE_TRANSITIONS[self.state]:
            raise InvalidTransition(f"node {self.id}: {self.state.value} -> {to.value} is not allowed")
        if to is NodeState.WARM and warm_state is None:
            warm_state = self.warm_state or WarmState.STOPPED
        return dataclasses.replace(
            self,
            state=to,
            history=(*self.history, Transition(to, at)),
            warm_state=warm_state if to is NodeState.WARM else None,
            idle_since=at if to is NodeState.READY else self.idle_since,
        )

    def walk_to(
        self, to: NodeState, at: datetime, *, warm_state: WarmState | None = None, observed_by: str | None = None
    ) -> Node:
        """The node moved to `to` along the shortest walk the table allows, each step timestamped `at`.

        A warm node sent to BOOTING wakes instead (clouds list a warm-pool
        node starting into service as booting); a node already in `to` is
        returned as it is, except that a warm one takes the sub-state given.
        Where the table has no walk, a state reported by provider
        `observed_by` (a terminating node listed in service again) is an
        observed re-sync: one history entry saying so, no invented steps;
        without `observed_by` it raises `InvalidTransition`.
        """
        state = self.state
        if state is NodeState.WARM and to is NodeState.BOOTING:
            to = NodeState.WAKING
        if state is to:
            if to is NodeState.WARM and warm_state is not None and warm_state is not self.warm_state:
                return dataclasses.replace(self, warm_state=warm_state)
            return self
        path = NODE_PATHS.get((state, to))
        if path is None:
            if observed_by is None:
                raise InvalidTransition(f"node {self.id}: no walk from {state.value} to {to.value}")
            why = f"{observed_by} lists it {to.value} after {state.value}, which no transition leads to"
            return dataclasses.replace(
                self,
                state=to,
                history=(*self.history, Transition(to, at, resync=why)),
                warm_state=(warm_state or self.warm_state or WarmState.STOPPED) if to is NodeState.WARM else None,
                idle_since=at if to is NodeState.READY else self.idle_since,
            )
        node = self
        for step in path:
            node = node.transition(step, at, warm_state=warm_state if step is NodeState.WARM else None)
        return node

    @property
    def entered_state_at(self) -> datetime:
        return self.history[-1].at if self.history else self.created_at

    def is_stuck(self, now: datetime, timeouts: Mapping[NodeState, float | None] = NODE_STATE_TIMEOUT_S) -> bool:
        """Whether the node has stayed in its state past that state's timeout."""
        limit = timeouts.get(self.state)
        return limit is not None and (now - self.entered_state_at).total_seconds() > limit

    @property
    def live(self) -> bool:
        return self.state in LIVE_NODE_STATES


@dataclass(frozen=True)
class Offering:
    """Something a provider can launch: one instance type in one zone and capacity type."""

    instance_type: str
    zone: str
    capacity_type: CapacityType
    price_per_hour: float
    available: bool = True
    interruption_band: str | None = None  # e.g. "<5%", "5-10%" where the cloud publishes it


class EventKind(StrEnum):
    """What a provider reports happened, outside burst's own calls."""

    INTERRUPTION = "interruption"  # spot reclaim notice; `deadline` says when the node goes
    REBALANCE = "rebalance"  # elevated interruption risk, no deadline yet
    LAUNCH_FAILED = "launch_failed"
    NODE_LOST = "node_lost"


@dataclass(frozen=True)
class ProviderEvent:
    """One event from a provider's event source (SQS, zone operations, the sim)."""

    kind: EventKind
    at: datetime
    group_id: GroupId
    node_id: NodeId | None = None
    deadline: datetime | None = None
    detail: str = ""
