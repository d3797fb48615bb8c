"""What a simulation runs on: node groups, prices, spot hazards, tenant policies, loop interval.

`default_setup(trace)` is the documented hybrid set-up sized from the trace
itself, so any trace replays with one command:

- one on-prem steady group (`onprem`, 8 × A100 per node, priced by the catalog's
  on-prem cost model) with ceil(P50 of the trace's concurrent GPU demand / 8)
  nodes, paid for all the time;
- one on-demand and one spot cloud group (`cloud-od`, `cloud-spot`:
  p4d.24xlarge in us-east-1 at the shipped catalog's prices), each allowed up
  to ceil(peak demand / 8) nodes, 5 min cold boot, 1 min wake from a stopped
  warm pool, idle nodes released at break-even (`burst.planner.scale_down`); spot nodes are interrupted at
  `DEFAULT_SPOT_HAZARD_PER_HOUR` per node-hour (seeded);
- every tenant of the trace gets the default policy with spot allowed, a queue
  wait SLO of 10 min, and `DEFAULT_FAULT_TOLERANT_FRACTION` of its jobs (a seeded
  draw per job) assumed fault-tolerant, checkpointing every
  `DEFAULT_CHECKPOINT_INTERVAL_S`. The traces record neither fault tolerance
  nor checkpoints: this is an assumption, and the report states it.

`setup_from_config(config)` uses a `burst.yaml`'s groups and policies instead.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from burst.catalog import Catalog
from burst.model import (
    CapacityType,
    GpuShape,
    GroupId,
    Job,
    NodeGroup,
    Policy,
    SpotPolicy,
    TenantName,
    Tier,
    WarmPoolSettings,
    WarmState,
)
from burst.sim.traces import TraceStats
from policies import BurstConfig

DEFAULT_SPOT_HAZARD_PER_HOUR = 0.01
DEFAULT_FAULT_TOLERANT_FRACTION = 0.5
DEFAULT_CHECKPOINT_INTERVAL_S = 1800.0
DEFAULT_LOOP_INTERVAL_S = 60.0
CHECKPOINT_DURATION_RANGE_S = (30.0, 300.0)
"""A fault-tolerant trace job's checkpoint takes a seeded draw from this range: some fit a 2-minute
spot notice and some do not."""
DEFAULT_SLO_S = 600.0
GPUS_PER_NODE = 8


@dataclass(frozen=True)
class SimSetup:
    """Everything a strategy is simulated on; strategies derive their own from it."""

    cluster: str
    groups: tuple[NodeGroup, ...]
    initial: Mapping[GroupId, int]
    spot_hazard_per_hour: Mapping[GroupId, float]
    policies: Mapping[TenantName, Policy]
    catalog: Catalog
    loop_interval_s: float = DEFAULT_LOOP_INTERVAL_S
    default_policy: Policy | None = None
    assumptions: tuple[str, ...] = field(default=())
    checkpointing: bool = True  # False: fault-tolerant trace jobs never checkpoint (they resume from the start)
    checkpoint_duration_range_s: tuple[float, float] = CHECKPOINT_DURATION_RANGE_S  # a trace job's checkpoint: a draw
    capacity: Mapping[GroupId, int] = field(default_factory=dict)  # most live nodes a group can get (default: max_size)

    def policy(self, tenant: TenantName) -> Policy:
        """The tenant's policy; tenants without one get `default_policy` (or burst's default)."""
        found = self.policies.get(tenant)
        if found is not None:
            return found
        base = self.default_policy or Policy(tenant=tenant)
        return dataclasses.replace(base, tenant=tenant)

    def policies_for(self, tenants: Iterable[TenantName]) -> dict[TenantName, Policy]:
        """A policy for every tenant named (the planner needs one per tenant with jobs)."""
        return {t: self.policy(t) for t in sorted(set(tenants) | set(self.policies))}

    def steady_gpus(self) -> int:
        """GPUs the steady tier starts with."""
        return sum(self.initial.get(g.id, 0) * g.gpus_per_node for g in self.groups if g.tier is Tier.STEADY)


def default_setup(stats: TraceStats, catalog: Catalog | None = None, *, cluster: str = "sim") -> SimSetup:
    """The hybrid set-up sized from a trace's own demand (see the module docstring)."""
    catalog = catalog or Catalog.load()
    shape = GpuShape(gpu_model="A100", gpus_per_node=GPUS_PER_NODE, gpu_memory_gib=40.0)
    onprem_nodes = math.ceil(stats.p50_gpus / GPUS_PER_NODE)
    cloud_max = max(1, math.ceil(stats.peak_gpus / GPUS_PER_NODE))
    onprem = NodeGroup(
        id="onprem",
        provider="sim",
        region="dc1",
        tier=Tier.STEADY,
        capacity_type=CapacityType.ONPREM,
        shape=shape,
        instance_type="dgx-a100",
        min_size=onprem_nodes,
        max_size=onprem_nodes,
        boot_latency_s=600.0,
    )
    cloud = {
        "boot_latency_s": 300.0,
        "warm_wake_latency_s": {WarmState.STOPPED: 60.0, WarmState.RUNNING: 5.0},
        "max_size": cloud_max,
        "provider": "sim",
        "region": "us-east-1",
        "tier": Tier.ELASTIC,
        "shape": shape,
        "instance_type": "p4d.24xlarge",
    }
    od = NodeGroup(id="cloud-od", capacity_type=CapacityType.ON_DEMAND, **cloud)  # type: ignore[arg-type]
    spot = NodeGroup(id="cloud-spot", capacity_type=CapacityType.SPOT, **cloud)  # type: ignore[arg-type]
    default = Policy(
        tenant="_default",
        queue_wait_slo_s=DEFAULT_SLO_S,
        spot=SpotPolicy(allowed=True, fault_tolerant_fraction=DEFAULT_FAULT_TOLERANT_FRACTION),
    )
    return SimSetup(
        cluster=cluster,
        groups=(onprem, od, spot),
        initial={"onprem": onprem_nodes, "cloud-od": 0, "cloud-spot": 0},
        spot_hazard_per_hour={"cloud-spot": DEFAULT_SPOT_HAZARD_PER_HOUR},
        policies={},
        catalog=catalog,
        default_policy=default,
        assumptions=(
            f"on-prem: {onprem_nodes} x 8 A100 (P50 of the trace's concurrent demand, {stats.p50_gpus:g} GPUs) at "
            f"${catalog.group_price(onprem):.2f}/node-h",
            f"cloud: p4d.24xlarge us-east-1 on-demand (${catalog.group_price(od):.2f}/node-h) and spot "
            f"(${catalog.group_price(spot):.2f}/node-h) from the shipped catalog, up to {cloud_max} nodes each, "
            "5 min cold boot",
            f"spot interruptions: {DEFAULT_SPOT_HAZARD_PER_HOUR:g} per node-hour (seeded)",
            f"fault tolerance is not in the trace: {DEFAULT_FAULT_TOLERANT_FRACTION:.0%} of each tenant's jobs "
            f"(seeded) are assumed fault-tolerant, checkpointing every {DEFAULT_CHECKPOINT_INTERVAL_S / 60:g} min; "
            f"a checkpoint takes {CHECKPOINT_DURATION_RANGE_S[0]:g}-{CHECKPOINT_DURATION_RANGE_S[1]:g} s (seeded draw); "
            "spot notice 2 min",
            f"queue wait SLO: {DEFAULT_SLO_S / 60:g} min for tenants without a policy",
        ),
    )


