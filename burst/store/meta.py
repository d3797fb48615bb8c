"""Small facts kept across restarts: the key/value table (`MetaKey`), the controller's cross-tick memory
(`burst.memory`: cooldowns, interruption notices, events read but not yet applied, ...), completed jobs' run
times and the API token hashes replicas share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum, unique

from burst.store.base import StoreBase
from burst.store.sql import _finite

__all__ = ["MetaKey", "MetaRecords"]


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
    SERVICES = "services.status"
    """Each service's last tick as the daemon saw and decided it (`burst services`, metrics)."""


class MetaRecords(StoreBase):
    """The meta, controller_memory, job_runtimes and api_token_hashes tables."""

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
