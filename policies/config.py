"""The global `burst.yaml` config: schema, validation with `FILE:LINE: field: message` errors, domain objects.

Paths in the file (`policies_dir`, `state_path`, `catalog.path`) are relative to
the config file's directory; `load_config` records that directory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import (
    AfterValidator,
    AwareDatetime,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    StrictBool,
    StrictInt,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic.fields import FieldInfo

from burst.bounds import (
    MAX_CLOCK_SPEED,
    MAX_GPUS_PER_NODE,
    MAX_GROUP_NODES,
    MAX_LIST_LENGTH,
    MAX_LOOP_INTERVAL_S,
    MIN_CLOCK_SPEED,
    shown,
    time_problem,
)
from burst.model import (
    CapacityType,
    GpuShape,
    NodeGroup,
    PowerSaving,
    SpecialEvent,
    Tier,
    WarmPoolSettings,
    WarmState,
)
from burst.provider_registry import PROVIDERS, ProviderSpec, on_register, provider_names
from policies.durations import Duration
from policies.fields import (
    Name,
    NonEmptyStr,
    NonNegativeInt,
    PathStr,
    PositiveDuration,
    PositiveNumber,
    StrictModel,
    none_as_empty,
)
from policies.loader import LocatedValueError, read_yaml, validate_document
from policies.provider_sections import AwsDoc, GcpDoc, LibcloudDoc, OnPremDoc
from policies.rates import RatesDoc
from policies.schema import ProviderName

CLUSTER_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
"""Cluster ids tag cloud resources (GCP labels too), so: lower-case letters, digits, '_', '-'."""

NonNegativeNumber = Annotated[float, Field(ge=0, strict=True)]
NodeCount = Annotated[StrictInt, Field(ge=0, le=MAX_GROUP_NODES)]
"""Nodes in a group or its warm pool (burst.bounds)."""


POSTGRES_URL_SCHEMES = ("postgresql://", "postgres://")
"""A `state_path` starting with one of these names a PostgreSQL server, not a file."""


DEFAULT_API_HOST = "127.0.0.1"
"""Where the API binds when its listen setting names only a port."""


def listen_address(value: str | int) -> str:
    """Decide the HOST:PORT an API listen setting binds: `HOST:PORT` as given, a bare port (`8460`, `:8460`)
    on 127.0.0.1. Port 0 (any free port) passes; a ValueError names the accepted forms otherwise."""
    text = str(value).strip() if not isinstance(value, bool) else ""
    host, _, port = text.rpartition(":")
    if not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise ValueError(f"{shown(value)} is not HOST:PORT or a port, e.g. 127.0.0.1:8460 or 8460")
    return f"{host or DEFAULT_API_HOST}:{int(port)}"


def _cluster_id(value: str) -> str:
    if re.fullmatch(CLUSTER_PATTERN, value) is None:
        raise ValueError(
            f"invalid cluster id {shown(value)}: use lower-case letters, digits, '_' or '-', "
            "starting with a letter or digit, at most 63 characters (it becomes a GCP label value)"
        )
    return value


ClusterId = Annotated[
    str,
    Field(strict=True),
    AfterValidator(_cluster_id),
    WithJsonSchema({"type": "string", "pattern": CLUSTER_PATTERN}),
]


class WarmPoolDoc(StrictModel):
    """A node group's hot pool."""

    min_size: NodeCount = Field(
        default=0, description="Nodes kept warm at least. Read by the pools step."
    )
    max_prepared: NodeCount = Field(
        default=0, description="Most nodes held warm (0 = only min_size). Read by the pools step."
    )
    state: WarmState = Field(
        default=WarmState.STOPPED, description="Warm sub-state of pooled nodes. Read by the pools step."
    )
    reuse_on_scale_in: StrictBool = Field(
        default=True,
        description="Return scaled-in nodes to the pool instead of terminating them. Read by the pools step.",
    )
    max_age: PositiveDuration = Field(
        default=30 * 86400.0,
        description="Duration after which a warm node is replaced by a fresh one (image drift; GCP recreates "
        "standby VMs after 60 days). Read by the pools step.",
    )

    def to_model(self) -> WarmPoolSettings:
        """Decide the domain `WarmPoolSettings` for this section."""
        return WarmPoolSettings(
            min_size=self.min_size,
            max_prepared=self.max_prepared,
            state=self.state,
            reuse_on_scale_in=self.reuse_on_scale_in,
            max_age_s=self.max_age,
        )


