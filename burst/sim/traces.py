"""GPU job trace loaders: real cluster traces -> validated `burst.model.Job` tuples.

`load_trace(path)` reads one CSV file and returns a `Trace`: its jobs (all
PENDING, sorted by submit time then id), the rows it had to skip (`BadRow`,
with 1-based file line numbers; the header is line 1) and its tenants.
A file that cannot be used at all (missing, empty, unknown header, no usable
row) raises `TraceError`, one line naming the file and what is wrong.

Jobs come out with `fault_tolerant=False` (except where a generic CSV says
otherwise): no real trace records fault tolerance, so the simulator assigns
it later as an explicit, seeded assumption.

Formats (`format=`; "auto" picks one from the header columns; header names
are matched case-insensitively, surrounding spaces ignored):

``philly``
    Microsoft Philly, as processed for the Pollux artifact:
    ``timestamp,duration,num_gpus,gpu_time,cluster``. ``timestamp`` is the
    submit time as a UTC-naive datetime string (``2017-10-09 07:01:55``;
    read as UTC; a number would be read as seconds since the Unix epoch),
    ``duration`` seconds of run time, ``num_gpus`` GPUs. Tenant = ``cluster``
    (the virtual cluster). ``gpu_time`` is not used.

``itp``
    Microsoft ITP clusters (ElasticFlow raw traces):
    ``job_id,submission_time,duration,num_gpu``. ``submission_time`` counts
    seconds from the collection start, which ``epoch`` anchors: by default
    2021-03-04T00:00:00Z, the documented collection start. Tenant = the file
    stem (``itp-cluster04``) unless ``tenant`` is given.

``alibaba``
    Alibaba cluster-trace-gpu-v2023 pod lists (``openb_pod_list_*.csv``):
    ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
    creation_time,deletion_time,scheduled_time``. Times are seconds from the
    trace start, which ``epoch`` anchors: by default 2023-01-01T00:00:00Z (the
    trace publishes no calendar date; this one is a convention). Submit time =
    ``creation_time``; duration = ``deletion_time - scheduled_time``, or
    ``deletion_time - creation_time`` when ``scheduled_time`` is empty (a pod
    that never got scheduled). Pods with ``num_gpu == 0`` are CPU-only: they
    are skipped and counted in `Trace.skipped_non_gpu`, not reported as bad.
    A 1-GPU pod with ``gpu_milli < 1000`` is a GPU-sharing job:
    ``gpus=0, gpu_share=gpu_milli/1000`` (an empty ``gpu_milli`` means whole
    GPUs). ``gpu_spec`` naming one GPU model becomes ``gpu_model``; a list of
    alternatives (``V100M16|V100M32``) leaves it unset. Tenant = ``qos``.

``csv``
    burst's generic format. Required: ``submit_time`` (ISO 8601, e.g.
    ``2024-05-01T00:30:00Z`` or with an offset, UTC when naive; or a number of
    seconds since ``epoch``, default the Unix epoch), ``duration_s`` (> 0) and
    ``gpus`` (whole, >= 1). Optional: ``tenant`` (empty or absent -> the
    ``tenant`` argument, default ``"default"``), ``job_id``, ``gpu_model``,
    ``fault_tolerant`` (true/false, yes/no, 1/0; default false) and
    ``checkpoint_interval_s`` (> 0).

Options, for every format: ``tenant_column`` names the column to read tenants
from instead of the format's own; ``tenant`` is the tenant for rows whose
tenant cell is empty or whose format has no tenant column (a row with no
tenant and no fallback is a bad row).

Job ids are ``<tenant>-<id>``, where id is the row's job id (ITP ``job_id``,
Alibaba ``name``, csv ``job_id``) or, where there is none, its line number.
A repeated id is a bad row.

Bad rows (each skipped and reported): a required field missing, a value that
is not a number or a time, a duration <= 0, GPUs not a whole number >= 1, a
relative time < 0.
"""

from __future__ import annotations

import bisect
import csv
import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from burst.bounds import (
    EARLIEST_YEAR,
    LATEST_YEAR,
    MAX_DURATION_S,
    MAX_JOB_GPUS,
    MAX_JOB_ID_LENGTH,
    MAX_NAME_LENGTH,
    MAX_TEXT_LENGTH,
    job_problem,
    shown,
)
from burst.model import Job

