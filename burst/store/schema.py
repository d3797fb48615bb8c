"""The store's schema: an ordered list of `MIGRATIONS`, each taking the schema one version up.

The version is kept in ``PRAGMA user_version`` (PostgreSQL: the
`burst_schema` table); opening a store applies the missing migrations, each in
its own transaction (`burst.store.base.StoreBase._migrate`). Statements are
written for SQLite; `burst.store_pg.pg_ddl` adapts them for PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LATEST_VERSION", "MIGRATIONS", "Migration", "SchemaTooNew", "SchemaTooOld"]


class SchemaTooNew(RuntimeError):
    """The file was written by a newer burst than this one."""


class SchemaTooOld(RuntimeError):
    """A read-only open found a schema older than this burst's (only a writer migrates it)."""


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
    Migration(
        7,
        "service events declared through the API (a promotion, a launch: a window and an optional multiplier)",
        (
            """CREATE TABLE service_events (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                tenant TEXT NOT NULL,
                service TEXT NOT NULL,
                name TEXT,
                start_at TEXT NOT NULL,
                end_at TEXT NOT NULL,
                multiplier REAL CHECK (multiplier IS NULL OR multiplier > 0),
                created_at TEXT NOT NULL,
                CHECK (end_at > start_at)
            )""",
            "CREATE INDEX service_events_tenant ON service_events(tenant, service, end_at)",
        ),
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version

if [m.version for m in MIGRATIONS] != list(range(1, len(MIGRATIONS) + 1)):  # pragma: no cover
    raise AssertionError("MIGRATIONS must be numbered 1..N in order")
