"""The tenant policy file's schema (pydantic v2) and its conversion to `burst.model.Policy`.

One YAML file per tenant; every key is optional and unknown keys are errors.
Each field's description says which part of burst reads it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    Strict,
    StrictBool,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError, core_schema

from burst.bounds import MAX_LIST_LENGTH, MAX_WEIGHT, shown
from burst.model import (
    QUANTILES,
    Budget,
    DisruptionPolicy,
    GpuSharing,
    HotPoolPolicy,
    Policy,
    PrescalePolicy,
    SpotPolicy,
)
from burst.provider_registry import provider_names
from policies.durations import Duration
from policies.fields import (
    Fraction,
    GpuCount,
    LocatedValueError,
    Money,
    Name,
    NonEmptyStr,
    NonNegativeNumber,
    Number,
    PositiveDuration,
    Priority,
    StrictModel,
    none_as_empty,
)
from policies.limits import LimitsDoc
from policies.services import ServiceDoc, duplicate_service_names

PLANNER = "read by the planner"
SPOT_PLACEMENT = "read by spot placement"
PREEMPTION = "read by the planner's priority preemption step"

def _provider_name(value: Any) -> str:
    names = provider_names()
    if isinstance(value, str) and value in names:
        return value
    expected = ", ".join(repr(n) for n in names[:-1]) + f" or {names[-1]!r}"
    raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})


class _ProviderNameType:
    """A registered provider's name (`burst.provider_registry`, in its order): validated when read, an enum in the
    JSON schema."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(_provider_name)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        return {"enum": provider_names(), "type": "string"}


ProviderName = Annotated[str, _ProviderNameType]
"""A provider backend's name (one registered in `burst.provider_registry`)."""


class QuotaDoc(StrictModel):
    """GPU quotas per tier."""

    steady_gpus: GpuCount | None = Field(
        default=None, description=f"Max GPUs on the steady (on-prem) tier; null = unlimited; {PLANNER}."
    )
    burst_gpus: GpuCount | None = Field(
        default=None, description=f"Max GPUs on the elastic (cloud) tier; null = unlimited; {PLANNER}."
    )


class BudgetDoc(StrictModel):
    """Hard spending caps in USD; a missing cap means no cap."""

    usd_per_hour: Money | None = Field(
        default=None, description=f"Hard cap on USD spent per hour (> 0); {PLANNER}."
    )
    usd_per_month: Money | None = Field(
        default=None, description=f"Hard cap on USD spent per calendar month (> 0); {PLANNER}."
    )


class SpotDoc(StrictModel):
    """Whether and how much of the tenant's elastic work may run on Spot/Preemptible capacity."""

    allowed: StrictBool = Field(
        default=False, description=f"Whether the tenant's jobs may run on spot capacity; {PLANNER}."
    )
    max_share: Fraction = Field(
        default=1.0, description=f"Share (0..1) of the tenant's elastic GPUs that may be spot; {PLANNER}."
    )
    required_checkpoint_interval: PositiveDuration | None = Field(
        default=None,
        description="Duration: a fault-tolerant job must checkpoint at least this often to go on spot; "
        f"null = any fault-tolerant job qualifies; {SPOT_PLACEMENT}.",
    )
    fault_tolerant_fraction: Fraction = Field(
        default=0.0,
        description="Trace replay only: the seeded share (0..1) of this tenant's trace jobs assumed "
        f"fault-tolerant; {PLANNER}.",
    )
    deadline_margin: PositiveDuration | None = Field(
        default=None,
        description="Duration: a job with a deadline whose slack (time to the deadline less its remaining work, "
        "counted from its last checkpoint) falls below this runs on on-demand, not spot; null = one cold boot "
        f"of the on-demand group plus the job's checkpoint duration; {PLANNER}'s deadline step.",
    )
    price_tolerance: Fraction = Field(
        default=0.10,
        description="Spot offerings (node groups) priced within this fraction of the cheapest one a job may use "
        "count as equally cheap: among them the lowest interruption rate wins (default 0.10); "
        f"{SPOT_PLACEMENT}.",
    )
    max_offering_share: Fraction = Field(
        default=0.5,
        description="Share (0..1) of the tenant's spot GPUs one offering may hold before the other offerings "
        f"within the price tolerance are tried first (default 0.5); {SPOT_PLACEMENT}.",
    )


