"""Service events declared through the API: a tenant's windows of unusual demand for one of its services (a
promotion, a launch), kept beside the events its policy file declares and read by the service loop each tick."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from burst.model import ServiceEvent
from burst.store.base import StoreBase
from burst.store.sql import _dt, _finite, _ts, _where

__all__ = ["ServiceEventRecords", "StoredServiceEvent"]


@dataclass(frozen=True)
class StoredServiceEvent:
    """One stored event: its id (the API's handle on it), whose service it is, the event, and when it was stored."""

    id: int
    tenant: str
    service: str
    event: ServiceEvent
    created_at: datetime

    def to_json(self) -> dict[str, Any]:
        """The event as the API answers it."""
        e = self.event
        return {"id": self.id, "tenant": self.tenant, "service": self.service, "name": e.name,
                "start": e.start.isoformat(), "end": e.end.isoformat(), "multiplier": e.multiplier,
                "created_at": self.created_at.isoformat()}


_COLUMNS = "id, tenant, service, name, start_at, end_at, multiplier, created_at"


def _stored(row: Sequence[Any]) -> StoredServiceEvent:
    i, tenant, service, name, start, end, multiplier, created = row
    event = ServiceEvent(start=_dt(start), end=_dt(end), multiplier=None if multiplier is None else float(multiplier),
                         name=name)
    return StoredServiceEvent(int(i), str(tenant), str(service), event, _dt(created))


class ServiceEventRecords(StoreBase):
    """The service_events table: add, read, count and delete a tenant's declared service events, and prune those
    retention no longer keeps."""

    def add_service_event(self, tenant: str, service: str, event: ServiceEvent, *,
                          at: datetime | None = None) -> StoredServiceEvent:
        """Store `event` for `tenant`'s `service` (stamped `at`, default now); the stored event with its new id."""
        stamp = self._stamp(at)
        multiplier = None if event.multiplier is None else _finite(event.multiplier, "multiplier")
        with self._tx() as conn:
            new_id = conn.execute(
                "INSERT INTO service_events (tenant, service, name, start_at, end_at, multiplier, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (tenant, service, event.name, _ts(event.start, "start"), _ts(event.end, "end"), multiplier, stamp),
            ).fetchone()[0]
        return StoredServiceEvent(int(new_id), tenant, service, event, _dt(stamp))

    def service_events(self, tenant: str, service: str | None = None, *,
                       ended_after: datetime | None = None) -> list[StoredServiceEvent]:
        """`tenant`'s stored events (of `service` only, when given; ending after `ended_after` only, when given),
        in start order."""
        where, params = ["tenant = ?"], [tenant]
        if service is not None:
            where.append("service = ?")
            params.append(service)
        if ended_after is not None:
            where.append("end_at > ?")
            params.append(_ts(ended_after, "ended_after"))
        rows = self._query(f"SELECT {_COLUMNS} FROM service_events{_where(where)} ORDER BY start_at, end_at, id",
                           params)
        return [_stored(row) for row in rows]

    def count_service_events(self, tenant: str, *, ended_after: datetime | None = None) -> int:
        """How many events `tenant` has stored across its services (ending after `ended_after` only, when given)."""
        where, params = ["tenant = ?"], [tenant]
        if ended_after is not None:
            where.append("end_at > ?")
            params.append(_ts(ended_after, "ended_after"))
        return int(self._query(f"SELECT count(*) FROM service_events{_where(where)}", params)[0][0])

    def prune_service_events(self, ended_before: datetime) -> int:
        """Delete every tenant's events that ended before `ended_before` (retention); how many went."""
        with self._tx() as conn:
            gone = conn.execute("DELETE FROM service_events WHERE end_at < ?",
                                (_ts(ended_before, "ended_before"),)).rowcount
        return int(gone)

    def delete_service_event(self, tenant: str, service: str, event_id: int) -> bool:
        """Delete event `event_id` if it is `tenant`'s `service`'s; whether it was (another's is left alone)."""
        with self._tx() as conn:
            gone = conn.execute("DELETE FROM service_events WHERE id = ? AND tenant = ? AND service = ?",
                                (int(event_id), tenant, service)).rowcount
        return bool(gone)