class PowerSavingDoc(StrictModel):
    """On-prem power saving (Slurm semantics): idle nodes powered off, woken for pending or forecast demand."""

    suspend_time: PositiveDuration = Field(
        default=1800.0, description="Duration a node stays idle before it is powered off (default 30 min)."
    )
    suspend_rate: NonNegativeInt = Field(default=0, description="Most nodes powered off per minute (0: no limit).")
    resume_rate: NonNegativeInt = Field(default=0, description="Most nodes woken per minute (0: no limit).")

    def to_model(self) -> PowerSaving:
        """Decide the domain `PowerSaving` for this section."""
        return PowerSaving(suspend_after_s=self.suspend_time, suspend_rate=self.suspend_rate,
                           resume_rate=self.resume_rate)


class NodeGroupDoc(StrictModel):
    """One node group: identical nodes scaled as one unit (ASG, MIG, on-prem rack)."""

    id: Name = Field(description="Unique node group id.")
    provider: ProviderName = Field(description="Backend that owns the group.")
    region: NonEmptyStr = Field(description="Provider region (on-prem: the data centre).")
    zone: str = Field(default="", strict=True, description="Zone, optional.")
    tier: Tier = Field(description="steady (owned, on-prem) or elastic (cloud).")
    capacity_type: CapacityType = Field(description="onprem (steady tier), on_demand or spot (elastic tier).")
    instance_type: NonEmptyStr = Field(description="Catalog key of the node's machine type.")
    gpu_model: NonEmptyStr = Field(description="GPU model each node carries, e.g. A100.")
    gpus_per_node: Annotated[StrictInt, Field(ge=1, le=MAX_GPUS_PER_NODE)] = Field(
        description=f"GPUs per node (1 .. {MAX_GPUS_PER_NODE})."
    )
    gpu_memory_gib: PositiveNumber | None = Field(
        default=None, description="Memory per GPU in GiB, optional."
    )
    min_size: NodeCount = Field(default=0, description="Fewest nodes the planner keeps.")
    max_size: NodeCount = Field(description=f"Most nodes the planner asks for (>= min_size, at most {MAX_GROUP_NODES}).")
    initial_size: NodeCount | None = Field(
        default=None, description="Size at first start (min_size..max_size); default min_size."
    )
    boot_latency: Duration = Field(
        default=300.0, description="Duration from request to ready (default 300 s)."
    )
    warm_wake_latency: dict[WarmState, Duration] = Field(
        default_factory=dict, description="Duration to wake a warm node, per warm state."
    )
    warm_pool: WarmPoolDoc = Field(
        default=WarmPoolDoc(), description="Hot-pool settings; not for spot groups (AWS forbids warm pools on Spot)."
    )
    scale_down_cooldown: Duration | None = Field(
        default=None, description="Duration a node stays idle before scale-in. Default: the break-even rule, one "
        "boot_latency of idle time (kept longer only while forecast demand needs it).",
    )
    power_saving: PowerSavingDoc | None = Field(
        default=None,
        description="provider onprem only: power idle nodes off after suspend_time and wake them (warm_wake_latency "
        "powered_off, default boot_latency) for pending or forecast demand; min_size nodes stay on.",
    )
    spot_hazard_per_hour: NonNegativeNumber = Field(
        default=0.0, description="sim provider only: spot interruption hazard per node-hour (default 0)."
    )
    interruption_band: Literal["<5%", "5-10%", "10-15%", "15-20%", ">20%"] | None = Field(
        default=None,
        description="spot only: the cloud's published monthly interruption band for this offering (AWS Spot "
        "Instance Advisor); the prior of the interruption rate burst learns; default 10-15%.",
    )

    @field_validator("warm_wake_latency", "warm_pool", mode="before")
    @classmethod
    def _empty_section(cls, value: Any) -> Any:
        return none_as_empty(value, {})

    @field_validator("tier")
    @classmethod
    def _tier_fits_provider(cls, value: Tier, info: ValidationInfo) -> Tier:
        provider = info.data.get("provider")
        spec = PROVIDERS.get(provider) if isinstance(provider, str) else None
        if spec is None or spec.tier is None or value is spec.tier:
            return value
        if spec.tier is Tier.STEADY:
            raise ValueError(f"provider {provider} is owned capacity: its tier must be steady")
        raise ValueError(f"provider {provider} is cloud capacity: its tier must be elastic (steady is on-prem)")

    @field_validator("power_saving")
    @classmethod
    def _power_saving_on_prem(cls, value: PowerSavingDoc | None, info: ValidationInfo) -> PowerSavingDoc | None:
        if value is not None and info.data.get("tier") is not Tier.STEADY:
            raise ValueError("power_saving applies to on-prem (tier steady) groups only")
        return value

    @field_validator("capacity_type")
    @classmethod
    def _capacity_fits_tier(cls, value: CapacityType, info: ValidationInfo) -> CapacityType:
        tier = info.data.get("tier")
        if tier is Tier.STEADY and value is not CapacityType.ONPREM:
            raise ValueError(f"tier steady needs capacity_type onprem, got {value.value}")
        if tier is Tier.ELASTIC and value is CapacityType.ONPREM:
            raise ValueError(
                "capacity_type onprem is only for tier steady; use on_demand or spot for elastic groups"
            )
        return value

    @field_validator("max_size")
    @classmethod
    def _max_at_least_min(cls, value: int, info: ValidationInfo) -> int:
        low = info.data.get("min_size")
        if low is not None and value < low:
            raise ValueError(f"max_size {value} is below min_size {low}")
        return value

    @field_validator("initial_size")
    @classmethod
    def _initial_in_range(cls, value: int | None, info: ValidationInfo) -> int | None:
        low, high = info.data.get("min_size"), info.data.get("max_size")
        if value is not None and low is not None and value < low:
            raise ValueError(f"initial_size {value} is below min_size {low}")
        if value is not None and high is not None and value > high:
            raise ValueError(f"initial_size {value} is above max_size {high}")
        return value

    @field_validator("warm_pool")
    @classmethod
    def _pool_fits_group(cls, value: WarmPoolDoc, info: ValidationInfo) -> WarmPoolDoc:
        high = info.data.get("max_size")
        if high is not None and value.min_size > high:
            raise LocatedValueError(
                f"warm pool min_size {value.min_size} exceeds the group's max_size {high}", ["min_size"]
            )
        if high is not None and value.max_prepared > high:
            raise LocatedValueError(
                f"warm pool max_prepared {value.max_prepared} exceeds the group's max_size {high}",
                ["max_prepared"],
            )
        if value.model_fields_set and info.data.get("capacity_type") is CapacityType.SPOT:
            raise ValueError(
                f"node group {info.data.get('id', '?')} is capacity_type spot: spot groups have no warm pool "
                "(AWS forbids warm pools on Spot and mixed-instance groups); remove warm_pool or use on_demand"
            )
        return value

    @field_validator("spot_hazard_per_hour")
    @classmethod
    def _hazard_only_sim(cls, value: float, info: ValidationInfo) -> float:
        provider = info.data.get("provider")
        if value > 0 and provider is not None and provider != "sim":
            raise ValueError(f"spot_hazard_per_hour applies to provider sim only (this group is {provider})")
        return value

    @property
    def effective_initial_size(self) -> int:
        """The size the group starts at: `initial_size`, else `min_size`."""
        return self.min_size if self.initial_size is None else self.initial_size

    def to_model(self) -> NodeGroup:
        """Decide the domain `NodeGroup` this entry describes (durations in seconds)."""
        group = NodeGroup(
            id=self.id,
            provider=self.provider,
            region=self.region,
            tier=self.tier,
            capacity_type=self.capacity_type,
            shape=GpuShape(self.gpu_model, self.gpus_per_node, self.gpu_memory_gib or 0.0),
            instance_type=self.instance_type,
            min_size=self.min_size,
            max_size=self.max_size,
            zone=self.zone,
            boot_latency_s=self.boot_latency,
            warm_wake_latency_s=dict(self.warm_wake_latency),
            warm_pool=self.warm_pool.to_model(),
            scale_down_cooldown_s=self.scale_down_cooldown,
            interruption_band=self.interruption_band,
        )
        return group if self.power_saving is None else group.with_power_saving(self.power_saving.to_model())


