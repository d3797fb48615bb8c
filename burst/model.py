"""The domain model: the one vocabulary every burst subsystem speaks.

Everything here is immutable (frozen dataclasses) and free of I/O. Providers,
policies, pools and forecasting exchange these types, never SDK objects.
Times are timezone-aware UTC datetimes, durations are seconds, money is USD.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from typing import Any, TypeAlias

NodeId: TypeAlias = str
GroupId: TypeAlias = str
JobId: TypeAlias = str
TenantName: TypeAlias = str


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


class GpuSharing(StrEnum):
    """How jobs asking for a fraction of a GPU may share one (the node agent sets what the mode needs)."""

    NONE = "none"  # every job gets whole GPUs to itself
    MPS = "mps"  # CUDA Multi-Process Service: concurrent kernels, per-client thread limit
    TIME_SLICING = "time_slicing"  # the driver's time slices: contexts take turns


class GpuHealth(StrEnum):
    """The scheduler's verdict on one GPU, judged from its NVML readings (providers/onprem/health.py)."""

    HEALTHY = "healthy"  # takes new work at full score
    DEGRADED = "degraded"  # takes new work, scored lower (throttling, clocks below max under load)
    UNHEALTHY = "unhealthy"  # no new work; its jobs are moved, checkpoint first


class GpuLink(StrEnum):
    """How two GPUs of one node talk, best first (NVML topology levels, NVLink above them all)."""

    SAME = "same"  # the same GPU
    NVLINK = "nvlink"  # at least one active NVLink between them
    PCIE_SWITCH = "pcie_switch"  # NVML SINGLE / MULTIPLE: behind the same PCIe switch(es)
    HOST_BRIDGE = "host_bridge"  # NVML HOSTBRIDGE: the same PCIe host bridge
    NUMA_NODE = "numa_node"  # NVML NODE: the same NUMA node, across host bridges
    SYSTEM = "system"  # NVML SYSTEM: across sockets (SMP interconnect)

    @property
    def rank(self) -> int:
        """0 for the best link; larger is slower."""
        return GPU_LINK_ORDER.index(self)


GPU_LINK_ORDER: tuple[GpuLink, ...] = tuple(GpuLink)


@dataclass(frozen=True)
class Gpu:
    """One physical GPU as the local scheduler sees it: identity, size, health."""

    uuid: str
    index: int
    model: str
    memory_mib: int
    health: GpuHealth = GpuHealth.HEALTHY
    health_reason: str = ""
    numa_node: int | None = None
    mig_enabled: bool = False


@dataclass(frozen=True)
class GpuPairLink:
    """The link between GPUs `a` and `b` of one node (by UUID)."""

    a: str
    b: str
    link: GpuLink


@dataclass(frozen=True)
class NodeGpus:
    """A node's GPUs and the link between pairs of them (a pair not listed is the worst link, SYSTEM)."""

    node_id: NodeId
    gpus: tuple[Gpu, ...]
    links: tuple[GpuPairLink, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)

    @functools.cached_property
    def _link_of(self) -> dict[tuple[str, str], GpuLink]:
        return {(min(p.a, p.b), max(p.a, p.b)): p.link for p in self.links}

    def link(self, a: str, b: str) -> GpuLink:
        """The link between GPUs `a` and `b`."""
        if a == b:
            return GpuLink.SAME
        return self._link_of.get((a, b) if a < b else (b, a), GpuLink.SYSTEM)


class JobState(StrEnum):
    """Where a job is. A job is in exactly one of these at all times."""

    PENDING = "pending"
    RUNNING = "running"
    CHECKPOINTING = "checkpointing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RECLAIMED = "reclaimed"


TERMINAL_JOB_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.RECLAIMED})

