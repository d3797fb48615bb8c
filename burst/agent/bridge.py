"""The controller's use of its node agents: their GPUs into the snapshot, plan job actions out, reports back.

Each tick the reconcile loop

1. `sync`s what agents reported into the embedded queue: a job whose
   process exited 0 succeeded, any other exit (or a failed start) failed; a
   checkpoint ack sets the job's `last_checkpoint_at` to when the checkpoint
   was taken (`checkpoint_taken_at`: the ack's time less the job's measured
   checkpoint duration, as `burst.progress` reads it);
2. reads `node_gpus()` into the snapshot, so the local GPU scheduler binds
   jobs to specific GPUs of nodes with an agent;
3. `forward`s the plan's job actions for jobs on those nodes: a placement
   becomes an assignment (the job's command on its bound GPUs, with the
   sharing mode of its tenant for a fractional job), a checkpoint request a
   checkpoint request (deadline: twice the job's measured checkpoint, at
   least `MIN_CHECKPOINT_DEADLINE_S`), and an eviction, requeue or reclaim
   an eviction of the job's process group.

A node id is the provider's node id; an agent registers under it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from burst.agent.channel import Assignment, CheckpointRequest, Eviction, JobPhase
from burst.agent.hub import AgentHub
from burst.model import Action, ActionKind, GpuSharing, Job, JobState, NodeGpus, NodeId, Policy, TenantName
from burst.state import Store

log = logging.getLogger(__name__)

MIN_CHECKPOINT_DEADLINE_S = 60.0
STOPPING = (ActionKind.EVICT_JOB, ActionKind.REQUEUE_JOB, ActionKind.RECLAIM_JOB)


class AgentBridge:
    """Connects the reconcile loop to an `AgentHub` (see the module docstring)."""

    def __init__(self, hub: AgentHub, store: Store, policies: Callable[[], Mapping[TenantName, Policy]]) -> None:
        self.hub = hub
        self.store = store
        self.policies = policies

    def node_gpus(self) -> dict[NodeId, NodeGpus]:
        """The GPUs each agent last reported, by node id."""
        return {node_id: view.gpus for node_id, view in self.hub.views().items()}

    def sync(self, now: datetime) -> None:
        """Apply the agents' job statuses and checkpoint acks to the embedded queue."""
        statuses, acks = self.hub.drain()
        for ack in acks:
            job = self.store.get_job(ack.job_id)
            if job is not None and job.active:
                self.store.put_job(dataclasses.replace(job, last_checkpoint_at=checkpoint_taken_at(job, ack.at)), at=now)
        for status in statuses:
            job = self.store.get_job(status.job_id)
            if job is None or not job.active:
                continue
            if status.phase is JobPhase.EXITED:
                state = JobState.SUCCEEDED if status.exit_code == 0 else JobState.FAILED
            elif status.phase is JobPhase.FAILED_TO_START:
                state = JobState.FAILED
            else:
                continue
            log.info("job ended on its agent", extra={"job": job.id, "state": state.value, "exit_code": status.exit_code})
            self.store.put_job(dataclasses.replace(job, state=state), at=now)

    def forward(self, action: Action, before: Job | None, now: datetime) -> None:
        """Tell the agents of the job's nodes what `action` asks of them (nothing for nodes without an agent)."""
        agents = set(self.hub.views())
        if action.kind is ActionKind.PLACE_JOB:
            job = self.store.get_job(action.target)
            if job is None or not job.command or not action.node_ids or action.node_ids[0] not in agents:
                return
            policy = self.policies().get(job.tenant)
            sharing = policy.gpu_sharing if policy is not None and job.gpus == 0 else GpuSharing.NONE
            for node_id in action.node_ids:
                node_gpus = {g.uuid for g in self.hub.views()[node_id].gpus.gpus} if node_id in agents else set()
                self.hub.assign(node_id, Assignment(
                    job_id=job.id, command=list(job.command),
                    gpu_uuids=[u for u in action.gpu_uuids if u in node_gpus] or list(action.gpu_uuids),
                    sharing=sharing, share=job.gpu_share if job.gpus == 0 else None,
                ))
        elif action.kind is ActionKind.REQUEST_CHECKPOINT and before is not None:
            wait = max(MIN_CHECKPOINT_DEADLINE_S, 2 * (before.checkpoint_duration_s or 0.0))
            for node_id in before.node_ids:
                if node_id in agents:
                    self.hub.request_checkpoint(node_id, CheckpointRequest(
                        job_id=before.id, request_id=action.id or f"{before.id}@{now.isoformat()}",
                        deadline=now + timedelta(seconds=wait),
                    ))
        elif action.kind in STOPPING and before is not None:
            for node_id in before.node_ids:
                if node_id in agents:
                    self.hub.evict(node_id, Eviction(job_id=before.id, reason=action.reason))


def checkpoint_taken_at(job: Job, acked_at: datetime) -> datetime:
    """When an acknowledged checkpoint was taken: its ack less the job's measured duration, not before the run.

    `burst.progress` counts the work up to `last_checkpoint_at` as saved once
    a checkpoint duration has passed after it; the ack arrives when the
    checkpoint is complete, so the work it saved is the work up to its start.
    """
    taken = acked_at - timedelta(seconds=job.checkpoint_duration_s or 0.0)
    return max(taken, job.started_at) if job.started_at is not None else taken
