"""Small builders for domain objects used across tests (real model types, no fakes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from burst.model import CapacityType, GpuShape, Job, JobState, Node, NodeGroup, NodeState, Tier, Transition

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def group(
    gid: str,
    *,
    tier: Tier = Tier.ELASTIC,
    capacity_type: CapacityType = CapacityType.ON_DEMAND,
    gpus: int = 8,
    max_size: int = 10,
    min_size: int = 0,
    provider: str = "sim",
    region: str = "us-east-1",
    gpu_model: str = "A100",
    cooldown_s: float | None = 600.0,
) -> NodeGroup:
    if tier is Tier.STEADY:
        capacity_type = CapacityType.ONPREM
    return NodeGroup(
        id=gid,
        provider=provider,
        region=region,
        tier=tier,
        capacity_type=capacity_type,
        shape=GpuShape(gpu_model, gpus),
        instance_type=f"{gid}-type",
        min_size=min_size,
        max_size=max_size,
        scale_down_cooldown_s=cooldown_s,
    )


def ready_node(nid: str, g: NodeGroup, *, idle_since: datetime | None = None, at: datetime = T0) -> Node:
    since = idle_since or at - timedelta(hours=1)
    return Node(
        id=nid,
        group_id=g.id,
        state=NodeState.READY,
        gpus=g.gpus_per_node,
        created_at=since,
        history=(Transition(NodeState.READY, since),),
        idle_since=since,
    )


def job(
    jid: str,
    tenant: str = "a",
    gpus: int = 1,
    *,
    submitted: datetime = T0,
    state: JobState = JobState.PENDING,
    nodes: tuple[str, ...] = (),
    started: datetime | None = None,
    **kw: object,
) -> Job:
    return Job(
        id=jid,
        tenant=tenant,
        gpus=gpus,
        submitted_at=submitted,
        state=state,
        node_ids=nodes,
        started_at=started,
        **kw,  # type: ignore[arg-type]
    )


@dataclass
class TablePrices:
    """A price source from a table of USD/hour per node, by group id."""

    per_node: Mapping[str, float] = field(default_factory=dict)

    def group_price(self, group: NodeGroup) -> float:
        return self.per_node[group.id]
