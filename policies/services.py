"""The `services:` section of a tenant policy: online inference services, validated, converted to `Service`.

Each entry is one service (a model served by replicas). The checks that span
fields (one capacity form, `min_replicas <= max_replicas`, an event's end after
its start, unique names) are field validators, so each problem is one
`FILE:LINE: field: message` line on the key it is about. Unique names and "not
both capacity forms" are also checked on the raw document
(`services_raw_checks`, run by the loader), so they are reported even beside
other errors in the same entries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictInt,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic.config import JsonDict

from burst.bounds import (
    MAX_EVENT_MULTIPLIER,
    MAX_GPU_S_PER_TOKEN,
    MAX_LIST_LENGTH,
    MAX_QUERY_LENGTH,
    MAX_REPLICA_GPUS,
    MAX_REPLICAS,
    MAX_REQUESTS_PER_S,
    MAX_USD,
    shown,
    time_problem,
)
from burst.model import Service, ServiceEvent, TenantName, TokenCost
from policies.durations import Duration
from policies.fields import Fraction, Name, NonEmptyStr, StrictModel, none_as_empty

BOTH_FORMS = "give requests_per_s or gpu_s_per_request, not both"
READ_BY = "read by the service planner (burst.planner.services) in the daemon and the simulator"

ReplicaCount = Annotated[StrictInt, Field(ge=0, le=MAX_REPLICAS)]
GpuSPerToken = Annotated[float, Strict(), Field(ge=0, le=MAX_GPU_S_PER_TOKEN)]
_NO_ZONE = "needs a timezone, e.g. 2026-11-27T00:00:00Z (or a bare date: its 00:00 UTC)"


def _instant(value: Any) -> Any:
    """An event time as written: an ISO 8601 instant with a timezone, or a date, quoted or not (its 00:00 UTC)."""
    if isinstance(value, bool | int | float):  # pydantic would read a number as seconds since 1970
        raise ValueError(f"expected an ISO 8601 instant, e.g. 2026-11-27T00:00:00Z, got the number {value!r:.40}")
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
        try:
            value = date.fromisoformat(value.strip())
        except ValueError as exc:
            raise ValueError(f"invalid date {shown(value)}: {exc}") from None
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=UTC)
    return value


def _in_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError(_NO_ZONE)
    problem = time_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value.astimezone(UTC)


Instant = Annotated[
    datetime, BeforeValidator(_instant), AfterValidator(_in_utc),
    WithJsonSchema({"anyOf": [{"type": "string", "format": "date-time"}, {"type": "string", "format": "date"}]}),
]
"""A timezone-aware instant (a bare date is its 00:00 UTC), stored in UTC."""


class TokenCostDoc(StrictModel):
    """A replica's cost per request in GPU time: a x context tokens + b x generated tokens."""

    a: GpuSPerToken = Field(description=f"GPU-seconds per context (prompt) token (>= 0); {READ_BY}.")
    b: GpuSPerToken = Field(description=f"GPU-seconds per generated token (>= 0); {READ_BY}.")

    @field_validator("b")
    @classmethod
    def _not_free(cls, value: float, info: ValidationInfo) -> float:
        if value == 0 and info.data.get("a") == 0:
            raise ValueError("a and b are both 0: a request would cost no GPU time; give at least one above 0")
        return value

    def to_model(self) -> TokenCost:
        """Decide the domain `TokenCost` of this entry."""
        return TokenCost(context_gpu_s=self.a, generated_gpu_s=self.b)


class ServiceEventDoc(StrictModel):
    """A known window of unusual demand (a promotion, a launch)."""

    name: NonEmptyStr | None = Field(
        default=None, description=f"Label of the event, optional (events sharing one share a learnt effect); {READ_BY}."
    )
    start: Instant = Field(description=f"When the event starts (ISO 8601 with a timezone, or a date: 00:00 UTC); {READ_BY}.")
    end: Instant = Field(description=f"When it ends, after start (exclusive); {READ_BY}.")
    multiplier: Annotated[float, Strict(), Field(gt=0, le=MAX_EVENT_MULTIPLIER)] | None = Field(
        default=None,
        description=f"Expected factor on the request rate during the window (> 0 .. {MAX_EVENT_MULTIPLIER:g}); "
        f"null = the forecaster learns it; {READ_BY}.",
    )

    @field_validator("end")
    @classmethod
    def _after_start(cls, value: datetime, info: ValidationInfo) -> datetime:
        start = info.data.get("start")
        if start is not None and value <= start:
            raise ValueError(f"end {value.isoformat()} is not after start {start.isoformat()}")
        return value

    def to_model(self) -> ServiceEvent:
        """Decide the domain `ServiceEvent` of this entry."""
        return ServiceEvent(start=self.start, end=self.end, multiplier=self.multiplier, name=self.name)


_ONE_CAPACITY_FORM: JsonDict = {"oneOf": [{"required": ["requests_per_s"]}, {"required": ["gpu_s_per_request"]}]}