__all__ = [
    "ALIBABA_EPOCH",
    "FORMATS",
    "ITP_EPOCH",
    "UNIX_EPOCH",
    "BadRow",
    "Trace",
    "TraceError",
    "TraceStats",
    "detect_format",
    "load_trace",
]

ITP_EPOCH = datetime(2021, 3, 4, tzinfo=UTC)
"""ITP `submission_time` 0: the documented collection start (2021-03-04T00:00:00Z)."""

ALIBABA_EPOCH = datetime(2023, 1, 1, tzinfo=UTC)
"""Alibaba v2023 time 0 by convention (2023-01-01T00:00:00Z): the trace gives only relative seconds."""

UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""What numeric absolute times (philly `timestamp`, csv `submit_time`) count from by default."""


class TraceError(ValueError):
    """A trace file that cannot be used at all; the message is one line naming the file."""


@dataclass(frozen=True)
class BadRow:
    """One skipped row: its 1-based line in the file (header = line 1) and what was wrong."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass(frozen=True)
class TraceStats:
    """Totals of a trace, with demand taken as every job running from submit for its duration.

    `peak_gpus` and `p50_gpus` are of concurrent GPU demand (fractional shares
    count as their fraction). `p50_gpus` is time-weighted over [start, end]:
    the smallest demand level at or below which the trace spends at least half
    of that span (idle gaps count as level 0). Intervals are half-open, so a
    job ending when another starts does not overlap it.
    """

    jobs: int
    gpu_hours: float
    peak_gpus: float
    p50_gpus: float
    start: datetime | None
    end: datetime | None


PRIOR_DAYS = 30.0
"""Days of jobs before a window that it keeps as forecast history."""


@dataclass(frozen=True)
class Trace:
    """A loaded trace: jobs sorted by (submitted_at, id), the rows skipped, the tenants seen."""

    path: Path
    format: str
    jobs: tuple[Job, ...]
    bad_rows: tuple[BadRow, ...] = ()
    tenants: tuple[str, ...] = ()
    skipped_non_gpu: int = 0  # Alibaba CPU-only pods (num_gpu == 0): skipped, not bad
    prior: tuple[Job, ...] = ()  # after `window`: jobs of the PRIOR_DAYS before it (forecast history)

    def window(self, start: datetime | None = None, days: float | None = None) -> Trace:
        """The jobs submitted in [start, start + days); start defaults to the first job, days to no end.

        A naive `start` is read as UTC. Bad rows and counters of the file are kept;
        tenants are those of the jobs kept; `prior` holds the jobs submitted in
        the `PRIOR_DAYS` before `start`, which forecasting reads as history.
        """
        if days is not None and not days > 0:
            raise ValueError(f"window: days must be > 0, got {days}")
        if start is None:
            if not self.jobs:
                return self
            start = self.jobs[0].submitted_at
        start = _as_utc(start)
        lo = bisect.bisect_left(self.jobs, start, key=_submitted)
        hi = len(self.jobs)
        if days is not None:
            hi = bisect.bisect_left(self.jobs, start + timedelta(days=days), key=_submitted)
        jobs = self.jobs[lo:hi]
        first = bisect.bisect_left(self.jobs, start - timedelta(days=PRIOR_DAYS), key=_submitted)
        return dataclasses.replace(self, jobs=jobs, tenants=_tenants_of(jobs), prior=self.jobs[first:lo])

    def stats(self) -> TraceStats:
        """Job count, GPU-hours and concurrent-demand peak / time-weighted median (see `TraceStats`)."""
        if not self.jobs:
            return TraceStats(jobs=0, gpu_hours=0.0, peak_gpus=0.0, p50_gpus=0.0, start=None, end=None)
        t0 = self.jobs[0].submitted_at
        n = len(self.jobs)
        starts = np.fromiter(((j.submitted_at - t0).total_seconds() for j in self.jobs), float, n)
        durations = np.fromiter((j.duration_s or 0.0 for j in self.jobs), float, n)
        demand = np.fromiter((j.gpu_demand for j in self.jobs), float, n)
        ends = starts + durations
        peak, p50 = concurrency(starts, ends, demand)
        return TraceStats(
            jobs=n,
            gpu_hours=float(np.dot(durations, demand)) / 3600.0,
            peak_gpus=peak,
            p50_gpus=p50,
            start=t0,
            end=t0 + timedelta(seconds=float(ends.max())),
        )


def _submitted(job: Job) -> datetime:
    return job.submitted_at


