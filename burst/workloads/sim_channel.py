"""The checkpoint channel of simulated jobs: the protocol real jobs speak, answered on the simulated clock.

burst never checkpoints a job itself; it asks over a channel and the job
answers (`burst.agent.channel`: the on-prem agent signals the job's process,
Kubernetes annotates its pods). `SimCheckpointChannel` is that channel for the
jobs of an in-memory queue (the simulator's), plugged into the reconcile loop
as its agent link (`burst.reconcile.AgentLink`) like the real ones: `forward`
carries a plan's job actions to the jobs, `sync` brings back what they did.

* A plan's `request_checkpoint` becomes a `CheckpointRequest`: its request id
  is the action's id, its deadline (as on the other channels) twice the job's
  measured `checkpoint_duration_s`, at least `MIN_CHECKPOINT_DEADLINE_S`. The
  job is `checkpointing` while the request is in flight (the planner waits for
  it and asks nothing more).
* The job takes its `checkpoint_duration_s` and answers with a
  `CheckpointAck` for that request id, `at` the moment the checkpoint
  completed. The ack is what records the checkpoint: the job's
  `last_checkpoint_at` becomes the moment the checkpoint was taken (the
  request), so `burst.progress` saves the work done up to then, and counts it
  from the moment it completed (`last_checkpoint_at + checkpoint_duration_s`,
  the ack's `at`).
* A request times out, with no ack, when its deadline passes, the job loses a
  node, the job finishes, or a plan evicts, requeues or reclaims it before the
  checkpoint completes: the job keeps its previous checkpoint, so a node lost
  during a checkpoint loses the work since the last completed one.

A node's loss is dated by its own history (when it last left `ready`, looked
up by id so a node already terminated still tells); a node with no record at
all counts as lost since the last sync that saw it ready. Everything happens at the instants the loop passes in, never
the wall clock, so a replay stays deterministic; `next_event_at` tells an
event-driven clock when the next ack or timeout is due.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from burst.agent.channel import CheckpointAck, CheckpointRequest
from burst.model import Action, ActionKind, Job, JobState, Node, NodeGpus, NodeId, NodeState

MIN_CHECKPOINT_DEADLINE_S = 60.0
"""A request's deadline is twice the job's measured checkpoint, and at least this (as on the other channels)."""
STOPPING = frozenset({ActionKind.EVICT_JOB, ActionKind.REQUEUE_JOB, ActionKind.RECLAIM_JOB})


class JobBook(Protocol):
    """Where the channel reads and writes the jobs it talks to (`burst.workloads.queue.MemoryQueue`)."""

    def get(self, job_id: str) -> Job | None: ...

    def put(self, job: Job, now: datetime) -> None: ...


class TimeoutCause(StrEnum):
    """What came before a requested checkpoint completed."""

    DEADLINE = "deadline"  # the request's deadline passed
    NODE_LOST = "node_lost"  # one of the job's nodes stopped being ready
    FINISHED = "finished"  # the job completed its work
    STOPPED = "stopped"  # a plan evicted, requeued or reclaimed the job (or its run ended otherwise)


@dataclass(frozen=True)
class CheckpointTimeout:
    """A request that got no ack: when it ended and why."""

    request: CheckpointRequest
    at: datetime
    cause: TimeoutCause


@dataclass
class _InFlight:
    request: CheckpointRequest
    asked_at: datetime
    completes_at: datetime
    run: datetime  # the `started_at` of the run the request was made to
    ready_at: datetime  # the last sync that saw every node of the job ready


class SimCheckpointChannel:
    """Checkpoint requests to simulated jobs, and their acks or timeouts (see the module docstring).

    `jobs` is the queue the simulated jobs live in; `node` looks up a node they run on by id, terminated
    ones included (the sim provider's `node`), to date when it was lost.
    """

    def __init__(
        self,
        jobs: JobBook,
        node: Callable[[NodeId], Node | None],
        *,
        min_deadline_s: float = MIN_CHECKPOINT_DEADLINE_S,
    ) -> None:
        self.jobs = jobs
        self.node = node
        self.min_deadline_s = min_deadline_s
        self.in_flight: dict[str, _InFlight] = {}
        self.requests: list[CheckpointRequest] = []
        self.acks: list[CheckpointAck] = []
        self.timeouts: list[CheckpointTimeout] = []

    # ------------------------------------------------------------ the reconcile loop's agent link

    def node_gpus(self) -> Mapping[NodeId, NodeGpus]:
        """Nothing: no agent reports the GPUs of simulated nodes."""
        return {}

    def forward(self, action: Action, before: Job | None, now: datetime) -> None:
        """Send a plan's checkpoint request to its job; an eviction, requeue or reclaim ends one in flight."""
        if action.kind is ActionKind.REQUEST_CHECKPOINT:
            job = self.jobs.get(action.target)
            if job is None:
                return
            wait = max(self.min_deadline_s, 2 * (job.checkpoint_duration_s or 0.0))
            self.request(job.id, action.id or f"{job.id}@{now.isoformat()}", now + timedelta(seconds=wait), now)
        elif action.kind in STOPPING:
            self._time_out(action.target, now, TimeoutCause.STOPPED)

    def sync(self, now: datetime) -> None:
        """Deliver the acks and timeouts due by `now` to the jobs (before the queue observes them)."""
        for job_id in sorted(self.in_flight):
            self._settle(job_id, now)

    # ------------------------------------------------------------ the channel

    def request(self, job_id: str, request_id: str, deadline: datetime, now: datetime) -> CheckpointRequest | None:
        """Ask the running job for a checkpoint by `deadline`; None when it is not running or already asked."""
        job = self.jobs.get(job_id)
        if job is None or job.state is not JobState.RUNNING or job.started_at is None or job_id in self.in_flight:
            return None
        request = CheckpointRequest(job_id=job_id, request_id=request_id, deadline=deadline)
        takes = timedelta(seconds=job.checkpoint_duration_s or 0.0)
        self.in_flight[job_id] = _InFlight(request, now, now + takes, job.started_at, now)
        self.requests.append(request)
        self.jobs.put(dataclasses.replace(job, state=JobState.CHECKPOINTING), now)
        return request

    def next_event_at(self) -> datetime | None:
        """When the next request in flight completes or reaches its deadline (None: nothing in flight)."""
        due = [min(f.completes_at, f.request.deadline) for f in self.in_flight.values()]
        return min(due) if due else None

    def _settle(self, job_id: str, now: datetime) -> None:
        flight = self.in_flight[job_id]
        job = self.jobs.get(job_id)
        if job is None or job.state not in (JobState.RUNNING, JobState.CHECKPOINTING) or job.started_at != flight.run:
            self._time_out(job_id, now, TimeoutCause.STOPPED)
            return
        lost = self._lost_at(job, flight.ready_at)
        ends = [(flight.request.deadline, TimeoutCause.DEADLINE)]
        if lost is not None:
            ends.append((lost, TimeoutCause.NODE_LOST))
        if job.finishes_at is not None:
            ends.append((job.finishes_at, TimeoutCause.FINISHED))
        first_at, cause = min(ends, key=lambda e: e[0])
        if flight.completes_at <= min(now, first_at):
            del self.in_flight[job_id]
            self.acks.append(CheckpointAck(job_id=job_id, request_id=flight.request.request_id, at=flight.completes_at))
            self.jobs.put(dataclasses.replace(job, state=JobState.RUNNING, last_checkpoint_at=flight.asked_at), now)
        elif first_at <= now:
            self._time_out(job_id, first_at, cause)
        elif lost is None:
            flight.ready_at = now

    def _time_out(self, job_id: str, at: datetime, cause: TimeoutCause) -> None:
        flight = self.in_flight.pop(job_id, None)
        if flight is None:
            return
        self.timeouts.append(CheckpointTimeout(flight.request, at, cause))
        job = self.jobs.get(job_id)
        if job is not None and job.state is JobState.CHECKPOINTING:
            self.jobs.put(dataclasses.replace(job, state=JobState.RUNNING), at)

    def _lost_at(self, job: Job, ready_at: datetime) -> datetime | None:
        """When the first of the job's nodes stopped being ready (None: all still are).

        A node with no record was last known ready at `ready_at`; that is all that can be said.
        """
        lost: list[datetime] = []
        for node_id in job.node_ids:
            node = self.node(node_id)
            if node is None:
                lost.append(ready_at)
            elif node.state is not NodeState.READY:
                lost.append(_left_ready_at(node, ready_at))
        return min(lost) if lost else None


def _left_ready_at(node: Node, default: datetime) -> datetime:
    """When `node` last left `ready`, from its history (`default` when its history does not say)."""
    for before, after in zip(reversed(node.history[:-1]), reversed(node.history[1:]), strict=True):
        if before.state is NodeState.READY:
            return after.at
    return default


__all__ = [
    "MIN_CHECKPOINT_DEADLINE_S",
    "CheckpointTimeout",
    "JobBook",
    "SimCheckpointChannel",
    "TimeoutCause",
]
