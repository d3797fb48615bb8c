"""The cost ledger (USD and GPU-hours per tenant, line and group) and the job-loss ledger (work lost to
interruptions and evictions, GPU time spent checkpointing)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from burst.store.base import StoreBase
from burst.store.meta import MetaKey
from burst.store.sql import _dt, _finite, _json, _ts, _where, _window

__all__ = ["COST_LINES", "LOSS_CAUSES", "PENDING_COSTS_MAX", "CostEntry", "JobLoss", "LedgerRecords", "LossTotals"]


COST_LINES: tuple[str, ...] = ("steady", "elastic_on_demand", "elastic_spot", "hot_pool")
"""The cost ledger's lines (DESIGN.md's `cost_by_tier` keys)."""


@dataclass(frozen=True)
class CostEntry:
    """One cost ledger row; `tenant` None is tier overhead (idle steady capacity, hot pools)."""

    at: datetime
    line: str
    usd: float
    gpu_hours: float = 0.0
    tenant: str | None = None
    group_id: str | None = None


LOSS_CAUSES: tuple[str, ...] = ("interruption", "eviction", "checkpoint")
"""Why a job-loss ledger row was written: its nodes were lost (the job was requeued), a plan evicted
it, or a plan's checkpoint request was applied to it while running."""


@dataclass(frozen=True)
class JobLoss:
    """One job-loss ledger row: GPU-seconds of work a job lost beyond its last checkpoint, or spent checkpointing.

    `lost_gpu_s` is the work lost × the job's GPUs (interruption and eviction
    rows); `checkpoint_gpu_s` is the checkpoint's duration × its GPUs
    (checkpoint rows). `group_id` and `node_ids` are the job's nodes when known.
    """

    at: datetime
    job_id: str
    tenant: str
    cause: str
    gpus: float
    lost_gpu_s: float = 0.0
    checkpoint_gpu_s: float = 0.0
    group_id: str | None = None
    node_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class LossTotals:
    """One tenant's job-loss ledger, summed: runs interrupted, runs evicted, checkpoints, and their GPU-hours."""

    interruptions: int = 0
    evictions: int = 0
    checkpoints: int = 0
    lost_gpu_hours: float = 0.0
    checkpoint_gpu_hours: float = 0.0


PENDING_COSTS_MAX = 10_000
"""Ledger rows an in-memory store holds back at most before writing them (see `Store.record_costs`)."""


