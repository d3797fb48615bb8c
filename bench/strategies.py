"""Benchmark: every strategy on the real traces, with ratios, throughput and peak memory.

    python bench/strategies.py            # the docs table: Philly and ITP clusters 02 and 04
    python bench/strategies.py --small    # a one-day slice of one trace (CI keeps the script from rotting)
    python bench/strategies.py --speed    # the speed target: 60 days of itp-cluster04, every strategy

Traces are read from $BURST_DATA_DIR (default ../shared/data). Prices are the
shipped catalog's (burst/data/prices.csv: p4d.24xlarge us-east-1 on-demand and
spot, on-prem from the catalog's cost model); the set-up is the default one
sized from each trace (see burst.sim.setup). Without --small the table is
written to docs/benchmarks/strategies.md with the command, commit and date.
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import time
from datetime import datetime
from pathlib import Path

from benchdoc import write_doc

from burst.settings import data_dir
from burst.sim.compare import Comparison, compare, ratio
from burst.sim.strategies import STRATEGIES
from burst.sim.traces import load_trace

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "strategies.md"

# (file, first submission replayed or None for the trace's first job, days). Philly's first weeks hold a
# handful of jobs, so its window starts on the first Monday of October 2017.
FULL = (("philly.csv", "2017-10-02T00:00:00Z", 3.0), ("itp-cluster02.csv", None, 14.0), ("itp-cluster04.csv", None, 7.0))
SMALL = (("itp-cluster02.csv", None, 1.0),)
SPEED = (("itp-cluster04.csv", None, 60.0),)
SPEED_TARGET_S = 60.0
MEMORY_TARGET_MIB = 1024.0


def peak_rss_mib() -> float:
    """Peak resident memory of this process or its largest worker so far (ru_maxrss is KiB on Linux)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, workers) / 1024.0


def fmt(x: float, spec: str = ",.0f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def table(name: str, days: float, result: Comparison) -> list[str]:
    """One trace's markdown table: each strategy's figures and burst's ratios."""
    res = result.results
    lines = [
        f"### {name}, {days:g} days from {result.start:%Y-%m-%d %H:%M} UTC ({result.to_json()['trace']['jobs']} jobs)",
        "",
        "| strategy | cost $ | vs oracle | vs reactive | wait p50 s | wait p95 s | P95 wait vs reactive | SLO misses "
        "| on-prem util | interruptions | lost GPU-h | TTC p95 s | forecast fit s | sim h / wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    oracle = res.get("oracle")
    reactive = res.get("reactive")
    for strategy, r in res.items():
        sim_wall = r.wall_s - r.forecast_fit_s
        speed = r.simulated_hours / sim_wall if sim_wall > 0 else math.nan
        lines.append(
            f"| {strategy} | {fmt(r.cost_usd)} | {fmt(ratio(r.cost_usd, oracle.cost_usd) if oracle else math.nan, '.2f')} "
            f"| {fmt(ratio(r.cost_usd, reactive.cost_usd) if reactive else math.nan, '.2f')} "
            f"| {fmt(r.wait_p50_s)} | {fmt(r.wait_p95_s)} "
            f"| {fmt(ratio(r.wait_p95_s, reactive.wait_p95_s) if reactive else math.nan, '.2f')} "
            f"| {r.slo_violations} | {r.onprem_utilization:.1%} | {r.interruptions} | {fmt(r.lost_gpu_hours, ',.1f')} "
            f"| {fmt(r.time_to_capacity_p95_s)} | {r.forecast_fit_s:.1f} | {fmt(speed, ',.0f')} |"
        )
    with_f, without = res.get("burst"), res.get("burst-no-forecast")
    if with_f and without:
        lines += ["", f"Forecasting (burst over burst-no-forecast, same run): cost x{ratio(with_f.cost_usd, without.cost_usd):.3f}, "
                  f"P95 wait x{ratio(with_f.wait_p95_s, without.wait_p95_s):.3f}, SLO misses {with_f.slo_violations} vs "
                  f"{without.slo_violations}, {with_f.forecast_fits} fits ({', '.join(f'{m}: {n}' for m, n in sorted(with_f.forecast_models.items()))})."]
    lines += ["", "Assumptions: " + "; ".join(result.setup.assumptions) + ".", ""]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="one-day slice of one trace; writes nothing")
    parser.add_argument("--speed", action="store_true", help="60 days of itp-cluster04 with every strategy; writes nothing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2, help="processes running strategies at once (default 2: the CI machine's cores)")
    args = parser.parse_args()
    runs = SMALL if args.small else SPEED if args.speed else FULL
    out: list[str] = []
    total_wall = 0.0
    for file, start, days in runs:
        since = datetime.fromisoformat(start) if start else None
        trace = load_trace(data_dir() / "traces" / file).window(since, days=days)
        t0 = time.perf_counter()
        result = compare(trace, list(STRATEGIES), seed=args.seed, days=days, workers=args.workers)
        wall = time.perf_counter() - t0
        total_wall += wall
        out += table(file, days, result)
        per = ", ".join(f"{n} {r.wall_s:.1f}s" for n, r in result.results.items())
        print(f"{file} {days:g} d: {wall:.1f} s wall ({per}); peak RSS {peak_rss_mib():.0f} MiB", file=sys.stderr)
    summary = (f"Total wall {total_wall:.1f} s with {args.workers} worker process(es); peak memory of the largest "
               f"process {peak_rss_mib():.0f} MiB.")
    if args.speed:
        summary += (f" Target: under {SPEED_TARGET_S:g} s wall ({'met' if total_wall < SPEED_TARGET_S else 'not met'}), "
                    f"under {MEMORY_TARGET_MIB:g} MiB ({'met' if peak_rss_mib() < MEMORY_TARGET_MIB else 'not met'}).")
    print("\n".join(out))
    print(summary)
    if not (args.small or args.speed):
        write_doc(DOC, "strategies.py", "Strategy benchmark",
                  "Every strategy replays the same trace window through the same controller and sim provider; "
                  "`oracle` is the bound of `burst.sim.oracle`. Ratios are cost (or P95 wait) of the row's strategy "
                  "over the oracle's or reactive's, measured in one run. `TTC` is time to capacity. Waits of jobs "
                  "never started by the end of the run are counted up to the end. `burst` plans with demand forecasts "
                  "(refit every 6 simulated hours from the trace's prior 30 days and the run's own demand, see "
                  "`burst/sim/forecasts.py`); `burst-no-forecast` is the same planner and policies without them. "
                  "Forecast fit time is its own column; `sim h / wall s` leaves it out.", [*out, summary, ""])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
