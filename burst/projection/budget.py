"""Budget status: when a tenant's projected spend first passes its hourly or monthly budget.

A tenant's policy may cap its spend per hour (`budget.usd_per_hour`), per
calendar month (`budget.usd_per_month`, UTC, as the planner counts them), or
both. The spend comes from a run's cost ledger: each row bills the time since
the ledger's previous tick (the tick before, or the projection's start for
the first), and is taken as spent evenly over that span.

- Monthly: a tenant's spend in a month is what it spent before the
  projection started (month-to-date, from the ledger) plus its cumulative
  projected spend; a new month starts again from zero. The breach instant is
  the first moment that sum passes the budget, interpolated linearly inside
  the ledger interval where it happens.
- Hourly: the spend in each clock hour (UTC) of the horizon; the breach
  instant is the first moment an hour's spend so far passes the hourly
  budget. The planner refuses placements that would take a tenant's rate
  over it, so a breach here is spend it cannot refuse (work already running
  when prices or its share change).

A tenant's breach is the earlier of the two (`Breach`), naming the budget passed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from burst.model import Budget, month_start
from burst.state import CostEntry

HOURLY = "usd_per_hour"
MONTHLY = "usd_per_month"
_HOUR = timedelta(hours=1)

Interval = tuple[datetime, datetime, float]
"""(since, until, USD spent evenly over that span)."""


@dataclass(frozen=True)
class Breach:
    """When a tenant's projected spend first passes one of its budgets, and which (`HOURLY` or `MONTHLY`)."""

    at: datetime
    budget: str


def has_budget(budget: Budget) -> bool:
    """Whether the policy caps spend at all (per hour or per month)."""
    return budget.usd_per_hour is not None or budget.usd_per_month is not None


def spend_points(ledger: Iterable[CostEntry], tenant: str) -> list[tuple[datetime, float]]:
    """The tenant's ledger spend as (instant, USD) points, in time order (one per instant)."""
    by_at: dict[datetime, float] = {}
    for row in ledger:
        if row.tenant == tenant:
            by_at[row.at] = by_at.get(row.at, 0.0) + row.usd
    return sorted(by_at.items())


def spend_intervals(ledger: Sequence[CostEntry], start: datetime) -> dict[str, list[Interval]]:
    """Each tenant's spend as (since, until, USD) spans in time order: a row spans from the ledger's previous tick
    (any tenant's; `start` for the first) to its own."""
    ticks = sorted({row.at for row in ledger})
    since = dict(zip(ticks, [start, *ticks], strict=False))
    by_tenant: dict[str, dict[datetime, float]] = {}
    for row in ledger:
        if row.tenant is None:  # idle capacity and hot pools: overhead on no tenant
            continue
        at = by_tenant.setdefault(row.tenant, {})
        at[row.at] = at.get(row.at, 0.0) + row.usd
    return {t: [(max(start, since[at]), at, usd) for at, usd in sorted(rows.items())] for t, rows in by_tenant.items()}


def breach_at(
    points: Iterable[tuple[datetime, float]],
    budget_usd_month: float | None,
    *,
    start: datetime,
    month_to_date_usd: float = 0.0,
) -> datetime | None:
    """When spend first passes the monthly budget (module doc), or None: within the points' span.

    `points` are (instant, USD spent over the interval ending at that instant),
    time-ordered, all after `start`; `month_to_date_usd` is what was spent in
    `start`'s month before `start`.
    """
    intervals, prev = [], start
    for at, usd in points:
        intervals.append((prev, at, usd))
        prev = at
    return month_breach_at(intervals, budget_usd_month, start=start, month_to_date_usd=month_to_date_usd)


def month_breach_at(intervals: Iterable[Interval], budget_usd_month: float | None, *, start: datetime,
                    month_to_date_usd: float = 0.0) -> datetime | None:
    """When the month's spend first passes `budget_usd_month` (module doc), or None; `intervals` in time order."""
    if budget_usd_month is None:
        return None
    month = month_start(start)
    spent = month_to_date_usd
    if spent > budget_usd_month:
        return start
    for since, at, usd in intervals:
        if month_start(at) != month:  # the interval crossing the month boundary counts to the new month
            month, spent = month_start(at), 0.0
            since = max(since, month)
        if spent + usd > budget_usd_month:
            share = (budget_usd_month - spent) / usd if usd > 0 else 0.0
            return since + timedelta(seconds=(at - since).total_seconds() * share)
        spent += usd
    return None


def hour_breach_at(intervals: Iterable[Interval], budget_usd_hour: float | None) -> datetime | None:
    """When the spend inside one clock hour (UTC) first passes `budget_usd_hour` (module doc), or None."""
    if budget_usd_hour is None:
        return None
    hour: datetime | None = None
    spent = 0.0
    for since, until, usd in intervals:
        span = (until - since).total_seconds()
        for lo, hi in _hour_pieces(since, until):
            piece = usd * (hi - lo).total_seconds() / span if span > 0 else usd
            if _clock_hour(lo) != hour:
                hour, spent = _clock_hour(lo), 0.0
            if spent + piece > budget_usd_hour + 1e-9:
                share = (budget_usd_hour - spent) / piece if piece > 0 else 0.0
                return lo + timedelta(seconds=(hi - lo).total_seconds() * share)
            spent += piece
    return None


def _clock_hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def _hour_pieces(since: datetime, until: datetime) -> list[tuple[datetime, datetime]]:
    """[since, until] cut at each whole hour inside it (one piece for an instant)."""
    if until <= since:
        return [(since, until)]
    pieces, lo = [], since
    while lo < until:
        hi = min(until, _clock_hour(lo) + _HOUR)
        pieces.append((lo, hi))
        lo = hi
    return pieces


def first_breach(intervals: Sequence[Interval], budget: Budget, *, start: datetime,
                 month_to_date_usd: float = 0.0) -> Breach | None:
    """The earlier of the hourly and the monthly breach (module doc), or None when spend passes neither budget."""
    found = [Breach(at, name) for at, name in (
        (hour_breach_at(intervals, budget.usd_per_hour), HOURLY),
        (month_breach_at(intervals, budget.usd_per_month, start=start, month_to_date_usd=month_to_date_usd), MONTHLY),
    ) if at is not None]
    return min(found, key=lambda b: b.at, default=None)


def breaches(ledger: Sequence[CostEntry], budgets: Mapping[str, Budget], *, start: datetime,
             month_to_date: Mapping[str, float]) -> dict[str, Breach | None]:
    """Each tenant with a budget (hourly or monthly): when a run's `ledger` passes it first (`first_breach`)."""
    spans = spend_intervals(ledger, start)
    return {t: first_breach(spans.get(t, []), b, start=start, month_to_date_usd=month_to_date.get(t, 0.0))
            for t, b in budgets.items() if has_budget(b)}


def month_to_date(spend: Mapping[str, float], tenant: str) -> float:
    """A tenant's month-to-date spend (0 when the ledger has none)."""
    return float(spend.get(tenant, 0.0))


__all__ = ["HOURLY", "MONTHLY", "Breach", "breach_at", "breaches", "first_breach", "has_budget", "hour_breach_at",
           "month_breach_at", "month_to_date", "spend_intervals", "spend_points"]
