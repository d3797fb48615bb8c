"""What the store forgets and how much it holds, across its tables (`burst.retention` decides when)."""

from __future__ import annotations

from datetime import datetime

from burst.model import TERMINAL_JOB_STATES, NodeState
from burst.store.base import StoreBase
from burst.store.nodes import IntentStatus
from burst.store.sql import _placeholders, _ts

__all__ = ["RetentionRecords"]


class RetentionRecords(StoreBase):
    """Prune finished rows from every table that keeps them; count each table's rows."""

    def prune_finished(self, before: datetime) -> dict[str, int]:
        """Delete what is finished and older than `before`; how many rows went, by table.

        Finished jobs (a terminal state, last written before `before`),
        decisions whose last plan was before it, intents with an outcome
        (confirmed or failed) from before it, nodes terminated before it and
        job-loss rows from before it. Pending and running jobs, unconfirmed intents and live nodes stay
        whatever their age.
        """
        stamp = _ts(before, "before")
        terminal = sorted(s.value for s in TERMINAL_JOB_STATES)
        outcomes = [IntentStatus.CONFIRMED.value, IntentStatus.FAILED.value]
        with self._tx() as conn:
            gone = {
                "jobs": conn.execute(
                    f"DELETE FROM jobs WHERE state IN ({_placeholders(len(terminal))}) AND updated_at < ?",
                    (*terminal, stamp)).rowcount,
                "decisions": conn.execute(
                    "DELETE FROM decisions WHERE COALESCE(last_at, at) < ?", (stamp,)).rowcount,
                "intents": conn.execute(
                    f"DELETE FROM intents WHERE status IN ({_placeholders(len(outcomes))}) AND updated_at < ?",
                    (*outcomes, stamp)).rowcount,
                "nodes": conn.execute(
                    "DELETE FROM nodes WHERE state = ? AND updated_at < ?", (NodeState.TERMINATED.value, stamp)).rowcount,
                "job_losses": conn.execute("DELETE FROM job_losses WHERE at < ?", (stamp,)).rowcount,
            }
        if gone["nodes"]:
            self._node_cache = None  # re-read: terminated rows went
        return {k: int(v) for k, v in gone.items()}

    def row_counts(self) -> dict[str, int]:
        """How many rows each of the store's tables holds."""
        tables = ("jobs", "nodes", "intents", "group_targets", "demand_history", "cost_ledger", "job_losses",
                  "decisions", "api_token_hashes", "service_events", "meta")
        with self._lock:
            self._write_pending_costs()
            return {t: int(self._query(f"SELECT count(*) FROM {t}")[0][0]) for t in tables}
