"""Job queues: the embedded queue kept in the state store, and an in-memory one for the simulator.

Both run the same rules (`QueueRules.observe`): a running job whose nodes are
no longer ready is requeued from its last checkpoint; a running job with a
known duration that has done all its work succeeds. Jobs submitted with
`burst submit` live in the store queue; in production the on-prem agent or
Kubernetes reports completion, in the quickstart and the simulator the
duration does.

A job outside `burst.bounds` (`job_problem`: one written to the store past
the API, or an undecodable row) is failed where the queue meets it, before
any rule reads it, and reported in `JobEvents.failed` with its reason: the
loop logs it as a hold and plans for everyone else.

A plan's `request_checkpoint` is recorded at once (`last_checkpoint_at` is
the request; `burst.progress` counts it once its duration has passed), except
in a memory queue built with `ack_checkpoints`: there the checkpoint channel
of simulated jobs (`burst.workloads.sim_channel`) carries the request and
records the checkpoint when the job acknowledges it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from burst import progress
from burst.bounds import job_problem
from burst.model import Action, ActionKind, Job, JobState, Node, NodeId, NodeState
from burst.state import Store
from burst.workloads.base import JobEvents

RUNNING_STATES = (JobState.RUNNING, JobState.CHECKPOINTING)


def observe_jobs(
    jobs: Iterable[Job], now: datetime, nodes: Mapping[NodeId, Node], *, complete_by_duration: bool
) -> tuple[list[Job], list[Job], JobEvents]:
    """Advance `jobs` to `now`: returns (active jobs, changed jobs, events)."""
    active: list[Job] = []
    changed: list[Job] = []
    events = JobEvents()
    ready_state = NodeState.READY
    ready = {node_id for node_id, node in nodes.items() if node.state is ready_state}
    running_state, checkpointing_state = RUNNING_STATES
    pending_state = JobState.PENDING
    for job in jobs:
        state = job.state
        if state is pending_state:
            active.append(job)
            continue
        if state is running_state or state is checkpointing_state:
            finish = job.finishes_at  # progress.finishes_at, read directly: this runs for every job each tick
            if complete_by_duration and finish is not None and finish <= now:
                done = progress.complete(job, finish)
                changed.append(done)
                events.completed.append(done)
                events.ended_on[job.id] = (job.node_ids, finish)
                continue
            if not ready.issuperset(job.node_ids):
                back, lost = progress.requeue(job, now)
                changed.append(back)
                events.requeued.append((back, lost))
                events.lost_nodes[job.id] = job.node_ids
                active.append(back)
                continue
            active.append(job)  # a running job is active
        elif job.active:
            active.append(job)
    return active, changed, events


def screen_jobs(jobs: Iterable[Job]) -> tuple[list[Job], list[tuple[Job, str]]]:
    """Split `jobs` into those the planner can reason about and those out of bounds, with the reason."""
    sound: list[Job] = []
    bad: list[tuple[Job, str]] = []
    for job in jobs:
        problem = job_problem(job)
        if problem is None:
            sound.append(job)
        else:
            bad.append((job, problem))
    return sound, bad


def apply_job_action(job: Job, action: Action, now: datetime) -> Job:
    """The job after a plan's job action."""
    if action.kind is ActionKind.PLACE_JOB:
        return progress.start(job, action.node_ids, now, action.gpu_uuids)
    if action.kind is ActionKind.RECLAIM_JOB:
        return progress.end(job, JobState.RECLAIMED, now)
    if action.kind in (ActionKind.REQUEUE_JOB, ActionKind.EVICT_JOB):
        return progress.requeue(job, now)[0]
    if action.kind is ActionKind.REQUEST_CHECKPOINT:
        # The checkpoint is recorded as `last_checkpoint_at`; `started_at` stays the run's
        # start (the reclaim step measures max_job_runtime from it).
        if not checkpoints_on_request(job):
            return job
        return dataclasses.replace(job, last_checkpoint_at=now)
    raise ValueError(f"not a job action: {action.kind.value}")


def checkpoints_on_request(job: Job) -> bool:
    """Whether a plan's request_checkpoint makes `job` checkpoint: only a running job does."""
    return job.state in RUNNING_STATES and job.started_at is not None