JOB_TRANSITIONS: Mapping[JobState, frozenset[JobState]] = {
    JobState.PENDING: frozenset({JobState.RUNNING, JobState.CANCELLED, JobState.FAILED}),
    JobState.RUNNING: frozenset(
        {JobState.PENDING, JobState.CHECKPOINTING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.RECLAIMED}
    ),
    JobState.CHECKPOINTING: frozenset(
        {JobState.PENDING, JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.RECLAIMED}
    ),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
    JobState.RECLAIMED: frozenset(),
}
"""Allowed job transitions (RUNNING -> PENDING is a requeue after eviction or node loss)."""


@dataclass(frozen=True)
class Job:
    """A unit of GPU work submitted by a tenant."""

    id: JobId
    tenant: TenantName
    gpus: int
    submitted_at: datetime
    state: JobState = JobState.PENDING
    gpu_share: float | None = None
    gpu_model: str | None = None
    priority: int | None = None
    fault_tolerant: bool = False
    checkpoint_interval_s: float | None = None
    checkpoint_duration_s: float | None = None
    last_checkpoint_at: datetime | None = None
    deadline: datetime | None = None
    started_at: datetime | None = None
    node_ids: tuple[NodeId, ...] = ()
    duration_s: float | None = None
    work_done_s: float = 0.0
    gpu_uuids: tuple[str, ...] = ()  # the GPUs the local scheduler bound on-prem (empty elsewhere)
    command: tuple[str, ...] = ()  # argv a node agent runs for the job (empty: something else runs it)
    # The run time its submitter declared: the planner's only view of the job's length besides its tenant's
    # history (`duration_s` is what the job really takes, known to the queue and the simulator, never planned on).
    declared_duration_s: float | None = None
    do_not_disrupt: bool = False  # never moved to save money (spot notices, failures and preemption still move it)

    def __post_init__(self) -> None:
        if self.gpus < 0 or (self.gpus == 0 and self.gpu_share is None):
            raise ValueError(f"job {self.id}: gpus must be >= 1 (or a gpu_share), got {self.gpus}")
        if self.gpu_share is not None and not 0 < self.gpu_share <= 1:
            raise ValueError(f"job {self.id}: gpu_share must be in (0, 1], got {self.gpu_share}")

    # Jobs are immutable, so derived values are computed once per object (the reconcile loop
    # and the simulator read them for every job on every tick).
    @functools.cached_property
    def gpu_demand(self) -> float:
        """GPUs this job occupies: whole GPUs, or its fractional share of one."""
        return gpu_demand_of(self)

    @functools.cached_property
    def finishes_at(self) -> datetime | None:
        """When this run completes if nothing interrupts it: started, with a known duration, less work done."""
        if self.duration_s is None or self.started_at is None:
            return None
        return self.started_at + timedelta(seconds=max(0.0, self.duration_s - self.work_done_s))

    @property
    def whole_gpus(self) -> int:
        """GPUs the scheduler must reserve (a fractional job reserves one shared GPU)."""
        return self.gpus if self.gpus else 1

    @property
    def active(self) -> bool:
        return self.state not in TERMINAL_JOB_STATES


def gpu_demand_of(job: Job) -> float:
    """`Job.gpu_demand`, without caching it on the job: for a pass that reads each job of a fresh snapshot once."""
    return float(job.gpus) if job.gpus else float(job.gpu_share or 0.0)


@dataclass(frozen=True)
class Offering:
    """Something a provider can launch: one instance type in one zone and capacity type."""

    instance_type: str
    zone: str
    capacity_type: CapacityType
    price_per_hour: float
    available: bool = True
    interruption_band: str | None = None  # e.g. "<5%", "5-10%" where the cloud publishes it


@dataclass(frozen=True)
class Budget:
    """Hard spending caps; None means no cap."""

    usd_per_hour: float | None = None
    usd_per_month: float | None = None


def month_start(at: datetime) -> datetime:
    """The first instant of `at`'s calendar month (UTC): where monthly budgets, spend and usage start again."""
    at = at.astimezone(UTC)
    return datetime(at.year, at.month, 1, tzinfo=UTC)