class PrescaleDoc(StrictModel):
    """Elastic pre-scaling ahead of forecast demand."""

    quantile: Number | None = Field(
        default=0.9,
        description="Forecast quantile the elastic tier is scaled ahead for (0.1, 0.5, 0.9 or 0.99); "
        f"null = no pre-scaling for this tenant; {PLANNER}.",
    )
    buffer: Duration = Field(
        default=300.0,
        description="Duration added to a group's boot latency to give the pre-scaling lead time "
        f"(default 300 s); {PLANNER}.",
    )
    wait_usd_per_gpu_hour: NonNegativeNumber | None = Field(
        default=None,
        description="USD a GPU-hour of this tenant's queueing is worth: a pre-scaling launch must save more "
        "expected wait, valued at this, than it is expected to cost (null = the default, 12 USD: three on-demand "
        f"A100 GPU-hours); {PLANNER}.",
    )

    @field_validator("quantile")
    @classmethod
    def _forecast_quantile(cls, value: float | None) -> float | None:
        if value is not None and value not in QUANTILES:
            raise ValueError(f"must be one of the forecast quantiles {', '.join(map(str, QUANTILES))}, got {value:g}")
        return value


class HotPoolDoc(StrictModel):
    """The tenant's part in the hot pools of warm nodes."""

    enabled: StrictBool = Field(
        default=True, description=f"Whether the tenant's forecast demand sizes the hot pools; {PLANNER}."
    )
    min_gpus: GpuCount = Field(
        default=0, description=f"Warm GPUs kept for the tenant at least, forecast or not; {PLANNER}."
    )


class DisruptionDoc(StrictModel):
    """How far burst may move the tenant's running fault-tolerant jobs to save money (consolidation, room on-prem)."""

    do_not_disrupt: StrictBool = Field(
        default=False,
        description="Never move the tenant's jobs to save money (spot notices, failed GPUs and priority "
        f"preemption still move them); {PLANNER}.",
    )
    max_share: Fraction = Field(
        default=0.1,
        description="Share (0..1) of the tenant's running GPUs that may be moving at once, always at least one "
        f"job (default 0.1); {PLANNER}.",
    )
    min_move_interval: PositiveDuration = Field(
        default=3600.0,
        description=f"Duration: a job resumed after a move is not moved again sooner (default 1h); {PLANNER}.",
    )


