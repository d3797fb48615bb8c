"""Leader election: a lease with expiry and a fencing epoch, so only one daemon acts on a cluster.

`LeaderLease` is the interface; `StoreLease` keeps the lease as a row of the
state store: a SQLite file (one host, several daemons on the same file) or a
PostgreSQL database (replicas on several hosts sharing one database); the
Kubernetes Lease object implements the same interface for clusters.

Each daemon calls `acquire(now)` once per tick. The holder renews its lease;
another daemon takes it over only after it expired, and every takeover
increments the **epoch**. The actuator calls `check(epoch, now)` before each
journal write and provider call: a daemon whose lease was taken over (it
stalled past its lease, then woke up) gets `Deposed` and its late writes
never happen. Clocks are injected, so failover is tested with a fake clock.

Daemons on a simulated clock each run their own clock, so a lease judged by
the time each passes in means nothing between them: `WallClockLease` judges
it on the wall clock they share instead (the runtime wraps every lease in it
on a sim clock).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from burst import store_pg

DEFAULT_LEASE_S = 30.0
"""How long a lease lasts without renewal; a standby takes over within this after the leader stops."""


class Deposed(RuntimeError):
    """This daemon's lease is gone (expired, or taken over with a newer epoch): it must not act."""


@dataclass(frozen=True)
class LeaseState:
    """Who holds the lease, until when, in which epoch."""

    holder: str
    epoch: int
    expires_at: datetime


class LeaderLease(Protocol):
    """What the daemon needs of a lease (SQLite here; a Kubernetes Lease in clusters)."""

    holder: str

    def acquire(self, now: datetime) -> int | None:
        """Take or renew the lease for `holder`: its epoch if this daemon leads now, else None."""
        ...

    def check(self, epoch: int, now: datetime) -> None:
        """Raise `Deposed` unless `holder` still holds the lease in `epoch` at `now`."""
        ...

    def release(self) -> None:
        """Give the lease up now (a clean stop), so a standby takes over at once."""
        ...

    def current(self) -> LeaseState | None:
        """The lease as stored (None if nobody ever held it)."""
        ...


class WallClockLease:
    """A lease judged on one clock every daemon shares (the wall clock), whatever time a daemon passes in.

    For daemons on simulated clocks: each advances its own, so judging the
    lease by them would let a daemon whose clock ran ahead take over from a
    live leader. The lease's expiry, takeovers and fencing all use `clock`.
    """

    def __init__(self, lease: LeaderLease, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.lease = lease
        self.holder = lease.holder
        self.clock = clock

    def acquire(self, now: datetime) -> int | None:
        """Take or renew the lease, judged at the shared clock's time (`now` is the daemon's own)."""
        return self.lease.acquire(self.clock())

    def check(self, epoch: int, now: datetime) -> None:
        """Raise `Deposed` unless the lease is still held in `epoch` at the shared clock's time."""
        self.lease.check(epoch, self.clock())

    def release(self) -> None:
        """Give the lease up now."""
        self.lease.release()

    def current(self) -> LeaseState | None:
        """The lease as stored."""
        return self.lease.current()


LEASE_LOCK = 0x6C65617365
"""The PostgreSQL advisory lock key a lease transaction holds ("lease" in hex): takeovers are serialised as
SQLite's BEGIN IMMEDIATE serialises them."""


class StoreLease:
    """A lease row in the state store, taken and renewed in serialised transactions (see the module docstring).

    `location` is the store's: a SQLite file path, or a ``postgresql://`` URL
    (every replica's lease judged in one database, each on its own connection).
    """

    def __init__(
        self, location: Path | str, holder: str, *, name: str = "controller", duration_s: float = DEFAULT_LEASE_S
    ) -> None:
        self.path = location
        self.holder = holder
        self.name = name
        self.duration = timedelta(seconds=duration_s)
        self._lock = threading.Lock()
        self._postgres = store_pg.is_url(location)
        self._conn: Any
        if self._postgres:
            self._conn = store_pg.PgConnection(str(location))
            text = 'TEXT COLLATE "C"'
        else:
            self._conn = sqlite3.connect(location, timeout=10.0, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA busy_timeout = 10000")
            text = "TEXT"
        self._conn.execute("BEGIN IMMEDIATE")  # replicas starting together create the table once
        try:
            if self._postgres:
                self._conn.execute("SELECT pg_advisory_xact_lock(?)", (LEASE_LOCK,))
            self._conn.execute(
                f"CREATE TABLE IF NOT EXISTS leases (name {text} PRIMARY KEY, holder {text} NOT NULL, "
                f"epoch INTEGER NOT NULL, expires_at {text} NOT NULL)"
            )
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def _read(self) -> LeaseState | None:
        row = self._conn.execute("SELECT holder, epoch, expires_at FROM leases WHERE name = ?", (self.name,)).fetchone()
        return None if row is None else LeaseState(row[0], int(row[1]), datetime.fromisoformat(row[2]))

    def current(self) -> LeaseState | None:
        with self._lock:
            return self._read()

    def acquire(self, now: datetime) -> int | None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                if self._postgres:
                    self._conn.execute("SELECT pg_advisory_xact_lock(?)", (LEASE_LOCK,))
                state = self._read()
                if state is not None and state.holder != self.holder and state.expires_at > now:
                    self._conn.execute("COMMIT")
                    return None
                renew = state is not None and state.holder == self.holder and state.expires_at > now
                epoch = state.epoch if renew and state is not None else (state.epoch + 1 if state else 1)
                self._conn.execute(
                    "INSERT INTO leases (name, holder, epoch, expires_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, epoch = excluded.epoch, "
                    "expires_at = excluded.expires_at",
                    (self.name, self.holder, epoch, (now + self.duration).isoformat()),
                )
                self._conn.execute("COMMIT")
                return epoch
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def check(self, epoch: int, now: datetime) -> None:
        state = self.current()
        if state is None or state.holder != self.holder or state.epoch != epoch:
            who = "nobody" if state is None else f"{state.holder} (epoch {state.epoch})"
            raise Deposed(f"{self.holder} lost the lease of epoch {epoch}: it is held by {who}")
        if state.expires_at <= now:
            raise Deposed(f"{self.holder}'s lease of epoch {epoch} expired at {state.expires_at.isoformat()}")

    def release(self) -> None:
        with self._lock:
            self._conn.execute(
                "UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ?",
                (datetime.min.replace(tzinfo=None).isoformat() + "+00:00", self.name, self.holder),
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()


SqliteLease = StoreLease
"""The name `StoreLease` had when the store was SQLite only."""
