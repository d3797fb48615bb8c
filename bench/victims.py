"""Benchmark: priority preemption's victim order: least lost work (burst) vs most recently started (Kueue) vs random.

    python bench/victims.py           # the docs table: Philly, 3 days from 2017-10-02
    python bench/victims.py --small   # half a day of Philly (CI keeps the script from rotting)

The traces carry no priorities, so the benchmark states one: the tenant with
the most GPU-hours in the window is `high` (priority 10) and every other
tenant is priority 0 and `preemptible_by` it. The cloud groups are capped at
zero nodes, so the steady tier (sized at 50% and at 75% of the window's peak
demand, one table row group each) is all there is and the high-priority tenant's jobs preempt when it is full. Half of
each tenant's jobs are fault-tolerant and checkpoint every 30 min (the
default set-up, seeded); the others lose all their work when evicted. The
three strategies differ only in the order victims are taken; the disruption
budget (10% of a tenant's running GPUs at once) and the minimisation pass are
the same. Without --small the table is written to docs/benchmarks/victims.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from benchdoc import write_doc

from burst.model import Policy, Tier
from burst.settings import data_dir
from burst.sim.compare import compare
from burst.sim.setup import SimSetup, default_setup
from burst.sim.traces import Trace, load_trace

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "victims.md"
STEADY_SHARES = (0.5, 0.75)
ORDERS = (
    ("least lost work (burst)", "burst-no-forecast"),
    ("most recently started (Kueue default)", "burst-victims-most-recent"),
    ("random (seeded)", "burst-victims-random"),
)


def busiest_tenant(trace: Trace) -> str:
    """The tenant with the most GPU-hours in the trace."""
    hours: dict[str, float] = defaultdict(float)
    for job in trace.jobs:
        hours[job.tenant] += job.gpu_demand * (job.duration_s or 0.0) / 3600.0
    return max(sorted(hours), key=lambda t: hours[t])


def preemption_setup(trace: Trace, steady_share: float) -> tuple[SimSetup, str]:
    """The steady tier alone, and priorities: the busiest tenant may preempt every other one."""
    stats = trace.stats()
    base = default_setup(stats)
    steady_nodes = math.ceil(steady_share * stats.peak_gpus / 8)
    groups = tuple(
        dataclasses.replace(g, min_size=steady_nodes, max_size=steady_nodes) if g.tier is Tier.STEADY
        else dataclasses.replace(g, max_size=0)
        for g in base.groups
    )
    initial = {g.id: steady_nodes for g in groups if g.tier is Tier.STEADY}
    high = busiest_tenant(trace)
    assert base.default_policy is not None
    tenants = sorted({j.tenant for j in trace.jobs})
    policies: dict[str, Policy] = {
        t: dataclasses.replace(base.default_policy, tenant=t, priority=10 if t == high else 0,
                               preemptible_by=() if t == high else (high,))
        for t in tenants
    }
    assumptions = (*base.assumptions, f"priorities stated by the benchmark: {high} is priority 10 and may preempt "
                   f"every other tenant (priority 0); steady tier at {steady_share:.0%} of peak demand, cloud groups capped at 0 nodes")
    return dataclasses.replace(base, groups=groups, initial=initial, policies=policies, assumptions=assumptions), high


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="half a day of Philly; writes nothing")
    parser.add_argument("--workers", type=int, default=3, help="processes running strategies at once (default 3)")
    args = parser.parse_args()
    days = 0.5 if args.small else 3.0
    trace = load_trace(data_dir() / "traces" / "philly.csv").window(datetime(2017, 10, 2, tzinfo=UTC), days=days)
    lines = ["| steady tier | victim order | evictions | lost GPU-h | jobs completed | wait p50 s | wait p95 s |",
             "|---|---|---:|---:|---:|---:|---:|"]
    high = busiest_tenant(trace)
    for share in STEADY_SHARES:
        setup, high = preemption_setup(trace, share)
        results = compare(trace, [s for _, s in ORDERS], setup=setup, days=days, workers=args.workers).results
        for label, name in ORDERS:
            r = results[name]
            lines.append(f"| {share:.0%} of peak | {label} | {r.evictions:,} | {r.lost_gpu_hours:,.1f} | "
                         f"{r.jobs_completed:,} | {r.wait_p50_s:,.0f} | {r.wait_p95_s:,.0f} |")
        print(f"steady tier at {share:.0%} of peak: done", file=sys.stderr)
    print("\n".join(lines))
    if not args.small:
        write_doc(DOC, "victims.py", "Victim order benchmark",
                  f"Philly, 3 days from 2017-10-02, steady tier only (cloud capped at 0), tenant {high} (the busiest) "
                  "at priority 10 preempting every other tenant; see the script's docstring for the assumptions. "
                  "`lost GPU-h` is work lost beyond the last checkpoint, summed over every eviction.", [*lines, ""])
    return 0


if __name__ == "__main__":
    sys.exit(main())