class PriceRowDoc(StrictModel):
    """One price row, with the shipped price CSV's columns; a row replaces the catalog's row of the same key.

    Only the key (provider, instance_type, region) and the on-demand price are
    required; the GPU columns may be left out when the row overrides a catalog
    row (the catalog keeps that row's values) and are needed for a new instance type.
    """

    provider: ProviderName = Field(description="Provider the price is for.")
    instance_type: NonEmptyStr = Field(description="Instance type (catalog key).")
    region: NonEmptyStr = Field(description="Region the price is for.")
    on_demand_usd_per_hour: PositiveNumber = Field(description="On-demand USD per instance-hour (> 0).")
    spot_usd_per_hour: PositiveNumber | None = Field(
        default=None, description="Spot USD per instance-hour (> 0); null = no spot price."
    )
    gpu_model: NonEmptyStr | None = Field(default=None, description="GPU model; null = the catalog row's.")
    gpus: Annotated[StrictInt, Field(ge=1)] | None = Field(
        default=None, description="GPUs per instance; null = the catalog row's."
    )
    gpu_memory_gib: NonNegativeNumber | None = Field(
        default=None, description="Memory per GPU in GiB; null = the catalog row's."
    )
    source: NonEmptyStr | None = Field(
        default=None, description="Where the price was read; null = burst.yaml."
    )
    read_on: date | None = Field(default=None, description="Date the price was read (YYYY-MM-DD).")