class LedgerRecords(StoreBase):
    """The cost_ledger and job_losses tables: append rows, sum them by tenant and line, roll old rows up."""

    # ---------------------------------------------------------------- cost ledger

    def record_cost(
        self,
        at: datetime,
        line: str,
        usd: float,
        gpu_hours: float,
        tenant: str | None = None,
        group_id: str | None = None,
    ) -> None:
        """Append one ledger row (`record_costs` of one `CostEntry`)."""
        self.record_costs((CostEntry(at, line, usd, gpu_hours, tenant, group_id),))

    def record_costs(self, rows: Iterable[CostEntry]) -> int:
        """Append ledger rows in one transaction; how many were written (none if any row is invalid).

        A private in-memory store keeps the rows back until the ledger is next read (see `__init__`).
        """
        values = []
        stamps: dict[datetime, str] = {}
        for row in rows:
            if row.line not in COST_LINES:
                raise ValueError(f"cost line must be one of {', '.join(COST_LINES)}, got {row.line!r}")
            gpu_hours = _finite(row.gpu_hours, "gpu_hours")
            if gpu_hours < 0:
                raise ValueError(f"gpu_hours must be >= 0, got {row.gpu_hours!r}")
            stamp = stamps.get(row.at)
            if stamp is None:
                stamp = stamps[row.at] = _ts(row.at, "at")
            values.append((stamp, row.tenant, str(row.line), row.group_id, _finite(row.usd, "usd"), gpu_hours))
        if values:
            with self._lock:
                pending = self._pending_costs
                if pending is None:
                    self._insert_costs(values)
                else:
                    pending.extend(values)
                    if len(pending) >= PENDING_COSTS_MAX:
                        self._write_pending_costs()
        return len(values)

    def _ledger_query(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """A read of the cost ledger, after writing the rows an in-memory store holds back."""
        with self._lock:
            self._write_pending_costs()
            return self._query(sql, params)

    def costs(
        self, since: datetime | None = None, until: datetime | None = None, tenant: str | None = None
    ) -> list[CostEntry]:
        """Ledger rows in ``[since, until)`` (for one tenant, when given), oldest first."""
        where, params = _window("at", since, until)
        if tenant is not None:
            where.append("tenant = ?")
            params.append(tenant)
        rows = self._ledger_query(
            f"SELECT at, line, usd, gpu_hours, tenant, group_id FROM cost_ledger{_where(where)} ORDER BY at, id",
            params,
        )
        return [CostEntry(_dt(a), ln, float(u), float(h), t, g) for a, ln, u, h, t, g in rows]

    def spend_by_tenant(self, since: datetime, until: datetime | None = None) -> dict[str, float]:
        """USD per tenant in ``[since, until)``; tier overhead (no tenant) is left out."""
        where, params = _window("at", since, until)
        where.append("tenant IS NOT NULL")
        rows = self._ledger_query(
            f"SELECT tenant, sum(usd) FROM cost_ledger{_where(where)} GROUP BY tenant ORDER BY tenant", params
        )
        return {t: float(u) for t, u in rows}

    def gpu_hours_by_tenant(self, since: datetime, until: datetime | None = None) -> dict[str, float]:
        """GPU-hours per tenant in ``[since, until)`` (metering for `burst usage`)."""
        where, params = _window("at", since, until)
        where.append("tenant IS NOT NULL")
        rows = self._ledger_query(
            f"SELECT tenant, sum(gpu_hours) FROM cost_ledger{_where(where)} GROUP BY tenant ORDER BY tenant",
            params,
        )
        return {t: float(h) for t, h in rows}

    def tenant_usage(
        self, since: datetime, until: datetime | None = None, *, after_id: int = 0
    ) -> tuple[dict[tuple[str, str, str | None], tuple[float, float]], int]:
        """Tenant ledger rows in ``[since, until)`` with an id above `after_id`, summed per (tenant, line, group_id).

        Returns ``{(tenant, line, group_id): (gpu_hours, usd)}`` and the largest
        row id read (`after_id` when there is none), so a caller can add up
        the ledger incrementally: pass the id back to read only newer rows.
        Tier overhead (no tenant) is left out.
        """
        where, params = _window("at", since, until)
        where += ["tenant IS NOT NULL", "id > ?"]
        params.append(int(after_id))
        rows = self._ledger_query(
            f"SELECT tenant, line, group_id, sum(gpu_hours), sum(usd), max(id) FROM cost_ledger{_where(where)} "
            "GROUP BY tenant, line, group_id ORDER BY tenant, line, group_id",
            params,
        )
        out = {(t, ln, g): (float(h), float(u)) for t, ln, g, h, u, _ in rows}
        return out, max((int(m) for *_, m in rows), default=int(after_id))

    def cost_by_line(self, since: datetime, until: datetime | None = None) -> dict[str, float]:
        """USD per cost line in ``[since, until)``, overhead included; every line present (0.0 if none)."""
        where, params = _window("at", since, until)
        out = dict.fromkeys(COST_LINES, 0.0)
        for line, usd in self._ledger_query(
            f"SELECT line, sum(usd) FROM cost_ledger{_where(where)} GROUP BY line", params
        ):
            out[line] = float(usd)
        return out

    def roll_up_costs(self, before: datetime) -> tuple[int, int]:
        """Replace the ledger rows of each whole UTC hour before `before` by one row per (hour, tenant, line,
        group) holding their sums, stamped at the hour's start; (rows read, rows written).

        Sums over any window whose edges fall on hour boundaries are unchanged
        (`burst usage` meters months), so old ledger rows cost one row per
        hour and key, not one per tick. Hours rolled up once are not read
        again (`MetaKey.LEDGER_ROLLED_UP_UNTIL`).
        """
        cutoff = _ts(before.astimezone(UTC).replace(minute=0, second=0, microsecond=0), "before")
        with self._lock:
            self._write_pending_costs()
            with self._tx() as conn:
                key = MetaKey.LEDGER_ROLLED_UP_UNTIL.value
                row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
                since = row[0] if row else ""
                if cutoff <= since:
                    return 0, 0
                window = ("at >= ? AND at < ?", (since, cutoff))
                hour = "substr(at, 1, 13) || ':00:00.000000+00:00'"
                sums = conn.execute(
                    f"SELECT {hour}, tenant, line, group_id, sum(usd), sum(gpu_hours), count(*) FROM cost_ledger "
                    f"WHERE {window[0]} GROUP BY {hour}, tenant, line, group_id "
                    "ORDER BY 1, COALESCE(tenant, ''), line, COALESCE(group_id, '')",
                    window[1],
                ).fetchall()
                read = sum(int(r[6]) for r in sums)
                conn.execute(f"DELETE FROM cost_ledger WHERE {window[0]}", window[1])
                if sums:
                    conn.executemany(
                        "INSERT INTO cost_ledger (at, tenant, line, group_id, usd, gpu_hours) VALUES (?, ?, ?, ?, ?, ?)",
                        [(h, t, ln, g, float(u), float(gh)) for h, t, ln, g, u, gh, _ in sums],
                    )
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (key, cutoff),
                )
                return read, len(sums)

    # ---------------------------------------------------------------- job-loss ledger

    def record_losses(self, rows: Iterable[JobLoss]) -> int:
        """Append job-loss rows in one transaction; how many were written (none if any row is invalid).

        A row's cause must be one of `LOSS_CAUSES`; its GPUs and GPU-seconds
        must be finite and >= 0.
        """
        values = []
        for row in rows:
            if row.cause not in LOSS_CAUSES:
                raise ValueError(f"job loss cause must be one of {', '.join(LOSS_CAUSES)}, got {row.cause!r}")
            amounts = [_finite(v, name) for v, name in
                       ((row.gpus, "gpus"), (row.lost_gpu_s, "lost_gpu_s"), (row.checkpoint_gpu_s, "checkpoint_gpu_s"))]
            if min(amounts) < 0:
                raise ValueError(f"job {row.job_id}: gpus and GPU-seconds must be >= 0, got {amounts}")
            values.append((_ts(row.at, "at"), row.job_id, row.tenant, row.cause, *amounts, row.group_id,
                           _json(list(row.node_ids), "node_ids")))
        if values:
            with self._tx() as conn:
                conn.executemany(
                    "INSERT INTO job_losses (at, job_id, tenant, cause, gpus, lost_gpu_s, checkpoint_gpu_s, group_id, "
                    "node_ids_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    values,
                )
        return len(values)

    @staticmethod
    def _loss_where(
        since: datetime | None, until: datetime | None, tenant: str | None, job_id: str | None = None
    ) -> tuple[str, list[Any]]:
        where, params = _window("at", since, until)
        for column, value in (("tenant", tenant), ("job_id", job_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        return _where(where), params

    def job_losses(
        self,
        since: datetime | None = None,
        until: datetime | None = None,
        *,
        tenant: str | None = None,
        job_id: str | None = None,
    ) -> list[JobLoss]:
        """Job-loss rows in ``[since, until)`` (for one tenant and/or job, when given), oldest first."""
        where, params = self._loss_where(since, until, tenant, job_id)
        rows = self._query(
            "SELECT at, job_id, tenant, cause, gpus, lost_gpu_s, checkpoint_gpu_s, group_id, node_ids_json "
            f"FROM job_losses{where} ORDER BY at, id",
            params,
        )
        return [
            JobLoss(_dt(a), j, t, c, float(g), float(lost), float(ck), grp, tuple(json.loads(n)))
            for a, j, t, c, g, lost, ck, grp, n in rows
        ]

    def loss_totals(
        self, since: datetime | None = None, until: datetime | None = None, *, tenant: str | None = None
    ) -> dict[str, LossTotals]:
        """Per tenant, the job-loss ledger in ``[since, until)`` summed (only tenants with rows; one when given).

        Interruptions and evictions count rows of that cause (one per run
        stopped); GPU-hours are the rows' GPU-seconds / 3600.
        """
        where, params = self._loss_where(since, until, tenant)
        rows = self._query(
            "SELECT tenant, sum(CASE WHEN cause = 'interruption' THEN 1 ELSE 0 END), "
            "sum(CASE WHEN cause = 'eviction' THEN 1 ELSE 0 END), sum(CASE WHEN cause = 'checkpoint' THEN 1 ELSE 0 END), "
            f"sum(lost_gpu_s), sum(checkpoint_gpu_s) FROM job_losses{where} GROUP BY tenant ORDER BY tenant",
            params,
        )
        return {
            t: LossTotals(int(i), int(e), int(c), float(lost) / 3600.0, float(ck) / 3600.0)
            for t, i, e, c, lost, ck in rows
        }