@dataclass(frozen=True)
class SpotPolicy:
    """Whether and how much of a tenant's work may run on Spot/Preemptible capacity."""

    allowed: bool = False
    max_share: float = 1.0
    required_checkpoint_interval_s: float | None = None
    fault_tolerant_fraction: float = 0.0  # trace replay only: the seeded share of jobs assumed fault-tolerant
    deadline_margin_s: float | None = None  # slack below which a deadline job leaves spot (None: boot + checkpoint)
    price_tolerance: float = 0.10  # spot offerings this much dearer than the cheapest count as cheap (spread)
    max_offering_share: float = 0.5  # share of the tenant's spot GPUs one offering holds before others go first


@dataclass(frozen=True)
class DisruptionPolicy:
    """How far burst may move a tenant's running fault-tolerant jobs to save money (consolidation, making room
    on-prem): never when `do_not_disrupt`; at most `max_share` of its running GPUs moving at once (always one
    job); a job not again within `min_move_interval_s` of resuming from a move."""

    do_not_disrupt: bool = False
    max_share: float = 0.1
    min_move_interval_s: float = 3600.0


@dataclass(frozen=True)
class SubmitLimits:
    """How much of the controller one tenant's submissions may hold (the API answers 429 beyond any of them).

    At most `max_pending_jobs` jobs not yet terminal, whose stored records
    together hold at most `max_pending_job_bytes`; submits at most
    `submits_per_second` on average, `submit_burst` at once (a token bucket).
    """

    max_pending_jobs: int = 10_000
    submits_per_second: float = 20.0
    submit_burst: int = 100
    max_pending_job_bytes: int = 16 * 1024 * 1024


@dataclass(frozen=True)
class HotPoolPolicy:
    """Whether a tenant's forecast sizes the hot pools, and the warm GPUs it wants kept at least."""

    enabled: bool = True
    min_gpus: int = 0


@dataclass(frozen=True)
class PrescalePolicy:
    """How far ahead of forecast demand the elastic tier is scaled for a tenant.

    `quantile` is the forecast quantile provisioned for (one of `QUANTILES`;
    None turns pre-scaling off for the tenant); the lead time is a group's boot
    latency plus `buffer_s`. A launch must pay: the expected queueing it saves,
    valued at `wait_usd_per_gpu_hour`, above its expected cost
    (`burst.planner.prescale_value`).
    """

    quantile: float | None = 0.9
    buffer_s: float = 300.0
    wait_usd_per_gpu_hour: float | None = None  # what a GPU-hour of queueing is worth; None: the planner's default


class WorkKind(StrEnum):
    """The two kinds of work a tenant runs, and which comes first on the steady tier.

    On the steady tier (owned GPUs, paid whether used or not) a tenant's
    services outrank its batch jobs: a replica its rate needs takes on-prem
    GPUs ahead of the tenant's batch work, and fault-tolerant batch yields them
    by checkpoint (refilling them when the rate falls, the daily tide). Work
    that cannot move is never stopped for a service: the service bursts to the
    elastic tier instead. `steady_rank` orders the two (lower goes first); the
    planner steps that act on it are not built yet.
    """

    SERVICE = "service"  # replicas serving a request rate
    JOB = "job"  # batch, queued, runs to completion

    @property
    def steady_rank(self) -> int:
        """0 for the kind served first on the steady tier (services), 1 for batch jobs."""
        return 0 if self is WorkKind.SERVICE else 1


@dataclass(frozen=True)
class TokenCost:
    """What one request costs a service in GPU time: `context_gpu_s` per context (prompt) token plus
    `generated_gpu_s` per generated token (the linear model fitted to LLM inference traces)."""

    context_gpu_s: float
    generated_gpu_s: float

    def gpu_s_per_request(self, context_tokens: float, generated_tokens: float) -> float:
        """GPU-seconds one request with these token counts takes."""
        return self.context_gpu_s * context_tokens + self.generated_gpu_s * generated_tokens


