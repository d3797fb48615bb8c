"""The controller's store: one SQLite file in WAL mode, or a PostgreSQL database several replicas share.

`Store(location)` opens either: a path is a SQLite file, a ``postgresql://``
URL a server (`burst.store_pg` adapts the one SQL text this module writes).
Both backends pass one contract suite (tests/test_state.py).

What lives here: jobs (the embedded queue's truth), nodes as last observed,
the actuator's intent journal, group targets, demand history (forecasting
input), the cost ledger, the job-loss ledger (work lost to interruptions and
evictions, GPU time spent checkpointing), the decision log (``burst explain``),
the controller's cross-tick memory (`burst.memory`: cooldowns, interruption
notices, events read but not yet applied, completed jobs' run times, ...) and a
small key/value table whose entries are the `MetaKey` names.

Conventions
-----------
- Every public write runs in one ``BEGIN IMMEDIATE`` transaction: a call either
  lands entirely or not at all.
- Times are stored as fixed-width ISO 8601 UTC strings
  (``2026-03-02T12:00:00.000000+00:00``), which sort lexicographically in time
  order, and are returned as timezone-aware UTC datetimes. Naive datetimes are
  rejected with a ValueError naming the argument.
- Time windows are half-open: ``since <= at < until``.
- Model objects are stored as their `burst.codec` JSON, next to the columns
  that queries filter on (kept in sync by the store, never written apart).
- The schema is versioned with ``PRAGMA user_version`` (PostgreSQL: the
  `burst_schema` table) and an ordered list of `MIGRATIONS`; opening a store
  applies the missing ones, each in its own transaction (re-checked under the
  write lock, an advisory lock on PostgreSQL, so two processes opening the
  same old store migrate it once).
- An existing file is checked before use (`burst.store_files`): an empty,
  truncated or corrupt one is refused with `DamagedStore` (one line: the
  file, the problem, the recovery), never silently replaced; files are kept
  0600, and `backup` copies the open store with SQLite's online backup API.
- One `Store` holds one connection guarded by a lock: it may be shared across
  threads (one writer at a time). Other processes or `Store` objects on the
  same file read concurrently thanks to WAL; writers wait up to the busy
  timeout.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sqlite3
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum, unique
from pathlib import Path
from types import TracebackType
from typing import Any

from burst import codec, store_files, store_pg
from burst.model import JOB_TRANSITIONS, TERMINAL_JOB_STATES, DemandPoint, Job, JobState, Node, NodeState
from burst.store_files import DamagedStore

__all__ = [
    "COST_LINES",
    "INTENT_TRANSITIONS",
    "LATEST_VERSION",
    "LOSS_CAUSES",
    "MIGRATIONS",
    "CostEntry",
    "DamagedStore",
    "Decision",
    "GroupTarget",
    "Intent",
    "IntentStatus",
    "InvalidIntentTransition",
    "InvalidJobTransition",
    "JobExists",
    "JobLoss",
    "LossTotals",
    "MissingStore",
    "MetaKey",
    "Migration",
    "SchemaTooNew",
    "SchemaTooOld",
    "Store",
]


# ------------------------------------------------------------------ errors


class InvalidJobTransition(ValueError):
    """A stored job was asked to move along an edge `JOB_TRANSITIONS` does not have."""


class JobExists(ValueError):
    """`add_job` was given an id the store already has."""


class InvalidIntentTransition(ValueError):
    """An intent was asked to move backwards (or sideways) in its lifecycle."""


class SchemaTooNew(RuntimeError):
    """The file was written by a newer burst than this one."""


class SchemaTooOld(RuntimeError):
    """A read-only open found a schema older than this burst's (only a writer migrates it)."""


class MissingStore(FileNotFoundError):
    """A read-only open found no state file (a read never creates one)."""


# ------------------------------------------------------------------ records


@unique
class MetaKey(StrEnum):
    """The key/value table's entries: one name each, declared here and nowhere else.

    `Store.get_meta` and `Store.set_meta` refuse any other name, so two
    modules can never share an entry by spelling it alike. The controller's
    cross-tick memory has its own table (`Store.memory`), not entries here.
    """

    PLAN_SEQ = "plan.seq"
    """The number of the last plan made (plan ids count up from it across restarts)."""
    LAST_TICK = "reconcile.last_tick"
    """The instant of the controller's last recorded tick: costs are counted from it, and a simulated
    clock resumes from it (one fact, one entry: the quickstart's clock is the loop's last tick)."""
    GC_FIRST_SEEN = "gc.first_seen"
    """When each unknown tagged node was first seen (its grace period before garbage collection)."""
    FEED_CURSOR = "feed.synthetic.cursor"
    """The instant up to which a synthetic workload has submitted its jobs."""
    GROUP_GPU_MODELS = "node_groups.gpu_models"
    """{group id: GPU model} of every group a run on this state has had (`burst usage --state`)."""
    LEDGER_ROLLED_UP_UNTIL = "ledger.rolled_up_until"
    """The instant before which the cost ledger holds hourly rows only (`Store.roll_up_costs`)."""


class IntentStatus(StrEnum):
    """Where an actuator intent is: journaled, sent to the provider, and its outcome."""

    PLANNED = "planned"
    SENT = "sent"
    CONFIRMED = "confirmed"
    FAILED = "failed"


INTENT_TRANSITIONS: Mapping[IntentStatus, frozenset[IntentStatus]] = {
    IntentStatus.PLANNED: frozenset({IntentStatus.SENT, IntentStatus.FAILED}),
    IntentStatus.SENT: frozenset({IntentStatus.CONFIRMED, IntentStatus.FAILED}),
    IntentStatus.CONFIRMED: frozenset(),
    IntentStatus.FAILED: frozenset(),
}
"""Forward-only intent lifecycle: planned -> sent -> confirmed | failed, planned -> failed."""

