"""Helpers every part of the store shares: how times, JSON and numbers are written, and WHERE clauses built.

- Times are stored as fixed-width ISO 8601 UTC strings
  (``2026-03-02T12:00:00.000000+00:00``), which sort lexicographically in time
  order, and are returned as timezone-aware UTC datetimes. Naive datetimes are
  rejected with a ValueError naming the argument.
- Time windows are half-open: ``since <= at < until``.
- Model objects are stored as their `burst.codec` JSON, next to the columns
  that queries filter on (kept in sync by the store, never written apart).

The names keep their leading underscore: they belong to the store's modules, not to its callers.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any


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


def _where(clauses: Sequence[str]) -> str:
    return (" WHERE " + " AND ".join(clauses)) if clauses else ""


_IDS_PER_STATEMENT = 500
"""Ids one `IN (...)` list holds at most (SQLite's older builds allow 999 parameters a statement)."""
_ROWS_PER_INSERT = 150
"""Rows one multi-row INSERT writes at most (six parameters each, under the same limit)."""


def _placeholders(n: int) -> str:
    return ",".join("?" * n)
