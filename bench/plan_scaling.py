"""Benchmark: one `plan()` call on generated snapshots of growing size, to catch a super-linear step early.

    python bench/plan_scaling.py           # 1k and 10k nodes x 10k and 100k pending jobs, 200 tenants
    python bench/plan_scaling.py --small   # small sizes only (CI keeps the script from rotting)

Snapshots are generated (seeded), not a trace: half the nodes are on-prem and
half busy; pending jobs ask 1-8 GPUs. Prints seconds per plan and the growth
ratio between sizes (10x the input should cost about 10x, not 100x). Target:
under 1 s at the largest size on one core.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime, timedelta

from burst.catalog import Catalog
from burst.model import (
    CapacityType,
    GpuShape,
    Job,
    JobState,
    Node,
    NodeGroup,
    NodeState,
    Snapshot,
    Tier,
    Transition,
)
from burst.planner import PlanIds, plan

TARGET_S = 1.0
NOW = datetime(2026, 3, 2, 12, tzinfo=UTC)
SHAPE = GpuShape("A100", 8, 40.0)


def groups() -> tuple[NodeGroup, ...]:
    common = {"provider": "sim", "shape": SHAPE, "boot_latency_s": 300.0}
    return (
        NodeGroup(id="onprem", region="dc1", tier=Tier.STEADY, capacity_type=CapacityType.ONPREM,
                  instance_type="dgx-a100", min_size=0, max_size=100_000, **common),  # type: ignore[arg-type]
        NodeGroup(id="od", region="us-east-1", tier=Tier.ELASTIC, capacity_type=CapacityType.ON_DEMAND,
                  instance_type="p4d.24xlarge", max_size=100_000, **common),  # type: ignore[arg-type]
        NodeGroup(id="spot", region="us-east-1", tier=Tier.ELASTIC, capacity_type=CapacityType.SPOT,
                  instance_type="p4d.24xlarge", max_size=100_000, **common),  # type: ignore[arg-type]
    )


def snapshot(n_nodes: int, n_pending: int, n_tenants: int, seed: int = 0) -> Snapshot:
    rng = random.Random(seed)
    gs = groups()
    nodes = []
    jobs = []
    since = NOW - timedelta(hours=2)
    for i in range(n_nodes):
        g = gs[0] if i < n_nodes // 2 else gs[1 + i % 2]
        nodes.append(Node(id=f"n{i:06d}", group_id=g.id, state=NodeState.READY, gpus=8, created_at=since,
                          history=(Transition(NodeState.READY, since),)))
        if i % 2 == 0:
            jobs.append(Job(id=f"r{i:06d}", tenant=f"t{i % n_tenants:03d}", gpus=8, submitted_at=since,
                            state=JobState.RUNNING, started_at=since, node_ids=(f"n{i:06d}",), duration_s=7200.0))
    for k in range(n_pending):
        jobs.append(Job(id=f"p{k:07d}", tenant=f"t{rng.randrange(n_tenants):03d}", gpus=rng.choice((1, 2, 4, 8)),
                        submitted_at=NOW - timedelta(seconds=rng.uniform(0, 3600)), duration_s=3600.0,
                        fault_tolerant=rng.random() < 0.5, checkpoint_interval_s=1800.0))
    targets = {g.id: sum(1 for n in nodes if n.group_id == g.id) for g in gs}
    return Snapshot(groups=gs, nodes=tuple(nodes), jobs=tuple(jobs), targets=targets)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args()
    sizes = [(100, 1_000), (1_000, 10_000)] if args.small else [(1_000, 10_000), (10_000, 10_000), (1_000, 100_000), (10_000, 100_000)]
    catalog = Catalog.load()
    previous: float | None = None
    print(f"{'nodes':>7} {'pending':>8} {'tenants':>7} {'s/plan':>8} {'actions':>8} {'growth':>7}")
    for n_nodes, n_pending in sizes:
        snap = snapshot(n_nodes, n_pending, 200)
        t0 = time.perf_counter()
        result = plan(snap, [], {}, catalog, now=NOW, ids=PlanIds("bench"))
        dt = time.perf_counter() - t0
        growth = f"{dt / previous:.1f}x" if previous else "-"
        print(f"{n_nodes:>7} {n_pending:>8} {200:>7} {dt:>8.3f} {len(result.actions):>8} {growth:>7}")
        previous = dt
    if not args.small:
        target = "met" if dt < TARGET_S else "not met"
        print(f"largest size: {dt:.3f} s per plan; target under {TARGET_S:g} s on one core: {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
