"""Calibrating a projection's band on its own past errors, and the naive projection it is measured against.

The naive projection (`shifted_week`) is last week again: the jobs submitted
in the week before the cutoff, each moved exactly one week later, replayed on
the coming week's set-up. The calibration (`calibrated_bands`) is split
conformal on the past weeks' errors of the same series, week by week, so that
week i's band is corrected only from weeks before it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from burst.model import Job
from burst.sim.engine import StrategyResult, simulate
from burst.sim.setup import with_fault_tolerance
from burst.sim.strategies import StrategyRun

WEEK = timedelta(days=7)


def shifted_week(jobs: Sequence[Job], cut: datetime, shift: timedelta = WEEK) -> list[Job]:
    """The naive projection's jobs: those submitted in [cut - shift, cut), each moved `shift` later.

    A job keeps everything but its times: the same id (so its fault-tolerance
    draw is the same), tenant, size and duration; its submission and, where it
    has one, its deadline move by `shift`.
    """
    out = []
    for job in jobs:
        if cut - shift <= job.submitted_at < cut:
            deadline = job.deadline + shift if job.deadline is not None else None
            out.append(dataclasses.replace(job, submitted_at=job.submitted_at + shift, deadline=deadline))
    return out


@dataclass(frozen=True)
class Band:
    """A projection's P10, P50 and P90 of one total (USD)."""

    p10: float
    p50: float
    p90: float

    def holds(self, actual: float) -> bool:
        """Whether `actual` lies inside [P10, P90]."""
        return self.p10 <= actual <= self.p90


def band_score(band: Band, actual: float) -> float:
    """How far `actual` fell outside `band`, as a log ratio: > 0 outside, <= 0 inside (the CQR score).

    max(log(P10 / actual), log(actual / P90)): the factor by which the band
    would have had to widen at both ends to hold `actual`. A zero P10 holds
    any actual from below; a zero actual is outside any band with P10 > 0.
    """
    if actual <= 0:
        return -math.inf if band.p10 <= 0 else math.inf
    below = math.log(band.p10 / actual) if band.p10 > 0 else -math.inf
    above = math.log(actual / band.p90) if band.p90 > 0 else math.inf
    return max(below, above)


def conformal_widening(scores: Sequence[float], coverage: float = 0.8) -> float | None:
    """The log factor a band widens by from past `scores`: their split-conformal quantile for `coverage`.

    That is the ceil((n + 1) coverage)-th smallest of the n scores, and it may
    be negative (the band narrows) once there are enough of them (at 0.8, four).
    With fewer, that rank would pass n and the guarantee would need an
    unbounded band; the widening is then the largest score, never below 0: the
    band grows to hold every past week it missed, and no handful of weeks it
    held narrows it. None with no scores.
    """
    n = len(scores)
    if n == 0:
        return None
    rank = math.ceil((n + 1) * coverage - 1e-9)
    if rank > n:
        return max(0.0, max(scores))
    return sorted(scores)[rank - 1]


def calibrated_bands(bands: Sequence[Band], actuals: Sequence[float], coverage: float = 0.8) -> list[Band]:
    """Each week's band corrected only from the weeks before it: conformal on their `band_score`s.

    `bands` and `actuals` are one series' weeks in time order. Week i's P10 is
    divided and its P90 multiplied by exp(q), q the conformal quantile of
    weeks 0..i-1's scores (`conformal_widening`; a negative q narrows, never
    past the P50); the first week keeps its own band. The P50 is left as
    projected.
    """
    if len(bands) != len(actuals):
        raise ValueError(f"{len(bands)} bands for {len(actuals)} actuals")
    out = []
    for i, band in enumerate(bands):
        q = conformal_widening([band_score(b, a) for b, a in zip(bands[:i], actuals[:i], strict=True)], coverage)
        if q is None:
            out.append(band)
            continue
        factor = math.exp(q)
        out.append(Band(min(band.p10 / factor, band.p50), band.p50, max(band.p90 * factor, band.p50)))
    return out


def naive_projection(run: StrategyRun, history: Sequence[Job], cut: datetime, shift: timedelta = WEEK) -> StrategyResult:
    """Last week again: `shifted_week`'s jobs replayed from `cut` for `shift` on `run`'s set-up and strategy.

    Fault tolerance is marked as the simulator marks a trace's jobs (seed 0,
    per job id), so a job the original week ran as fault-tolerant is so again.
    """
    jobs = with_fault_tolerance(shifted_week(history, cut, shift), run.setup, 0)
    return simulate(run, jobs, start=cut, end=cut + shift, prior=history)
