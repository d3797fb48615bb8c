"""How long a job is expected to run: from what production knows, never from its true duration.

A job's length is known to the planner only as

1. its `declared_duration_s`, the run time its submitter declared (`burst submit
   --duration`, the API's `duration`), when it has one; else
2. its tenant's history of completed run times (`Snapshot.runtimes`), given the
   time the job has already run: the mean of `d - age` over the past run times
   `d` longer than its age, once at least `MIN_HISTORY` of them are; else
3. its age itself (a job that has run `t` is expected to run about `t` more, the
   rule for the heavy-tailed run times GPU clusters show), and at least
   `DEFAULT_RUN_S` for a job that has barely run.

`Job.duration_s` is never read here: in the simulator it is the trace's true
duration, which no production controller knows. (The simulator declares none.)
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from burst.model import Job, JobState, TenantName

MIN_HISTORY = 5
"""Past run times longer than a job's age needed before the tenant's history is used for it."""

DEFAULT_RUN_S = 3600.0
"""The remaining run expected of a job with no declared duration and too little history."""

HISTORY_PER_TENANT = 1000
"""Completed run times kept per tenant (the most recent)."""


class RuntimeHistory:
    """The run times of each tenant's recently completed jobs, as the reconcile loop sees them complete."""

    def __init__(self, per_tenant: int = HISTORY_PER_TENANT) -> None:
        self.per_tenant = per_tenant
        self._times: dict[TenantName, deque[float]] = {}
        self._frozen: dict[TenantName, tuple[float, ...]] = {}

    def record(self, job: Job) -> None:
        """Add a completed job's run time (the work it did, over every run)."""
        self.add(job.tenant, job.work_done_s)

    def add(self, tenant: TenantName, seconds: float) -> None:
        """Add one of `tenant`'s run times (a completed job's, or one read back from the store)."""
        times = self._times.get(tenant)
        if times is None:
            times = self._times[tenant] = deque(maxlen=self.per_tenant)
        times.append(seconds)
        self._frozen.pop(tenant, None)

    def runtimes(self) -> dict[TenantName, tuple[float, ...]]:
        """Each tenant's run times, for `Snapshot.runtimes` (tuples rebuilt only for tenants that changed)."""
        for tenant, times in self._times.items():
            if tenant not in self._frozen:
                self._frozen[tenant] = tuple(times)
        return dict(self._frozen)


@dataclass(frozen=True)
class _Sorted:
    """One tenant's past run times, ascending, with suffix sums for conditional means."""

    times: tuple[float, ...]
    suffix: tuple[float, ...]  # suffix[i] = sum(times[i:])

    @classmethod
    def of(cls, runtimes: Iterable[float]) -> _Sorted:
        times = tuple(sorted(runtimes))
        suffix = [0.0] * (len(times) + 1)
        for i in range(len(times) - 1, -1, -1):
            suffix[i] = suffix[i + 1] + times[i]
        return cls(times, tuple(suffix))

    def mean_remaining(self, age: float) -> float | None:
        """Mean of `d - age` over past run times `d > age`, or None when fewer than MIN_HISTORY are."""
        i = bisect.bisect_right(self.times, age)
        longer = len(self.times) - i
        if longer < MIN_HISTORY:
            return None
        return self.suffix[i] / longer - age


class RuntimeEstimator:
    """Expected remaining run of jobs, from declared durations and each tenant's run-time history."""

    def __init__(self, runtimes: Mapping[TenantName, tuple[float, ...]]) -> None:
        self._runtimes = runtimes
        self._sorted: dict[TenantName, _Sorted] = {}

    def remaining_s(self, job: Job, now: datetime) -> tuple[float, str]:
        """Seconds the job is expected to run from `now`, and where that figure comes from (for reasons)."""
        age = ran_s(job, now)
        if job.declared_duration_s is not None:
            return max(0.0, job.declared_duration_s - age), "declared duration"
        history = self._sorted.get(job.tenant)
        if history is None:
            history = self._sorted[job.tenant] = _Sorted.of(self._runtimes.get(job.tenant, ()))
        mean = history.mean_remaining(age)
        if mean is not None:
            return mean, f"tenant {job.tenant}'s run times past {age:.0f} s"
        return max(age, DEFAULT_RUN_S), "no history: its age, at least the default"


def ran_s(job: Job, now: datetime) -> float:
    """Seconds of work the job has done by `now`: earlier runs' banked work plus this run's time.

    Unlike `burst.progress.work_at`, not capped at the job's true duration.
    """
    done = job.work_done_s
    if job.state in (JobState.RUNNING, JobState.CHECKPOINTING) and job.started_at is not None:
        done += max(0.0, (now - job.started_at).total_seconds())
    return done


__all__ = ["DEFAULT_RUN_S", "HISTORY_PER_TENANT", "MIN_HISTORY", "RuntimeEstimator", "RuntimeHistory", "ran_s"]