class OnpremCostDoc(StrictModel):
    """What an owned GPU-hour costs (amortised capex + power + operations); defaults as the catalog's."""

    capex_usd_per_gpu: PositiveNumber = Field(
        default=25000.0, description="Purchase price per GPU, USD (> 0)."
    )
    depreciation_years: PositiveNumber = Field(
        default=4.0, description="Straight-line depreciation period (> 0)."
    )
    power_w_per_gpu: PositiveNumber = Field(default=700.0, description="Power drawn per GPU, W (> 0).")
    pue: Annotated[float, Field(ge=1, strict=True)] = Field(
        default=1.4, description="Facility power usage effectiveness (>= 1)."
    )
    usd_per_kwh: PositiveNumber = Field(default=0.12, description="Electricity price, USD per kWh (> 0).")
    ops_usd_per_gpu_hour: NonNegativeNumber = Field(
        default=0.25, description="Operations cost per GPU-hour, USD (>= 0)."
    )


class CatalogDoc(StrictModel):
    """Price catalog additions. Read by the catalog."""

    path: PathStr | None = Field(default=None, description="Extra price CSV (relative to the config file).")
    overrides: Annotated[list[PriceRowDoc], Strict()] = Field(
        default_factory=list, description="Price rows that replace catalog rows."
    )
    onprem: OnpremCostDoc | None = Field(
        default=None, description="On-prem cost model; null = the catalog's defaults."
    )

    @field_validator("overrides", mode="before")
    @classmethod
    def _empty_list(cls, value: Any) -> Any:
        return none_as_empty(value, [])

    @field_validator("overrides")
    @classmethod
    def _unique_rows(cls, value: list[PriceRowDoc]) -> list[PriceRowDoc]:
        seen: dict[tuple[str, str, str], int] = {}
        for i, row in enumerate(value):
            key = (row.provider, row.instance_type, row.region)
            if key in seen:
                raise LocatedValueError(f"duplicate price row {'/'.join(key)} (also item {seen[key]})", [i])
            seen[key] = i
        return value


class SpecialEventDoc(StrictModel):
    """A holiday or special event the forecaster models as its own effect."""

    name: NonEmptyStr = Field(description="Event name; occurrences sharing a name share one fitted effect.")
    start: date = Field(description="First day of the event (YYYY-MM-DD, UTC).")
    days: Annotated[StrictInt, Field(ge=1)] = Field(default=1, description="Days it lasts (default 1).")

    def to_event(self) -> SpecialEvent:
        """The domain `SpecialEvent` this entry means."""
        return SpecialEvent(name=self.name, start=self.start, days=self.days)


class ForecastingDoc(StrictModel):
    """Demand forecasting settings. Read by forecasting and the reconcile loop."""

    enabled: StrictBool = True
    horizon: PositiveDuration = Field(
        default=48 * 3600.0, description="Duration forecast ahead (default 48h)."
    )
    step: PositiveDuration = Field(
        default=15 * 60.0, description="Duration between forecast points (default 15m)."
    )
    refit_interval: PositiveDuration = Field(
        default=6 * 3600.0, description="Duration between refits (default 6h)."
    )
    min_history: Duration = Field(
        default=24 * 3600.0, description="Duration of history needed before fitting (default 24h)."
    )
    events: Annotated[list[SpecialEventDoc], Strict()] = Field(
        default_factory=list,
        description="Holidays and special events, past and coming: each name is fitted as a Prophet holiday "
        "from its past occurrences and applied to its coming ones.",
    )

    @field_validator("horizon")
    @classmethod
    def _horizon_at_most_30_days(cls, value: float) -> float:
        if value > 30 * 86400:
            raise ValueError(f"horizon ({value:g} s) is longer than 30 days")
        return value

    @field_validator("step")
    @classmethod
    def _step_within_horizon(cls, value: float, info: ValidationInfo) -> float:
        if not 300 <= value <= 86400:
            raise ValueError(f"step ({value:g} s) is outside 5 min .. 1 day")
        horizon = info.data.get("horizon")
        if horizon is not None and value > horizon:
            raise ValueError(f"step ({value:g} s) is longer than horizon ({horizon:g} s)")
        return value