def with_hot_pool(setup: SimSetup, state: WarmState = WarmState.STOPPED) -> SimSetup:
    """The set-up with a hot pool on every on-demand elastic group, bounded only by the group's max size.

    burst then sizes the pools from the forecast (`pools.sizing`); the
    hot-pool benchmark compares that with no pool and a fixed one.
    """
    groups = tuple(
        dataclasses.replace(g, warm_pool=WarmPoolSettings(max_prepared=g.max_size, state=state))
        if g.tier is Tier.ELASTIC and g.capacity_type is CapacityType.ON_DEMAND
        else g
        for g in setup.groups
    )
    note = (f"hot pool: on-demand groups may keep {state.value} nodes warm "
            f"({'storage price while stopped' if state is WarmState.STOPPED else 'full price'}), up to their max size")
    return dataclasses.replace(setup, groups=groups, assumptions=(*setup.assumptions, note))


def with_spot_scarcity(setup: SimSetup, share: float = 0.25) -> SimSetup:
    """The set-up with each spot group able to hold only `share` of its max size: launches beyond it fail
    (insufficient capacity in that offering), so a strategy that waits for spot pays for it in time."""
    capacity = {g.id: max(1, math.floor(share * g.max_size)) for g in setup.groups
                if g.capacity_type is CapacityType.SPOT}
    note = f"spot scarcity: each spot offering holds at most {share:.0%} of its group's max size; launches beyond fail"
    return dataclasses.replace(setup, capacity={**setup.capacity, **capacity}, assumptions=(*setup.assumptions, note))