@dataclass(frozen=True)
class ServiceEvent:
    """A declared window of unusual demand for a service (a promotion, a launch): from `start` (inclusive) to
    `end` (exclusive). `multiplier` is the factor its tenant expects on the request rate; None leaves the size of
    the effect to the forecaster."""

    start: datetime
    end: datetime
    multiplier: float | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise ValueError(f"service event: end {self.end.isoformat()} is not after start {self.start.isoformat()}")
        if self.multiplier is not None and not self.multiplier > 0:
            raise ValueError(f"service event: multiplier must be > 0, got {self.multiplier}")

    def in_force(self, at: datetime) -> bool:
        """Whether `at` lies inside the window."""
        return self.start <= at < self.end


@dataclass(frozen=True)
class Service:
    """A tenant's online inference service: a model served by replicas, each `gpus_per_replica` GPUs of
    `gpu_model`, sized to a request rate (`WorkKind.SERVICE`: it outranks its tenant's batch work on the steady
    tier).

    A replica's capacity is either `requests_per_s` or its `token_cost` (one is
    given, never both); it is run at `target_utilisation` of it. The planner
    keeps `min_replicas` .. `max_replicas`; a replica needs `replica_start_s`
    (model load) after its node is up and must serve within `ready_within_s` of
    being needed. At most `spot_share` of the replicas may be spot; an unserved
    request costs `unserved_request_cost_usd`. The planner's decision for one
    service is `burst.planner.services.plan_service`, on the sizing rules of
    `burst.planner.service_sizing`.
    """

    tenant: TenantName
    name: str
    gpu_model: str
    max_replicas: int
    ready_within_s: float
    unserved_request_cost_usd: float
    gpus_per_replica: int = 1
    requests_per_s: float | None = None
    token_cost: TokenCost | None = None
    target_utilisation: float = 0.7
    min_replicas: int = 0
    replica_start_s: float = 120.0
    spot_share: float = 0.0
    events: tuple[ServiceEvent, ...] = ()

    def __post_init__(self) -> None:
        if (self.requests_per_s is None) == (self.token_cost is None):
            raise ValueError(f"service {self.name}: give exactly one of requests_per_s and token_cost")
        if not 0 <= self.min_replicas <= self.max_replicas:
            raise ValueError(f"service {self.name}: replicas must satisfy 0 <= min_replicas <= max_replicas, "
                             f"got {self.min_replicas} .. {self.max_replicas}")
        if not 0 < self.target_utilisation <= 1:
            raise ValueError(f"service {self.name}: target_utilisation must be in (0, 1], got "
                             f"{self.target_utilisation}")

    @property
    def kind(self) -> WorkKind:
        """`WorkKind.SERVICE`: served ahead of its tenant's batch jobs on the steady tier."""
        return WorkKind.SERVICE


@dataclass(frozen=True)
class Policy:
    """One tenant's validated policy (built by `policies/` from its YAML file)."""

    tenant: TenantName
    priority: int = 0
    steady_quota_gpus: int | None = None
    burst_quota_gpus: int | None = None
    budget: Budget = field(default_factory=Budget)
    spot: SpotPolicy = field(default_factory=SpotPolicy)
    prescale: PrescalePolicy = field(default_factory=PrescalePolicy)
    hot_pool: HotPoolPolicy = field(default_factory=HotPoolPolicy)
    disruption: DisruptionPolicy = field(default_factory=DisruptionPolicy)
    allowed_providers: tuple[str, ...] = ()
    allowed_regions: tuple[str, ...] = ()
    queue_wait_slo_s: float = 600.0
    preemptible_by: tuple[TenantName, ...] = ()
    fair_share_weight: float = 1.0
    max_job_runtime_s: float | None = None
    gpu_sharing: GpuSharing = GpuSharing.NONE
    limits: SubmitLimits = field(default_factory=SubmitLimits)  # what its API submissions may hold
    services: tuple[Service, ...] = ()  # the tenant's inference services (`Service`), in file order

    def allows_group(self, group: NodeGroup) -> bool:
        """Whether this tenant may use `group` at all (providers and regions)."""
        if self.allowed_providers and group.provider not in self.allowed_providers:
            return False
        return not (self.allowed_regions and group.tier is Tier.ELASTIC and group.region not in self.allowed_regions)


