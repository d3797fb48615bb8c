"""Budget status: when a tenant's projected spend passes its monthly budget.

Budgets (`budget.usd_per_month`) are per calendar month (UTC), as the planner
counts them. A tenant's spend in a month is what it spent before the
projection started (month-to-date, from the ledger) plus its cumulative
projected spend; a new month starts again from zero. The breach instant is
the first moment that sum passes the budget, interpolated linearly inside
the ledger interval where it happens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from burst.model import month_start
from burst.state import CostEntry


def spend_points(ledger: Iterable[CostEntry], tenant: str) -> list[tuple[datetime, float]]:
    """The tenant's ledger spend as (instant, USD) points, in time order (one per instant)."""
    by_at: dict[datetime, float] = {}
    for row in ledger:
        if row.tenant == tenant:
            by_at[row.at] = by_at.get(row.at, 0.0) + row.usd
    return sorted(by_at.items())


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
    if budget_usd_month is None:
        return None
    month = month_start(start)
    spent = month_to_date_usd
    if spent > budget_usd_month:
        return start
    prev = start
    for at, usd in points:
        if month_start(at) != month:  # the interval crossing the month boundary counts to the new month
            month, spent = month_start(at), 0.0
            prev = max(prev, month)
        if spent + usd > budget_usd_month:
            share = (budget_usd_month - spent) / usd if usd > 0 else 0.0
            return prev + timedelta(seconds=(at - prev).total_seconds() * share)
        spent += usd
        prev = at
    return None


def month_to_date(spend: Mapping[str, float], tenant: str) -> float:
    """A tenant's month-to-date spend (0 when the ledger has none)."""
    return float(spend.get(tenant, 0.0))


__all__ = ["breach_at", "month_to_date", "spend_points"]
