"""Cost against service: the gate on a "cost <= baseline" target and the dominance check of the cost-delay frontier.

Pure decisions on a strategy's figures (`Point`), read by the strategy
benchmark and the simulate report:

- the service gate (`cost_verdict`): burst is held to costing no more than a
  baseline unless that baseline's P95 delay exceeds burst's by more than
  `SERVICE_GATE_S`; then the baseline is "cheaper at worse service", which
  waives the target and is reported as such, not hidden;
- dominance (`dominated_by`): a strategy dominates another when it is cheaper
  and no worse on P95 delay, lost work and work delivered. burst must not be
  dominated. The bounds and references (`NOT_COMPARED`) are plotted but are
  not candidates: no controller can reach them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

SERVICE_GATE_S = 60.0
"""How much worse (seconds of P95 delay) a baseline must serve than burst for its lower cost to waive the target."""

NOT_COMPARED = ("oracle", "floor", "burst-clairvoyant", "static-p50")
"""Strategies left out of the dominance check: the two bounds, burst with the true future (a reference), and
static-p50, which does not finish its work (it keeps its window and is outside every target)."""

WORK_SLACK_GPU_H = 1e-6
"""Work delivered that differs by less than this is the same work (floating-point sums)."""


class Figures(Protocol):
    """What a point is read from (`burst.sim.engine.StrategyResult` has these)."""

    @property
    def cost_usd(self) -> float: ...
    @property
    def delay_p95_s(self) -> float: ...
    @property
    def lost_gpu_hours(self) -> float: ...
    @property
    def work_gpu_hours(self) -> float: ...


@dataclass(frozen=True)
class Point:
    """One strategy's figures on one window, as the frontier reads them."""

    cost_usd: float
    delay_p95_s: float
    lost_gpu_hours: float
    work_gpu_hours: float

    @classmethod
    def of(cls, r: Figures) -> Point:
        """The point of a result."""
        return cls(r.cost_usd, r.delay_p95_s, r.lost_gpu_hours, r.work_gpu_hours)


class CostVerdict(Enum):
    """The outcome of a "cost <= baseline" target."""

    HOLDS = "yes"
    FAILS = "no"
    WORSE_SERVICE = "cheaper at worse service"  # the baseline is cheaper, and serves worse than the gate allows


def cost_verdict(mine: Point, baseline: Point, gate_s: float = SERVICE_GATE_S) -> CostVerdict:
    """Whether "cost <= baseline" holds for `mine`, fails, or is waived because the cheaper baseline's P95 delay
    exceeds `mine`'s by more than `gate_s`."""
    if mine.cost_usd <= baseline.cost_usd:
        return CostVerdict.HOLDS
    if baseline.delay_p95_s - mine.delay_p95_s > gate_s:
        return CostVerdict.WORSE_SERVICE
    return CostVerdict.FAILS


def dominates(a: Point, b: Point) -> bool:
    """Whether `a` is cheaper than `b` and no worse on P95 delay, lost work and work delivered."""
    return (a.cost_usd < b.cost_usd and a.delay_p95_s <= b.delay_p95_s and a.lost_gpu_hours <= b.lost_gpu_hours
            and a.work_gpu_hours >= b.work_gpu_hours - WORK_SLACK_GPU_H)


def dominated_by(name: str, points: Mapping[str, Point], not_compared: Sequence[str] = NOT_COMPARED) -> list[str]:
    """The strategies among `points` (outside `not_compared`) that dominate `name`'s point; empty when none does."""
    mine = points[name]
    return [other for other, p in points.items()
            if other != name and other not in not_compared and dominates(p, mine)]


def cost_delay_frontier(points: Mapping[str, Point]) -> list[str]:
    """The strategies no other among `points` beats on both cost and P95 delay (one cheaper and no slower, or
    one faster and no dearer), by rising P95 delay: the line the frontier plot draws."""
    def beaten(p: Point) -> bool:
        return any((q.cost_usd < p.cost_usd and q.delay_p95_s <= p.delay_p95_s)
                   or (q.cost_usd <= p.cost_usd and q.delay_p95_s < p.delay_p95_s) for q in points.values())
    return sorted((n for n, p in points.items() if not beaten(p)),
                  key=lambda n: (points[n].delay_p95_s, points[n].cost_usd))


__all__ = ["NOT_COMPARED", "SERVICE_GATE_S", "CostVerdict", "Point", "cost_delay_frontier", "cost_verdict",
           "dominated_by", "dominates"]