class KubernetesWorkloadDoc(StrictModel):
    """A Kubernetes cluster's GPU pods as the jobs; its Nodes labelled, drained and cleaned up. Read by the runtime."""

    kubeconfig: PathStr | None = Field(
        default=None, description="kubeconfig file (relative to this file); null = the in-cluster service account, "
        "else ~/.kube/config."
    )
    context: NonEmptyStr | None = Field(default=None, description="kubeconfig context; null = its current one.")
    api_url: NonEmptyStr | None = Field(
        default=None, description="Plain-HTTP API endpoint without credentials (kubectl proxy) instead of a kubeconfig."
    )
    tenant_label: NonEmptyStr = Field(
        default="burst.dev/tenant", description="Namespace label naming a pod's tenant (else the namespace's name)."
    )
    checkpoint_grace: PositiveDuration = Field(
        default=120.0, description="Duration a fault-tolerant pod has to acknowledge a checkpoint before eviction "
        "(a spot notice's deadline when sooner)."
    )
    pdb_retry: PositiveDuration = Field(
        default=300.0, description="Duration an eviction a PodDisruptionBudget refuses (429) is retried."
    )
    on_pdb_timeout: Literal["wait", "delete"] = Field(
        default="wait", description="After pdb_retry: wait (keep honouring the budget) or delete the pod."
    )
    drain_timeout: PositiveDuration = Field(
        default=900.0, description="Duration a node burst terminates is drained before its instance goes anyway."
    )


class WorkloadDoc(StrictModel):
    """Built-in job sources. Read by the quickstart."""

    synthetic: dict[str, Any] | None = Field(
        default=None, description="Synthetic generator settings (free-form)."
    )
    kubernetes: KubernetesWorkloadDoc | None = Field(
        default=None, description="GPU pods of a Kubernetes cluster as the jobs; null = the embedded queue."
    )


class ApiDoc(StrictModel):
    """The daemon's HTTP API (`burst run`): off unless `listen` is set (or `burst run --api`)."""

    listen: str | None = Field(
        default=None, strict=True,
        description="HOST:PORT the API binds, e.g. 127.0.0.1:8460, or a bare port (8460 or :8460) for 127.0.0.1 "
        "(default: no API). Bind beyond 127.0.0.1 only behind TLS.",
    )
    tokens_dir: PathStr = Field(
        default="tokens",
        description="Directory of bearer tokens (admin.token, tenant-<name>.token), relative to this file; missing "
        "ones are generated on start, readable by their owner only.",
    )
    agent_tokens: PathStr | None = Field(
        default=None,
        description="YAML mapping of on-prem node id to agent token; when set, the node agents' link is served "
        "under /agent/v1.",
    )

    @field_validator("listen", mode="before")
    @classmethod
    def _host_port(cls, value: Any) -> Any:
        if value is None or isinstance(value, bool) or not isinstance(value, str | int):
            return value  # None, or a type error the field itself reports
        address = listen_address(value)
        if address.endswith(":0"):
            raise ValueError(f"{shown(value)}: port 0 is not a fixed port; give one, e.g. 8460")
        return address


class StateBackupDoc(StrictModel):
    """Periodic online backups of the SQLite state file (SQLite's backup API), into `<state file>.backups/`."""

    interval: PositiveDuration = Field(
        default=3600.0, description="Duration between backups, on the controller's clock (default 1h)."
    )
    keep: Annotated[StrictInt, Field(ge=0, le=1000)] = Field(
        default=3, description="Newest backups kept (default 3); 0 turns backups off."
    )


MONTH_S = 31 * 86400.0
"""The longest month: ledger rows younger than this are never rolled up, so month-to-date figures read raw rows."""


class RetentionDoc(StrictModel):
    """How long the state store keeps what it no longer acts on, so it stays bounded (checked every `interval`)."""

    ledger_rollup_after: Annotated[PositiveDuration, Field(ge=MONTH_S)] = Field(
        default=35 * 86400.0, description="Cost-ledger rows older than this (at least 31d) roll up into one row per "
        "hour, tenant, line and group; sums over whole hours (burst usage's months) stay exact (default 35d)."
    )
    finished_after: PositiveDuration = Field(
        default=35 * 86400.0, description="Finished jobs, decisions, intents with an outcome and terminated nodes "
        "older than this are deleted (default 35d); pending and running jobs and unconfirmed intents never are. "
        "Service events declared through the API go once they ended this long ago, and never within 14 days of "
        "their end (the rate forecaster still reads them)."
    )
    demand_history: Annotated[PositiveDuration, Field(ge=MONTH_S)] = Field(
        default=35 * 86400.0, description="Demand samples older than this are deleted (at least 31d: forecasts read "
        "the last 30 days; default 35d)."
    )
    interval: PositiveDuration = Field(
        default=3600.0, description="How often, on the controller's clock, the leader applies retention (default 1h)."
    )


