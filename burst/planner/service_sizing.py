"""Sizing rules for services (online inference): how many replicas a request rate needs, how far ahead to
size them, and when one may go.

Pure functions of numbers and `burst.model.Service`: no clock, no I/O.
`burst.planner.services.plan_service`, the planner's decision for one
service, is built on them.

The rules, in the order a plan would use them:

1. A replica serves `replica_capacity_rps` requests/s at 100%, and is run at
   the service's `target_utilisation` of it.
2. The rate to size for is the forecast's `forecast_quantile` one lead time
   ahead (`lead_time_s`: node boot or wake, plus model load), times the
   `event_multiplier` of any declared event then.
3. `replicas_for_rate` turns that rate into replicas, and `clamp_replicas`
   keeps them within the service's bounds, naming the bound that applied.
4. When the lead time exceeds `ready_within`, capacity started on demand is
   late: `needs_standby` says standby replicas must be kept running.
5. `may_scale_in` keeps a replica while either the rate now or the forecast
   over the lead time needs it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from burst.model import QUANTILES, Service

QUANTILE_FLOOR = 0.5
"""Lowest quantile services are sized at: below the median the forecast is
expected to fall short more often than not, however cheap an unserved request."""
QUANTILE_CEILING = 0.99
"""Highest quantile services are sized at: the highest the forecasts give (`QUANTILES`)."""

_WHOLE_TOLERANCE = 1e-9
"""Replicas within this of a whole number count as that number (2.1 / 0.7 is 3.0000000000000004 in floats)."""


def replica_capacity_rps(
    service: Service, mean_context_tokens: float | None = None, mean_generated_tokens: float | None = None
) -> float:
    """Decide how many requests per second one replica of `service` serves at 100% utilisation.

    A service declared with `requests_per_s` serves that. One declared with a
    token cost serves `gpus_per_replica / (a x context + b x generated)`: its
    GPUs give `gpus_per_replica` GPU-seconds each second, and a request with
    the mean token counts costs that many GPU-seconds. The token form needs
    both means (>= 0); a ValueError says which is missing or why the cost is 0.
    """
    if service.requests_per_s is not None:
        return service.requests_per_s
    cost = service.token_cost
    if cost is None:  # Service refuses this on construction; kept for type narrowing
        raise ValueError(f"service {service.name}: no capacity per replica declared")
    if mean_context_tokens is None or mean_generated_tokens is None:
        raise ValueError(f"service {service.name}: its token cost needs the mean context and generated tokens")
    if not (mean_context_tokens >= 0 and mean_generated_tokens >= 0):
        raise ValueError(f"service {service.name}: token counts must be >= 0, got "
                         f"{mean_context_tokens} context, {mean_generated_tokens} generated")
    gpu_s = cost.gpu_s_per_request(mean_context_tokens, mean_generated_tokens)
    if not gpu_s > 0:
        raise ValueError(f"service {service.name}: a request with these token counts costs no GPU time")
    return service.gpus_per_replica / gpu_s


def replicas_for_rate(rate: float, capacity_rps: float, target: float) -> int:
    """Decide how many replicas serve `rate` requests/s with each at `target` of its `capacity_rps`:
    ceil(rate / (capacity x target)), unclamped (see `clamp_replicas`).

    A rate at or below 0 needs none; a quotient within a billionth of a whole
    number needs that number (float noise never adds a replica). Capacity must
    be > 0 and target in (0, 1].
    """
    if not capacity_rps > 0 or not math.isfinite(capacity_rps):
        raise ValueError(f"capacity per replica must be a finite number > 0, got {capacity_rps}")
    if not 0 < target <= 1:
        raise ValueError(f"target utilisation must be in (0, 1], got {target}")
    if math.isnan(rate):
        raise ValueError("the rate is not a number")
    if rate <= 0:
        return 0
    return math.ceil(rate / (capacity_rps * target) - _WHOLE_TOLERANCE)


Bound = Literal["min_replicas", "max_replicas"]


@dataclass(frozen=True)
class ClampedReplicas:
    """A replica count within a service's bounds, and the bound that set it (None when the need was within)."""

    replicas: int
    bound: Bound | None = None

    @property
    def reason(self) -> str:
        """A phrase for a decision's reason: which bound applied, if any."""
        return "within min_replicas .. max_replicas" if self.bound is None else f"held at {self.bound}"


