"""Demand series files: a CSV with a time column and a value column (or a sum of columns), resampled.

The value is one column (`value_column`) or a sum of columns (`value_expr`,
e.g. ``running_gpu_num+pending_gpu_num``: column names joined by ``+``,
nothing else). Times are ISO 8601 or ``YYYY-MM-DD HH:MM:SS``; a time without
an offset is UTC. Points are averaged into buckets of `step_s` starting at the
first bucket boundary at or before the first point; a bucket with no point
(a gap in the file) takes the last value before it, and the count of filled
buckets is kept on the result so a caller can say so.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from forecasting.models import DemandSeries, SeriesError


@dataclass(frozen=True)
class LoadedSeries:
    """A series read from a file, with how many empty buckets were filled forward."""

    series: DemandSeries
    filled_buckets: int
    rows: int


def load_series(
    path: Path,
    *,
    time_column: str = "time",
    value_column: str | None = None,
    value_expr: str | None = None,
    step_s: float = 3600.0,
    tenant: str | None = None,
    gpu_model: str = "any",
) -> LoadedSeries:
    """Read `path` into a regular series; a bad file raises SeriesError naming the column or line."""
    if value_column and value_expr:
        raise SeriesError("give a value column or a value expression, not both")
    terms = [t.strip() for t in (value_expr or value_column or "").split("+")] if (value_expr or value_column) else []
    if any(not t for t in terms):
        raise SeriesError(f"value expression {value_expr!r}: expected column names joined by '+'")
    try:
        handle = path.open(newline="")
    except OSError as exc:
        raise SeriesError(f"{path}: {exc.strerror or exc}") from None
    with handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        if not terms:
            others = [c for c in header if c != time_column]
            if len(others) != 1:
                raise SeriesError(f"{path}: say which column holds the value (--value-column or --value-expr); columns: {', '.join(header)}")
            terms = others
        missing = [c for c in (time_column, *terms) if c not in header]
        if missing:
            raise SeriesError(f"{path}: no column {', '.join(repr(c) for c in missing)}; columns: {', '.join(header)}")
        points: list[tuple[datetime, float]] = []
        for line, row in enumerate(reader, start=2):
            when = _parse_time(row[time_column], path, line, time_column)
            total = 0.0
            for term in terms:
                try:
                    value = float(row[term])
                except (TypeError, ValueError):
                    raise SeriesError(f"{path}:{line}: column {term!r}: {row[term]!r} is not a number") from None
                if not math.isfinite(value) or value < 0:
                    raise SeriesError(f"{path}:{line}: column {term!r}: {row[term]!r} is not a finite number >= 0")
                total += value
            points.append((when, total))
    if not points:
        raise SeriesError(f"{path}: no rows")
    points.sort(key=lambda p: p[0])
    series, filled = resample(points, step_s, tenant or path.stem, gpu_model)
    return LoadedSeries(series=series, filled_buckets=filled, rows=len(points))


def _parse_time(raw: str | None, path: Path, line: int, column: str) -> datetime:
    text = (raw or "").strip()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise SeriesError(f"{path}:{line}: column {column!r}: {raw!r} is not a time (ISO 8601, e.g. 2020-05-01 00:00:00)") from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def resample(points: list[tuple[datetime, float]], step_s: float, tenant: str, gpu_model: str) -> tuple[DemandSeries, int]:
    """Time-sorted (instant, GPUs) points as bucket means at `step_s` (buckets aligned to the Unix epoch),
    gaps filled with the last value; (series, filled bucket count)."""
    if step_s <= 0:
        raise SeriesError(f"step must be positive, got {step_s:g} s")
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    first = points[0][0]
    origin = epoch + timedelta(seconds=math.floor((first - epoch).total_seconds() / step_s) * step_s)
    sums: dict[int, list[float]] = {}
    for when, value in points:
        k = int((when - origin).total_seconds() // step_s)
        acc = sums.setdefault(k, [0.0, 0])
        acc[0] += value
        acc[1] += 1
    last_k = max(sums)
    values: list[float] = []
    filled = 0
    for k in range(last_k + 1):
        if k in sums:
            values.append(sums[k][0] / sums[k][1])
        else:
            values.append(values[-1])
            filled += 1
    stamps = tuple(origin + timedelta(seconds=step_s * k) for k in range(last_k + 1))
    return DemandSeries(tenant, gpu_model, stamps, tuple(values), step_s), filled
