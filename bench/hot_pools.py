"""Benchmark: burst with forecast-sized hot pools, with no pool, and with a fixed pool of the same average size.

    python bench/hot_pools.py           # the docs table: Philly (3 days) and itp-cluster04 (7 days)
    python bench/hot_pools.py --small   # a one-day slice of itp-cluster02 (CI keeps the script from rotting)

Each trace replays on the default set-up with a stopped hot pool allowed on
the on-demand cloud group (`burst.sim.setup.with_hot_pool`). `burst` sizes
the pool from the forecast; `burst-no-pool` has none; `burst-fixed-pool`
keeps a fixed pool of the average size `burst` held, measured in the first
pass of the same run. Traces are read from $BURST_DATA_DIR (default
../shared/data). Without --small the table goes to docs/benchmarks/hot-pools.md.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from benchdoc import write_doc

from burst.settings import data_dir
from burst.sim.compare import compare, ratio
from burst.sim.engine import StrategyResult
from burst.sim.setup import default_setup, with_hot_pool
from burst.sim.traces import load_trace

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "hot-pools.md"
FULL = (("philly.csv", "2017-10-02T00:00:00Z", 3.0), ("itp-cluster04.csv", None, 7.0))
SMALL = (("itp-cluster02.csv", None, 1.0),)


READING = """## Reading the table

A pool turns a 5-minute cold boot into a 1-minute wake for the jobs that take
on-demand nodes. Spot groups have no pool (AWS refuses warm pools on Spot),
so fault-tolerant jobs still wait a spot boot, and they are most of the jobs
that wait about a boot (`docs/benchmarks/strategies.md`, "What forecasts can
move", counts them): the P95 wait falls where jobs that cannot go to spot were
among those at it, and does not move where they were not. What a pool adds
to the bill is the stopped nodes' storage (the `of which hot pool` column)
and one boot at full price to prepare each replacement; a woken node also
spares the boot a cold launch would have billed, so the totals move by about
1% either way. The ratio lines under each table compare the forecast-sized
pool with the other two rows of the same run.
"""

def row(name: str, r: StrategyResult) -> str:
    return (f"| {name} | {r.cost_usd:,.0f} | {r.cost_by_tier['hot_pool']:,.0f} | {r.warm_nodes_avg:.1f} "
            f"| {r.time_to_capacity_p95_s:,.0f} | {r.wait_p50_s:,.0f} | {r.wait_p95_s:,.0f} | {r.slo_violations} |")


def ratios(sized: StrategyResult, other: StrategyResult, name: str) -> str:
    """One line: the forecast-sized pool's cost, P95 time to capacity and P95 wait over another row's."""
    return (f"- forecast-sized pool over {name}: cost x{ratio(sized.cost_usd, other.cost_usd):.3f}, "
            f"TTC p95 x{ratio(sized.time_to_capacity_p95_s, other.time_to_capacity_p95_s):.2f}, "
            f"wait p95 x{ratio(sized.wait_p95_s, other.wait_p95_s):.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="one-day slice of one trace; writes nothing")
    parser.add_argument("--workers", type=int, default=2, help="processes running strategies at once (default 2)")
    args = parser.parse_args()
    out: list[str] = []
    for file, start, days in SMALL if args.small else FULL:
        since = datetime.fromisoformat(start) if start else None
        trace = load_trace(data_dir() / "traces" / file).window(since, days=days)
        setup = with_hot_pool(default_setup(trace.stats()))
        first = compare(trace, ["burst", "burst-no-pool"], setup=setup, days=days, workers=args.workers).results
        fixed_nodes = round(first["burst"].warm_nodes_avg)
        fixed = compare(trace, ["burst-fixed-pool"], setup=setup, days=days, fixed_pool_nodes=fixed_nodes).results
        results = {"burst (forecast-sized pool)": first["burst"], "burst-no-pool": first["burst-no-pool"],
                   f"burst-fixed-pool ({fixed_nodes} nodes)": fixed["burst-fixed-pool"]}
        out += [f"### {file}, {days:g} days from {trace.jobs[0].submitted_at:%Y-%m-%d %H:%M} UTC ({len(trace.jobs)} jobs)", "",
                "| strategy | cost $ | of which hot pool $ | warm nodes (avg) | TTC p95 s | wait p50 s | wait p95 s "
                "| SLO misses |",
                "|---|---:|---:|---:|---:|---:|---:|---:|",
                *(row(n, r) for n, r in results.items()), "",
                ratios(first["burst"], first["burst-no-pool"], "no pool"),
                ratios(first["burst"], fixed["burst-fixed-pool"], f"the fixed {fixed_nodes}-node pool"), "",
                "Assumptions: " + "; ".join(setup.assumptions) + ".", ""]
        print(f"{file}: done", file=sys.stderr)
    print("\n".join(out))
    if not args.small:
        write_doc(DOC, "hot_pools.py", "Hot-pool benchmark",
                  "The three rows of a trace are one run: the fixed pool's size is the forecast-sized pool's "
                  "average. `of which hot pool $` is what warm (stopped) nodes cost at the storage price; nodes being "
                  "prepared for the pool boot at full price and count in the total. `TTC` is time to capacity "
                  "(burst/sim/engine.py).", [*out, READING])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