def clamp_replicas(service: Service, needed: int) -> ClampedReplicas:
    """Decide the replica count `service` runs for `needed` replicas: `needed` within
    [min_replicas, max_replicas], naming the bound when one applied."""
    if needed < service.min_replicas:
        return ClampedReplicas(service.min_replicas, "min_replicas")
    if needed > service.max_replicas:
        return ClampedReplicas(service.max_replicas, "max_replicas")
    return ClampedReplicas(needed)


def forecast_quantile(unserved_request_cost: float, replica_hour_usd: float, capacity_rps: float, target: float) -> float:
    """Decide the forecast quantile a service's replicas are sized at, by the newsvendor critical ratio.

    One replica short for an hour leaves unserved the requests it would have
    served: capacity x target x 3600, each costing `unserved_request_cost`
    (the under-provisioning cost cu). One replica too many costs its hour,
    `replica_hour_usd` (co). Sizing at the quantile cu / (cu + co) balances the
    two. The result is kept within [QUANTILE_FLOOR, QUANTILE_CEILING]: both
    costs 0 (nothing to balance) gives the floor, a free replica the ceiling.
    """
    if unserved_request_cost < 0 or replica_hour_usd < 0:
        raise ValueError("costs must be >= 0")
    if not capacity_rps > 0 or not 0 < target <= 1:
        raise ValueError(f"capacity must be > 0 and target in (0, 1], got {capacity_rps}, {target}")
    under = capacity_rps * target * 3600.0 * unserved_request_cost
    over = replica_hour_usd
    if under + over == 0:
        return QUANTILE_FLOOR
    return min(QUANTILE_CEILING, max(QUANTILE_FLOOR, under / (under + over)))


def forecast_level(quantile: float, levels: Iterable[float] = QUANTILES) -> float:
    """Decide which of a forecast's quantiles (`levels`, by default `QUANTILES`) to read for `quantile`: the
    lowest at or above it (never sizing below what was asked), the highest when none is."""
    ordered = sorted(levels)
    if not ordered:
        raise ValueError("a forecast without quantiles has no level to read")
    return next((q for q in ordered if q >= quantile), ordered[-1])


def lead_time_s(boot_or_wake_s: float, replica_start_s: float) -> float:
    """Decide how long a replica takes from the decision to serving: its node's boot (or wake from a warm
    pool, or 0 on a node already up) plus the replica's model load."""
    if boot_or_wake_s < 0 or replica_start_s < 0:
        raise ValueError(f"durations must be >= 0, got {boot_or_wake_s} and {replica_start_s}")
    return boot_or_wake_s + replica_start_s


def needs_standby(service: Service, lead_s: float) -> bool:
    """Decide whether `service` must keep standby replicas running: a replica started when needed would serve
    only after `lead_s`, later than its `ready_within`."""
    return lead_s > service.ready_within_s


def may_scale_in(current: int, needed_now: int, needed_over_lead: int) -> bool:
    """Decide whether one of `current` replicas may go: only when neither the rate observed now nor the
    forecast over the lead time needs it (both needs below `current`). A replica released early comes back
    only one lead time later; one kept costs one replica-hour per hour."""
    return current > max(needed_now, needed_over_lead)


def event_multiplier(service: Service, at: datetime) -> float:
    """Decide the factor `service`'s declared events put on its rate at `at`: the largest multiplier among
    the events in force then (start inclusive, end exclusive), or 1.0 when none declares one. Overlapping
    windows do not compound: a day-long promotion and its peak hour inside it are one surge."""
    factors = [e.multiplier for e in service.events if e.multiplier is not None and e.in_force(at)]
    return max(factors, default=1.0)
