"""Which on-prem GPUs are taken, for one plan: the bridge between placement and the local GPU scheduler.

Placement counts free GPUs per node; on nodes whose agent reported its GPUs
(`Snapshot.node_gpus`) the local scheduler picks which ones. The book starts
from the GPUs running jobs are bound to; a node whose count says fewer GPUs
are free than its bound jobs explain (jobs placed before the node reported
its GPUs) has its highest-index GPUs counted as taken, so the two views
never disagree about how many are free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from burst.model import GpuSharing, Job, JobState, NodeGpus, NodeId, Policy
from burst.planner.gpu_scheduler import Binding, GpuRequest, GpuUse, Unplaced, schedule

HOLDING = (JobState.RUNNING, JobState.CHECKPOINTING)


@dataclass
class GpuBook:
    """The GPUs of reporting on-prem nodes and what holds each one, updated as the plan binds jobs."""

    nodes: Mapping[NodeId, NodeGpus]
    in_use: dict[str, GpuUse]

    @staticmethod
    def build(node_gpus: Mapping[NodeId, NodeGpus], jobs: Sequence[Job], free_of: Mapping[NodeId, int]) -> GpuBook:
        """The book for a snapshot: bound GPUs of running jobs, plus unexplained use per node's count."""
        in_use: dict[str, GpuUse] = {}
        for job in jobs:
            if job.state not in HOLDING:
                continue
            for uuid in job.gpu_uuids:
                before = in_use.get(uuid)
                if job.gpus == 0 and job.gpu_share is not None:
                    share = job.gpu_share + (before.share if before else 0.0)
                    in_use[uuid] = GpuUse(min(1.0, share), 0, before.sharing if before else GpuSharing.MPS)
                else:
                    in_use[uuid] = GpuUse()
        for node_id, node in node_gpus.items():
            free = free_of.get(node_id)
            if free is None:
                continue
            unbound = [g for g in sorted(node.gpus, key=lambda g: -g.index) if g.uuid not in in_use]
            for gpu in unbound[: max(0, len(unbound) - free)]:
                in_use[gpu.uuid] = GpuUse()
        return GpuBook(node_gpus, in_use)

    def bind(self, job: Job, policy: Policy, among: Sequence[NodeId]) -> Binding | Unplaced:
        """Bind `job` to GPUs of the nodes `among` (those with enough free GPUs by count), and book them."""
        nodes = [self.nodes[n] for n in among if n in self.nodes]
        request = GpuRequest.for_job(job, policy)
        result = schedule([request], nodes, self.in_use)
        if not result.bindings:
            return result.unplaced[0]
        binding = result.bindings[0]
        for uuid in binding.gpu_uuids:
            before = self.in_use.get(uuid)
            if binding.share is not None:
                taken = binding.share + (before.share if before else 0.0)
                self.in_use[uuid] = GpuUse(taken, (before.memory_mib if before else 0), binding.sharing)
            else:
                self.in_use[uuid] = GpuUse()
        return binding

    def opens_gpu(self, binding: Binding) -> bool:
        """Whether the binding took a GPU nobody used before (a shared GPU joined costs no GPU count)."""
        return binding.share is None or self.in_use[binding.gpu_uuids[0]].share <= (binding.share + 1e-9)
