"""Where a service's replicas run: the `ReplicaBackend` protocol, and replicas as jobs of the embedded queue.

The daemon's service loop (`burst.service_loop`) counts a service's replicas
with `counts` and sets how many should run with `scale`. `QueueReplicas`
runs them as jobs of the embedded queue (the quickstart's and the simulator's
way, as the daily tide replays them): one job per replica, `gpus_per_replica`
GPUs of the service's model, not fault tolerant (a replica that stops drops
requests, it never resumes), at the highest job priority so it goes ahead of
its tenant's batch work, running until the service lets it go. The planner
then places them like any job: on the steady tier first, moving
fault-tolerant batch off it by checkpoint, bursting to the cloud otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from burst.bounds import MAX_PRIORITY
from burst.model import Job, JobState, Service

REPLICA_PREFIX = "svc"
"""Replica jobs are named `svc:TENANT/NAME:N`."""
RUNNING = (JobState.RUNNING, JobState.CHECKPOINTING)


@dataclass(frozen=True)
class ReplicaCounts:
    """A service's replicas at an instant: `ready` serving, `starting` waiting for a node or loading the model."""

    ready: int
    starting: int

    @property
    def total(self) -> int:
        """Replicas serving or on their way."""
        return self.ready + self.starting


class ReplicasRefused(Exception):
    """A backend will not count or set a service's replicas now: `reason` says why (a setting it refuses, a call
    that failed), `counts` what it saw all the same. The service loop keeps the replicas as they are and holds."""

    def __init__(self, reason: str, counts: ReplicaCounts | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.counts = counts if counts is not None else ReplicaCounts(ready=0, starting=0)


class ReplicaBackend(Protocol):
    """Runs a service's replicas somewhere: counts them and sets how many should run. Either method may raise
    `ReplicasRefused`."""

    def counts(self, service: Service, jobs: Sequence[Job], now: datetime) -> ReplicaCounts:
        """The service's replicas at `now` (`jobs`: the tick's active jobs)."""
        ...

    def scale(self, service: Service, replicas: int, jobs: Sequence[Job], now: datetime) -> list[Job]:
        """Run `replicas` of the service from now; the tick's active jobs as they are after the change."""
        ...


class JobQueue(Protocol):
    """What `QueueReplicas` needs of the embedded queue: submit a job, record one that changed."""

    def submit(self, job: Job) -> None: ...

    def put(self, job: Job, now: datetime) -> None: ...


def replica_stem(service: Service) -> str:
    """The id every replica job of `service` starts with."""
    return f"{REPLICA_PREFIX}:{service.tenant}/{service.name}:"


def is_replica(job: Job) -> bool:
    """Whether `job` is a service's replica (not batch work)."""
    return job.id.startswith(REPLICA_PREFIX + ":")


def replicas_of(service: Service, jobs: Sequence[Job]) -> list[Job]:
    """The service's active replica jobs, oldest first."""
    stem = replica_stem(service)
    return sorted((j for j in jobs if j.id.startswith(stem) and j.active), key=lambda j: (j.submitted_at, j.id))


def serving(job: Job, service: Service, now: datetime) -> bool:
    """Whether a replica job serves at `now`: running, its model loaded (`replica_start_s` after it started)."""
    return (job.state in RUNNING and job.started_at is not None
            and job.started_at + timedelta(seconds=service.replica_start_s) <= now)


def stop_order(replicas: Sequence[Job], service: Service, now: datetime) -> list[Job]:
    """Decide which replicas go first on scale-in: those not serving yet (pending, then loading), latest first,
    then serving ones, latest started first."""
    def key(job: Job) -> tuple[int, float]:
        if job.state is JobState.PENDING:
            return (0, -job.submitted_at.timestamp())
        started = (job.started_at or job.submitted_at).timestamp()
        return (1 if not serving(job, service, now) else 2, -started)
    return sorted(replicas, key=key)


class QueueReplicas:
    """Replicas as jobs of the embedded queue (module doc)."""

    def __init__(self, queue: JobQueue) -> None:
        self.queue = queue

    def counts(self, service: Service, jobs: Sequence[Job], now: datetime) -> ReplicaCounts:
        """Serving replica jobs are ready; pending and loading ones are starting."""
        mine = replicas_of(service, jobs)
        ready = sum(1 for j in mine if serving(j, service, now))
        return ReplicaCounts(ready=ready, starting=len(mine) - ready)

    def scale(self, service: Service, replicas: int, jobs: Sequence[Job], now: datetime) -> list[Job]:
        """Submit replica jobs up to `replicas`, or cancel the ones `stop_order` puts first down to it."""
        mine = replicas_of(service, jobs)
        if replicas == len(mine):
            return list(jobs)
        if replicas > len(mine):
            taken = {j.id for j in mine}
            stem, n = replica_stem(service), 0
            added: list[Job] = []
            while len(added) < replicas - len(mine):
                n += 1
                job_id = f"{stem}{int(now.timestamp())}-{n}"
                if job_id in taken:
                    continue
                job = Job(id=job_id, tenant=service.tenant, gpus=service.gpus_per_replica, submitted_at=now,
                          gpu_model=service.gpu_model, priority=MAX_PRIORITY, fault_tolerant=False)
                self.queue.submit(job)
                added.append(job)
            return [*jobs, *added]
        stopped = {j.id for j in stop_order(mine, service, now)[: len(mine) - replicas]}
        for job in mine:
            if job.id in stopped:
                self.queue.put(dataclasses.replace(job, state=JobState.CANCELLED), now)
        return [j for j in jobs if j.id not in stopped]
