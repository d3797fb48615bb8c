"""The status document of `GET /v1/status`: tiers, groups, warm pools, queue and spend rate, from one tick."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from burst.costing import spend_rate_by_tenant
from burst.model import JobState, NodeGroup, NodeState
from burst.reconcile import TickReport

BOOTING = (NodeState.REQUESTED, NodeState.BOOTING, NodeState.WAKING)


def daemon_status(
    report: TickReport, group_price: Callable[[NodeGroup], float], forecasts: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Decide the status document for the tick `report` describes (a standby says only that); `forecasts` is the
    forecast service's serving model and backtest score per series."""
    out: dict[str, Any] = {"at": report.at.isoformat(), "plan_id": report.plan.id, "standby": report.standby}
    snap = report.snapshot
    if snap is None:
        return out
    tiers: dict[str, dict[str, float]] = defaultdict(lambda: {"ready_gpus": 0.0, "booting_gpus": 0.0, "warm_gpus": 0.0})
    groups = []
    for g in snap.groups:
        nodes = [n for n in snap.nodes if n.group_id == g.id]
        ready = sum(n.gpus for n in nodes if n.state is NodeState.READY)
        booting = sum(n.gpus for n in nodes if n.state in BOOTING)
        warm = sum(n.gpus for n in nodes if n.state is NodeState.WARM)
        tier = tiers[g.tier.value]
        tier["ready_gpus"] += ready
        tier["booting_gpus"] += booting
        tier["warm_gpus"] += warm
        pool = snap.warm_pools.get(g.id)
        groups.append({
            "id": g.id, "provider": g.provider, "tier": g.tier.value, "capacity_type": g.capacity_type.value,
            "gpu_model": g.shape.gpu_model, "target": snap.target_of(g), "ready_gpus": ready, "booting_gpus": booting,
            "warm_gpus": warm, "warm_pool": {"size": pool[0], "state": pool[1].value} if pool else None,
            "unavailable": snap.unavailable.get(g.id),
        })
    queue: dict[str, dict[str, float]] = defaultdict(
        lambda: {"pending_jobs": 0, "running_jobs": 0, "pending_gpus": 0.0, "running_gpus": 0.0}
    )
    for job in snap.jobs:
        q = queue[job.tenant]
        if job.state is JobState.PENDING:
            q["pending_jobs"] += 1
            q["pending_gpus"] += job.gpu_demand
        elif job.state in (JobState.RUNNING, JobState.CHECKPOINTING):
            q["running_jobs"] += 1
            q["running_gpus"] += job.gpu_demand
    spend = spend_rate_by_tenant(snap.groups, snap.nodes, snap.jobs, group_price)
    out.update(
        tiers=dict(tiers),
        groups=groups,
        queue=dict(sorted(queue.items())),
        spend_usd_per_hour={t: round(v, 4) for t, v in sorted(spend.items())},
        spend_month_usd={t: round(v, 2) for t, v in sorted(snap.spend_month_usd.items())},
        actions=len(report.plan.actions),
        holds=len(report.plan.holds),
        forecasts=dict(sorted((forecasts or {}).items())),
    )
    return out
