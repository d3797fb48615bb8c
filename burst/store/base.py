"""The store's plumbing: opening a SQLite file or a PostgreSQL database, migrating it, transactions, backups.

`StoreBase` is what every part of the store (`burst.store`'s mixins) builds
on; `burst.state.Store` composes them.

Conventions
-----------
- Every public write runs in one ``BEGIN IMMEDIATE`` transaction: a call either
  lands entirely or not at all.
- The schema is versioned with ``PRAGMA user_version`` (PostgreSQL: the
  `burst_schema` table) and an ordered list of `MIGRATIONS`; opening a store
  applies the missing ones, each in its own transaction (re-checked under the
  write lock, an advisory lock on PostgreSQL, so two processes opening the
  same old store migrate it once).
- An existing file is checked before use (`burst.store_files`): an empty,
  truncated or corrupt one is refused with `DamagedStore` (one line: the
  file, the problem, the recovery), never silently replaced; files are kept
  0600, and `backup` copies the open store with SQLite's online backup API.
- One store holds one connection guarded by a lock: it may be shared across
  threads (one writer at a time). Other processes or stores on the
  same file read concurrently thanks to WAL; writers wait up to the busy
  timeout.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from burst import store_files, store_pg
from burst.model import Node
from burst.store.schema import LATEST_VERSION, MIGRATIONS, SchemaTooNew, SchemaTooOld
from burst.store.sql import _ts

__all__ = ["MissingStore", "StoreBase"]


class MissingStore(FileNotFoundError):
    """A read-only open found no state file (a read never creates one)."""


class StoreBase:
    """What every part of the store shares: the connection, its lock, transactions, the schema version, and the
    ledger rows an in-memory store holds back (its transactions put them back on a rollback)."""

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        target_version: int | None = None,
        busy_timeout_s: float = 10.0,
        read_only: bool = False,
        fresh: bool = False,
        older_schema: bool = False,
    ) -> None:
        self.path: str = os.fspath(path)
        if target_version is not None and not 0 <= target_version <= LATEST_VERSION:
            raise ValueError(f"target_version must be in 0..{LATEST_VERSION}, got {target_version}")
        self.postgres = store_pg.is_url(self.path)
        self.read_only = read_only
        self._older_schema = older_schema
        self._busy_timeout_s = busy_timeout_s
        on_disk = not self._is_memory(self.path) and not self.postgres
        existed = on_disk and os.path.exists(self.path)
        if on_disk:
            self._check_before_open(existed, fresh=fresh)
        self._lock = threading.RLock()
        self._node_cache: dict[str, Node] | None = None  # this process is the nodes table's only writer
        self._live_node_cache: dict[str, Node] = {}  # the cached nodes not terminated
        self._depth = 0
        # A private in-memory store has nothing to make durable: its ledger rows wait here (validated) and are
        # written in one statement when the ledger is next read or PENDING_COSTS_MAX of them wait, instead of
        # one indexed insert per tick (the simulator records a tick's costs far more often than it reads them).
        # Only ":memory:" and "" are private to this connection; `_is_memory` also admits "file::memory:" names.
        self._pending_costs: list[tuple[str, str | None, str, str | None, float, float]] | None = (
            [] if self.path in ("", ":memory:") else None
        )
        self._pending_mark = 0  # pending rows before the open transaction: a rollback drops the ones after
        # Earlier ticks' rows written inside the open transaction: a rollback puts them back to wait.
        self._pending_written: list[tuple[str, str | None, str, str | None, float, float]] = []
        # The last recorded plan's holds, (subject, reason, data JSON) -> row id: the same hold in the next plan
        # extends that row instead of adding one. Empty after a restart, so a restart's first plan starts new rows.
        self._open_holds: dict[tuple[str, str, str], int] = {}
        target = LATEST_VERSION if target_version is None else target_version
        if self.postgres:
            self._conn: Any = store_pg.PgConnection(self.path, connect_timeout_s=busy_timeout_s)
            try:
                self._check_version() if read_only else self._migrate(target)
            except BaseException:
                self._conn.close()
                self._conn = None
                raise
            return
        self._conn = self._connect(busy_timeout_s, on_disk=on_disk)
        try:
            self._prepare(existed, on_disk=on_disk, target=target)
        except BaseException:
            self._conn.close()
            self._conn = None
            raise

    def _check_before_open(self, existed: bool, *, fresh: bool) -> None:
        """Refuse, before SQLite touches anything, a file that is not a store, a store a read-only open would
        create, and a new file where an earlier one's log or backups are left (unless `fresh`)."""
        path = Path(self.path)
        if existed:
            store_files.check_file(path)
            return
        if not fresh:
            store_files.check_missing(path)
        if self.read_only:
            raise MissingStore(f"{path}: no state file here (`burst run` creates it)")
        path.parent.mkdir(parents=True, exist_ok=True)

    def _connect(self, busy_timeout_s: float, *, on_disk: bool) -> sqlite3.Connection:
        """The SQLite connection: a read-only one never creates, checkpoints or deletes the file or its log."""
        path = Path(self.path)
        if on_disk and self.read_only:
            quiet = not path.with_name(path.name + "-wal").exists()  # no log: no process has the file open
            return sqlite3.connect(store_files.read_only_uri(path, immutable=quiet), uri=True, timeout=busy_timeout_s,
                                   isolation_level=None, check_same_thread=False)
        return sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)

    def _prepare(self, existed: bool, *, on_disk: bool, target: int) -> None:
        """Check an existing file, switch to WAL and migrate (a writable store), or check the schema (read-only)."""
        path = Path(self.path)
        if on_disk and not self.read_only:
            store_files.make_private(path)  # before anything is written; -wal and -shm follow it
        self._conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
        if existed:
            store_files.check_open(self._conn, path)
        if self.read_only:
            self._check_version()
            return
        try:
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._migrate(target)
        except sqlite3.DatabaseError as exc:
            if not existed or isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise
            raise store_files.damaged(path, f"is corrupt ({exc})") from None
        if existed:
            store_files.check_writable(self._conn, path)

    def _check_version(self) -> None:
        """A read-only store is read at this burst's schema: refuse an older or newer one (nothing is migrated);
        an `older_schema` open admits an older one, to report its version and what would migrate it."""
        current = self.schema_version
        if current > LATEST_VERSION:
            raise SchemaTooNew(f"{store_pg.shown(self.path)}: schema version {current} is newer than this burst "
                               f"supports ({LATEST_VERSION}); upgrade burst")
        if current == 0 and self.postgres:
            raise MissingStore(f"{store_pg.shown(self.path)}: no burst state in this database (`burst run` creates it)")
        if current < LATEST_VERSION and not self._older_schema:
            raise SchemaTooOld(f"{store_pg.shown(self.path)}: schema version {current} predates this burst's "
                               f"({LATEST_VERSION}); `burst run` or `burst db upgrade` upgrades it (read-only commands "
                               "never write)")

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, target_version: int | None = None, read_only: bool = False,
             fresh: bool = False, older_schema: bool = False) -> Self:
        """Open `path`, creating it and applying any missing migrations (up to `target_version`); `read_only`
        opens an existing store for reading and writes nothing; `fresh` lets a new file start beside an old
        one's backups (`burst run --fresh`). `older_schema` (read-only) admits a schema older than this burst's
        instead of refusing it: only its `schema_version` is to be read then (`burst db status`)."""
        if older_schema and not read_only:
            raise ValueError("older_schema applies to a read-only open (a writer migrates)")
        return cls(path, target_version=target_version, read_only=read_only, fresh=fresh, older_schema=older_schema)

    def backup(self, now: datetime, *, keep: int = store_files.DEFAULT_BACKUP_KEEP) -> Path:
        """Copy this store online (SQLite's backup API) to `<state>.backups/`, keeping the newest `keep` copies;
        the new copy's path (see `burst.store_files.backup`)."""
        if self._is_memory(self.path):
            raise ValueError("an in-memory store has no file to back up")
        if self.postgres:
            raise ValueError("a PostgreSQL store is backed up by the server (pg_dump, base backups), not by burst")
        with self._lock:
            return store_files.backup(self._c(), Path(self.path), now, keep=keep)

    @staticmethod
    def _is_memory(path: str) -> bool:
        return path == ":memory:" or path == "" or path.startswith("file::memory:")

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @property
    def closed(self) -> bool:
        """Whether `close` was called (a closed store refuses every read and write)."""
        return self._conn is None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({store_pg.redact(self.path) if self.postgres else self.path!r})"

    # ---------------------------------------------------------------- plumbing

    def _c(self) -> Any:
        """The open connection: a `sqlite3.Connection`, or a `burst.store_pg.PgConnection` speaking the same calls."""
        if self._conn is None:
            raise sqlite3.ProgrammingError(f"store {self!r} is closed")
        return self._conn

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group several writes into one transaction: all of them land, or (on an exception) none."""
        with self._tx():
            yield

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        """One write transaction (BEGIN IMMEDIATE); nested use joins the outer one."""
        with self._lock:
            conn = self._c()
            if self._depth:
                self._depth += 1
                try:
                    yield conn
                finally:
                    self._depth -= 1
                return
            conn.execute("BEGIN IMMEDIATE")
            self._depth = 1
            pending = self._pending_costs
            if pending is not None:
                self._pending_mark = len(pending)
                self._pending_written = []
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                self._node_cache = None  # re-read after a rollback
                if pending is not None:
                    pending[:] = self._pending_written + pending[:self._pending_mark]
                raise
            else:
                conn.execute("COMMIT")
            finally:
                self._depth = 0

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            return list(self._c().execute(sql, params).fetchall())

    @property
    def schema_version(self) -> int:
        """The store's schema version (``PRAGMA user_version`` on SQLite, the `burst_schema` table on PostgreSQL)."""
        with self._lock:
            return self._version(self._c())

    def _version(self, conn: Any) -> int:
        if not self.postgres:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
        table = store_pg.SCHEMA_TABLE
        if conn.execute("SELECT to_regclass(?)", (table,)).fetchone()[0] is None:
            return 0
        row = conn.execute(f"SELECT version FROM {table}").fetchone()
        return int(row[0]) if row else 0

    def _set_version(self, conn: Any, version: int) -> None:
        if not self.postgres:
            conn.execute(f"PRAGMA user_version = {int(version)}")
            return
        table = store_pg.SCHEMA_TABLE
        conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (version INTEGER NOT NULL)")
        if conn.execute(f"UPDATE {table} SET version = ?", (version,)).rowcount == 0:
            conn.execute(f"INSERT INTO {table} (version) VALUES (?)", (version,))

    @property
    def journal_mode(self) -> str:
        """SQLite's journal mode (``wal``); ``postgresql`` for a server store."""
        if self.postgres:
            return "postgresql"
        return str(self._query("PRAGMA journal_mode")[0][0])

    def _migrate(self, target: int) -> None:
        current = self.schema_version
        if current > LATEST_VERSION:
            raise SchemaTooNew(
                f"{store_pg.shown(self.path)}: schema version {current} is newer than this burst supports "
                f"({LATEST_VERSION}); upgrade burst"
            )
        for migration in MIGRATIONS:
            if migration.version <= current or migration.version > target:
                continue
            with self._tx() as conn:
                if self.postgres:  # the write lock SQLite's BEGIN IMMEDIATE takes, held to the commit
                    conn.execute("SELECT pg_advisory_xact_lock(?)", (store_pg.MIGRATION_LOCK,))
                # Re-read under the write lock: another opener may have migrated meanwhile.
                if self._version(conn) >= migration.version:
                    continue
                for statement in migration.statements:
                    conn.execute(store_pg.pg_ddl(statement) if self.postgres else statement)
                self._set_version(conn, migration.version)

    # ---------------------------------------------------------------- held-back ledger rows

    def _insert_costs(self, values: Sequence[tuple[str, str | None, str, str | None, float, float]]) -> None:
        with self._tx() as conn:
            conn.executemany(
                "INSERT INTO cost_ledger (at, tenant, line, group_id, usd, gpu_hours) VALUES (?, ?, ?, ?, ?, ?)",
                values,
            )

    def _write_pending_costs(self) -> None:
        """Write the ledger rows an in-memory store holds back (call with the lock held)."""
        pending = self._pending_costs
        if pending:
            if self._depth:  # inside an open transaction: a rollback takes back the earlier ticks' rows too
                self._pending_written += pending[:self._pending_mark]
            self._insert_costs(pending)
            pending.clear()
            self._pending_mark = 0

    # ---------------------------------------------------------------- misc

    @staticmethod
    def _stamp(at: datetime | None) -> str:
        return _ts(at if at is not None else datetime.now(UTC), "at")
