"""Batch jobs and their lifecycle table."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from burst.model.base import JobId, NodeId, TenantName


class JobState(StrEnum):
    """Where a job is. A job is in exactly one of these at all times."""

    PENDING = "pending"
    RUNNING = "running"
    CHECKPOINTING = "checkpointing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RECLAIMED = "reclaimed"


TERMINAL_JOB_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.RECLAIMED})

JOB_TRANSITIONS: Mapping[JobState, frozenset[JobState]] = {
    JobState.PENDING: frozenset({JobState.RUNNING, JobState.CANCELLED, JobState.FAILED}),
    JobState.RUNNING: frozenset(
        {JobState.PENDING, JobState.CHECKPOINTING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.RECLAIMED}
    ),
    JobState.CHECKPOINTING: frozenset(
        {JobState.PENDING, JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.RECLAIMED}
    ),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
    JobState.RECLAIMED: frozenset(),
}
"""Allowed job transitions (RUNNING -> PENDING is a requeue after eviction or node loss)."""


@dataclass(frozen=True)
class Job:
    """A unit of GPU work submitted by a tenant."""

    id: JobId
    tenant: TenantName
    gpus: int
    submitted_at: datetime
    state: JobState = JobState.PENDING
    gpu_share: float | None = None
    gpu_model: str | None = None
    priority: int | None = None
    fault_tolerant: bool = False
    checkpoint_interval_s: float | None = None
    checkpoint_duration_s: float | None = None
    last_checkpoint_at: datetime | None = None
    deadline: datetime | None = None
    started_at: datetime | None = None
    node_ids: tuple[NodeId, ...] = ()
    duration_s: float | None = None
    work_done_s: float = 0.0
    gpu_uuids: tuple[str, ...] = ()  # the GPUs the local scheduler bound on-prem (empty elsewhere)
    command: tuple[str, ...] = ()  # argv a node agent runs for the job (empty: something else runs it)
    # The run time its submitter declared: the planner's only view of the job's length besides its tenant's
    # history (`duration_s` is what the job really takes, known to the queue and the simulator, never planned on).
    declared_duration_s: float | None = None
    do_not_disrupt: bool = False  # never moved to save money (spot notices, failures and preemption still move it)
    # A service's replica its service's spot share puts on spot: it may run there though it is not fault tolerant (a
    # reclaimed replica loses no work, only its capacity until it is replaced).
    spot_replica: bool = False

    def __post_init__(self) -> None:
        if self.gpus < 0 or (self.gpus == 0 and self.gpu_share is None):
            raise ValueError(f"job {self.id}: gpus must be >= 1 (or a gpu_share), got {self.gpus}")
        if self.gpu_share is not None and not 0 < self.gpu_share <= 1:
            raise ValueError(f"job {self.id}: gpu_share must be in (0, 1], got {self.gpu_share}")

    # Jobs are immutable, so derived values are computed once per object (the reconcile loop
    # and the simulator read them for every job on every tick).
    @functools.cached_property
    def gpu_demand(self) -> float:
        """GPUs this job occupies: whole GPUs, or its fractional share of one."""
        return gpu_demand_of(self)

    @functools.cached_property
    def finishes_at(self) -> datetime | None:
        """When this run completes if nothing interrupts it: started, with a known duration, less work done."""
        if self.duration_s is None or self.started_at is None:
            return None
        return self.started_at + timedelta(seconds=max(0.0, self.duration_s - self.work_done_s))

    @property
    def whole_gpus(self) -> int:
        """GPUs the scheduler must reserve (a fractional job reserves one shared GPU)."""
        return self.gpus if self.gpus else 1

    @property
    def active(self) -> bool:
        return self.state not in TERMINAL_JOB_STATES


def gpu_demand_of(job: Job) -> float:
    """`Job.gpu_demand`, without caching it on the job: for a pass that reads each job of a fresh snapshot once."""
    return float(job.gpus) if job.gpus else float(job.gpu_share or 0.0)