class MemoryQueue:
    """An in-memory job queue (the simulator's): jobs arrive with `submit`, nothing persists."""

    def __init__(self, *, complete_by_duration: bool = True, ack_checkpoints: bool = False) -> None:
        self.jobs: dict[str, Job] = {}
        self.running: dict[str, Job] = {}  # the jobs of `jobs` holding GPUs (running or checkpointing)
        self.finished: list[Job] = []
        self.seen: set[str] = set()
        self.complete_by_duration = complete_by_duration
        # With ack_checkpoints a plan's request_checkpoint leaves the job as it is: a SimCheckpointChannel
        # over this queue carries the request, and the job's ack records the checkpoint.
        self.ack_checkpoints = ack_checkpoints
        self._failed: list[tuple[str, str, str]] = []  # refused on submit, reported by the next observe

    def submit(self, job: Job) -> None:
        self.seen.add(job.id)
        problem = job_problem(job)
        if problem is not None:
            self.finished.append(dataclasses.replace(job, state=JobState.FAILED))
            self._failed.append((job.id, job.tenant, problem))
            return
        self.jobs[job.id] = job
        if job.state in RUNNING_STATES:
            self.running[job.id] = job

    def has(self, job_id: str) -> bool:
        """Whether a job with this id was ever submitted."""
        return job_id in self.seen

    def observe(self, now: datetime, nodes: Mapping[NodeId, Node]) -> tuple[Sequence[Job], JobEvents]:
        active, changed, events = observe_jobs(self.jobs.values(), now, nodes, complete_by_duration=self.complete_by_duration)
        for job in changed:
            self._put(job)
        if self._failed:
            events.failed.extend(self._failed)
            self._failed.clear()
        return active, events

    def peek(self, now: datetime, nodes: Mapping[NodeId, Node]) -> Sequence[Job]:
        """The active jobs at `now`, changing nothing."""
        return observe_jobs(list(self.jobs.values()), now, nodes, complete_by_duration=self.complete_by_duration)[0]

    def apply(self, action: Action, now: datetime) -> None:
        job = self.jobs.get(action.target)
        if job is None or (self.ack_checkpoints and action.kind is ActionKind.REQUEST_CHECKPOINT):
            return
        self._put(apply_job_action(job, action, now))

    def get(self, job_id: str) -> Job | None:
        """The active job with this id (None when there is none)."""
        return self.jobs.get(job_id)

    def put(self, job: Job, now: datetime) -> None:
        """Record `job` as it is now (a job that ended moves to `finished`)."""
        self._put(job)

    def _put(self, job: Job) -> None:
        if job.active:
            self.jobs[job.id] = job
            if job.state in RUNNING_STATES:
                self.running[job.id] = job
            else:
                self.running.pop(job.id, None)
        else:
            self.jobs.pop(job.id, None)
            self.running.pop(job.id, None)
            self.finished.append(job)


class StoreQueue:
    """The embedded queue: jobs in the state store, submitted by `burst submit` or the API."""

    def __init__(self, store: Store, *, complete_by_duration: bool = False) -> None:
        self.store = store
        self.complete_by_duration = complete_by_duration

    def submit(self, job: Job) -> None:
        self.store.add_job(job, at=job.submitted_at)

    def has(self, job_id: str) -> bool:
        """Whether the store has a job with this id (in any state)."""
        return self.store.get_job(job_id) is not None

    def put(self, job: Job, now: datetime) -> None:
        """Record `job` as it is now (a service replica cancelled on scale-in)."""
        self.store.put_job(job, at=now)

    def observe(self, now: datetime, nodes: Mapping[NodeId, Node]) -> tuple[Sequence[Job], JobEvents]:
        unreadable: list[tuple[str, str, str]] = []
        jobs, bad = screen_jobs(self.store.jobs(states=[JobState.PENDING, *RUNNING_STATES], unreadable=unreadable))
        active, changed, events = observe_jobs(jobs, now, nodes, complete_by_duration=self.complete_by_duration)
        failed = [dataclasses.replace(job, state=JobState.FAILED) for job, _ in bad]
        if changed or failed:
            self.store.put_jobs([*changed, *failed], at=now)
        for job_id, _, _ in unreadable:
            self.store.fail_unreadable_job(job_id, at=now)
        events.failed.extend([(job.id, job.tenant, why) for job, why in bad] + unreadable)
        return active, events

    def peek(self, now: datetime, nodes: Mapping[NodeId, Node]) -> Sequence[Job]:
        """The active jobs at `now`, changing nothing (those out of bounds left out)."""
        jobs = screen_jobs(self.store.jobs(states=[JobState.PENDING, *RUNNING_STATES], unreadable=[]))[0]
        return observe_jobs(jobs, now, nodes, complete_by_duration=self.complete_by_duration)[0]

    def apply(self, action: Action, now: datetime) -> None:
        job = self.store.get_job(action.target)
        if job is not None and job.active:
            self.store.put_job(apply_job_action(job, action, now), at=now)