def _tenants_of(jobs: Sequence[Job]) -> tuple[str, ...]:
    return tuple(sorted({j.tenant for j in jobs}))


def concurrency(starts: np.ndarray, ends: np.ndarray, demand: np.ndarray) -> tuple[float, float]:
    """Peak and time-weighted median of the summed demand of intervals [start, end)."""
    times = np.concatenate([starts, ends])
    deltas = np.concatenate([demand, -demand])
    order = np.argsort(times, kind="stable")
    times, deltas = times[order], deltas[order]
    instants, first = np.unique(times, return_index=True)
    level = np.round(np.cumsum(np.add.reduceat(deltas, first)), 9)  # level over [instant_i, instant_i+1)
    widths = np.diff(instants)
    levels = level[:-1]
    if widths.size == 0 or widths.sum() <= 0:
        return 0.0, 0.0
    peak = float(levels.max())
    by_level = np.argsort(levels, kind="stable")
    cum = np.cumsum(widths[by_level])
    k = int(np.searchsorted(cum, cum[-1] * 0.5, side="left"))
    return peak, float(levels[by_level][k]) + 0.0  # + 0.0 turns -0.0 into 0.0


# ---------------------------------------------------------------- loading


class _Bad(Exception):
    """A row-level problem; becomes a BadRow."""


@dataclass(frozen=True)
class _Format:
    name: str
    required: tuple[str, ...]  # columns that identify the format and must be present
    tenant_column: str | None  # the format's own tenant column
    tenant_required: bool  # whether that column is required when no fallback tenant is given


_FORMATS: tuple[_Format, ...] = (
    _Format("alibaba", ("num_gpu", "creation_time", "deletion_time", "scheduled_time"), "qos", True),
    _Format("itp", ("submission_time", "duration", "num_gpu"), None, False),
    _Format("philly", ("timestamp", "duration", "num_gpus"), "cluster", True),
    _Format("csv", ("submit_time", "duration_s", "gpus"), "tenant", False),
)
_BY_NAME = {f.name: f for f in _FORMATS}
FORMATS = tuple(f.name for f in _FORMATS)
"""The formats `load_trace` reads (besides "auto")."""


def _describe(f: _Format) -> str:
    cols = [*f.required, *([f.tenant_column] if f.tenant_column and f.tenant_required else [])]
    return f"{f.name} ({','.join(cols)})"


def detect_format(columns: Sequence[str]) -> str | None:
    """The format whose required columns a header has (names normalised), or None."""
    have = {c.strip().lower() for c in columns}
    for f in _FORMATS:
        if have.issuperset(f.required):
            return f.name
    return None


def _as_utc(dt: datetime) -> datetime:
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def _cut(s: str) -> str:
    """A cell as quoted bare in a message: cut to a few dozen characters."""
    return s if len(s) <= 40 else s[:37] + "..."


def _cell(row: list[str], idx: int | None) -> str:
    if idx is None or idx >= len(row):
        return ""
    return row[idx].strip()


def _req(row: list[str], idx: int, name: str) -> str:
    s = _cell(row, idx)
    if not s:
        raise _Bad(f"{name}: missing")
    return s


