"""Request-rate series for the service simulator: loading, the replay window, and the fine-grained counts.

Two formats:

- `timestamp,value` (the Numenta Anomaly Benchmark's series): `value` requests
  arrive over the step that starts at `timestamp`, spread evenly over it. The
  step is the most common gap between rows; a missing step (the load balancer
  has 8 in 4,032) repeats the step before it, so a gap is not read as a drop to
  zero.
- the Azure LLM inference trace (`TIMESTAMP,ContextTokens,GeneratedTokens`, one
  row per request): counted per second, with the mean context and generated
  tokens kept for the token arithmetic (`AZURE_TOKEN_COST`).

The replay window (`default_window`): earlier data is history for the
forecasts and for the capacity mapping. nyc-taxi replays 2014-10-20 ..
2015-01-05 (its holidays inside); each `twitter-*` series its last 28 days; the
load balancer its last 7 days; the Azure hour whole; any other series its last
7 days when it holds at least 14, else the whole series.
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from burst.model import TokenCost

TICK_S = 15
"""The replay's tick: the Kubernetes HPA's sync period, the finest any controller acts at."""

NAB_COLUMNS = ("timestamp", "value")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")

AZURE_TOKEN_COST = TokenCost(context_gpu_s=1.0e-4, generated_gpu_s=3.0e-4)
"""GPU-seconds per context token (a) and per generated token (b) of a 7B-parameter model in fp16 on one A100-40GB.

Splitwise (Patel et al., ISCA 2024, the paper the Azure trace comes from) finds prompt processing compute-bound and
token generation memory-bound; the figures follow from that and the A100's datasheet (312 TFLOPS dense bf16,
1,555 GB/s HBM2): a = 2 x 7e9 FLOP per prompt token at 45% of peak = 1.0e-4 s (10k prompt tokens/s);
b = 13.5 GB of weights read per decode step at 90% of the bandwidth, 9.6 ms, shared by a batch of 32 sequences
= 3.0e-4 s (3.3k generated tokens/s)."""

AZURE_TOKEN_SOURCE = ("a = 1.0e-4 GPU-s per context token, b = 3.0e-4 GPU-s per generated token: a 7B model in fp16 "
                      "on one A100-40GB, prefill compute-bound (14 GFLOP/token at 45% of 312 TFLOPS), decode "
                      "memory-bound (13.5 GB read per step at 90% of 1,555 GB/s, batch 32), as Splitwise "
                      "(Patel et al., ISCA 2024) characterises the two phases")


class ServiceTraceError(ValueError):
    """A rate series that cannot be read: the message names the file and, where it applies, the line."""


@dataclass(frozen=True)
class RateSeries:
    """One request-rate series: counts per step from `origin`, and the steps `[start, end)` that are replayed.

    `counts[k]` requests arrive in `[origin + k*step_s, origin + (k+1)*step_s)`, spread evenly. Steps before
    `start` are history (forecasts, capacity mapping). The token means are those of an Azure-format trace.
    """

    name: str
    path: Path
    format: str
    step_s: int
    origin: datetime
    counts: np.ndarray
    start: int
    end: int
    mean_context_tokens: float | None = None
    mean_generated_tokens: float | None = None

    def at(self, k: int) -> datetime:
        """The instant step `k` starts."""
        return self.origin + timedelta(seconds=k * self.step_s)

    @property
    def window_start(self) -> datetime:
        """When the replay starts."""
        return self.at(self.start)

    @property
    def window_end(self) -> datetime:
        """When the replay ends (exclusive)."""
        return self.at(self.end)

    @property
    def window_s(self) -> int:
        """The replay's length, seconds."""
        return (self.end - self.start) * self.step_s

    def history(self) -> np.ndarray:
        """Counts per step before the window."""
        return self.counts[: self.start]

    def window(self) -> np.ndarray:
        """Counts per step inside the window."""
        return self.counts[self.start: self.end]

    def head(self, days: float) -> RateSeries:
        """This series with its window cut to its first `days` days (the benchmark's --small runs)."""
        steps = max(1, math.ceil(days * 86400 / self.step_s))
        return replace(self, end=min(self.end, self.start + steps))

    def fine_counts(self) -> np.ndarray:
        """The window's requests per second-or-tick, shape (ticks, per_tick): per second for a series whose step
        is under a tick, else per tick (a step's count spread evenly over its ticks)."""
        counts = self.window().astype(float)
        if self.step_s < TICK_S:
            if TICK_S % self.step_s:
                raise ServiceTraceError(f"{self.path}: a step of {self.step_s} s does not divide the {TICK_S} s tick")
            per_tick = TICK_S // self.step_s
            padded = np.concatenate([counts, np.zeros((-len(counts)) % per_tick)])
            return padded.reshape(-1, per_tick)
        if self.step_s % TICK_S:
            raise ServiceTraceError(f"{self.path}: a step of {self.step_s} s is not a whole number of {TICK_S} s ticks")
        ticks = self.step_s // TICK_S
        return np.repeat(counts / ticks, ticks).reshape(-1, 1)


