"""Retention: what the store forgets, and when, so a controller that runs for years keeps a bounded store.

`cutoffs` decides (pure: settings and an instant in, instants out); `apply`
asks the store to roll the old cost ledger up to hourly rows and to delete
the finished rows and demand samples older than their cutoffs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from burst.bounds import SERVICE_EVENT_MEMORY_S
from burst.state import Store
from policies.config import RetentionDoc


@dataclass(frozen=True)
class Cutoffs:
    """The instants before which each kind of row is rolled up or deleted."""

    ledger: datetime
    finished: datetime
    demand: datetime
    service_events: datetime  # API service events that ended before it are deleted


@dataclass(frozen=True)
class RetentionReport:
    """What one pass did: ledger rows rolled up into hourly rows, and rows deleted by table."""

    at: datetime
    ledger_read: int
    ledger_written: int
    deleted: dict[str, int]


def cutoffs(settings: RetentionDoc, now: datetime) -> Cutoffs:
    """Decide each kind of row's cutoff at `now` from its retention age. A service event declared through the API
    goes once it ended `finished_after` ago, and never while the rate forecaster still reads it
    (`SERVICE_EVENT_MEMORY_S` after its end)."""
    return Cutoffs(
        ledger=now - timedelta(seconds=settings.ledger_rollup_after),
        finished=now - timedelta(seconds=settings.finished_after),
        demand=now - timedelta(seconds=settings.demand_history),
        service_events=now - timedelta(seconds=max(settings.finished_after, SERVICE_EVENT_MEMORY_S)),
    )


def apply(store: Store, settings: RetentionDoc, now: datetime) -> RetentionReport:
    """Roll up and prune `store` as `settings` say at `now`; what went."""
    cut = cutoffs(settings, now)
    read, written = store.roll_up_costs(cut.ledger)
    deleted = store.prune_finished(cut.finished)
    deleted["demand_history"] = store.prune_demand(cut.demand)
    deleted["service_events"] = store.prune_service_events(cut.service_events)
    return RetentionReport(now, read, written, deleted)


__all__ = ["Cutoffs", "RetentionReport", "apply", "cutoffs"]