DEFAULT_POLICY_NAME = "_default"


def default_policy(tenant: TenantName) -> Policy:
    """The policy a tenant without a file gets: priority 0, no quota, no budget, no spot."""
    return Policy(tenant=tenant)


QUANTILES = (0.1, 0.5, 0.9, 0.99)
"""The quantiles every forecast gives, ascending."""

@dataclass(frozen=True)
class SpecialEvent:
    """A known day (or run of days) of unusual demand: a holiday, a conference deadline, a launch."""

    name: str
    start: date
    days: int = 1


ANY_MODEL = "any"
"""The GPU model of demand that names none (jobs that run on any GPU)."""

ALL_TENANTS: TenantName = "*"
"""The tenant of a pooled forecast: one series per GPU model for every tenant together."""


@dataclass(frozen=True)
class Forecast:
    """Forecast GPU demand for one series (tenant, GPU model) at future steps."""

    tenant: TenantName
    gpu_model: str
    timestamps: tuple[datetime, ...]  # ascending
    quantiles: Mapping[float, tuple[float, ...]]  # 0.1/0.5/0.9/0.99 -> one value per timestamp
    model: str = "none"
    history_s: float = math.inf  # how much history it was fitted on (forecasting sets it)
    backtest_p90_pinball: float | None = None  # the serving model's P90 pinball loss (GPUs) in the backtest that chose it
    # the serving model's P50 rises over the next step's actual changes, against none, in that backtest: below 1 its
    # rises foresee demand (forecasting.select.rise_skill); None where no backtest chose the model
    backtest_rise_skill: float | None = None

    def __post_init__(self) -> None:
        stamps = self.timestamps
        if any(later < earlier for earlier, later in zip(stamps, stamps[1:], strict=False)):
            raise ValueError(f"forecast {self.tenant}/{self.gpu_model}: timestamps must ascend")
        for q, path in self.quantiles.items():
            if len(path) != len(stamps):
                raise ValueError(f"forecast {self.tenant}/{self.gpu_model}: quantile {q} has {len(path)} values "
                                 f"for {len(stamps)} timestamps")

    def at(self, q: float, when: datetime) -> float:
        """The `q` quantile at the last step at or before `when` (0 before the first step)."""
        i = bisect.bisect_right(self.timestamps, when)
        return self.quantiles[q][i - 1] if i else 0.0

    def now_value(self, q: float, now: datetime) -> float:
        """The `q` quantile now: at the last step at or before `now`, else at the first step (0 with no steps)."""
        if not self.timestamps:
            return 0.0
        return self.at(q, now) if self.timestamps[0] <= now else self.quantiles[q][0]

    def max_over(self, q: float, start: datetime, end: datetime) -> float:
        """The largest `q` quantile over [start, end] (with no step inside it, the value at `start`, see `now_value`)."""
        first, last = self.steps_within(start, end)
        return max(self.quantiles[q][first:last], default=self.now_value(q, start))

    def steps_within(self, start: datetime, end: datetime | None = None) -> tuple[int, int]:
        """The slice [first, last) of the steps inside [start, end] (to the last step without `end`)."""
        last = len(self.timestamps) if end is None else bisect.bisect_right(self.timestamps, end)
        return bisect.bisect_left(self.timestamps, start, 0, last), last