def _naive_utc(text: str, where: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ServiceTraceError(f"{where}: not an ISO timestamp: {text[:40]!r}") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ServiceTraceError(f"{where}: not a number: {text[:40]!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ServiceTraceError(f"{where}: expected a finite number >= 0, got {text[:40]!r}")
    return value


def _rows(path: Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        return header, [(i, row) for i, row in enumerate(reader, start=2) if row]


def load_nab(path: Path) -> RateSeries:
    """Read a `timestamp,value` series: counts on its most common step, a missing step repeating the one before."""
    header, rows = _rows(path)
    if tuple(header[:2]) != NAB_COLUMNS:
        raise ServiceTraceError(f"{path}:1: expected the columns timestamp,value, got {','.join(header)[:80]}")
    points = [(_naive_utc(r[0], f"{path}:{i}"), _number(r[1], f"{path}:{i}")) for i, r in rows]
    if len(points) < 2:
        raise ServiceTraceError(f"{path}: a series needs at least two rows")
    gaps = Counter(int((b[0] - a[0]).total_seconds()) for a, b in zip(points, points[1:], strict=False))
    step = gaps.most_common(1)[0][0]
    if step <= 0:
        raise ServiceTraceError(f"{path}: timestamps must increase")
    origin = points[0][0]
    steps = int((points[-1][0] - origin).total_seconds()) // step + 1
    counts = np.full(steps, np.nan)
    for at, value in points:
        k = int((at - origin).total_seconds()) // step
        if not 0 <= k < steps or not math.isnan(counts[k]):
            raise ServiceTraceError(f"{path}: timestamp {at:%Y-%m-%d %H:%M:%S} repeats or goes back a step")
        counts[k] = value
    for k in range(1, steps):
        if math.isnan(counts[k]):
            counts[k] = counts[k - 1]
    series = RateSeries(path.stem, path, "nab", step, origin, counts, 0, steps)
    return default_window(series)


def load_azure(path: Path) -> RateSeries:
    """Read the Azure LLM per-request trace: requests counted per second, with the mean token counts."""
    header, rows = _rows(path)
    if tuple(header[:3]) != AZURE_COLUMNS:
        raise ServiceTraceError(f"{path}:1: expected the columns {','.join(AZURE_COLUMNS)}, got {','.join(header)[:80]}")
    if not rows:
        raise ServiceTraceError(f"{path}: no requests")
    times = [_naive_utc(r[0], f"{path}:{i}") for i, r in rows]
    context = [_number(r[1], f"{path}:{i}") for i, r in rows]
    generated = [_number(r[2], f"{path}:{i}") for i, r in rows]
    origin = min(times).replace(microsecond=0)
    seconds = np.array([int((t - origin).total_seconds()) for t in times])
    counts = np.bincount(seconds).astype(float)
    return RateSeries(path.stem, path, "azure", 1, origin, counts, 0, len(counts),
                      mean_context_tokens=float(np.mean(context)), mean_generated_tokens=float(np.mean(generated)))


def load_rate_series(path: Path) -> RateSeries:
    """Read a rate series in either format, told apart by its header."""
    header, _ = _rows(path)
    if tuple(header[:3]) == AZURE_COLUMNS:
        return load_azure(path)
    return load_nab(path)


def _index(series: RateSeries, at: datetime) -> int:
    return max(0, min(len(series.counts), math.ceil((at - series.origin).total_seconds() / series.step_s)))


def _last_days(series: RateSeries, days: float) -> RateSeries:
    end = len(series.counts)
    return replace(series, start=max(0, end - int(days * 86400) // series.step_s), end=end)


def default_window(series: RateSeries) -> RateSeries:
    """Decide which steps of `series` are replayed (the module docstring's rules, by file name)."""
    name = series.name.lower()
    if name.startswith("nyc-taxi"):
        lo = _index(series, datetime(2014, 10, 20, tzinfo=UTC))
        hi = _index(series, datetime(2015, 1, 5, tzinfo=UTC))
        return replace(series, start=lo, end=max(lo + 1, hi))
    if name.startswith("twitter"):
        return _last_days(series, 28)
    if name.startswith("elb"):
        return _last_days(series, 7)
    if len(series.counts) * series.step_s >= 14 * 86400:
        return _last_days(series, 7)
    return replace(series, start=0, end=len(series.counts))


def history_p50_rps(series: RateSeries) -> float:
    """The median request rate (requests/s) of the series' history, or of the window when it has none."""
    data = series.history() if series.start > 0 else series.window()
    if not len(data):
        return 0.0
    per = max(1, 60 // series.step_s)  # a per-second trace: its median second is often empty, so per minute
    if len(data) >= per:
        data = data[: len(data) // per * per].reshape(-1, per).sum(axis=1)
    else:
        per = len(data)
        data = np.asarray([data.sum()])
    return float(np.median(data)) / (per * series.step_s)