class TenantPolicyDoc(StrictModel):
    """One tenant's policy file (`<tenant>.yaml`). Every key is optional."""

    model_config = ConfigDict(title="burst tenant policy", extra="forbid", allow_inf_nan=False, frozen=True)

    tenant: Name | None = Field(
        default=None,
        description=f"The tenant's name; optional, and if given it must equal the file stem; {PLANNER}.",
    )
    priority: Priority = Field(
        default=0, description="Higher is served first; between tenants the only priority that counts (a job's own "
        f"priority orders its tenant's jobs only); {PLANNER}.",
    )
    quota: QuotaDoc = Field(default=QuotaDoc(), description=f"GPU quotas per tier; {PLANNER}.")
    budget: BudgetDoc = Field(default=BudgetDoc(), description=f"Hard spending caps; {PLANNER}.")
    spot: SpotDoc = Field(default=SpotDoc(), description=f"Spot/Preemptible usage; {PLANNER}.")
    prescale: PrescaleDoc = Field(
        default=PrescaleDoc(), description=f"Elastic pre-scaling ahead of forecast demand; {PLANNER}."
    )
    hot_pool: HotPoolDoc = Field(default=HotPoolDoc(), description=f"Hot pools of warm nodes; {PLANNER}.")
    disruption: DisruptionDoc = Field(
        default=DisruptionDoc(), description=f"Moves of running jobs to save money; {PLANNER}."
    )
    allowed_providers: Annotated[list[ProviderName], Strict(), Field(max_length=MAX_LIST_LENGTH)] = Field(
        default_factory=list, description=f"Providers the tenant may use; empty or missing = any; {PLANNER}."
    )
    allowed_regions: Annotated[list[NonEmptyStr], Strict(), Field(max_length=MAX_LIST_LENGTH)] = Field(
        default_factory=list,
        description=f"Elastic-tier regions the tenant may use; empty or missing = any; {PLANNER}.",
    )
    queue_wait_slo: PositiveDuration = Field(
        default=600.0,
        description=f"Duration: the longest a pending job should wait for GPUs (default 600 s); {PLANNER}.",
    )
    preemptible_by: Annotated[list[Name], Strict(), Field(max_length=MAX_LIST_LENGTH)] = Field(
        default_factory=list, description=f"Tenants whose jobs may preempt this tenant's jobs; {PREEMPTION}."
    )
    fair_share_weight: Annotated[float, Strict(), Field(gt=0, le=MAX_WEIGHT)] = Field(
        default=1.0, description=f"Fair-share weight (> 0 .. {MAX_WEIGHT:g}, default 1); {PLANNER}."
    )
    max_job_runtime: PositiveDuration | None = Field(
        default=None, description=f"Duration after which a job is reclaimed; null = unlimited; {PLANNER}."
    )
    gpu_sharing: Literal["none", "mps", "time_slicing"] = Field(
        default="none",
        description="How the tenant's fractional-GPU jobs may share a GPU on-prem: none (default), mps "
        "(CUDA Multi-Process Service) or time_slicing; read by the local GPU scheduler and the node agent.",
    )
    limits: LimitsDoc = Field(
        default=LimitsDoc(),
        description="How much of the controller the tenant's API submissions may hold: pending jobs, their stored "
        "text, submits per second (beyond any, the API answers 429); read by the API.",
    )
    services: Annotated[list[ServiceDoc], Strict(), Field(max_length=MAX_LIST_LENGTH)] = Field(
        default_factory=list,
        description="The tenant's online inference services: replicas sized to a request rate, ahead of the "
        "tenant's batch work on the steady tier; read by the daemon's service loop where burst.yaml names "
        "where their rates are read (rates:), and by the simulator.",
    )

    @field_validator("quota", "budget", "spot", "prescale", "hot_pool", "disruption", "limits", mode="before")
    @classmethod
    def _empty_section(cls, value: Any) -> Any:
        return none_as_empty(value, {})

    @field_validator("allowed_providers", "allowed_regions", "preemptible_by", "services", mode="before")
    @classmethod
    def _empty_list(cls, value: Any) -> Any:
        return none_as_empty(value, [])

    @field_validator("allowed_providers", "allowed_regions", "preemptible_by")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        seen: set[str] = set()
        for item in value:
            if item in seen:
                raise ValueError(f"{shown(item)} is listed twice")
            seen.add(item)
        return value

    @field_validator("services")
    @classmethod
    def _unique_service_names(cls, value: list[ServiceDoc]) -> list[ServiceDoc]:
        for loc, message in duplicate_service_names([s.name for s in value]):
            raise LocatedValueError(message, loc)
        return value

    @field_validator("tenant")
    @classmethod
    def _tenant_matches_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        stem = info.context.get("tenant") if isinstance(info.context, dict) else None
        if value is not None and stem is not None and value != stem:
            raise ValueError(
                f"file is for tenant {stem!r} (its name) but says tenant: {value!r}; "
                f"rename the file to {value}.yaml or set tenant: {stem}"
            )
        return value

    def to_policy(self, tenant: str) -> Policy:
        """Decide the domain `Policy` this document means for `tenant` (durations in seconds, lists as tuples)."""
        return Policy(
            tenant=tenant,
            priority=self.priority,
            steady_quota_gpus=self.quota.steady_gpus,
            burst_quota_gpus=self.quota.burst_gpus,
            budget=Budget(usd_per_hour=self.budget.usd_per_hour, usd_per_month=self.budget.usd_per_month),
            spot=SpotPolicy(
                allowed=self.spot.allowed,
                max_share=self.spot.max_share,
                required_checkpoint_interval_s=self.spot.required_checkpoint_interval,
                fault_tolerant_fraction=self.spot.fault_tolerant_fraction,
                deadline_margin_s=self.spot.deadline_margin,
                price_tolerance=self.spot.price_tolerance,
                max_offering_share=self.spot.max_offering_share,
            ),
            prescale=PrescalePolicy(quantile=self.prescale.quantile, buffer_s=self.prescale.buffer,
                                    wait_usd_per_gpu_hour=self.prescale.wait_usd_per_gpu_hour),
            hot_pool=HotPoolPolicy(enabled=self.hot_pool.enabled, min_gpus=self.hot_pool.min_gpus),
            disruption=DisruptionPolicy(do_not_disrupt=self.disruption.do_not_disrupt,
                                        max_share=self.disruption.max_share,
                                        min_move_interval_s=self.disruption.min_move_interval),
            allowed_providers=tuple(self.allowed_providers),
            allowed_regions=tuple(self.allowed_regions),
            queue_wait_slo_s=self.queue_wait_slo,
            preemptible_by=tuple(self.preemptible_by),
            fair_share_weight=self.fair_share_weight,
            max_job_runtime_s=self.max_job_runtime,
            gpu_sharing=GpuSharing(self.gpu_sharing),
            limits=self.limits.to_limits(),
            services=tuple(s.to_model(tenant) for s in self.services),
        )