@dataclass(frozen=True)
class RateForecast:
    """Request-rate forecast quantiles (requests/s) for one service at future instants.

    `quantiles` maps a quantile (e.g. 0.1, 0.5, 0.9, 0.99) to one value per
    instant of `at` (ascending). A value holds from its instant to the next
    one, as a series value spreads over its step. `events_included` says the
    forecaster already put the service's declared event multipliers into the
    values, so the planner does not apply them a second time.
    """

    at: tuple[datetime, ...]
    quantiles: Mapping[float, tuple[float, ...]]
    events_included: bool = False

    def __post_init__(self) -> None:
        if any(later <= earlier for earlier, later in zip(self.at, self.at[1:], strict=False)):
            raise ValueError("rate forecast: instants must strictly ascend")
        if not self.quantiles:
            raise ValueError("rate forecast: no quantile given")
        for q, path in self.quantiles.items():
            if not 0 < q < 1:
                raise ValueError(f"rate forecast: quantile {q} is not in (0, 1)")
            if len(path) != len(self.at):
                raise ValueError(f"rate forecast: quantile {q} has {len(path)} values for {len(self.at)} instants")

    def value_at(self, q: float, when: datetime) -> float:
        """The `q` quantile in force at `when`: the value of the last instant at or before it, else the first
        instant's (the forecast's nearest word on a time before it starts); 0 with no instants."""
        if not self.at:
            return 0.0
        i = bisect.bisect_right(self.at, when)
        return self.quantiles[q][i - 1 if i else 0]


# ---------------------------------------------------------------- actions


class ActionKind(StrEnum):
    """What an action asks the actuator (or job source) to do."""

    SCALE_UP = "scale_up"
    SCALE_DOWN = "scale_down"
    TERMINATE_NODES = "terminate_nodes"
    SET_WARM_POOL = "set_warm_pool"
    PLACE_JOB = "place_job"
    REQUEST_CHECKPOINT = "request_checkpoint"
    EVICT_JOB = "evict_job"
    RECLAIM_JOB = "reclaim_job"
    REQUEUE_JOB = "requeue_job"


JOB_ACTION_KINDS = frozenset({
    ActionKind.PLACE_JOB, ActionKind.REQUEST_CHECKPOINT, ActionKind.EVICT_JOB, ActionKind.RECLAIM_JOB,
    ActionKind.REQUEUE_JOB,
})
"""Actions on a job: their `count` is GPUs. Every other action's is nodes."""


@dataclass(frozen=True)
class Action:
    """One typed step of a plan, with the reason a reader of `burst plan` sees.

    `target` is the group, node or job acted on; `count` is how many nodes
    (scale actions) or GPUs (job actions) it concerns; `size` is the absolute
    group size asked for, where it applies. `step` names the planner step that
    produced it.
    """

    kind: ActionKind
    target: str
    reason: str
    step: str
    count: int | None = None
    size: int | None = None
    node_ids: tuple[NodeId, ...] = ()
    tenant: TenantName | None = None
    warm_state: WarmState | None = None
    gpu_uuids: tuple[str, ...] = ()
    id: str = ""

    @property
    def count_unit(self) -> str:
        """What `count` counts: `gpus` for an action on a job, `nodes` for one on a group or its nodes."""
        return "gpus" if self.kind in JOB_ACTION_KINDS else "nodes"

    @property
    def key(self) -> str:
        """Idempotency key derived from what the action does (stable across restarts)."""
        parts = [self.kind.value, self.target]
        if self.size is not None:
            parts.append(f"size={self.size}")
        if self.node_ids:
            parts.append("nodes=" + ",".join(sorted(self.node_ids)))
        if self.warm_state is not None:
            parts.append(f"warm={self.warm_state.value}")
        return ":".join(parts)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind.value, "target": self.target}
        if self.count is not None:
            out["count"] = self.count
            out["count_unit"] = self.count_unit
        if self.size is not None:
            out["size"] = self.size
        if self.node_ids:
            out["node_ids"] = list(self.node_ids)
        if self.gpu_uuids:
            out["gpu_uuids"] = list(self.gpu_uuids)
        if self.tenant is not None:
            out["tenant"] = self.tenant
        if self.warm_state is not None:
            out["warm_state"] = self.warm_state.value
        out["step"] = self.step
        out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class Hold:
    """A non-decision: something the planner considered and did not do, and why."""

    subject: str
    reason: str
    step: str
    tenant: TenantName | None = None
    job_ids: tuple[JobId, ...] = ()  # the jobs a hold about several of them covers (`burst explain JOB` finds it)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"subject": self.subject, "step": self.step, "reason": self.reason}
        if self.tenant is not None:
            out["tenant"] = self.tenant
        if self.job_ids:
            out["job_ids"] = list(self.job_ids)
        return out