class LeaderDoc(StrictModel):
    """Leader election among daemons sharing one state file: only the lease holder acts."""

    enabled: StrictBool = Field(default=False, description="Elect a leader through a lease in the state store.")
    lease: PositiveDuration = Field(
        default=30.0, description="Duration of the lease; a standby takes over within it after the leader stops."
    )
    holder: str | None = Field(default=None, strict=True, description="This daemon's name (default host:pid).")
    kind: Literal["store", "sqlite", "kubernetes"] = Field(
        default="store", description="store: a lease row with a fencing epoch in the state store (the SQLite file, "
        "or the PostgreSQL database replicas share; sqlite is its older name); kubernetes: a coordination.k8s.io "
        "Lease (through workload.kubernetes' connection, else the in-cluster service account)."
    )
    name: NonEmptyStr = Field(default="burst-controller", description="kubernetes only: the Lease's name.")
    namespace: NonEmptyStr = Field(default="burst-system", description="kubernetes only: the Lease's namespace.")


def duplicate_group_ids(ids: Sequence[object]) -> list[tuple[tuple[int | str, ...], str]]:
    """Decide which node-group ids repeat an earlier one: (loc below node_groups, message) per repeat."""
    seen: dict[str, int] = {}
    out: list[tuple[tuple[int | str, ...], str]] = []
    for i, gid in enumerate(ids):
        if not isinstance(gid, str):
            continue
        if gid in seen:
            out.append(((i, "id"), f"duplicate node group id {shown(gid)} (also item {seen[gid]})"))
        else:
            seen[gid] = i
    return out


def _raw_checks(data: Mapping[str, Any]) -> list[tuple[tuple[int | str, ...], str]]:
    """Checks run on the raw document, so they report even when other entries have errors."""
    groups = data.get("node_groups")
    if not isinstance(groups, list):
        return []
    ids = [g.get("id") if isinstance(g, dict) else None for g in groups]
    return [(("node_groups", *loc), message) for loc, message in duplicate_group_ids(ids)]


def _sim_start(value: Any) -> Any:
    if isinstance(value, bool | int | float):  # pydantic would read a number as seconds since 1970
        raise ValueError(f"expected an ISO 8601 instant, e.g. 2026-03-02T00:00:00Z, got the number {value!r:.40}")
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("sim_start needs a timezone, e.g. 2026-03-02T00:00:00Z")
        return value
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=UTC)
    return value


DEFAULT_INTERRUPTION_COOLDOWN_S = 0.0
"""`spot.interruption_cooldown` when not set: off. Measured in the simulator with one spot group per GPU model
(its default set-up), a 5-minute cooldown raised cost on all three benchmark traces (ITP04 +2.4%) and lost
work on ITP02 (+44%): with no other spot offering to move to, the work can only go to on-demand."""


class SpotDoc(StrictModel):
    """Spot capacity: how the controller reacts to interruptions."""

    interruption_cooldown: Duration = Field(
        default=DEFAULT_INTERRUPTION_COOLDOWN_S,
        description="Duration a spot group that just lost a node to an interruption takes no new launches, so "
        "work tries the other offerings first (its running nodes are untouched). Default 0 (off): with one spot "
        "group per GPU model a cooldown only sends work to on-demand, which cost more in every benchmark; set it "
        "(e.g. 5m) when several spot groups (instance types, zones) serve the same GPUs.",
    )


