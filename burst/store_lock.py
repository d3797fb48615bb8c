"""One writer per store: the lock a daemon holds on its state store while it runs without leader election.

Two daemons acting on one store both scale, evict and requeue: against a real
cloud, double scaling. So `burst run` takes the store's writer lock before it
writes anything, and a second `burst run` on the same store is refused in one
line naming the holder (its host and PID). With leader election on, daemons
share a store on purpose (one leads, the others wait as standbys): each takes
the lock shared, so they run together, while a daemon without election (which
takes it exclusive) is refused beside them, and they beside it. Read-only commands (`burst jobs`, `explain`, `plan`,
`usage`, `cost`) and the API's submits never take it.

- A SQLite file: an exclusive `flock` on `<state>.lock` beside it, which the
  kernel releases when the process ends, however it ends (no stale lock after
  a `kill -9`). The file holds the holder's host, PID and start, for the
  refusal.
- A PostgreSQL database: a session-level advisory lock (`WRITER_LOCK`) held
  on a connection of its own, whose `application_name` names the holder; the
  server releases it when that session ends. A session lost to a failover is
  taken again by `check`, or, when another daemon took it meanwhile, this one
  learns it and stops.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from burst import store_pg

WRITER_LOCK = store_pg.MIGRATION_LOCK + 1
"""The PostgreSQL advisory lock key the writing daemon holds for its whole run."""

APPLICATION_PREFIX = "burst run "
"""The lock session's `application_name` starts with this, then the holder (`HOST:PID`)."""


class StoreHeld(RuntimeError):
    """Another daemon holds the store's writer lock: one line naming it and what to do."""


class WriterLock(Protocol):
    """A held writer lock."""

    holder: str

    def check(self) -> str | None:
        """Decide whether this daemon still holds the lock (taking it again if its session was lost): None if
        it does, else one line naming who holds it now."""
        ...

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        ...


def this_holder() -> str:
    """The name a daemon holds the lock by: `HOST:PID`."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _refusal(location: str, who: str, *, shared: bool) -> StoreHeld:
    if shared:  # this daemon elects a leader; the holder does not
        return StoreHeld(f"{location}: the state store is held by {who}, which runs without leader election; "
                         "stop it first, or turn leader election on in its burst.yaml too")
    return StoreHeld(f"{location}: the state store is held by {who}; stop that daemon first, or turn leader "
                     "election on (leader.enabled in burst.yaml) to run this one as its standby")


def lock_path(path: Path) -> Path:
    """The lock file of SQLite state file `path`: `<state>.lock` beside it."""
    return path.with_name(path.name + ".lock")


class FileWriterLock:
    """The writer lock of a SQLite state file: `flock` on `<state>.lock`, released when the process ends."""

    def __init__(self, path: Path, holder: str, *, shared: bool = False) -> None:
        self.holder = holder
        self.path = lock_path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise _refusal(str(path), _file_holder(self.path), shared=shared) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        host, _, pid = holder.rpartition(":")
        record = json.dumps({"host": host, "pid": pid, "since": datetime.now(UTC).isoformat(timespec="seconds"),
                             "leader_election": shared})
        os.ftruncate(fd, 0)
        os.pwrite(fd, record.encode() + b"\n", 0)

    def check(self) -> str | None:
        """A flock is never lost while this process lives: always held."""
        return None

    def release(self) -> None:
        """Unlock and close the lock file (it stays, empty of meaning, for the next holder)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _file_holder(path: Path) -> str:
    """Who the lock file at `path` says holds it: `burst run (PID p on host h, since t)`."""
    try:
        record = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        record = {}
    if not isinstance(record, dict) or "pid" not in record:
        return "another burst run (its lock file does not say which)"
    who = f"burst run (PID {record.get('pid')} on host {record.get('host')}, since {record.get('since')})"
    return f"daemons electing a leader (the latest to start: {who})" if record.get("leader_election") else who


class PgWriterLock:
    """The writer lock of a PostgreSQL store: a session advisory lock on a connection of its own."""

    def __init__(self, url: str, holder: str, *, shared: bool = False, connect_timeout_s: float = 10.0) -> None:
        self.url = url
        self.holder = holder
        self.shared = shared
        self.connect_timeout_s = connect_timeout_s
        self._conn: Any = None
        who = self._take()
        if who is not None:
            raise _refusal(store_pg.redact(url), who, shared=shared)

    def _take(self) -> str | None:
        """Connect and try the lock: None when taken, else who holds it."""
        psycopg = store_pg.import_psycopg(self.url)

        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, int(self.connect_timeout_s)),
                                   application_name=(APPLICATION_PREFIX + self.holder)[:63])
        except psycopg.OperationalError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise store_pg.StoreUnavailable(f"{store_pg.redact(self.url)}: cannot connect ({first})") from None
        taken = conn.execute(f"SELECT pg_try_advisory_lock{'_shared' if self.shared else ''}(%s)",
                             (WRITER_LOCK,)).fetchone()
        if taken is not None and taken[0]:
            self._conn = conn
            return None
        try:
            return _pg_holder(conn)
        finally:
            conn.close()

    def check(self) -> str | None:
        """Still held while the lock's session lives; a lost session (a failover) takes the lock again if it
        is free, else names who holds it now."""
        import psycopg

        if self._conn is not None and not self._conn.broken:
            try:
                self._conn.execute("SELECT 1")
                return None
            except psycopg.OperationalError:
                pass
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        try:
            return self._take()
        except store_pg.StoreUnavailable:
            return None  # the server is down: nobody else can take the lock either; the next tick retries

    def release(self) -> None:
        """End the lock's session (the server releases the lock with it)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _pg_holder(conn: Any) -> str:
    """Who holds the writer lock on the server `conn` reaches, from the holding session's application_name."""
    row = conn.execute(
        "SELECT a.application_name, a.client_addr, a.backend_start FROM pg_locks l JOIN pg_stat_activity a "
        "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s "
        "AND l.objsubid = 1", (WRITER_LOCK >> 32, WRITER_LOCK & 0xFFFFFFFF)).fetchone()
    if row is None:
        return "another burst run (it released the lock just now; try again)"
    name, addr, since = row
    if isinstance(name, str) and name.startswith(APPLICATION_PREFIX):
        host, _, pid = name[len(APPLICATION_PREFIX):].rpartition(":")
        return f"burst run (PID {pid} on host {host}, since {since:%Y-%m-%dT%H:%M:%S%z})"
    return f"another client ({name or 'unnamed'} from {addr or 'a local socket'})"


def hold_writer(location: Path | str, holder: str | None = None, *, shared: bool = False) -> WriterLock:
    """Take the writer lock of the store at `location` for `holder` (default: this process), `shared` among
    daemons that elect a leader; raise StoreHeld, naming the holder, when a daemon holds it in a way that
    excludes this one."""
    who = holder or this_holder()
    if store_pg.is_url(location):
        return PgWriterLock(str(location), who, shared=shared)
    return FileWriterLock(Path(location), who, shared=shared)


__all__ = ["WRITER_LOCK", "FileWriterLock", "PgWriterLock", "StoreHeld", "WriterLock", "hold_writer", "lock_path",
           "this_holder"]
