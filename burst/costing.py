"""Cost attribution: who pays for each node-second, on which cost line.

The rule (also in burst.catalog's docstring): a tenant is charged for the
GPU-hours its jobs hold, at the node's per-GPU rate; idle GPUs of a live node
are tier overhead (tenant None) on the node's own line; warm (hot-pool) nodes
are the `hot_pool` line at their standby rate. On-prem is never free: it is
priced from capex, power and operations by the catalog.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Protocol

from burst.catalog import cost_line
from burst.model import Job, JobState, Node, NodeGroup, NodeId, NodeState, WarmState
from burst.state import CostEntry


class CostPrices(Protocol):
    def group_price(self, group: NodeGroup) -> float: ...

    def standby_price(self, group: NodeGroup) -> float: ...


HOLDING_STATES = frozenset({JobState.RUNNING, JobState.CHECKPOINTING})

PAID_STATES = frozenset(
    {NodeState.REQUESTED, NodeState.BOOTING, NodeState.WAKING, NodeState.READY, NodeState.DRAINING, NodeState.INTERRUPTED}
)


def attribute_costs(
    groups: Mapping[str, NodeGroup],
    nodes: Iterable[Node],
    jobs: Iterable[Job],
    prices: CostPrices,
    *,
    seconds: float,
    at: datetime,
    ended: Iterable[tuple[Job, tuple[NodeId, ...], float]] = (),
) -> list[CostEntry]:
    """Ledger rows for `seconds` of the given state: tenants pay for held GPUs, the rest is overhead.

    `ended`: jobs that stopped holding GPUs during those seconds, each with the nodes it held and for how many of
    the seconds; its tenant pays that part of its GPUs, taken from the overhead (the nodes' total is the same)."""
    held: dict[str, dict[str, float]] = {}
    holding = [(job, job.node_ids, 1.0) for job in jobs if job.node_ids and job.state in HOLDING_STATES]
    holding += [(job, nodes, min(1.0, max(0.0, s / seconds))) for job, nodes, s in ended if nodes and seconds > 0]
    for job, node_ids, weight in holding:
        if weight > 0:
            share = job.gpu_demand / len(node_ids) * weight
            tenant = job.tenant
            for node_id in node_ids:
                on_node = held.get(node_id)
                if on_node is None:
                    held[node_id] = {tenant: share}
                else:
                    on_node[tenant] = on_node.get(tenant, 0.0) + share
    hours = seconds / 3600.0
    rows: dict[tuple[str, str | None, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    paid: dict[str, tuple[str, float, float]] = {}  # per group: (cost line, USD/node-hour, its USD per GPU for `seconds`)
    warm_price: dict[tuple[str, bool], tuple[float, str]] = {}  # per (group, running warm): the same for warm nodes
    idle_usd: dict[str, float] = {}  # per group: its idle GPUs' cost, summed in node order (the overhead row)
    warm_state, running_warm = NodeState.WARM, WarmState.RUNNING
    for node in nodes:
        group_id = node.group_id
        group = groups.get(group_id)
        if group is None:
            continue
        state = node.state
        if state is warm_state:
            running = node.warm_state is running_warm
            warm = warm_price.get((group_id, running))
            if warm is None:
                warm = warm_price[(group_id, running)] = (
                    prices.group_price(group) if running else prices.standby_price(group), cost_line(group, warm=True))
            entry = rows[(warm[1], None, group_id)]
            entry[0] += warm[0] * hours
            continue
        if state not in PAID_STATES:
            continue
        priced = paid.get(group_id)
        if priced is None:
            price = prices.group_price(group)
            priced = paid[group_id] = (cost_line(group, warm=False), price, price / max(1, group.gpus_per_node) * hours)
        line, price, per_gpu_hour = priced
        node_gpus = node.gpus
        if node_gpus != group.gpus_per_node:
            per_gpu_hour = price / max(1, node_gpus) * hours
        used = 0.0
        holders = held.get(node.id)
        if holders:
            for tenant, gpus in holders.items():
                left = node_gpus - used
                if left < gpus:
                    gpus = left
                used += gpus
                entry = rows[(line, tenant, group_id)]
                entry[0] += gpus * per_gpu_hour
                entry[1] += gpus * hours
        idle = node_gpus - used
        if idle > 0:
            idle_usd[group_id] = idle_usd.get(group_id, 0.0) + idle * per_gpu_hour
    for group_id, usd in idle_usd.items():
        rows[(paid[group_id][0], None, group_id)][0] += usd
    return [
        CostEntry(at=at, line=line, usd=usd, gpu_hours=gh, tenant=tenant, group_id=gid)
        for (line, tenant, gid), (usd, gh) in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1] or "", kv[0][2]))
        if usd > 0
    ]



def spend_rate_by_tenant(
    groups: Iterable[NodeGroup], nodes: Iterable[Node], jobs: Iterable[Job], group_price: Callable[[NodeGroup], float]
) -> dict[str, float]:
    """USD per hour each tenant's running jobs cost now: their GPUs at their node's per-GPU rate."""
    by_id = {g.id: g for g in groups}
    group_of = {n.id: by_id.get(n.group_id) for n in nodes}
    rate: dict[str, float] = defaultdict(float)
    for job in jobs:
        if job.state not in HOLDING_STATES or not job.node_ids:
            continue
        group = group_of.get(job.node_ids[0])
        if group is not None:
            rate[job.tenant] += job.gpu_demand * group_price(group) / group.gpus_per_node
    return dict(rate)
