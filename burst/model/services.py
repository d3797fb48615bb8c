"""Online inference services: what a replica serves, what a request costs, declared windows of unusual demand."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from burst.model.base import TenantName


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
    request costs `unserved_request_cost_usd`. `rate_query` is the PromQL
    expression the daemon reads its offered load with. The planner's decision for one
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
    rate_query: str | None = None  # the PromQL of its offered load (arrivals, never completions); None: none declared

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
