"""Benchmark: the local GPU scheduler's packing against an exact optimum, and its throughput.

    python bench/gpu_packing.py           # the docs table (200 small instances; 10,000 jobs on 1,000 nodes)
    python bench/gpu_packing.py --small   # a quick slice (CI keeps the script from rotting)

Job sizes are drawn (seeded) from the real Philly trace's GPU counts
(../shared/data/traces/philly.csv, or $BURST_DATA_DIR): mostly 1 GPU, some 2,
4, 8 and larger gangs.

1. **Packing.** Each small instance is 2-5 8-GPU on-prem nodes (NVSwitch,
   DGX-1 cube mesh and PCIe topologies) with a seeded share of GPUs already
   busy, and 4-16 jobs. The optimum is scipy's `milp`: the most GPUs placed,
   each job on one node (or, for a gang larger than a node, on whole free
   nodes) or not at all. burst's scheduler places the jobs in the order given
   (as the planner does, in fair order) and also largest first; the ratio is
   GPUs placed / optimum, 1.0 being optimal.
2. **Throughput.** 10,000 jobs placed in one `schedule()` call on 1,000
   8-GPU nodes (a third each of the three topologies, a quarter of GPUs busy):
   jobs per second, wall clock, on this machine.

Without --small the table is written to docs/benchmarks/gpu-scheduler.md.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from benchdoc import write_doc
from scipy.optimize import Bounds, LinearConstraint, milp

from burst.model import NodeGpus
from burst.planner.gpu_scheduler import GpuRequest, GpuUse, schedule
from burst.settings import data_dir
from burst.sim.traces import load_trace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from gpu_nodes import cube_mesh_node, nvswitch_node, pcie_node  # noqa: E402

DOC = ROOT / "docs" / "benchmarks" / "gpu-scheduler.md"
TOPOLOGIES = (nvswitch_node, cube_mesh_node, pcie_node)
GPUS_PER_NODE = 8


def philly_sizes() -> list[int]:
    """GPU counts of every Philly job (whole-GPU jobs only)."""
    trace = load_trace(data_dir() / "traces" / "philly.csv", format="philly")
    return [j.gpus for j in trace.jobs if j.gpus >= 1]


def fleet(rng: random.Random, n_nodes: int, busy_share: float, prefix: str) -> tuple[list[NodeGpus], dict[str, GpuUse]]:
    nodes = [TOPOLOGIES[i % 3](f"{prefix}{i:04d}") for i in range(n_nodes)]
    in_use = {g.uuid: GpuUse() for n in nodes for g in n.gpus if rng.random() < busy_share}
    return nodes, in_use


def optimum(sizes: Sequence[int], free: Sequence[int], whole_free: int) -> int:
    """Most GPUs placeable: single-node jobs into node capacities; gangs need whole free nodes."""
    small = [s for s in sizes if s <= GPUS_PER_NODE]
    gangs = [s for s in sizes if s > GPUS_PER_NODE]
    n_jobs, n_nodes = len(small), len(free)
    # variables: x[j, n] for small jobs, then y[g] for gangs, then w[n] = node n given whole to gangs
    n_x = n_jobs * n_nodes
    n_vars = n_x + len(gangs) + n_nodes
    c = np.zeros(n_vars)
    for j, s in enumerate(small):
        c[j * n_nodes:(j + 1) * n_nodes] = -s
    for g, s in enumerate(gangs):
        c[n_x + g] = -s
    rows, lo, hi = [], [], []
    for j in range(n_jobs):  # each small job at most once
        r = np.zeros(n_vars)
        r[j * n_nodes:(j + 1) * n_nodes] = 1
        rows.append(r), lo.append(0), hi.append(1)
    for n in range(n_nodes):  # node capacity, and a node given to gangs takes nothing else
        r = np.zeros(n_vars)
        for j, s in enumerate(small):
            r[j * n_nodes + n] = s
        r[n_x + len(gangs) + n] = GPUS_PER_NODE
        rows.append(r), lo.append(0), hi.append(free[n])
    r = np.zeros(n_vars)  # gangs take whole free nodes: sum of nodes needed == nodes given
    for g, s in enumerate(gangs):
        r[n_x + g] = math.ceil(s / GPUS_PER_NODE)
    r[n_x + len(gangs):] = -1
    rows.append(r), lo.append(-np.inf), hi.append(0)
    ub = np.ones(n_vars)
    for n in range(n_nodes):
        ub[n_x + len(gangs) + n] = 1 if free[n] == GPUS_PER_NODE else 0
    res = milp(c, constraints=LinearConstraint(np.array(rows), lo, hi), integrality=np.ones(n_vars), bounds=Bounds(0, ub))
    assert res.status == 0, res.message
    assert whole_free >= 0
    return int(round(-res.fun))


def placed(requests: Sequence[GpuRequest], nodes: Sequence[NodeGpus], in_use: dict[str, GpuUse]) -> int:
    result = schedule(requests, nodes, in_use)
    return sum(len(b.gpu_uuids) for b in result.bindings)


def packing(instances: int, sizes: Sequence[int], seed: int) -> tuple[list[float], list[float], int]:
    rng = random.Random(seed)
    in_order, largest_first, optimal_hits = [], [], 0
    for k in range(instances):
        nodes, in_use = fleet(rng, rng.randint(2, 5), rng.uniform(0.0, 0.6), f"i{k}-")
        jobs = [rng.choice(sizes) for _ in range(rng.randint(4, 16))]
        requests = [GpuRequest(job_id=f"j{i}", tenant="t", gpus=s) for i, s in enumerate(jobs)]
        free = [sum(1 for g in n.gpus if g.uuid not in in_use) for n in nodes]
        best = optimum(jobs, free, sum(1 for f in free if f == GPUS_PER_NODE))
        if best == 0:
            continue
        got = placed(requests, nodes, in_use)
        got_sorted = placed(sorted(requests, key=lambda r: -r.gpus), nodes, in_use)
        assert got <= best and got_sorted <= best, (got, got_sorted, best)
        in_order.append(got / best)
        largest_first.append(got_sorted / best)
        optimal_hits += got == best
    return in_order, largest_first, optimal_hits


def throughput(n_jobs: int, n_nodes: int, sizes: Sequence[int], seed: int) -> tuple[float, int, float]:
    rng = random.Random(seed)
    nodes, in_use = fleet(rng, n_nodes, 0.25, "n")
    requests = [GpuRequest(job_id=f"j{i}", tenant="t", gpus=rng.choice(sizes)) for i in range(n_jobs)]
    t0 = time.perf_counter()
    result = schedule(requests, nodes, in_use)
    wall = time.perf_counter() - t0
    return n_jobs / wall, len(result.bindings), wall


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="a quick slice; prints, writes no docs")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    sizes = philly_sizes()
    instances, n_jobs, n_nodes = (20, 1000, 100) if args.small else (200, 10_000, 1_000)
    mixes = (("all Philly jobs", sizes), ("Philly jobs of 2+ GPUs", [s for s in sizes if s >= 2]))
    lines = [
        "| job sizes | instances | placed / optimum, given order: mean (worst) | optimal instances | "
        "largest first: mean (worst) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, mix in mixes:
        in_order, largest, hits = packing(instances, mix, args.seed)
        lines.append(
            f"| {name} | {len(in_order)} | {statistics.mean(in_order):.3f} ({min(in_order):.3f}) | "
            f"{hits} of {len(in_order)} | {statistics.mean(largest):.3f} ({min(largest):.3f}) |"
        )
    rate, bound, wall = throughput(n_jobs, n_nodes, sizes, args.seed)
    lines += [
        "",
        f"Throughput: {n_jobs:,} Philly-sized jobs in one `schedule()` call on {n_nodes:,} 8-GPU nodes "
        f"(a quarter of GPUs busy): **{rate:,.0f} jobs/s** ({wall:.2f} s wall, {bound:,} bound, the rest unplaced "
        "once the fleet is full).",
    ]
    print("\n".join(lines))
    if not args.small:
        write_doc(
            DOC,
            "gpu_packing.py",
            "Local GPU scheduler: packing against the optimum, and throughput",
            "Job sizes drawn from the Philly trace; the optimum is scipy `milp` (see the script's docstring).",
            ["", *lines, ""],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