class BurstConfig(StrictModel):
    """The whole `burst.yaml`. Every key is optional."""

    model_config = ConfigDict(title="burst config", extra="forbid", allow_inf_nan=False, frozen=True)

    cluster: ClusterId = Field(default="burst", description="Cluster id; tags everything burst creates.")
    policies_dir: PathStr = Field(
        default="policies", description="Tenant policy directory, relative to this file."
    )
    state_path: PathStr = Field(
        default="burst.db", description="The state store: a SQLite file, relative to this file, or a PostgreSQL "
        "server as a postgresql://user@host:port/database URL (password from PGPASSWORD or ~/.pgpass, not the URL)."
    )
    state_backup: StateBackupDoc = Field(
        default=StateBackupDoc(), description="Periodic online backups of the state file (not for the quickstart's "
        "temporary one)."
    )
    retention: RetentionDoc = Field(
        default=RetentionDoc(), description="How long the state store keeps old rows (ledger roll-up, pruning)."
    )
    loop_interval: Annotated[PositiveDuration, Field(le=MAX_LOOP_INTERVAL_S)] = Field(
        default=10.0, description="The heartbeat: longest duration between reconcile ticks (default 10 s, at most "
        "1 h); events (a job submitted or finished, a node ready or lost, an interruption notice) wake the loop sooner.",
    )
    loop_jitter: Duration = Field(default=0.0, description="Random duration added to each heartbeat (default 0).")
    loop_events: bool = Field(
        default=True, description="Whether events wake the loop before its heartbeat (default true; false: tick "
        "every loop_interval only).",
    )
    loop_batch_idle: Duration = Field(
        default=1.0, description="Quiet duration after the last event before the loop ticks (default 1 s, "
        "Karpenter's batchIdleDuration).",
    )
    loop_batch_max: Duration = Field(
        default=10.0, description="Longest duration a tick waits after the first event of a batch (default 10 s, "
        "Karpenter's batchMaxDuration; at least loop_batch_idle).",
    )
    loop_max_failing: PositiveDuration = Field(
        default=600.0, description="How long every tick may fail (a store or provider down) before the daemon exits "
        "non-zero (default 10 min: longer than a database failover). /readyz turns false well before.",
    )
    clock: Literal["real", "sim"] = Field(default="real", description="real or sim.")
    clock_speed: Annotated[float, Field(strict=True, ge=MIN_CLOCK_SPEED, le=MAX_CLOCK_SPEED)] = Field(
        default=60.0,
        description=f"sim clock only: simulated seconds per wall second ({MIN_CLOCK_SPEED:g} .. {MAX_CLOCK_SPEED:g}).",
    )
    sim_start: AwareDatetime | None = Field(
        default=None, description="sim clock only: start instant (default: now)."
    )
    node_groups: Annotated[list[NodeGroupDoc], Strict(), Field(max_length=MAX_LIST_LENGTH)] = Field(
        default_factory=list, description="The fleet's node groups."
    )
    catalog: CatalogDoc = Field(default=CatalogDoc(), description="Price catalog additions.")
    aws: AwsDoc | None = Field(default=None, description="AWS provider settings; null = no AWS groups.")
    libcloud: LibcloudDoc | None = Field(
        default=None, description="libcloud provider settings; null = no libcloud groups."
    )
    gcp: GcpDoc | None = Field(default=None, description="GCP provider settings; null = no GCP groups.")
    onprem: OnPremDoc | None = Field(
        default=None, description="onprem provider settings (inventory, power commands); null = no onprem groups."
    )
    forecasting: ForecastingDoc = Field(default=ForecastingDoc(), description="Forecasting settings.")
    workload: WorkloadDoc = Field(default=WorkloadDoc(), description="Built-in job sources.")
    rates: RatesDoc = Field(
        default=RatesDoc(), description="Where the services' request rates are read: a Prometheus, or synthetic "
        "cycles; none: services are not run by the daemon."
    )
    api: ApiDoc = Field(default=ApiDoc(), description="The daemon's HTTP API.")
    leader: LeaderDoc = Field(default=LeaderDoc(), description="Leader election between daemons.")
    spot: SpotDoc = Field(default=SpotDoc(), description="Spot capacity settings.")

    _base_dir: Path | None = PrivateAttr(default=None)

    @field_validator("catalog", "forecasting", "workload", "api", "leader", "spot", "state_backup", mode="before")
    @classmethod
    def _empty_section(cls, value: Any) -> Any:
        return none_as_empty(value, {})

    @field_validator("node_groups", mode="before")
    @classmethod
    def _empty_list(cls, value: Any) -> Any:
        return none_as_empty(value, [])

    @field_validator("sim_start", mode="before")
    @classmethod
    def _sim_start_aware(cls, value: Any) -> Any:
        return _sim_start(value)

    @field_validator("sim_start")
    @classmethod
    def _sim_start_utc(cls, value: datetime | None) -> datetime | None:
        problem = time_problem(value) if value is not None else None
        if problem is not None:
            raise ValueError(problem)
        return value.astimezone(UTC) if value is not None else None

    @field_validator("loop_jitter")
    @classmethod
    def _jitter_below_interval(cls, value: float, info: ValidationInfo) -> float:
        interval = info.data.get("loop_interval")
        if interval is not None and value >= interval:
            raise ValueError(f"loop_jitter ({value:g} s) must be shorter than loop_interval ({interval:g} s)")
        return value

    @field_validator("loop_batch_max")
    @classmethod
    def _batch_max_above_idle(cls, value: float, info: ValidationInfo) -> float:
        idle = info.data.get("loop_batch_idle")
        if idle is not None and value < idle:
            raise ValueError(f"loop_batch_max ({value:g} s) must be at least loop_batch_idle ({idle:g} s)")
        return value

    @field_validator("node_groups")
    @classmethod
    def _unique_ids(cls, value: list[NodeGroupDoc]) -> list[NodeGroupDoc]:
        for loc, message in duplicate_group_ids([g.id for g in value]):
            raise LocatedValueError(message, loc)
        return value

    @property
    def config_dir(self) -> Path:
        """The directory relative paths are resolved against: the config file's, else the working directory."""
        return self._base_dir if self._base_dir is not None else Path.cwd()

    def with_base_dir(self, base_dir: Path) -> BurstConfig:
        """Decide a copy of this config whose relative paths resolve against `base_dir`."""
        copy = self.model_copy()
        copy._base_dir = Path(base_dir).absolute()
        return copy

    def _resolve(self, value: str) -> Path:
        try:
            path = Path(value).expanduser()
        except RuntimeError:  # "~user" without such a user (checked when loaded from a file)
            path = Path(value)
        return (path if path.is_absolute() else self.config_dir / path).resolve()

    def policies_path(self) -> Path:
        """Decide the absolute tenant policy directory (`policies_dir` against the config file's directory)."""
        return self._resolve(self.policies_dir)

    def state_file(self) -> Path | str:
        """Decide where the state store is: a postgresql:// URL as written, else the absolute SQLite file path
        (`state_path` against the config file's directory)."""
        if self.state_path.startswith(POSTGRES_URL_SCHEMES):
            return self.state_path
        return self._resolve(self.state_path)

    def tokens_path(self) -> Path:
        """Decide the absolute API tokens directory (`api.tokens_dir` against the config file's directory)."""
        return self._resolve(self.api.tokens_dir)

    def agent_tokens_path(self) -> Path | None:
        """Decide the absolute agent tokens file, or None when the agent link is off."""
        return self._resolve(self.api.agent_tokens) if self.api.agent_tokens is not None else None

    def onprem_inventory_path(self) -> Path | None:
        """Decide the absolute onprem inventory file, or None when there is no onprem section."""
        return self._resolve(self.onprem.inventory) if self.onprem is not None else None

    def catalog_path(self) -> Path | None:
        """Decide the absolute extra price CSV path, or None when `catalog.path` is not set."""
        return self._resolve(self.catalog.path) if self.catalog.path is not None else None

    def aws_terraform_outputs(self) -> Path | None:
        """Decide the absolute terraform outputs path of the aws section, or None when not set."""
        if self.aws is None or self.aws.terraform_outputs is None:
            return None
        return self._resolve(self.aws.terraform_outputs)

    def rates_file(self, name: str | None) -> Path | None:
        """Decide the absolute path of a file `rates.prometheus` names (token, CA), or None when not set."""
        return self._resolve(name) if name is not None else None

    def kubeconfig_path(self) -> Path | None:
        """Decide the absolute kubeconfig of workload.kubernetes, or None when not set."""
        kube = self.workload.kubernetes
        return self._resolve(kube.kubeconfig) if kube is not None and kube.kubeconfig is not None else None

    def node_groups_model(self) -> tuple[NodeGroup, ...]:
        """Decide the domain `NodeGroup`s this config describes, in file order."""
        return tuple(g.to_model() for g in self.node_groups)


