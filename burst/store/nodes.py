"""Nodes as last observed, the actuator's intent journal, and the size last asked of each group.

Nodes are cached in memory (this process is the nodes table's only writer);
intents move forward only (`INTENT_TRANSITIONS`), each move one guarded UPDATE.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from burst import codec
from burst.model import Node, NodeState
from burst.store.base import StoreBase
from burst.store.sql import _IDS_PER_STATEMENT, _ROWS_PER_INSERT, _dt, _json, _placeholders, _ts, _where

__all__ = [
    "INTENT_TRANSITIONS",
    "UNCONFIRMED_INTENT_STATUSES",
    "GroupTarget",
    "Intent",
    "IntentStatus",
    "InvalidIntentTransition",
    "NodeRecords",
]


class InvalidIntentTransition(ValueError):
    """An intent was asked to move backwards (or sideways) in its lifecycle."""


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
        """Whether the intent has no outcome yet (planned or sent)."""
        return self.status in UNCONFIRMED_INTENT_STATUSES


@dataclass(frozen=True)
class GroupTarget:
    """The size last asked of a group, with the idempotency key of the asking action."""

    group_id: str
    size: int
    key: str
    updated_at: datetime


class NodeRecords(StoreBase):
    """The nodes, intents and group_targets tables."""

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
        """The stored node `node_id` as last observed (terminated included), or None."""
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
        """The journal entry `intent_id`, or None if there is none."""
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
        """The size last asked of each group, by group id."""
        return {
            g: int(s) for g, s in self._query("SELECT group_id, size FROM group_targets ORDER BY group_id")
        }

    def target_records(self) -> dict[str, GroupTarget]:
        """The size last asked of each group with the asking action's key and when, by group id."""
        rows = self._query("SELECT group_id, size, key, updated_at FROM group_targets ORDER BY group_id")
        return {g: GroupTarget(g, int(s), k, _dt(u)) for g, s, k, u in rows}

    def forget_target(self, group_id: str) -> bool:
        """Delete a group's target; whether there was one."""
        with self._tx() as conn:
            return bool(conn.execute("DELETE FROM group_targets WHERE group_id = ?", (group_id,)).rowcount > 0)