def in_region(setup: SimSetup, region: str) -> SimSetup:
    """The set-up with its cloud groups moved to `region` (priced there by the catalog)."""
    groups = tuple(dataclasses.replace(g, region=region) if g.tier is Tier.ELASTIC else g for g in setup.groups)
    moved = dataclasses.replace(setup, groups=groups)
    prices = ", ".join(f"{g.id} ${setup.catalog.group_price(g):.2f}/node-h" for g in groups if g.tier is Tier.ELASTIC)
    return dataclasses.replace(moved, assumptions=(*setup.assumptions, f"cloud groups in {region}: {prices}"))


SECOND_PRICE_REGION = "us-west-2"
"""Where the second-price set-up moves the cloud groups: p4d spot costs $8.00/node-h there, not $2.47."""


def with_second_price(setup: SimSetup) -> SimSetup:
    """The set-up with its cloud groups in `SECOND_PRICE_REGION`."""
    return in_region(setup, SECOND_PRICE_REGION)


MULTI_SHAPE_REGION = "us-central1"
MULTI_SHAPE_INSTANCE_TYPES = {1: "a2-highgpu-1g", 8: "a2-highgpu-8g"}
"""The cloud shapes of the multi-shape set-up, by GPUs per node: GCP A100 (40 GB) nodes the shipped catalog prices
at the same rate per GPU, so only a node's size tells them apart."""


def with_shapes(setup: SimSetup, instance_types: Mapping[int, str] = MULTI_SHAPE_INSTANCE_TYPES,
                region: str = MULTI_SHAPE_REGION, provider: str = "gcp") -> SimSetup:
    """The set-up with its cloud groups replaced by one on-demand and one spot group per shape of `instance_types`
    (GPUs per node -> instance type of the catalog in `region`), every shape able to hold as many GPUs as the
    cloud groups it replaces; the steady tier, policies and spot hazard per node-hour stay as they are.

    The groups run on the simulated cloud (provider `sim`) at `provider`'s catalog prices."""
    cloud = [g for g in setup.groups if g.tier is Tier.ELASTIC]
    if not cloud:
        return setup
    cloud_gpus = max(g.max_size * g.gpus_per_node for g in cloud)
    hazard = max((setup.spot_hazard_per_hour.get(g.id, 0.0) for g in cloud), default=DEFAULT_SPOT_HAZARD_PER_HOUR)
    template = cloud[0]
    added: list[NodeGroup] = []
    for gpus, instance_type in sorted(instance_types.items()):
        row = setup.catalog.find(provider, instance_type, region)
        if row is None:
            raise KeyError(f"no {provider} price for {instance_type} in {region}")
        shape = GpuShape(gpu_model=row.gpu_model, gpus_per_node=gpus, gpu_memory_gib=row.gpu_memory_gib)
        for capacity, suffix in ((CapacityType.ON_DEMAND, "od"), (CapacityType.SPOT, "spot")):
            added.append(dataclasses.replace(
                template, id=f"cloud-{gpus}g-{suffix}", capacity_type=capacity, shape=shape, region=region,
                instance_type=instance_type, max_size=max(1, math.ceil(cloud_gpus / gpus)), min_size=0))
    groups = (*(g for g in setup.groups if g.tier is not Tier.ELASTIC), *added)
    prices = ", ".join(f"{g.id} ({g.instance_type}) ${setup.catalog.group_price(g):.2f}/node-h, up to {g.max_size}"
                       for g in added)
    return dataclasses.replace(
        setup, groups=groups,
        initial={**{k: v for k, v in setup.initial.items() if k not in {g.id for g in cloud}},
                 **{g.id: 0 for g in added}},
        spot_hazard_per_hour={g.id: hazard for g in added if g.capacity_type is CapacityType.SPOT},
        capacity={k: v for k, v in setup.capacity.items() if k not in {g.id for g in cloud}},
        assumptions=(*(a for a in setup.assumptions if not a.startswith("cloud: ")),
                     f"cloud: {provider} {region} on-demand and spot per shape from the shipped catalog: {prices}"),
    )


def with_multi_shape(setup: SimSetup) -> SimSetup:
    """The set-up with a 1-GPU and an 8-GPU cloud shape (`MULTI_SHAPE_INSTANCE_TYPES`), each on-demand and spot."""
    return with_shapes(setup)