_INTENT_PREDECESSORS: Mapping[IntentStatus, tuple[str, ...]] = {
    new: tuple(sorted(old.value for old, nexts in INTENT_TRANSITIONS.items() if new in nexts)) for new in IntentStatus
}
"""The statuses an intent may move to each status from (the guard of `Store.mark_intent`'s UPDATE)."""

UNCONFIRMED_INTENT_STATUSES = (IntentStatus.PLANNED, IntentStatus.SENT)

COST_LINES: tuple[str, ...] = ("steady", "elastic_on_demand", "elastic_spot", "hot_pool")
"""The cost ledger's lines (DESIGN.md's `cost_by_tier` keys)."""


@dataclass(frozen=True)
class Intent:
    """One entry of the actuator's journal."""

    id: int
    key: str
    plan_id: str
    action: Mapping[str, Any]
    status: IntentStatus
    detail: str
    created_at: datetime
    updated_at: datetime

    @property
    def unconfirmed(self) -> bool:
        return self.status in UNCONFIRMED_INTENT_STATUSES


@dataclass(frozen=True)
class GroupTarget:
    """The size last asked of a group, with the idempotency key of the asking action."""

    group_id: str
    size: int
    key: str
    updated_at: datetime


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


@dataclass(frozen=True)
class Decision:
    """One decision log row: what the planner did (or held back) about `subject`, and why.

    A hold repeated unchanged by consecutive plans is one row: `at` and
    `plan_id` are its first plan's, `last_at` its latest plan's instant and
    `seen` how many plans made it (an action is always one plan's: `seen` 1).
    """

    id: int
    at: datetime
    plan_id: str
    subject: str
    kind: str
    reason: str
    data: Mapping[str, Any]
    last_at: datetime | None = None
    seen: int = 1


# ------------------------------------------------------------------ schema


