"""How a running job's work advances, checkpoints and is lost: pure functions shared by every job source.

A job that (re)starts at `started_at` with `work_done_s` already banked has done
`work_done_s + (now - started_at)` seconds of work at `now`. With a checkpoint
interval it checkpoints every `checkpoint_interval_s` of run time, and a
checkpoint asked for by a plan (`last_checkpoint_at` set during the run) counts
too, once it has had its `checkpoint_duration_s` to complete (it saves the work
as of its request; a node lost before it completes loses it); a job that loses
its node resumes from its last checkpoint (fault-tolerant jobs) or from the
start (jobs that cannot resume), and what it did since is lost work. A
checkpoint never saves more than the work done (duration included).

`last_checkpoint_at` is therefore when a requested checkpoint was taken, not
when it completed: the embedded queue records it at the request, and the
simulator's checkpoint channel (`burst.workloads.sim_channel`) records it, as
the request's time, only once the job acknowledges the checkpoint.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from burst.model import Job, JobState


def work_at(job: Job, now: datetime) -> float:
    """Seconds of work the job has done by `now` (capped at its duration when known)."""
    done = job.work_done_s
    if job.state in (JobState.RUNNING, JobState.CHECKPOINTING) and job.started_at is not None:
        done += max(0.0, (now - job.started_at).total_seconds())
    if job.duration_s is not None:
        done = min(done, job.duration_s)
    return done


def _run_start(job: Job) -> datetime | None:
    """When the job's current run began, or None when it is not running."""
    return job.started_at if job.state in (JobState.RUNNING, JobState.CHECKPOINTING) else None


def _checkpoint_run_s(job: Job, started: datetime, now: datetime) -> float | None:
    """Seconds into the current run of the job's last checkpoint at or before `now` (None: none yet).

    Periodic checkpoints fall every `checkpoint_interval_s` of run time; a
    requested one is `last_checkpoint_at` when it lies inside the current run.
    Neither counts past the work actually done (a job stops at its duration).
    """
    ran = max(0.0, work_at(job, now) - job.work_done_s)
    best: float | None = None
    interval = job.checkpoint_interval_s
    if interval and ran >= interval:
        best = (ran // interval) * interval
    asked = job.last_checkpoint_at
    takes = timedelta(seconds=job.checkpoint_duration_s or 0.0)
    if asked is not None and started <= asked and asked + takes <= now:
        at = min(ran, (asked - started).total_seconds())
        best = at if best is None else max(best, at)
    return best


def checkpointed_work(job: Job, now: datetime) -> float:
    """Work saved by the job's last checkpoint at or before `now` (what survives losing its node)."""
    started = _run_start(job)
    if started is None:
        return job.work_done_s
    if not job.fault_tolerant:
        return 0.0
    return job.work_done_s + (_checkpoint_run_s(job, started, now) or 0.0)


def last_checkpoint_at(job: Job, now: datetime) -> datetime | None:
    """When the job last checkpointed (in its current run if it has, else as recorded)."""
    started = _run_start(job)
    if started is None or not job.fault_tolerant:
        return job.last_checkpoint_at
    at = _checkpoint_run_s(job, started, now)
    if at is not None:
        return started + timedelta(seconds=at)
    before = job.last_checkpoint_at  # from an earlier run; a request in this run that has not completed is not one
    return before if before is not None and before < started else None


def finishes_at(job: Job) -> datetime | None:
    """When a running job with a known duration completes, if nothing interrupts it."""
    return job.finishes_at


def start(job: Job, node_ids: tuple[str, ...], now: datetime, gpu_uuids: tuple[str, ...] = ()) -> Job:
    """The job bound to `node_ids` (and, on-prem, to `gpu_uuids`) and running from `now`."""
    return dataclasses.replace(job, state=JobState.RUNNING, node_ids=node_ids, started_at=now, gpu_uuids=gpu_uuids)


def requeue(job: Job, now: datetime) -> tuple[Job, float]:
    """The job back in the queue after losing its nodes, and the seconds of work lost."""
    done = work_at(job, now)
    kept = checkpointed_work(job, now)
    back = dataclasses.replace(
        job,
        state=JobState.PENDING,
        node_ids=(),
        gpu_uuids=(),
        started_at=None,
        work_done_s=kept,
        last_checkpoint_at=last_checkpoint_at(job, now),
    )
    return back, max(0.0, done - kept)


def complete(job: Job, now: datetime) -> Job:
    """The job succeeded at `now`."""
    return dataclasses.replace(job, state=JobState.SUCCEEDED, work_done_s=work_at(job, now), node_ids=())


def end(job: Job, state: JobState, now: datetime) -> Job:
    """The job stopped for good in `state` (reclaimed, cancelled, failed)."""
    return dataclasses.replace(job, state=state, work_done_s=work_at(job, now), node_ids=())
