"""The job-loss ledger's rows for one tick: what interruptions and evictions cost in work, and checkpoints in GPU time.

- `interruption`: a running job whose nodes were lost was requeued from its
  last checkpoint (`JobEvents.requeued`); `lost_gpu_s` is the work done since
  that checkpoint × the job's GPUs.
- `eviction`: a plan evicted or requeued a running job (`JobEvents.evicted`);
  `lost_gpu_s` likewise.
- `checkpoint`: a plan's request_checkpoint was applied to a running job;
  `checkpoint_gpu_s` is its `checkpoint_duration_s` × its GPUs, the GPU time
  spent saving rather than working (0 when the duration is not measured).

The lost seconds are the ones `burst.progress.requeue` computed for the job
events, so the ledger, the `burst_lost_gpu_hours` metric and the simulator's
figure agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from burst.model import ActionKind, GroupId, Job, NodeId, Plan
from burst.state import JobLoss
from burst.workloads.base import JobEvents
from burst.workloads.queue import checkpoints_on_request


def job_losses(
    events: JobEvents,
    plan: Plan,
    jobs: Iterable[Job],
    group_of: Callable[[NodeId], GroupId | None],
    at: datetime,
) -> list[JobLoss]:
    """The ledger rows for a tick at `at`: its interruptions and evictions, then the checkpoints its plan asked.

    `jobs` are the active jobs the plan saw (before its actions); they name
    the nodes an evicted or checkpointing job ran on. `group_of` gives a
    node's group (None when unknown).
    """
    wanted = {job.id for job, _ in events.evicted}
    wanted.update(a.target for a in plan.actions if a.kind is ActionKind.REQUEST_CHECKPOINT)
    before = {j.id: j for j in jobs if j.id in wanted} if wanted else {}
    rows = [
        _lost(job, lost_s, "interruption", events.lost_nodes.get(job.id, ()), group_of, at)
        for job, lost_s in events.requeued
    ]
    rows += [
        _lost(job, lost_s, "eviction", _nodes_of(before.get(job.id)), group_of, at)
        for job, lost_s in events.evicted
    ]
    for action in plan.actions:
        was = before.get(action.target) if action.kind is ActionKind.REQUEST_CHECKPOINT else None
        if was is not None and checkpoints_on_request(was):
            rows.append(JobLoss(at, was.id, was.tenant, "checkpoint", was.gpu_demand,
                                checkpoint_gpu_s=(was.checkpoint_duration_s or 0.0) * was.gpu_demand,
                                group_id=_one_group(was.node_ids, group_of), node_ids=was.node_ids))
    return rows


def _lost(
    job: Job, lost_s: float, cause: str, node_ids: Sequence[NodeId],
    group_of: Callable[[NodeId], GroupId | None], at: datetime,
) -> JobLoss:
    return JobLoss(at, job.id, job.tenant, cause, job.gpu_demand, lost_gpu_s=lost_s * job.gpu_demand,
                   group_id=_one_group(node_ids, group_of), node_ids=tuple(node_ids))


def _nodes_of(job: Job | None) -> tuple[NodeId, ...]:
    return job.node_ids if job is not None else ()


def _one_group(node_ids: Sequence[NodeId], group_of: Callable[[NodeId], GroupId | None]) -> GroupId | None:
    """The group all of `node_ids` belong to; None when there are none, one is unknown, or they span groups."""
    groups = {group_of(n) for n in node_ids}
    return groups.pop() if len(groups) == 1 else None