def load_config(path: Path) -> BurstConfig:
    """Decide the `BurstConfig` a `burst.yaml` defines; raise PolicyValidationError with located lines if invalid.

    An empty file is all defaults. Relative paths in it resolve against the file's directory.
    """
    path = Path(path)
    doc = read_yaml(path)
    provider_names()  # every provider registered first: their sections are keys of the file
    config = validate_document(BurstConfig, doc, what="burst config", checks=_raw_checks)
    return config.with_base_dir(path.absolute().parent)


_DECLARED_SECTIONS = frozenset(BurstConfig.model_fields)


def _provider_section(spec: ProviderSpec, added: bool) -> None:
    """A registered provider's own section (`settings_model`) becomes an optional key of `BurstConfig` (null: the
    config has no groups of it); a section BurstConfig declares is left as declared."""
    section, model = spec.section, spec.settings_model
    if section is None or model is None or section in _DECLARED_SECTIONS:
        return
    if added:
        BurstConfig.model_fields[section] = FieldInfo(
            annotation=cast(Any, model | None), default=None,
            description=spec.section_help or f"{spec.name} provider settings; null = no {spec.name} groups.")
    else:
        BurstConfig.model_fields.pop(section, None)
    BurstConfig.model_rebuild(force=True)


on_register(_provider_section)


def config_json_schema() -> dict[str, Any]:
    """The JSON schema of `burst.yaml` (for editors and `burst config schema`), with every registered provider."""
    provider_names()
    return BurstConfig.model_json_schema()
