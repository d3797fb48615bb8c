"""The observed state at one instant: the planner's whole view of the world."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from burst.model.base import GroupId, NodeId, TenantName
from burst.model.gpus import NodeGpus
from burst.model.jobs import Job, JobState
from burst.model.nodes import Node, NodeGroup, NodeState, WarmState


@dataclass(frozen=True)
class Snapshot:
    """Observed state at one instant: the planner's whole view of the world.

    `targets` are the group sizes asked for (which may exceed the nodes listed:
    capacity still booting, or not yet visible, counts toward them).
    `spend_month_usd` is each tenant's month-to-date spend from the cost ledger.
    `warm_pools` are the warm-pool sizes and states asked of the providers.
    `unavailable` are groups cooling down after a failed launch or a spot
    interruption: the planner launches elsewhere until they are back.
    `notices` are the nodes a provider said it will reclaim, and when;
    `rebalances` the nodes it said are at elevated risk of that (a rebalance
    recommendation: no deadline), and when it said so.
    `node_gpus` are the GPUs (identity, health, topology) of on-prem nodes that
    reported them: the local GPU scheduler binds jobs to specific GPUs there.
    `interruption_rates` are the spot groups' interruption rates per node-hour
    learnt from observed interruptions (`burst.planner.spot_rates`); a group
    without one is taken at its published band's prior.
    `runtimes` are the run times (seconds of work) of each tenant's recently
    completed jobs: what the planner expects a job's run from
    (`burst.planner.runtime_estimate`).
    `service_warm_gpus` are the GPUs per model the services' plans keep warm
    (`burst.service_loop`): the hot-pool step holds at least that many.
    """

    groups: tuple[NodeGroup, ...]
    nodes: tuple[Node, ...]
    jobs: tuple[Job, ...]
    targets: Mapping[GroupId, int] = field(default_factory=dict)
    spend_month_usd: Mapping[TenantName, float] = field(default_factory=dict)
    warm_pools: Mapping[GroupId, tuple[int, WarmState]] = field(default_factory=dict)  # requested size, state
    unavailable: Mapping[GroupId, str] = field(default_factory=dict)  # groups not to launch in now, and why
    notices: Mapping[NodeId, datetime] = field(default_factory=dict)  # spot interruption deadlines per node
    rebalances: Mapping[NodeId, datetime] = field(default_factory=dict)  # rebalance recommendations' times per node
    node_gpus: Mapping[NodeId, NodeGpus] = field(default_factory=dict)  # on-prem nodes' GPUs, from their agents
    interruption_rates: Mapping[GroupId, float] = field(default_factory=dict)  # learnt, per node-hour
    runtimes: Mapping[TenantName, tuple[float, ...]] = field(default_factory=dict)  # completed jobs' run times, recent
    service_warm_gpus: Mapping[str, float] = field(default_factory=dict)  # GPU model -> GPUs services keep warm

    @functools.cached_property
    def running_jobs(self) -> tuple[Job, ...]:
        """The jobs holding GPUs (running or checkpointing), in snapshot order; found once per snapshot."""
        running, checkpointing = JobState.RUNNING, JobState.CHECKPOINTING
        return tuple([j for j in self.jobs if j.state is running or j.state is checkpointing])

    @functools.cached_property
    def pending_jobs(self) -> tuple[Job, ...]:
        """The jobs waiting to be placed, in snapshot order; found once per snapshot."""
        pending = JobState.PENDING
        return tuple([j for j in self.jobs if j.state is pending])

    def group(self, group_id: GroupId) -> NodeGroup:
        for g in self.groups:
            if g.id == group_id:
                return g
        raise KeyError(group_id)

    def target_of(self, group: NodeGroup) -> int:
        """A group's asked-for size; without a recorded target, its live node count."""
        if group.id in self.targets:
            return self.targets[group.id]
        return sum(1 for n in self.nodes if n.group_id == group.id and n.live and n.state is not NodeState.WARM)
