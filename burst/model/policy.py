"""A tenant's validated policy: budgets, quotas, spot, pre-scaling, hot pools, disruption and submit limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from burst.model.base import TenantName
from burst.model.gpus import GpuSharing
from burst.model.nodes import NodeGroup, Tier
from burst.model.services import Service


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
