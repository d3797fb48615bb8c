"""The decision log: what each plan did or held back, about which subject, and why (``burst explain``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from burst.store.base import StoreBase
from burst.store.sql import _dt, _json, _ts, _where

__all__ = ["Decision", "DecisionRecords"]


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


_DECISION_COLUMNS = "id, at, plan_id, subject, kind, reason, json, last_at, seen"


def _decision(row: Sequence[Any]) -> Decision:
    i, at, plan_id, subject, kind, reason, data, last_at, seen = row
    return Decision(int(i), _dt(at), plan_id, subject, kind, reason, json.loads(data),
                    _dt(last_at) if last_at is not None else None, int(seen))


class DecisionRecords(StoreBase):
    """The decisions table: record each plan's decisions (a repeated hold extends its row), read them back."""

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
        """Decisions about a job, node, group, tenant or service (`TENANT/NAME`) called `name`, newest first.

        Matches the subject itself (an action's target), a hold's `job:`,
        `group:`, `node:`, `tenant:` or `service:` subject, actions naming it among their
        node ids, and holds naming it among their job ids (a tenant's jobs
        left unplanned). Newest first by the last plan that made each.
        """
        subjects = [name, *(f"{k}:{name}" for k in ("job", "group", "node", "tenant", "service"))]
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
