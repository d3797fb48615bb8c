"""Whether pre-scaling pays: the expected queueing it saves, valued by the tenant, against what it costs.

A node pre-scaled now for a rise the forecast sees at `arrival` (the first
step within the lead time where the forecast P50 reaches its largest value
there) is billed from now. If the rise comes, a GPU of it saves the wait a
reactive launch at `arrival` would have caused, min(boot, arrival - now)
seconds, and it cost (arrival - now) seconds more than that reactive launch.
If the rise does not come, the GPU is billed for nothing over the lead time
and its break-even hold (lead + boot). Whether the i-th GPU past the supply
is used is P(rise > i): the forecast at `arrival`, as a distribution through
its P10/P50/P90/P99 (a CDF linear between them, reaching 0 one P10-P99
spread below P10 and 1 one P90-P99 gap above P99), less its P50 now.

Per node, in order: expected benefit = wait value x sum over its GPUs of
P(used) x saved hours; expected cost = GPU price x sum over its GPUs of
[P(used) x (arrival - now) + (1 - P(used)) x (lead + boot)] in hours. A node
is launched while its benefit exceeds its cost; the first node that does not
pay ends the launch (the later ones are used less often still).

The wait value is the tenant's `prescale.wait_usd_per_gpu_hour` (USD per
GPU-hour of queueing), default `DEFAULT_WAIT_USD_PER_GPU_HOUR`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from burst.model import QUANTILES, Forecast


@dataclass(frozen=True)
class PrescaleCase:
    """The economics of pre-scaling `nodes` nodes (the ones that pay) out of those asked for."""

    nodes: int  # nodes that pay, from the first
    benefit_usd: float  # expected wait saved, valued, over the nodes that pay (or the first node if none does)
    cost_usd: float  # expected cost over the same nodes
    used_gpus: float  # expected GPUs of those nodes the rise uses

    def says(self, wait_usd: float, source: str) -> str:
        """The reason's figures: expected benefit against expected cost, and where the wait value came from."""
        sign = ">" if self.nodes else "<="
        return (f"expected wait saved ${self.benefit_usd:,.2f} (at ${wait_usd:g} per GPU-hour of queueing, {source}) "
                f"{sign} expected cost ${self.cost_usd:,.2f}")


def exceed_probability(forecast: Forecast, at: datetime, level: float) -> float:
    """P(demand at `at` > `level`) read from the forecast's quantiles at that step (module doc)."""
    points = [(forecast.at(q, at), q) for q in QUANTILES if q in forecast.quantiles]
    if not points:
        return 0.0
    lo_v = points[0][0]
    hi_v = points[-1][0]
    spread = max(hi_v - lo_v, 1.0)
    top = max(hi_v - points[-2][0], 1.0) if len(points) > 1 else spread
    knots = [(lo_v - spread, 0.0), *points, (hi_v + top, 1.0)]
    if level <= knots[0][0]:
        return 1.0
    for (v0, q0), (v1, q1) in zip(knots, knots[1:], strict=False):
        if level < v1:
            return 1.0 - (q0 + (q1 - q0) * (level - v0) / (v1 - v0))
    return 0.0


def arrival_of(forecast: Forecast, now: datetime, until: datetime) -> datetime:
    """The first forecast step in [now, until] where P50 is at its largest there (now with no step inside)."""
    first, last = forecast.steps_within(now, until)
    if first >= last:
        return now
    path = forecast.quantiles[0.5][first:last]
    top = max(path)
    return forecast.timestamps[first + path.index(top)]


def prescale_case(
    forecast: Forecast,
    *,
    now: datetime,
    lead_s: float,
    boot_s: float,
    demand_now: float,
    supply: float,
    nodes: int,
    gpus_per_node: int,
    gpu_usd_per_hour: float,
    wait_usd_per_gpu_hour: float,
) -> PrescaleCase:
    """How many of `nodes` pre-scaled nodes pay for themselves (module doc); `supply` is the GPUs this tenant's
    demand already has (ready, booting and planned, less what higher-priority tenants need)."""
    arrival = arrival_of(forecast, now, now + timedelta(seconds=lead_s))
    ahead_s = max(0.0, (arrival - now).total_seconds())
    saved_h = min(boot_s, ahead_s) / 3600.0
    wasted_h = (lead_s + boot_s) / 3600.0
    rise_base = forecast.now_value(0.5, now)  # the rise is measured from the forecast now, applied to demand now
    paying = 0
    benefit = cost = used = 0.0
    first_node: tuple[float, float, float] | None = None
    for n in range(nodes):
        b = c = u = 0.0
        for g in range(gpus_per_node):
            extra = supply + n * gpus_per_node + g + 0.5 - demand_now  # rise needed for this GPU to be used
            p = exceed_probability(forecast, arrival, rise_base + extra)
            u += p
            b += wait_usd_per_gpu_hour * p * saved_h
            c += gpu_usd_per_hour * (p * ahead_s / 3600.0 + (1 - p) * wasted_h)
        if first_node is None:
            first_node = (b, c, u)
        if b <= c:
            break
        paying += 1
        benefit, cost, used = benefit + b, cost + c, used + u
    if paying == 0 and first_node is not None:
        benefit, cost, used = first_node
    return PrescaleCase(nodes=paying, benefit_usd=benefit, cost_usd=cost, used_gpus=used)


DEFAULT_WAIT_USD_PER_GPU_HOUR = 12.0
"""What a GPU-hour of queueing is worth to a tenant whose policy does not say: three on-demand A100 GPU-hours
(about $4 each in the catalog), for the people and the work waiting on it."""

__all__ = ["DEFAULT_WAIT_USD_PER_GPU_HOUR", "PrescaleCase", "arrival_of", "exceed_probability", "prescale_case"]
