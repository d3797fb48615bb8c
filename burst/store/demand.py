"""Demand history: the GPUs each tenant ran and waited for, per GPU model and instant (the forecasters' input)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from burst.model import DemandPoint
from burst.store.base import StoreBase
from burst.store.sql import _dt, _finite, _ts, _where, _window

__all__ = ["DemandRecords"]


class DemandRecords(StoreBase):
    """The demand_history table: record, read and prune demand samples."""

    def record_demand(self, points: Iterable[DemandPoint]) -> int:
        """Store demand samples (a sample for the same tenant, model and instant replaces the old one)."""
        n = 0
        with self._tx() as conn:
            for p in points:
                conn.execute(
                    "INSERT INTO demand_history (at, tenant, gpu_model, running_gpus, pending_gpus) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, gpu_model, at) DO UPDATE SET "
                    "running_gpus = excluded.running_gpus, pending_gpus = excluded.pending_gpus",
                    (
                        _ts(p.at, "DemandPoint.at"),
                        p.tenant,
                        p.gpu_model,
                        _finite(p.running_gpus, "running_gpus"),
                        _finite(p.pending_gpus, "pending_gpus"),
                    ),
                )
                n += 1
        return n

    def demand_history(
        self,
        tenant: str | None = None,
        gpu_model: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[DemandPoint]:
        """Demand samples in ``[since, until)``, ordered by time, tenant, GPU model."""
        where, params = _window("at", since, until)
        if tenant is not None:
            where.append("tenant = ?")
            params.append(tenant)
        if gpu_model is not None:
            where.append("gpu_model = ?")
            params.append(gpu_model)
        rows = self._query(
            "SELECT at, tenant, gpu_model, running_gpus, pending_gpus FROM demand_history"
            f"{_where(where)} ORDER BY at, tenant, gpu_model",
            params,
        )
        return [DemandPoint(_dt(a), t, g, float(r), float(p)) for a, t, g, r, p in rows]

    def prune_demand(self, before: datetime) -> int:
        """Delete demand samples older than `before`; how many went."""
        with self._tx() as conn:
            return int(conn.execute("DELETE FROM demand_history WHERE at < ?", (_ts(before, "before"),)).rowcount)
