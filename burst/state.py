"""The controller's store: one SQLite file in WAL mode, or a PostgreSQL database several replicas share.

`Store(location)` opens either: a path is a SQLite file, a ``postgresql://``
URL a server (`burst.store_pg` adapts the one SQL text the store writes).
Both backends pass one contract suite (tests/test_state.py).

What lives here: jobs (the embedded queue's truth), nodes as last observed,
the actuator's intent journal, group targets, demand history (forecasting
input), the cost ledger, the job-loss ledger (work lost to interruptions and
evictions, GPU time spent checkpointing), the decision log (``burst explain``),
the service events declared through the API, the controller's cross-tick
memory (`burst.memory`: cooldowns, interruption notices, events read but not
yet applied, completed jobs' run times, ...) and a small key/value table whose
entries are the `MetaKey` names.

`Store` composes one part per kind of record, each in `burst.store`: `jobs`,
`nodes` (nodes, intents, group targets), `ledger` (costs, job losses),
`demand`, `decisions`, `service_events`, `meta` (key/value, controller memory,
run times, API token hashes) and `retention`, over `base` (connection,
transactions, migrations, backups). Their conventions are in `burst.store.base` (one
transaction a write, schema versions, file checks, threads) and
`burst.store.sql` (UTC time text, half-open windows, JSON records). Callers
import everything from here.
"""

from __future__ import annotations

from burst.store.base import MissingStore, StoreBase
from burst.store.decisions import Decision, DecisionRecords
from burst.store.demand import DemandRecords
from burst.store.jobs import InvalidJobTransition, JobExists, JobRecords
from burst.store.ledger import COST_LINES, LOSS_CAUSES, CostEntry, JobLoss, LedgerRecords, LossTotals
from burst.store.meta import MetaKey, MetaRecords
from burst.store.nodes import (
    INTENT_TRANSITIONS,
    GroupTarget,
    Intent,
    IntentStatus,
    InvalidIntentTransition,
    NodeRecords,
)
from burst.store.retention import RetentionRecords
from burst.store.schema import LATEST_VERSION, MIGRATIONS, Migration, SchemaTooNew, SchemaTooOld
from burst.store.service_events import ServiceEventRecords, StoredServiceEvent
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
    "StoredServiceEvent",
]


class Store(JobRecords, NodeRecords, LedgerRecords, DemandRecords, DecisionRecords, ServiceEventRecords, MetaRecords,
            RetentionRecords, StoreBase):
    """The SQLite store. ``Store(path)`` opens (creating and migrating) a file; ``":memory:"`` works too.

    `target_version` stops migrating at that schema version. It exists for
    tests and tooling (to build an old-schema file and exercise a migration);
    a store opened below `LATEST_VERSION` supports only what that schema has.
    """
