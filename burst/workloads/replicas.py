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

Spot replicas (`scale`'s `spot`, from a service's spot share) are replica
jobs marked `spot_replica`: the planner may put them on spot though they are
not fault tolerant (they hold no work to lose), where they go when it is the
cheapest capacity of the service's model; a reclaimed one is requeued and
placed again. Each kind is moved to its own count; a serving replica of a
kind above its count is stopped only while the serving replicas stay at the
total asked for, so a swap keeps the old replica until the new one serves.
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
    """A service's replicas at an instant: `ready` serving, `starting` waiting for a node or loading the model;
    `spot_ready` and `spot_starting` of them spot replicas (`spot_starting` counts only those on their way for
    the first time: one that served and was requeued by a reclaim is starting, but lost to the planner, which
    stands in for it on demand beyond its hedge until it serves again)."""

    ready: int
    starting: int
    spot_ready: int = 0
    spot_starting: int = 0

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
    """Runs a service's replicas somewhere: counts them and sets how many should run (`spot` of them on spot,
    where `runs_spot`). Either method may raise `ReplicasRefused`."""

    runs_spot: bool

    def counts(self, service: Service, jobs: Sequence[Job], now: datetime) -> ReplicaCounts:
        """The service's replicas at `now` (`jobs`: the tick's active jobs)."""
        ...

    def scale(self, service: Service, replicas: int, jobs: Sequence[Job], now: datetime, spot: int = 0) -> list[Job]:
        """Run `replicas` of the service from now, `spot` of them on spot (ignored unless `runs_spot`); the tick's
        active jobs as they are after the change."""
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

    runs_spot = True

    def __init__(self, queue: JobQueue) -> None:
        self.queue = queue
        self._served: dict[str, set[str]] = {}  # per service stem: the spot replicas seen serving

    def counts(self, service: Service, jobs: Sequence[Job], now: datetime) -> ReplicaCounts:
        """Serving replica jobs are ready; pending and loading ones are starting; spot replicas counted apart too,
        a spot replica seen serving before and now starting again (requeued by a reclaim) not among the starting
        ones (`ReplicaCounts`)."""
        mine = replicas_of(service, jobs)
        ready = [j for j in mine if serving(j, service, now)]
        stem = replica_stem(service)
        served = self._served.get(stem, set()) & {j.id for j in mine if j.spot_replica}
        served |= {j.id for j in ready if j.spot_replica}
        self._served[stem] = served
        spot_ready = sum(1 for j in ready if j.spot_replica)
        ready_ids = {j.id for j in ready}
        spot_starting = sum(1 for j in mine if j.spot_replica and j.id not in ready_ids and j.id not in served)
        return ReplicaCounts(ready=len(ready), starting=len(mine) - len(ready), spot_ready=spot_ready,
                             spot_starting=spot_starting)

    def scale(self, service: Service, replicas: int, jobs: Sequence[Job], now: datetime, spot: int = 0) -> list[Job]:
        """Move each kind to its count (`spot` spot replicas, the rest on demand): submit the missing ones, and
        stop those `stop_order` puts first of a kind above its count, a serving one only while the serving
        replicas stay at `replicas` (module doc)."""
        mine = replicas_of(service, jobs)
        wanted = {True: min(spot, replicas), False: replicas - min(spot, replicas)}
        by_kind = {kind: [j for j in mine if j.spot_replica is kind] for kind in wanted}
        added: list[Job] = []
        taken = {j.id for j in mine}
        stem, n = replica_stem(service), 0
        for kind in (False, True):
            for _ in range(wanted[kind] - len(by_kind[kind])):
                n += 1
                while f"{stem}{int(now.timestamp())}-{n}" in taken:
                    n += 1
                job = Job(id=f"{stem}{int(now.timestamp())}-{n}", tenant=service.tenant, gpus=service.gpus_per_replica,
                          submitted_at=now, gpu_model=service.gpu_model, priority=MAX_PRIORITY, fault_tolerant=False,
                          spot_replica=kind)
                self.queue.submit(job)
                added.append(job)
        spare = sum(1 for j in mine if serving(j, service, now)) - replicas
        stopped: set[str] = set()
        for kind in (True, False):
            for job in stop_order(by_kind[kind], service, now)[: max(0, len(by_kind[kind]) - wanted[kind])]:
                if serving(job, service, now):
                    if spare <= 0:
                        break
                    spare -= 1
                stopped.add(job.id)
        for job in mine:
            if job.id in stopped:
                self.queue.put(dataclasses.replace(job, state=JobState.CANCELLED), now)
        return [*(j for j in jobs if j.id not in stopped), *added]