def _number(s: str, name: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise _Bad(f"{name}: not a number {shown(s)}") from None
    if not math.isfinite(v):
        raise _Bad(f"{name}: not a finite number {shown(s)}")
    return v


def _duration(s: str, name: str) -> float:
    v = _number(s, name)
    if v <= 0:
        raise _Bad(f"{name}: must be > 0, got {_cut(s)}")
    return v


def _count(s: str, name: str, minimum: int) -> int:
    v = _number(s, name)
    if v != int(v):
        raise _Bad(f"{name}: not a whole number {shown(s)}")
    if v < minimum:
        raise _Bad(f"{name}: must be >= {minimum}, got {_cut(s)}")
    return int(v)


def _offset(epoch: datetime, seconds: float, name: str, s: str) -> datetime:
    try:
        return epoch + timedelta(seconds=seconds)
    except OverflowError:
        raise _Bad(f"{name}: out of range {shown(s)}") from None


def _relative_time(s: str, name: str, epoch: datetime) -> datetime:
    v = _number(s, name)
    if v < 0:
        raise _Bad(f"{name}: must be >= 0, got {_cut(s)}")
    return _offset(epoch, v, name, s)


def _absolute_time(s: str, name: str, epoch: datetime) -> datetime:
    """ISO 8601 (naive = UTC), or a number of seconds since `epoch`."""
    try:
        v = float(s)
    except ValueError:
        pass
    else:
        if not math.isfinite(v):
            raise _Bad(f"{name}: not a time {shown(s)}")
        return _offset(epoch, v, name, s)
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        raise _Bad(f"{name}: not a time {shown(s)}") from None
    return _as_utc(dt)


_TRUE = frozenset({"true", "yes", "1", "t", "y"})
_FALSE = frozenset({"false", "no", "0", "f", "n"})


def _flag(s: str, name: str) -> bool:
    low = s.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise _Bad(f"{name}: not true/false {shown(s)}")


_RowFn = Callable[[list[str], int], Job | None]


def _tenant_getter(idx: int | None, column: str | None, fallback: str | None) -> Callable[[list[str]], str]:
    def get(row: list[str]) -> str:
        v = _cell(row, idx)
        if v:
            return v
        if fallback is None:
            raise _Bad(f"{column}: missing")
        return fallback

    return get


def _philly(col: Mapping[str, int], tenant_of: Callable[[list[str]], str], epoch: datetime) -> _RowFn:
    ts, du, ng = col["timestamp"], col["duration"], col["num_gpus"]

    def row_fn(row: list[str], line: int) -> Job:
        submitted = _absolute_time(_req(row, ts, "timestamp"), "timestamp", epoch)
        duration = _duration(_req(row, du, "duration"), "duration")
        gpus = _count(_req(row, ng, "num_gpus"), "num_gpus", 1)
        tenant = tenant_of(row)
        return Job(
            id=f"{tenant}-{line}", tenant=tenant, gpus=gpus, submitted_at=submitted, duration_s=duration
        )

    return row_fn


def _itp(col: Mapping[str, int], tenant_of: Callable[[list[str]], str], epoch: datetime) -> _RowFn:
    jid, st, du, ng = col.get("job_id"), col["submission_time"], col["duration"], col["num_gpu"]

    def row_fn(row: list[str], line: int) -> Job:
        submitted = _relative_time(_req(row, st, "submission_time"), "submission_time", epoch)
        duration = _duration(_req(row, du, "duration"), "duration")
        gpus = _count(_req(row, ng, "num_gpu"), "num_gpu", 1)
        tenant = tenant_of(row)
        ident = _cell(row, jid) or str(line)
        return Job(
            id=f"{tenant}-{ident}", tenant=tenant, gpus=gpus, submitted_at=submitted, duration_s=duration
        )

    return row_fn


def _alibaba(col: Mapping[str, int], tenant_of: Callable[[list[str]], str], epoch: datetime) -> _RowFn:
    name_i, ng, gm, spec = col.get("name"), col["num_gpu"], col.get("gpu_milli"), col.get("gpu_spec")
    ct, dt, sc = col["creation_time"], col["deletion_time"], col["scheduled_time"]

    def row_fn(row: list[str], line: int) -> Job | None:
        num_gpu = _count(_req(row, ng, "num_gpu"), "num_gpu", 0)
        if num_gpu == 0:
            return None
        created_s = _req(row, ct, "creation_time")
        created = _number(created_s, "creation_time")
        if created < 0:
            raise _Bad(f"creation_time: must be >= 0, got {_cut(created_s)}")
        deleted = _number(_req(row, dt, "deletion_time"), "deletion_time")
        scheduled_s = _cell(row, sc)
        began = _number(scheduled_s, "scheduled_time") if scheduled_s else created
        duration = deleted - began
        if duration <= 0:
            base = "scheduled_time" if scheduled_s else "creation_time"
            raise _Bad(f"duration: deletion_time - {base} must be > 0, got {duration:g}")
        gpus, share = num_gpu, None
        milli_s = _cell(row, gm)
        if num_gpu == 1 and milli_s:
            milli = _number(milli_s, "gpu_milli")
            if not 0 < milli <= 1000:
                raise _Bad(f"gpu_milli: must be in (0, 1000] for a 1-GPU pod, got {_cut(milli_s)}")
            if milli < 1000:
                gpus, share = 0, milli / 1000.0
        model = _cell(row, spec)
        gpu_model = model if model and "|" not in model and model.lower() != "nan" else None
        tenant = tenant_of(row)
        ident = _cell(row, name_i) or str(line)
        return Job(
            id=f"{tenant}-{ident}",
            tenant=tenant,
            gpus=gpus,
            gpu_share=share,
            gpu_model=gpu_model,
            submitted_at=_offset(epoch, created, "creation_time", created_s),
            duration_s=duration,
        )

    return row_fn


def _generic(col: Mapping[str, int], tenant_of: Callable[[list[str]], str], epoch: datetime) -> _RowFn:
    st, du, gp = col["submit_time"], col["duration_s"], col["gpus"]
    jid, gm = col.get("job_id"), col.get("gpu_model")
    ft, ci = col.get("fault_tolerant"), col.get("checkpoint_interval_s")

    def row_fn(row: list[str], line: int) -> Job:
        submitted = _absolute_time(_req(row, st, "submit_time"), "submit_time", epoch)
        duration = _duration(_req(row, du, "duration_s"), "duration_s")
        gpus = _count(_req(row, gp, "gpus"), "gpus", 1)
        ft_s, ci_s = _cell(row, ft), _cell(row, ci)
        tenant = tenant_of(row)
        ident = _cell(row, jid) or str(line)
        return Job(
            id=f"{tenant}-{ident}",
            tenant=tenant,
            gpus=gpus,
            submitted_at=submitted,
            duration_s=duration,
            gpu_model=_cell(row, gm) or None,
            fault_tolerant=_flag(ft_s, "fault_tolerant") if ft_s else False,
            checkpoint_interval_s=_duration(ci_s, "checkpoint_interval_s") if ci_s else None,
        )

    return row_fn


_BUILDERS: Mapping[str, Callable[[Mapping[str, int], Callable[[list[str]], str], datetime], _RowFn]] = {
    "philly": _philly,
    "itp": _itp,
    "alibaba": _alibaba,
    "csv": _generic,
}
_DEFAULT_EPOCH = {"philly": UNIX_EPOCH, "itp": ITP_EPOCH, "alibaba": ALIBABA_EPOCH, "csv": UNIX_EPOCH}


def load_trace(
    path: Path | str,
    *,
    format: str = "auto",
    epoch: datetime | None = None,
    tenant_column: str | None = None,
    tenant: str | None = None,
) -> Trace:
    """Load one trace file (see the module docstring for formats and options).

    `epoch` anchors relative times (ITP default 2021-03-04T00:00:00Z, the
    documented collection start; Alibaba default 2023-01-01T00:00:00Z) and
    numeric absolute times (default the Unix epoch); a naive epoch is UTC.
    Raises `TraceError` for an unusable file, `ValueError` for an unknown format.
    """
    path = Path(path)
    where = str(path)
    if format != "auto" and format not in _BY_NAME:
        raise ValueError(f"unknown trace format {format!r}: expected auto or one of {', '.join(FORMATS)}")
    try:
        handle = path.open(encoding="utf-8-sig", newline="")
    except FileNotFoundError:
        raise TraceError(f"{where}: file not found") from None
    except OSError as e:
        raise TraceError(f"{where}: cannot read ({e.strerror or e})") from None

    kept = _Rows()
    with handle:
        reader = csv.reader(handle)
        try:
            names, col = _header(where, reader)
            fmt = _pick_format(where, format, names)
            row_fn = _row_function(where, fmt, col, path, epoch, tenant_column, tenant)
            last = reader.line_num
            for row in reader:
                line, last = last + 1, reader.line_num
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue  # blank line
                kept.take(row_fn, row, line)
        except UnicodeDecodeError:
            raise TraceError(f"{where}: not UTF-8 text (near line {reader.line_num + 1})") from None
        except csv.Error as e:
            raise TraceError(f"{where}: line {reader.line_num}: malformed CSV ({e})") from None

    jobs = kept.jobs
    if not jobs:
        raise TraceError(f"{where}: no usable rows ({_why_empty(kept.rows, kept.bad, kept.skipped)})")
    jobs.sort(key=lambda j: (j.submitted_at, j.id))
    return Trace(
        path=path,
        format=fmt,
        jobs=tuple(jobs),
        bad_rows=tuple(kept.bad),
        tenants=_tenants_of(jobs),
        skipped_non_gpu=kept.skipped,
    )


def _header(where: str, reader: Iterator[list[str]]) -> tuple[list[str], dict[str, int]]:
    """The header's column names (stripped, lower case) and the index of each named one; a missing, blank or
    repeating header is a `TraceError`."""
    header = next(reader, None)
    if header is None:
        raise TraceError(f"{where}: empty file (no header line)")
    names = [h.strip().lower() for h in header]
    if not any(names):
        raise TraceError(f"{where}: line 1 is blank, expected a header")
    col: dict[str, int] = {}
    for i, n in enumerate(names):
        if n in col:
            raise TraceError(f"{where}: duplicate column {shown(n)} in the header")
        if n:
            col[n] = i
    return names, col


@dataclasses.dataclass
class _Rows:
    """What the data rows of a trace gave so far: the jobs kept, the rows refused and why, the non-GPU rows
    skipped, how many rows were read and the line each job id was first seen on."""

    jobs: list[Job] = dataclasses.field(default_factory=list)
    bad: list[BadRow] = dataclasses.field(default_factory=list)
    skipped: int = 0
    rows: int = 0
    seen: dict[str, int] = dataclasses.field(default_factory=dict)

    def take(self, row_fn: _RowFn, row: list[str], line: int) -> None:
        """Decide on one data row: kept as a job, refused (unreadable, out of bounds, a repeated job id) with
        the reason, or skipped (no GPU)."""
        self.rows += 1
        try:
            job = row_fn(row, line)
        except _Bad as e:
            self.bad.append(BadRow(line, str(e)))
            return
        except ValueError as e:  # the model's own checks
            self.bad.append(BadRow(line, str(e)))
            return
        if job is None:
            self.skipped += 1
            return
        if not _in_bounds(job):  # absurd values (a 1e15 s duration, a million GPUs): skipped, the field named
            self.bad.append(BadRow(line, job_problem(job) or "out of bounds"))
            return
        first = self.seen.get(job.id)
        if first is not None:
            self.bad.append(BadRow(line, f"job id {shown(job.id)} repeats line {first}"))
            return
        self.seen[job.id] = line
        self.jobs.append(job)


def _in_bounds(job: Job) -> bool:
    """Whether what a row sets is inside burst.bounds (every row passes here: kept to comparisons)."""
    duration, interval = job.duration_s, job.checkpoint_interval_s
    return (
        job.gpus <= MAX_JOB_GPUS and (duration is None or duration <= MAX_DURATION_S)
        and (interval is None or interval <= MAX_DURATION_S) and len(job.id) <= MAX_JOB_ID_LENGTH
        and len(job.tenant) <= MAX_NAME_LENGTH and EARLIEST_YEAR <= job.submitted_at.year <= LATEST_YEAR
        and (job.gpu_model is None or len(job.gpu_model) <= MAX_TEXT_LENGTH)
    )


def _pick_format(where: str, format: str, names: Sequence[str]) -> str:
    if format == "auto":
        found = detect_format(names)
        if found is None:
            header = _cut(",".join(n for n in names if n))
            expected = ", ".join(_describe(f) for f in _FORMATS)
            raise TraceError(f"{where}: unknown header ({header}); expected one of: {expected}")
        return found
    missing = [c for c in _BY_NAME[format].required if c not in names]
    if missing:
        raise TraceError(
            f"{where}: header does not match format {format!r}: missing column(s) {', '.join(missing)}"
        )
    return format


def _row_function(
    where: str,
    fmt: str,
    col: Mapping[str, int],
    path: Path,
    epoch: datetime | None,
    tenant_column: str | None,
    tenant: str | None,
) -> _RowFn:
    spec = _BY_NAME[fmt]
    fallback = tenant
    if fallback is None:
        fallback = {"itp": path.stem, "csv": "default"}.get(fmt)
    if tenant_column is not None:
        column: str | None = tenant_column.strip().lower()
        if column not in col:
            raise TraceError(f"{where}: no tenant column {shown(tenant_column)} in the header")
    else:
        column = spec.tenant_column
        if column is not None and column not in col and spec.tenant_required and fallback is None:
            raise TraceError(f"{where}: header does not match format {fmt!r}: missing column(s) {column}")
    idx = col.get(column) if column is not None else None
    anchor = _as_utc(epoch) if epoch is not None else _DEFAULT_EPOCH[fmt]
    return _BUILDERS[fmt](col, _tenant_getter(idx, column, fallback), anchor)


def _why_empty(rows: int, bad: Sequence[BadRow], skipped: int) -> str:
    if rows == 0:
        return "no data rows"
    parts = []
    if bad:
        parts.append(f"{len(bad)} bad row{'s' if len(bad) != 1 else ''}; first: {bad[0]}")
    if skipped:
        parts.append(f"{skipped} non-GPU pod{'s' if skipped != 1 else ''} skipped")
    return "; ".join(parts)