UTILISATION_YELLOW = 0.6
UTILISATION_RED = 0.8
"""Steady-tier status bands: green below 60% forecast utilisation, yellow to 80%, red above."""


def utilisation_status(utilisation: float) -> str:
    """Decide the steady tier's traffic light for a forecast utilisation (green / yellow / red)."""
    if utilisation > UTILISATION_RED:
        return "red"
    return "yellow" if utilisation >= UTILISATION_YELLOW else "green"


@dataclass(frozen=True)
class SteadyAdvice:
    """The steady (on-prem) tier's capacity recommendation for one GPU model over a planning window.

    `recommended_gpus` is the P50 over the window of the forecast P50 demand
    (summed over tenants): GPUs demanded at least half the time, which on-prem
    serves at its lowest unit cost. `utilisation` is the mean forecast share of
    today's `steady_gpus` that demand would keep busy (1.0 when there are none
    and demand is positive); `status` is its traffic light. The three are None
    when today's steady GPUs are not known (a series file forecast alone).
    With prices, `cost_optimal_gpus` is the size that minimises owned cost
    plus on-demand overflow (burst.planner.steady), and the year figures
    price both sizes.
    """

    gpu_model: str
    steady_gpus: int | None
    recommended_gpus: int
    utilisation: float | None
    utilisation_at_recommended: float
    status: str | None
    window_start: datetime
    window_end: datetime
    cost_optimal_quantile: float | None = None  # 1 - owned / on-demand USD per GPU-hour (None: prices not known)
    cost_optimal_gpus: int | None = None  # that quantile of the forecast P50 demand over the window
    year_usd_at_recommended: float | None = None  # a year of owning `recommended_gpus`, demand above on-demand
    year_usd_at_cost_optimal: float | None = None  # the same at `cost_optimal_gpus`

    def to_json(self) -> dict[str, Any]:
        def usd(v: float | None) -> float | None:
            return None if v is None else round(v, 2)

        return {
            "gpu_model": self.gpu_model,
            "steady_gpus": self.steady_gpus,
            "recommended_gpus": self.recommended_gpus,
            "utilisation": None if self.utilisation is None else round(self.utilisation, 4),
            "utilisation_at_recommended": round(self.utilisation_at_recommended, 4),
            "status": self.status,
            "window_start": self.window_start.isoformat(),
            "window_end": self.window_end.isoformat(),
            "cost_optimal_quantile": None if self.cost_optimal_quantile is None else round(self.cost_optimal_quantile, 4),
            "cost_optimal_gpus": self.cost_optimal_gpus,
            "year_usd_at_recommended": usd(self.year_usd_at_recommended),
            "year_usd_at_cost_optimal": usd(self.year_usd_at_cost_optimal),
        }


@dataclass(frozen=True)
class Plan:
    """What one tick decided: ordered actions, the holds that explain inaction, and steady-tier advice."""

    id: str
    at: datetime
    actions: tuple[Action, ...]
    holds: tuple[Hold, ...] = ()
    advice: tuple[SteadyAdvice, ...] = ()

    def of_kind(self, *kinds: ActionKind) -> list[Action]:
        return [a for a in self.actions if a.kind in kinds]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "actions": [a.to_json() for a in self.actions],
            "holds": [h.to_json() for h in self.holds],
            "steady_tier": [a.to_json() for a in self.advice],
        }