def only_shape(setup: SimSetup, gpus_per_node: int) -> SimSetup:
    """The set-up without its elastic groups of any other node size (the multi-shape set-up restricted to one)."""
    dropped = {g.id for g in setup.groups if g.tier is Tier.ELASTIC and g.gpus_per_node != gpus_per_node}
    return dataclasses.replace(
        setup, groups=tuple(g for g in setup.groups if g.id not in dropped),
        initial={k: v for k, v in setup.initial.items() if k not in dropped},
        spot_hazard_per_hour={k: v for k, v in setup.spot_hazard_per_hour.items() if k not in dropped},
        capacity={k: v for k, v in setup.capacity.items() if k not in dropped},
        assumptions=(*setup.assumptions, f"cloud restricted to {gpus_per_node}-GPU nodes"),
    )


NAMED_SETUPS: dict[str, Callable[[SimSetup], SimSetup]] = {
    "main": lambda setup: setup,
    "spot-scarcity": with_spot_scarcity,
    "second-price": with_second_price,
    "multi-shape": with_multi_shape,
}
"""The set-ups `burst simulate --setup` and the strategy benchmark replay, each a change to the default set-up
sized from the trace (`default_setup`): as it is, with scarce spot, with the cloud in the second-price region, or
with a 1-GPU and an 8-GPU cloud shape (GCP us-central1) in place of the one p4d shape."""


def named_setup(name: str, stats: TraceStats) -> SimSetup:
    """The set-up `NAMED_SETUPS[name]` makes of the default one sized from `stats`. Raises KeyError for a name
    it does not hold."""
    return NAMED_SETUPS[name](default_setup(stats))


def setup_from_config(config: BurstConfig) -> SimSetup:
    """The set-up a `burst.yaml` describes: its groups, initial sizes, spot hazards, policies and prices.

    Trace tenants without a policy file get burst's default policy (no spot).
    """
    from burst.runtime import catalog_from_config
    from policies import load_policy_dir

    groups = config.node_groups_model()
    docs = {d.id: d for d in config.node_groups}
    policies_dir = config.policies_path()
    policies = load_policy_dir(policies_dir) if policies_dir.is_dir() else {}
    return SimSetup(
        cluster=config.cluster,
        groups=tuple(groups),
        initial={g.id: docs[g.id].effective_initial_size for g in groups},
        spot_hazard_per_hour={g.id: docs[g.id].spot_hazard_per_hour for g in groups},
        policies=policies,
        catalog=catalog_from_config(config),
        loop_interval_s=config.loop_interval,
        default_policy=Policy(tenant="_default", queue_wait_slo_s=DEFAULT_SLO_S),
        assumptions=(f"set-up from the config of cluster {config.cluster!r}",),
    )


def with_fault_tolerance(jobs: Sequence[Job], setup: SimSetup, seed: int) -> list[Job]:
    """Mark the seeded share of each tenant's jobs fault-tolerant that its policy's `fault_tolerant_fraction` says.

    A job already marked keeps its own values. The draw is per job id, so a job
    is marked the same way whatever window of the trace is replayed.
    """
    out: list[Job] = []
    for job in jobs:
        policy = setup.policy(job.tenant)
        fraction = policy.spot.fault_tolerant_fraction
        if job.fault_tolerant or fraction <= 0:
            out.append(job)
            continue
        draw = random.Random(f"{seed}:ft:{job.id}")
        if draw.random() < fraction:
            interval: float | None = policy.spot.required_checkpoint_interval_s or DEFAULT_CHECKPOINT_INTERVAL_S
            took = job.checkpoint_duration_s
            if took is None:
                took = draw.uniform(*setup.checkpoint_duration_range_s)
            if not setup.checkpointing:
                interval = took = None
            job = dataclasses.replace(job, fault_tolerant=True, checkpoint_interval_s=interval, checkpoint_duration_s=took)
        out.append(job)
    return out


__all__ = [
    "DEFAULT_CHECKPOINT_INTERVAL_S",
    "DEFAULT_FAULT_TOLERANT_FRACTION",
    "DEFAULT_SPOT_HAZARD_PER_HOUR",
    "MULTI_SHAPE_INSTANCE_TYPES",
    "MULTI_SHAPE_REGION",
    "NAMED_SETUPS",
    "SECOND_PRICE_REGION",
    "SimSetup",
    "default_setup",
    "named_setup",
    "setup_from_config",
    "with_fault_tolerance",
    "in_region",
    "only_shape",
    "with_multi_shape",
    "with_shapes",
    "with_hot_pool",
    "with_second_price",
    "with_spot_scarcity",
]