class ServiceDoc(StrictModel):
    """One online inference service: a model served by replicas sized to its request rate."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True, json_schema_extra=_ONE_CAPACITY_FORM)

    name: Name = Field(description=f"Service name, unique within the tenant; {READ_BY}.")
    gpu_model: NonEmptyStr = Field(description=f"GPU model each replica runs on, e.g. A100; {READ_BY}.")
    gpus_per_replica: Annotated[StrictInt, Field(ge=1, le=MAX_REPLICA_GPUS)] = Field(
        default=1, description=f"GPUs one replica takes (1 .. {MAX_REPLICA_GPUS}, default 1); {READ_BY}."
    )
    requests_per_s: Annotated[float, Strict(), Field(gt=0, le=MAX_REQUESTS_PER_S)] | None = Field(
        default=None,
        description=f"Requests per second one replica serves at 100% (give this or gpu_s_per_request); {READ_BY}.",
    )
    gpu_s_per_request: TokenCostDoc | None = Field(
        default=None, validate_default=True,
        description="GPU-seconds per request = a x context tokens + b x generated tokens (give this or "
        f"requests_per_s); {READ_BY}.",
    )
    target_utilisation: Annotated[float, Strict(), Field(gt=0, le=1)] = Field(
        default=0.7, description=f"Share (> 0 .. 1) of a replica's capacity it is run at (default 0.7); {READ_BY}."
    )
    min_replicas: ReplicaCount = Field(default=0, description=f"Fewest replicas kept (default 0); {READ_BY}.")
    max_replicas: Annotated[StrictInt, Field(ge=1, le=MAX_REPLICAS)] = Field(
        description=f"Most replicas (>= min_replicas, 1 .. {MAX_REPLICAS}); {READ_BY}."
    )
    replica_start: Duration = Field(
        default=120.0, description=f"Duration a replica takes to load its model on a ready node (default 120 s); {READ_BY}."
    )
    ready_within: Duration = Field(
        description=f"Duration within which a replica the rate needs must be serving; longer lead times need "
        f"standby replicas; {READ_BY}."
    )
    spot_share: Fraction = Field(
        default=0.0, description=f"Share (0..1) of the replicas that may run on spot (default 0); {READ_BY}."
    )
    unserved_request_cost: Annotated[float, Strict(), Field(ge=0, le=MAX_USD)] = Field(
        description="USD one unserved request costs (>= 0): against a replica-hour's price it sets the forecast "
        f"quantile replicas are sized at; {READ_BY}.",
    )
    events: Annotated[list[ServiceEventDoc], Strict(), Field(max_length=MAX_LIST_LENGTH)] = Field(
        default_factory=list, description=f"Known windows of unusual demand (promotions, launches); {READ_BY}."
    )
    rate_query: Annotated[str, Strict(), Field(min_length=1, max_length=MAX_QUERY_LENGTH)] | None = Field(
        default=None,
        description="PromQL expression of the service's offered load in requests/s (arrivals at the ingress or "
        "gateway, rejected and queued requests included, never completions), read by the daemon from the "
        "Prometheus that burst.yaml's rates.prometheus names; read by the daemon's service loop (the simulator "
        "ignores it).",
    )

    @field_validator("events", mode="before")
    @classmethod
    def _empty_list(cls, value: Any) -> Any:
        return none_as_empty(value, [])

    @field_validator("gpu_s_per_request")
    @classmethod
    def _one_capacity_form(cls, value: TokenCostDoc | None, info: ValidationInfo) -> TokenCostDoc | None:
        if "requests_per_s" not in info.data:
            return value  # requests_per_s was invalid: its own error says why
        rate = info.data["requests_per_s"]
        if value is not None and rate is not None:
            raise ValueError(BOTH_FORMS)
        if value is None and rate is None:
            raise ValueError(
                "a service needs its capacity per replica: requests_per_s (requests one replica serves per "
                "second) or gpu_s_per_request ({a, b}: GPU-seconds per context and per generated token)"
            )
        return value

    @field_validator("max_replicas")
    @classmethod
    def _max_at_least_min(cls, value: int, info: ValidationInfo) -> int:
        low = info.data.get("min_replicas")
        if low is not None and value < low:
            raise ValueError(f"max_replicas {value} is below min_replicas {low}")
        return value

    def to_model(self, tenant: TenantName) -> Service:
        """Decide the domain `Service` this entry describes for `tenant` (durations in seconds)."""
        return Service(
            tenant=tenant,
            name=self.name,
            gpu_model=self.gpu_model,
            max_replicas=self.max_replicas,
            ready_within_s=self.ready_within,
            unserved_request_cost_usd=self.unserved_request_cost,
            gpus_per_replica=self.gpus_per_replica,
            requests_per_s=self.requests_per_s,
            token_cost=self.gpu_s_per_request.to_model() if self.gpu_s_per_request is not None else None,
            target_utilisation=self.target_utilisation,
            min_replicas=self.min_replicas,
            replica_start_s=self.replica_start,
            spot_share=self.spot_share,
            events=tuple(e.to_model() for e in self.events),
            rate_query=self.rate_query,
        )


def duplicate_service_names(names: Sequence[object]) -> list[tuple[tuple[int | str, ...], str]]:
    """Decide which service names repeat an earlier one: (loc below `services`, message) per repeat."""
    first: dict[str, int] = {}
    out: list[tuple[tuple[int | str, ...], str]] = []
    for i, name in enumerate(names):
        if not isinstance(name, str):
            continue
        if name in first:
            out.append(((i, "name"), f"duplicate service name {shown(name)} (also item {first[name]})"))
        else:
            first[name] = i
    return out


def services_raw_checks(data: Mapping[str, Any]) -> list[tuple[tuple[int | str, ...], str]]:
    """Checks on the raw `services` list, so they report even when other entries or fields have errors:
    duplicate names, and both capacity forms given."""
    services = data.get("services")
    if not isinstance(services, list):
        return []
    entries = [s if isinstance(s, dict) else {} for s in services]
    out = [(("services", *loc), message) for loc, message in duplicate_service_names([e.get("name") for e in entries])]
    for i, entry in enumerate(entries):
        if entry.get("requests_per_s") is not None and entry.get("gpu_s_per_request") is not None:
            out.append((("services", i, "gpu_s_per_request"), BOTH_FORMS))
    return out