@dataclass(frozen=True)
class Snapshot:
    """Observed state at one instant: the planner's whole view of the world.

    `targets` are the group sizes asked for (which may exceed the nodes listed:
    capacity still booting, or not yet visible, counts toward them).
    `spend_month_usd` is each tenant's month-to-date spend from the cost ledger.
    `warm_pools` are the warm-pool sizes and states asked of the providers.
    `unavailable` are groups cooling down after a failed launch or a spot
    interruption: the planner launches elsewhere until they are back.
    `notices` are the nodes a provider said it will reclaim, and when;
    `rebalances` the nodes it said are at elevated risk of that (a rebalance
    recommendation: no deadline), and when it said so.
    `node_gpus` are the GPUs (identity, health, topology) of on-prem nodes that
    reported them: the local GPU scheduler binds jobs to specific GPUs there.
    `interruption_rates` are the spot groups' interruption rates per node-hour
    learnt from observed interruptions (`burst.planner.spot_rates`); a group
    without one is taken at its published band's prior.
    `runtimes` are the run times (seconds of work) of each tenant's recently
    completed jobs: what the planner expects a job's run from
    (`burst.planner.runtime_estimate`).
    """

    groups: tuple[NodeGroup, ...]
    nodes: tuple[Node, ...]
    jobs: tuple[Job, ...]
    targets: Mapping[GroupId, int] = field(default_factory=dict)
    spend_month_usd: Mapping[TenantName, float] = field(default_factory=dict)
    warm_pools: Mapping[GroupId, tuple[int, WarmState]] = field(default_factory=dict)  # requested size, state
    unavailable: Mapping[GroupId, str] = field(default_factory=dict)  # groups not to launch in now, and why
    notices: Mapping[NodeId, datetime] = field(default_factory=dict)  # spot interruption deadlines per node
    rebalances: Mapping[NodeId, datetime] = field(default_factory=dict)  # rebalance recommendations' times per node
    node_gpus: Mapping[NodeId, NodeGpus] = field(default_factory=dict)  # on-prem nodes' GPUs, from their agents
    interruption_rates: Mapping[GroupId, float] = field(default_factory=dict)  # learnt, per node-hour
    runtimes: Mapping[TenantName, tuple[float, ...]] = field(default_factory=dict)  # completed jobs' run times, recent

    @functools.cached_property
    def running_jobs(self) -> tuple[Job, ...]:
        """The jobs holding GPUs (running or checkpointing), in snapshot order; found once per snapshot."""
        running, checkpointing = JobState.RUNNING, JobState.CHECKPOINTING
        return tuple([j for j in self.jobs if j.state is running or j.state is checkpointing])

    @functools.cached_property
    def pending_jobs(self) -> tuple[Job, ...]:
        """The jobs waiting to be placed, in snapshot order; found once per snapshot."""
        pending = JobState.PENDING
        return tuple([j for j in self.jobs if j.state is pending])

    def group(self, group_id: GroupId) -> NodeGroup:
        for g in self.groups:
            if g.id == group_id:
                return g
        raise KeyError(group_id)

    def target_of(self, group: NodeGroup) -> int:
        """A group's asked-for size; without a recorded target, its live node count."""
        if group.id in self.targets:
            return self.targets[group.id]
        return sum(1 for n in self.nodes if n.group_id == group.id and n.live and n.state is not NodeState.WARM)


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


@dataclass(frozen=True)
class DemandPoint:
    """GPUs demanded (running + pending) by one tenant for one GPU model at one instant."""

    at: datetime
    tenant: TenantName
    gpu_model: str
    running_gpus: float
    pending_gpus: float

    @property
    def demand_gpus(self) -> float:
        return self.running_gpus + self.pending_gpus


def hours_between(a: datetime, b: datetime) -> float:
    """Hours from a to b (negative if b is before a)."""
    return (b - a).total_seconds() / 3600.0