@dataclass(frozen=True)
class Migration:
    """One schema step: the statements that take the file from `version - 1` to `version`."""

    version: int
    description: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "base tables",
        (
            """CREATE TABLE meta (
                key TEXT PRIMARY KEY,
                value TEXT NOT NULL
            )""",
            """CREATE TABLE jobs (
                id TEXT PRIMARY KEY,
                tenant TEXT NOT NULL,
                state TEXT NOT NULL,
                submitted_at TEXT NOT NULL,
                json TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )""",
            "CREATE INDEX jobs_state ON jobs(state, submitted_at, id)",
            "CREATE INDEX jobs_tenant ON jobs(tenant, submitted_at, id)",
            """CREATE TABLE nodes (
                id TEXT PRIMARY KEY,
                group_id TEXT NOT NULL,
                state TEXT NOT NULL,
                json TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )""",
            "CREATE INDEX nodes_group ON nodes(group_id)",
            """CREATE TABLE intents (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                key TEXT NOT NULL,
                plan_id TEXT NOT NULL,
                action_json TEXT NOT NULL,
                status TEXT NOT NULL CHECK (status IN ('planned', 'sent', 'confirmed', 'failed')),
                detail TEXT NOT NULL DEFAULT '',
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )""",
            "CREATE INDEX intents_key ON intents(key)",
            """CREATE TABLE group_targets (
                group_id TEXT PRIMARY KEY,
                size INTEGER NOT NULL CHECK (size >= 0),
                key TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )""",
            """CREATE TABLE demand_history (
                at TEXT NOT NULL,
                tenant TEXT NOT NULL,
                gpu_model TEXT NOT NULL,
                running_gpus REAL NOT NULL,
                pending_gpus REAL NOT NULL,
                PRIMARY KEY (tenant, gpu_model, at)
            )""",
            "CREATE INDEX demand_at ON demand_history(at)",
            """CREATE TABLE cost_ledger (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                at TEXT NOT NULL,
                tenant TEXT,
                line TEXT NOT NULL
                    CHECK (line IN ('steady', 'elastic_on_demand', 'elastic_spot', 'hot_pool')),
                group_id TEXT,
                usd REAL NOT NULL
            )""",
            "CREATE INDEX cost_at ON cost_ledger(at)",
            """CREATE TABLE decisions (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                at TEXT NOT NULL,
                plan_id TEXT NOT NULL,
                subject TEXT NOT NULL,
                kind TEXT NOT NULL,
                reason TEXT NOT NULL,
                json TEXT NOT NULL
            )""",
            "CREATE INDEX decisions_subject ON decisions(subject, at)",
            "CREATE INDEX decisions_at ON decisions(at)",
        ),
    ),
    Migration(
        2,
        "cost ledger gpu_hours (metering); index intents by status (restart recovery)",
        (
            "ALTER TABLE cost_ledger ADD COLUMN gpu_hours REAL NOT NULL DEFAULT 0",
            "CREATE INDEX intents_status ON intents(status, id)",
            "CREATE INDEX cost_tenant ON cost_ledger(tenant, at)",
        ),
    ),
    Migration(
        3,
        "job-loss ledger (lost GPU-seconds per interruption and eviction, checkpoint GPU-seconds)",
        (
            """CREATE TABLE job_losses (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                at TEXT NOT NULL,
                job_id TEXT NOT NULL,
                tenant TEXT NOT NULL,
                cause TEXT NOT NULL CHECK (cause IN ('interruption', 'eviction', 'checkpoint')),
                gpus REAL NOT NULL CHECK (gpus >= 0),
                lost_gpu_s REAL NOT NULL DEFAULT 0 CHECK (lost_gpu_s >= 0),
                checkpoint_gpu_s REAL NOT NULL DEFAULT 0 CHECK (checkpoint_gpu_s >= 0),
                group_id TEXT,
                node_ids_json TEXT NOT NULL DEFAULT '[]'
            )""",
            "CREATE INDEX job_losses_tenant ON job_losses(tenant, at)",
            "CREATE INDEX job_losses_job ON job_losses(job_id, at)",
        ),
    ),
    Migration(
        4,
        "decision log: a hold repeated unchanged is one row with its last instant and how many plans made it",
        (
            "ALTER TABLE decisions ADD COLUMN last_at TEXT",
            "ALTER TABLE decisions ADD COLUMN seen INTEGER NOT NULL DEFAULT 1 CHECK (seen >= 1)",
        ),
    ),
    Migration(
        5,
        "the controller's cross-tick memory (cooldowns, notices, events read but not yet applied, ...) and "
        "completed jobs' run times; the learnt interruption rates move there from the key/value table",
        (
            """CREATE TABLE controller_memory (
                section TEXT PRIMARY KEY,
                json TEXT NOT NULL
            )""",
            """CREATE TABLE job_runtimes (
                tenant TEXT NOT NULL,
                seq INTEGER NOT NULL,
                seconds REAL NOT NULL,
                PRIMARY KEY (tenant, seq)
            ) WITHOUT ROWID""",
            "INSERT INTO controller_memory (section, json) SELECT 'interruptions', value FROM meta "
            "WHERE key = 'spot.interruptions'",
            "DELETE FROM meta WHERE key = 'spot.interruptions'",
        ),
    ),
    Migration(
        6,
        "API token hashes replicas share (SHA-256 of each token, never the token)",
        (
            """CREATE TABLE api_token_hashes (
                name TEXT PRIMARY KEY,
                sha256 TEXT NOT NULL CHECK (length(sha256) = 64)
            )""",
        ),
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version

if [m.version for m in MIGRATIONS] != list(range(1, len(MIGRATIONS) + 1)):  # pragma: no cover
    raise AssertionError("MIGRATIONS must be numbered 1..N in order")


# ------------------------------------------------------------------ time helpers


def _ts(value: datetime, name: str) -> str:
    """A datetime as the store's fixed-width UTC string; naive datetimes are refused."""
    if not isinstance(value, datetime):
        raise TypeError(f"{name}: expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name}: naive datetime {value.isoformat()} (times must be timezone-aware UTC)")
    return _utc_text(value)


@functools.lru_cache(maxsize=64)
def _utc_text(value: datetime) -> str:
    """`_ts`'s text of an aware datetime (equal instants give equal text; a tick stamps the same one often)."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def _dt(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _json(data: Any, name: str) -> str:
    try:
        return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not JSON-serialisable: {exc}") from exc


PENDING_COSTS_MAX = 10_000
"""Ledger rows an in-memory store holds back at most before writing them (see `Store.record_costs`)."""


def _finite(value: float, name: str) -> float:
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name}: must be finite, got {value!r}")
    return v


def _window(column: str, since: datetime | None, until: datetime | None) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    if since is not None:
        where.append(f"{column} >= ?")
        params.append(_ts(since, "since"))
    if until is not None:
        where.append(f"{column} < ?")
        params.append(_ts(until, "until"))
    return where, params


_DECISION_COLUMNS = "id, at, plan_id, subject, kind, reason, json, last_at, seen"


def _decision(row: Sequence[Any]) -> Decision:
    i, at, plan_id, subject, kind, reason, data, last_at, seen = row
    return Decision(int(i), _dt(at), plan_id, subject, kind, reason, json.loads(data),
                    _dt(last_at) if last_at is not None else None, int(seen))


def _where(clauses: Sequence[str]) -> str:
    return (" WHERE " + " AND ".join(clauses)) if clauses else ""


_IDS_PER_STATEMENT = 500
"""Ids one `IN (...)` list holds at most (SQLite's older builds allow 999 parameters a statement)."""
_ROWS_PER_INSERT = 150
"""Rows one multi-row INSERT writes at most (six parameters each, under the same limit)."""


def _placeholders(n: int) -> str:
    return ",".join("?" * n)


# ------------------------------------------------------------------ the store


class Store:
    """The SQLite store. ``Store(path)`` opens (creating and migrating) a file; ``":memory:"`` works too.

    `target_version` stops migrating at that schema version. It exists for
    tests and tooling (to build an old-schema file and exercise a migration);
    a store opened below `LATEST_VERSION` supports only what that schema has.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        target_version: int | None = None,
        busy_timeout_s: float = 10.0,
        read_only: bool = False,
        fresh: bool = False,
    ) -> None:
        self.path: str = os.fspath(path)
        if target_version is not None and not 0 <= target_version <= LATEST_VERSION:
            raise ValueError(f"target_version must be in 0..{LATEST_VERSION}, got {target_version}")
        self.postgres = store_pg.is_url(self.path)
        self.read_only = read_only
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
        """A read-only store is read at this burst's schema: refuse an older or newer one (nothing is migrated)."""
        current = self.schema_version
        if current > LATEST_VERSION:
            raise SchemaTooNew(f"{store_pg.shown(self.path)}: schema version {current} is newer than this burst "
                               f"supports ({LATEST_VERSION}); upgrade burst")
        if current < LATEST_VERSION:
            raise SchemaTooOld(f"{store_pg.shown(self.path)}: schema version {current} predates this burst's "
                               f"({LATEST_VERSION}); `burst run` upgrades it (read-only commands never write)")

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, target_version: int | None = None, read_only: bool = False,
             fresh: bool = False) -> Store:
        """Open `path`, creating it and applying any missing migrations (up to `target_version`); `read_only`
        opens an existing store for reading and writes nothing; `fresh` lets a new file start beside an old
        one's backups (`burst run --fresh`)."""
        return cls(path, target_version=target_version, read_only=read_only, fresh=fresh)

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
        return self._conn is None

    def __enter__(self) -> Store:
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
                f"{self.path}: schema version {current} is newer than this burst supports ({LATEST_VERSION}); "
                "upgrade burst"
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

    # ---------------------------------------------------------------- jobs

    def add_job(self, job: Job, *, at: datetime | None = None) -> None:
        """Insert a new job; raises `JobExists` if its id is taken."""
        stamp = self._stamp(at)
        with self._tx() as conn:
            if conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job.id,)).fetchone() is not None:
                raise JobExists(f"job {job.id} already exists")
            self._write_job(conn, job, stamp)

    def add_jobs(self, jobs: Sequence[Job], *, at: datetime | None = None) -> list[bool]:
        """Insert new jobs in one transaction: for each, True when stored, False when its id was taken (by an
        earlier job or an earlier one of `jobs`); a taken id never stops the others."""
        stamp = self._stamp(at)
        added: list[bool] = []
        with self._tx() as conn:
            ids = list(dict.fromkeys(j.id for j in jobs))
            taken: set[str] = set()
            for chunk in range(0, len(ids), 500):
                part = ids[chunk:chunk + 500]
                taken.update(r[0] for r in conn.execute(
                    f"SELECT id FROM jobs WHERE id IN ({_placeholders(len(part))})", part).fetchall())
            for job in jobs:
                fresh = job.id not in taken
                if fresh:
                    self._write_job(conn, job, stamp)
                    taken.add(job.id)
                added.append(fresh)
        return added

    def put_job(self, job: Job, *, at: datetime | None = None) -> None:
        """Insert or update a job; a state change must be an edge of `JOB_TRANSITIONS`."""
        self.put_jobs((job,), at=at)

    def put_jobs(self, jobs: Iterable[Job], *, at: datetime | None = None) -> None:
        """`put_job` for many jobs in one transaction (all or none; checked in order)."""
        stamp = self._stamp(at)
        with self._tx() as conn:
            for job in jobs:
                self._put_job(conn, job, stamp)

    def _put_job(self, conn: Any, job: Job, stamp: str) -> None:
        row = conn.execute("SELECT state FROM jobs WHERE id = ?", (job.id,)).fetchone()
        if row is not None:
            old = JobState(row[0])
            if job.state is not old and job.state not in JOB_TRANSITIONS[old]:
                raise InvalidJobTransition(f"job {job.id}: {old.value} -> {job.state.value} is not allowed")
        self._write_job(conn, job, stamp)

    @staticmethod
    def _write_job(conn: Any, job: Job, stamp: str) -> None:
        if not isinstance(job, Job):
            raise TypeError(f"expected a Job, got {type(job).__name__}")
        conn.execute(
            "INSERT INTO jobs (id, tenant, state, submitted_at, json, updated_at) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET tenant = excluded.tenant, state = excluded.state, "
            "submitted_at = excluded.submitted_at, json = excluded.json, updated_at = excluded.updated_at",
            (
                job.id,
                job.tenant,
                job.state.value,
                _ts(job.submitted_at, f"job {job.id} submitted_at"),
                codec.dumps(job),
                stamp,
            ),
        )

    def get_job(self, job_id: str) -> Job | None:
        rows = self._query("SELECT json FROM jobs WHERE id = ?", (job_id,))
        return codec.loads(Job, rows[0][0]) if rows else None

    def jobs(
        self,
        states: Iterable[JobState] | None = None,
        tenant: str | None = None,
        *,
        unreadable: list[tuple[str, str, str]] | None = None,
    ) -> list[Job]:
        """Jobs in any of `states` (all when None) for `tenant` (all when None), by submitted_at, id.

        A row whose record does not decode raises, unless `unreadable` is given: then it is left out and
        (job id, tenant, why) appended there.
        """
        where: list[str] = []
        params: list[Any] = []
        if states is not None:
            wanted = sorted({JobState(s).value for s in states})
            if not wanted:
                return []
            where.append(f"state IN ({_placeholders(len(wanted))})")
            params.extend(wanted)
        if tenant is not None:
            where.append("tenant = ?")
            params.append(tenant)
        if unreadable is None:
            rows = self._query(f"SELECT json FROM jobs{_where(where)} ORDER BY submitted_at, id", params)
            return [codec.loads(Job, r[0]) for r in rows]
        out: list[Job] = []
        for job_id, tenant_name, text in self._query(
            f"SELECT id, tenant, json FROM jobs{_where(where)} ORDER BY submitted_at, id", params
        ):
            try:
                out.append(codec.loads(Job, text))
            except (ValueError, TypeError, OverflowError) as exc:
                unreadable.append((job_id, tenant_name, f"its stored record does not decode: {str(exc)[:200]}"))
        return out

    def fail_unreadable_job(self, job_id: str, *, at: datetime) -> None:
        """Mark a job whose record does not decode as failed (its state column; the record is kept as it is)."""
        stamp = self._stamp(at)
        with self._tx() as conn:
            conn.execute("UPDATE jobs SET state = ?, updated_at = ? WHERE id = ?", (JobState.FAILED.value, stamp, job_id))

    def active_job_states(self) -> dict[str, JobState]:
        """Each pending or running job's state, by id (a cheap read: the daemon polls it between ticks)."""
        wanted = (JobState.PENDING.value, JobState.RUNNING.value, JobState.CHECKPOINTING.value)
        rows = self._query(f"SELECT id, state FROM jobs WHERE state IN ({_placeholders(len(wanted))})", wanted)
        return {str(jid): JobState(state) for jid, state in rows}

    def finish_times(self) -> list[datetime]:
        """When each running job with a known duration is due to finish (the daemon wakes then)."""
        running = self.jobs(states=[JobState.RUNNING, JobState.CHECKPOINTING])
        return [at for at in (job.finishes_at for job in running) if at is not None]

    def job_counts(self) -> dict[JobState, int]:
        """How many jobs are in each state (every state present, zero included)."""
        counts = dict.fromkeys(JobState, 0)
        for state, n in self._query("SELECT state, count(*) FROM jobs GROUP BY state"):
            counts[JobState(state)] = int(n)
        return counts

    def job_record(self, job_id: str) -> tuple[Job, str] | None:
        """The job and its version (the stored record's text, which `swap_job` compares), or None if there is none.

        Raises ValueError when the record does not decode.
        """
        rows = self._query("SELECT json FROM jobs WHERE id = ?", (job_id,))
        return (codec.loads(Job, rows[0][0]), str(rows[0][0])) if rows else None

    def swap_job(self, job: Job, *, version: str, at: datetime | None = None) -> bool:
        """Decide whether `job` replaces its stored row: only if the row still holds `version` (its record as
        `job_record` read it) and the state that record was read in (compare-and-set); whether it did.

        A write from a stale read (the row changed since) moves nothing and answers False, so the caller reads
        again. A state change must be an edge of `JOB_TRANSITIONS` (else `InvalidJobTransition`).
        """
        stamp = self._stamp(at)
        with self._tx() as conn:
            row = conn.execute("SELECT state FROM jobs WHERE id = ? AND json = ?", (job.id, version)).fetchone()
            if row is None:
                return False
            old = JobState(row[0])
            if job.state is not old and job.state not in JOB_TRANSITIONS[old]:
                raise InvalidJobTransition(f"job {job.id}: {old.value} -> {job.state.value} is not allowed")
            moved = conn.execute(
                "UPDATE jobs SET tenant = ?, state = ?, submitted_at = ?, json = ?, updated_at = ? "
                "WHERE id = ? AND state = ? AND json = ?",
                (job.tenant, job.state.value, _ts(job.submitted_at, f"job {job.id} submitted_at"), codec.dumps(job),
                 stamp, job.id, old.value, version),
            ).rowcount
            return bool(moved == 1)

    def tenant_backlog(self, tenant: str) -> tuple[int, int]:
        """How many of `tenant`'s jobs are not yet terminal, and how many bytes their stored records hold (the
        records are ASCII JSON, so their length is their size)."""
        wanted = sorted(s.value for s in JobState if s not in TERMINAL_JOB_STATES)
        rows = self._query(
            f"SELECT count(*), coalesce(sum(length(json)), 0) FROM jobs WHERE tenant = ? "
            f"AND state IN ({_placeholders(len(wanted))})", (tenant, *wanted),
        )
        return int(rows[0][0]), int(rows[0][1])

    def job_page(
        self,
        *,
        states: Iterable[JobState] | None = None,
        tenant: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int,
        max_bytes: int,
    ) -> tuple[list[tuple[str, str, str]], bool]:
        """Decide one page of a job listing: the rows (submitted_at, id, record) after the key `after` in
        (submitted_at, id) order, filtered as `jobs` filters; at most `limit` rows, fewer once their records pass
        `max_bytes` (one at least); and whether more rows follow. The rows stay undecoded: a record that does not
        decode is the caller's to skip, and its key still moves the page on."""
        where: list[str] = []
        params: list[Any] = []
        if states is not None:
            wanted = sorted({JobState(s).value for s in states})
            if not wanted:
                return [], False
            where.append(f"state IN ({_placeholders(len(wanted))})")
            params.extend(wanted)
        if tenant is not None:
            where.append("tenant = ?")
            params.append(tenant)
        if after is not None:
            where.append("(submitted_at > ? OR (submitted_at = ? AND id > ?))")
            params.extend((after[0], after[0], after[1]))
        sql = f"SELECT submitted_at, id, json FROM jobs{_where(where)} ORDER BY submitted_at, id LIMIT ?"
        rows: list[tuple[str, str, str]] = []
        size = 0
        with self._lock:
            cursor = self._c().execute(sql, (*params, limit + 1))
            try:
                while batch := cursor.fetchmany(64):  # a page of large records is never all in memory at once
                    for submitted_at, job_id, text in batch:
                        if len(rows) >= limit or (rows and size + len(text) > max_bytes):
                            return rows, True
                        rows.append((str(submitted_at), str(job_id), str(text)))
                        size += len(text)
            finally:
                cursor.close()
        return rows, False

    # ---------------------------------------------------------------- nodes

    def put_node(self, node: Node, *, at: datetime | None = None) -> None:
        """Insert or replace a node as last observed."""
        self.put_nodes((node,), at=at)

    def put_nodes(self, nodes: Iterable[Node], *, at: datetime | None = None) -> None:
        """Insert or replace nodes as last observed; a node equal to its stored row is not rewritten."""
        stamp = self._stamp(at)
        with self._lock:
            cache = self._nodes_by_id()
            changed: list[Node] = []
            for node in nodes:
                if not isinstance(node, Node):
                    raise TypeError(f"expected a Node, got {type(node).__name__}")
                cached = cache.get(node.id)
                if cached is not node and cached != node:
                    changed.append(node)
            if not changed:
                return
            with self._tx() as conn:
                for node in changed:
                    conn.execute(
                        "INSERT INTO nodes (id, group_id, state, json, updated_at) VALUES (?, ?, ?, ?, ?) "
                        "ON CONFLICT(id) DO UPDATE SET group_id = excluded.group_id, state = excluded.state, "
                        "json = excluded.json, updated_at = excluded.updated_at",
                        (node.id, node.group_id, node.state.value, codec.dumps(node), stamp),
                    )
            if self._node_cache is not None:
                self._cache_nodes(changed)

    def _nodes_by_id(self) -> dict[str, Node]:
        """Every stored node by id, read once and then kept in step with this store's writes."""
        if self._node_cache is None:
            rows = self._query("SELECT json FROM nodes ORDER BY id")
            self._node_cache = {}
            self._live_node_cache = {}
            self._cache_nodes(codec.loads(Node, r[0]) for r in rows)
        return self._node_cache

    def _cache_nodes(self, nodes: Iterable[Node]) -> None:
        assert self._node_cache is not None
        for node in nodes:
            self._node_cache[node.id] = node
            if node.state is NodeState.TERMINATED:
                self._live_node_cache.pop(node.id, None)
            else:
                self._live_node_cache[node.id] = node

    def node_ids(self) -> Collection[str]:
        """The ids of every stored node, terminated ones included (a read-only view)."""
        with self._lock:
            return self._nodes_by_id().keys()

    def live_nodes_by_id(self) -> dict[str, Node]:
        """The stored nodes not terminated, by id (a copy the caller may change)."""
        with self._lock:
            self._nodes_by_id()
            return dict(self._live_node_cache)

    def get_node(self, node_id: str) -> Node | None:
        with self._lock:
            return self._nodes_by_id().get(node_id)

    def nodes(self, include_terminated: bool = False, *, group_id: str | None = None) -> list[Node]:
        """Stored nodes by id; terminated ones only when asked."""
        with self._lock:
            every = self._nodes_by_id()
            found = every if include_terminated else self._live_node_cache
            return [found[i] for i in sorted(found) if group_id is None or found[i].group_id == group_id]

    def forget_node(self, node_id: str) -> bool:
        """Delete a node's row; whether there was one."""
        with self._tx() as conn:
            gone = bool(conn.execute("DELETE FROM nodes WHERE id = ?", (node_id,)).rowcount > 0)
        if self._node_cache is not None:
            self._node_cache.pop(node_id, None)
            self._live_node_cache.pop(node_id, None)
        return gone

    # ---------------------------------------------------------------- intents

    def record_intent(
        self,
        key: str,
        plan_id: str,
        action: Mapping[str, Any],
        at: datetime,
        *,
        status: IntentStatus = IntentStatus.PLANNED,
    ) -> int:
        """Journal an intent before it is carried out, `planned` (or `sent`, for an action applied in this
        process at once); returns its id."""
        return self.record_intents(((key, plan_id, action),), at, status=status)[0]

    def record_intents(
        self,
        intents: Sequence[tuple[str, str, Mapping[str, Any]]],
        at: datetime,
        *,
        status: IntentStatus = IntentStatus.PLANNED,
    ) -> list[int]:
        """Journal several intents (key, plan id, action) as `record_intent` does, in one transaction: all of
        them or none; returns their ids in order."""
        if status not in UNCONFIRMED_INTENT_STATUSES:
            raise InvalidIntentTransition(f"an intent is journaled planned or sent, not {status.value}")
        stamp = _ts(at, "at")
        value = IntentStatus(status).value
        rows = [(key, plan_id, _json(dict(action), "action"), value, stamp, stamp) for key, plan_id, action in intents]
        ids: list[int] = []
        with self._tx() as conn:
            for i in range(0, len(rows), _ROWS_PER_INSERT):
                chunk = rows[i:i + _ROWS_PER_INSERT]
                found = conn.execute(
                    "INSERT INTO intents (key, plan_id, action_json, status, detail, created_at, updated_at) VALUES "
                    + ",".join(["(?, ?, ?, ?, '', ?, ?)"] * len(chunk)) + " RETURNING id",
                    [value for row in chunk for value in row],
                ).fetchall()
                ids.extend(sorted(int(r[0]) for r in found))  # ids ascend in the VALUES' order; RETURNING's is unset
        return ids

    def mark_intent(self, intent_id: int, status: IntentStatus | str, at: datetime, detail: str = "") -> None:
        """Move an intent forward (see `INTENT_TRANSITIONS`); an empty `detail` keeps the previous one.

        One guarded UPDATE: it changes the row only from a status that may move
        to `status`. When it changes nothing, the row is read to say why:
        KeyError for an unknown id, `InvalidIntentTransition` for any other
        move (including re-marking the same status). `intent(id)` reads the result.
        """
        self.mark_intents((intent_id,), status, at, detail)

    def mark_intents(self, intent_ids: Sequence[int], status: IntentStatus | str, at: datetime, detail: str = "") -> None:
        """Move several intents forward as `mark_intent` does, in one transaction: all of them or (on the
        first that may not move, or is unknown) none. One guarded UPDATE per `_IDS_PER_STATEMENT` ids moves them;
        only when it moves fewer than asked are the others read, to say why (and the transaction rolls back)."""
        new = IntentStatus(status)
        before = _INTENT_PREDECESSORS[new]
        stamp = _ts(at, "at")
        ids = list(intent_ids)
        if len(set(ids)) != len(ids):
            raise InvalidIntentTransition(f"an intent is moved once per call: {sorted(i for i in set(ids) if ids.count(i) > 1)}")
        with self._tx() as conn:
            for chunk in (ids[i:i + _IDS_PER_STATEMENT] for i in range(0, len(ids), _IDS_PER_STATEMENT)):
                moved = conn.execute(
                    "UPDATE intents SET status = ?, updated_at = ?, detail = CASE WHEN ? = '' THEN detail ELSE ? END "
                    f"WHERE id IN ({_placeholders(len(chunk))}) AND status IN ({_placeholders(len(before))}) "
                    "RETURNING id",
                    (new.value, stamp, detail, detail, *chunk, *before),
                ).fetchall() if before else []
                if len(moved) == len(chunk):
                    continue
                done = {int(r[0]) for r in moved}
                first = next(i for i in chunk if i not in done)
                row = conn.execute("SELECT status FROM intents WHERE id = ?", (first,)).fetchone()
                if row is None:
                    raise KeyError(f"intent {first} not found")
                raise InvalidIntentTransition(f"intent {first}: {IntentStatus(row[0]).value} -> {new.value} is not allowed")

    _INTENT_SELECT = (
        "SELECT id, key, plan_id, action_json, status, detail, created_at, updated_at FROM intents"
    )

    @staticmethod
    def _intent_rows(rows: Iterable[Any]) -> list[Intent]:
        return [
            Intent(
                id=int(r[0]),
                key=r[1],
                plan_id=r[2],
                action=json.loads(r[3]),
                status=IntentStatus(r[4]),
                detail=r[5],
                created_at=_dt(r[6]),
                updated_at=_dt(r[7]),
            )
            for r in rows
        ]

    def intent(self, intent_id: int) -> Intent | None:
        found = self._intent_rows(self._query(f"{self._INTENT_SELECT} WHERE id = ?", (intent_id,)))
        return found[0] if found else None

    def unconfirmed_intents(self) -> list[Intent]:
        """Intents planned or sent but without an outcome, oldest first (what a restart must resolve)."""
        statuses = [s.value for s in UNCONFIRMED_INTENT_STATUSES]
        return self._intent_rows(
            self._query(
                f"{self._INTENT_SELECT} WHERE status IN ({_placeholders(len(statuses))}) ORDER BY created_at, id",
                statuses,
            )
        )

    def intents(self, key: str | None = None, limit: int | None = None) -> list[Intent]:
        """Journal entries (for one idempotency key, when given), newest first."""
        where: list[str] = []
        params: list[Any] = []
        if key is not None:
            where.append("key = ?")
            params.append(key)
        sql = f"{self._INTENT_SELECT}{_where(where)} ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return self._intent_rows(self._query(sql, params))

    # ---------------------------------------------------------------- targets

    def set_target(self, group_id: str, size: int, key: str, at: datetime) -> None:
        """Record the absolute size asked of a group (and the key of the action that asked)."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"target size for {group_id} must be an integer >= 0, got {size!r}")
        stamp = _ts(at, "at")
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO group_targets (group_id, size, key, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(group_id) DO UPDATE SET size = excluded.size, key = excluded.key, "
                "updated_at = excluded.updated_at",
                (group_id, size, key, stamp),
            )

    def targets(self) -> dict[str, int]:
        return {
            g: int(s) for g, s in self._query("SELECT group_id, size FROM group_targets ORDER BY group_id")
        }

    def target_records(self) -> dict[str, GroupTarget]:
        rows = self._query("SELECT group_id, size, key, updated_at FROM group_targets ORDER BY group_id")
        return {g: GroupTarget(g, int(s), k, _dt(u)) for g, s, k, u in rows}

    def forget_target(self, group_id: str) -> bool:
        with self._tx() as conn:
            return bool(conn.execute("DELETE FROM group_targets WHERE group_id = ?", (group_id,)).rowcount > 0)

    # ---------------------------------------------------------------- demand history

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
                  "decisions", "api_token_hashes", "meta")
        with self._lock:
            self._write_pending_costs()
            return {t: int(self._query(f"SELECT count(*) FROM {t}")[0][0]) for t in tables}

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

    # ---------------------------------------------------------------- meta

    def get_meta(self, key: MetaKey, default: str | None = None) -> str | None:
        """The value of a `MetaKey` entry (`default` when unset); any other name is a ValueError."""
        rows = self._query("SELECT value FROM meta WHERE key = ?", (MetaKey(key).value,))
        return str(rows[0][0]) if rows else default

    def set_meta(self, key: MetaKey, value: str) -> None:
        """Set a `MetaKey` entry; any other name is a ValueError."""
        name = MetaKey(key).value
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (name, str(value)),
            )

    # ---------------------------------------------------------------- controller memory

    def memory(self) -> dict[str, str]:
        """The controller's cross-tick memory as last written: {section: JSON text} (`burst.memory` owns both)."""
        return {str(k): str(v) for k, v in self._query("SELECT section, json FROM controller_memory")}

    def put_memory(self, sections: Mapping[str, str]) -> None:
        """Replace these sections of the controller's memory (JSON text each), all in one transaction."""
        if not sections:
            return
        for name, text in sections.items():
            if not isinstance(text, str):
                raise TypeError(f"memory section {name}: expected JSON text, got {type(text).__name__}")
        with self._tx() as conn:
            conn.executemany(
                "INSERT INTO controller_memory (section, json) VALUES (?, ?) "
                "ON CONFLICT(section) DO UPDATE SET json = excluded.json",
                sorted(sections.items()),
            )

    def record_runtimes(self, rows: Iterable[tuple[str, int, float]], *, keep: int) -> int:
        """Append completed jobs' run times as (tenant, seq, seconds), seq counting up per tenant; each tenant
        named keeps only its newest `keep`. How many rows were added (none if any is invalid)."""
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        values = [(str(t), int(seq), _finite(sec, f"run time of tenant {t}")) for t, seq, sec in rows]
        if not values:
            return 0
        newest: dict[str, int] = {}
        for tenant, seq, _ in values:
            newest[tenant] = max(seq, newest.get(tenant, seq))
        with self._tx() as conn:
            conn.executemany("INSERT INTO job_runtimes (tenant, seq, seconds) VALUES (?, ?, ?) "
                             "ON CONFLICT (tenant, seq) DO UPDATE SET seconds = excluded.seconds", values)
            conn.executemany("DELETE FROM job_runtimes WHERE tenant = ? AND seq <= ?",
                             [(t, seq - keep) for t, seq in newest.items() if seq > keep])
        return len(values)

    def runtimes(self) -> dict[str, list[tuple[int, float]]]:
        """Each tenant's recorded run times as (seq, seconds), oldest first."""
        out: dict[str, list[tuple[int, float]]] = {}
        for tenant, seq, seconds in self._query("SELECT tenant, seq, seconds FROM job_runtimes ORDER BY tenant, seq"):
            out.setdefault(str(tenant), []).append((int(seq), float(seconds)))
        return out

    # ---------------------------------------------------------------- API token hashes

    def token_hashes(self) -> dict[str, str]:
        """The API token hashes replicas share: {token name (``admin``, ``tenant-<name>``): hex SHA-256}."""
        return {str(n): str(h) for n, h in self._query("SELECT name, sha256 FROM api_token_hashes ORDER BY name")}

    def put_token_hash(self, name: str, sha256: str) -> None:
        """Set token `name`'s hash (a token file, the operator's truth, replaces whatever was shared)."""
        with self._tx() as conn:
            conn.execute("INSERT INTO api_token_hashes (name, sha256) VALUES (?, ?) "
                         "ON CONFLICT(name) DO UPDATE SET sha256 = excluded.sha256", (name, sha256))

    def claim_token_hash(self, name: str, sha256: str) -> str:
        """Share `sha256` as token `name`'s hash unless one is shared already; the hash shared now (the first
        claim wins)."""
        with self._tx() as conn:
            conn.execute("INSERT INTO api_token_hashes (name, sha256) VALUES (?, ?) ON CONFLICT(name) DO NOTHING",
                         (name, sha256))
            return str(conn.execute("SELECT sha256 FROM api_token_hashes WHERE name = ?", (name,)).fetchone()[0])

    # ---------------------------------------------------------------- decision log

    def record_decisions(
        self, plan_id: str, at: datetime, rows: Iterable[tuple[str, str, str, Mapping[str, Any]]]
    ) -> int:
        """Record one plan's (subject, kind, reason, data) decisions; how many rows were added.

        Every plan is recorded, even one with no rows: a hold the previous
        plan made with the same subject, reason and data extends that plan's
        row (its `last_at` and `seen`) rather than adding one; a hold that
        stops, even for one plan, starts a new row when it comes back.
        """
        stamp = _ts(at, "at")
        n = 0
        still_open: dict[tuple[str, str, str], int] = {}
        with self._tx() as conn:
            for subject, kind, reason, data in rows:
                text = _json(dict(data), f"decision {subject}")
                key = (subject, reason, text)
                if kind == "hold" and key in self._open_holds:
                    row_id = self._open_holds[key]
                    extended = conn.execute(
                        "UPDATE decisions SET last_at = ?, seen = seen + 1 "
                        "WHERE id = ? AND kind = 'hold' AND subject = ? AND reason = ? AND json = ?",
                        (stamp, row_id, subject, reason, text),
                    ).rowcount
                    if extended:
                        still_open[key] = row_id
                        continue
                new_id = conn.execute(
                    "INSERT INTO decisions (at, plan_id, subject, kind, reason, json, last_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (stamp, plan_id, subject, kind, reason, text, stamp),
                ).fetchone()[0]
                if kind == "hold":
                    still_open[key] = int(new_id)
                n += 1
        self._open_holds = still_open
        return n

    def decisions(
        self, subject: str | None = None, limit: int | None = 100, *, plan_id: str | None = None
    ) -> list[Decision]:
        """Decision log rows (about `subject` / from `plan_id`, when given), newest first."""
        where: list[str] = []
        params: list[Any] = []
        if subject is not None:
            where.append("subject = ?")
            params.append(subject)
        if plan_id is not None:
            where.append("plan_id = ?")
            params.append(plan_id)
        sql = f"SELECT {_DECISION_COLUMNS} FROM decisions{_where(where)} ORDER BY at DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_decision(row) for row in self._query(sql, params)]

    def decisions_about(self, name: str, limit: int | None = 50) -> list[Decision]:
        """Decisions about a job, node, group or tenant called `name`, newest first.

        Matches the subject itself (an action's target), a hold's `job:`,
        `group:`, `node:` or `tenant:` subject, actions naming it among their
        node ids, and holds naming it among their job ids (a tenant's jobs
        left unplanned). Newest first by the last plan that made each.
        """
        subjects = [name, *(f"{k}:{name}" for k in ("job", "group", "node", "tenant"))]
        marks = ", ".join("?" for _ in subjects)
        named = json.dumps(name)[1:-1]
        sql = (
            f"SELECT {_DECISION_COLUMNS} FROM decisions WHERE subject IN ({marks}) "
            f"OR (json LIKE ? AND EXISTS (SELECT 1 FROM {self._json_list('node_ids')} WHERE value = ?)) "
            f"OR (json LIKE ? AND EXISTS (SELECT 1 FROM {self._json_list('job_ids')} WHERE value = ?)) "
            "ORDER BY COALESCE(last_at, at) DESC, id DESC"
        )
        params: list[Any] = [*subjects, f'%"node_ids"%{named}%', name, f'%"job_ids"%{named}%', name]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_decision(row) for row in self._query(sql, params)]

    def _json_list(self, key: str) -> str:
        """A FROM item whose `value` column is each text in the decision row's JSON list `key` (none if absent)."""
        if not self.postgres:
            return f"json_each(decisions.json, '$.{key}')"
        doc = f"(decisions.json::jsonb -> '{key}')"
        return (f"jsonb_array_elements_text(CASE WHEN jsonb_typeof{doc} = 'array' THEN {doc} "
                "ELSE '[]'::jsonb END) AS listed(value)")

    # ---------------------------------------------------------------- misc

    @staticmethod
    def _stamp(at: datetime | None) -> str:
        return _ts(at if at is not None else datetime.now(UTC), "at")
