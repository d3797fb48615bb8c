"""Calibrating a projection's band on its own past errors, and the naive projection it is measured against.

The naive projection (`shifted_week`) is last week again: the jobs submitted
in the week before the cutoff, each moved exactly one week later, replayed on
the coming week's set-up. The calibration (`calibrated_bands`) is split
conformal on the past weeks' errors of the same series, week by week, so that
week i's band is corrected only from weeks before it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from burst.model import Job

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
