"""Benchmark: backtest of the cost projection on the real traces, week by week.

    python bench/cost_backtest.py            # the docs table: ITP clusters 02 and 04, every full week
    python bench/cost_backtest.py --small    # one week of one trace (CI keeps the script from rotting)
    python bench/cost_backtest.py --trace itp-cluster04.csv   # a subset: every week of the traces named; no doc

For week N+1 (7 days from the trace's first midnight + 7(N+1) days; only full
weeks with a full week of history before them): the set-up is sized from the
history up to week N (burst.sim.setup.default_setup), the projection fits
burst's forecaster on the up to 30 days of demand before the cutoff (from the
trace's first job on), samples `--paths` demand paths from it and replays each
as synthetic jobs (burst.projection), the P10/P50/P90 being quantiles of those
runs' costs; then week N+1's real jobs are replayed on the same set-up with the
same strategy. Reported: the P50 error of the weekly total,
|P50 - actual| / actual, and whether the actual fell in [P10, P90]; and, to
say where a miss comes from, the sampled paths' demand (GPU-hours per day,
P10/P50/P90 over paths) against the week's real unconstrained demand, the
on-prem size, and the cost per line of the median run against the replay's. Targets,
reported not enforced: the actual inside P10-P90 in at least 10 of 14 weeks,
and a median P50 error of at most 15%. The strategy simulated is
`burst-no-forecast` (the real planner without in-run forecast refits) to keep
the full run within the hour on two cores. Traces are read from
$BURST_DATA_DIR (default ../shared/data).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchdoc import write_doc

from burst.projection.arrivals import job_mix
from burst.projection.calibration import shifted_week
from burst.projection.demand import HISTORY_S, fit_forecast, series_of_jobs
from burst.projection.project import project
from burst.settings import data_dir
from burst.sim.engine import simulate
from burst.sim.forecasts import trace_demand
from burst.sim.registry import strategy_run
from burst.sim.setup import default_setup, with_fault_tolerance
from burst.sim.traces import load_trace
from forecasting.paths import MIN_PATHS, quantile

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "cost-projection.md"
STRATEGY = "burst-no-forecast"
FULL = ("itp-cluster02.csv", "itp-cluster04.csv")
SMALL = ("itp-cluster02.csv",)
WEEK = timedelta(days=7)
TIERS = ("steady", "elastic_on_demand", "elastic_spot")
KEPT = "## How long burst cost takes"
"""The doc's hand-written section (bench/cost_speed.py's figures): from this heading on, a regeneration keeps it."""


def one_week(name: str, week: int, paths: int = MIN_PATHS) -> dict[str, Any]:
    """Project week `week` (0-based from the first midnight) from the history before it, then replay it."""
    trace = load_trace(data_dir() / "traces" / name)
    first = trace.jobs[0].submitted_at.replace(hour=0, minute=0, second=0, microsecond=0)
    cut = first + week * WEEK
    history = tuple(j for j in trace.jobs if j.submitted_at < cut)
    hist_trace = trace.window(history[0].submitted_at, (cut - history[0].submitted_at).total_seconds() / 86400)
    stats = hist_trace.stats()
    setup = default_setup(stats)
    forecast, dependence = fit_forecast(series_of_jobs(history, cut), WEEK.total_seconds())
    mix = job_mix(j for j in history if j.submitted_at >= cut - timedelta(seconds=HISTORY_S))
    proj = project(setup, stats, forecast, mix, start=cut, horizon_s=WEEK.total_seconds(), strategy=STRATEGY,
                   prior=history, paths=paths, dependence=dependence)
    actual_jobs = [j for j in trace.jobs if cut <= j.submitted_at < cut + WEEK]
    actual = simulate(strategy_run(STRATEGY, setup, stats), with_fault_tolerance(actual_jobs, setup, 0),
                      start=cut, end=cut + WEEK, prior=history)
    naive = simulate(strategy_run(STRATEGY, setup, stats), with_fault_tolerance(shifted_week(history, cut), setup, 0),
                     start=cut, end=cut + WEEK, prior=history)
    p10, p50, p90 = (proj.baseline.cost(q) for q in (0.1, 0.5, 0.9))
    real_demand = [p.demand_gpus for p in trace_demand(trace.jobs, cut, cut + WEEK, 3600.0)]
    path_demand = [24.0 * sum(p) / len(p) for p in proj.paths]  # GPU-hours per day of each sampled path
    return {"trace": name, "week": week, "start": cut, "p10": p10, "p50": p50, "p90": p90, "actual": actual.cost_usd,
            "error": abs(p50 - actual.cost_usd) / actual.cost_usd if actual.cost_usd else float("nan"),
            "inside": p10 <= actual.cost_usd <= p90, "naive": naive.cost_usd, "model": forecast.model.split(" (")[0],
            "level": dependence.level, "wait_p95": proj.baseline.median_run.wait_p95_s,
            "actual_wait_p95": actual.wait_p95_s,
            "demand": [quantile(path_demand, q) for q in (0.1, 0.5, 0.9)],
            "actual_demand": 24.0 * sum(real_demand) / max(1, len(real_demand)),
            "tiers": [proj.baseline.median_run.cost_by_tier.get(t, 0.0) for t in TIERS],
            "actual_tiers": [actual.cost_by_tier.get(t, 0.0) for t in TIERS], "onprem_gpus": setup.steady_gpus()}


def kept_section(doc: Path) -> list[str]:
    """The lines of `doc` from the `KEPT` heading on (none when it has no such section)."""
    text = doc.read_text(encoding="utf-8") if doc.exists() else ""
    at = text.find(KEPT)
    return text[at:].splitlines() if at >= 0 else []


def weeks_of(name: str) -> list[int]:
    """Weeks 1.. whose 7 days end before the trace's last submission (week 0 is history only)."""
    trace = load_trace(data_dir() / "traces" / name)
    first = trace.jobs[0].submitted_at.replace(hour=0, minute=0, second=0, microsecond=0)
    last = trace.jobs[-1].submitted_at
    return [w for w in range(1, 100) if first + (w + 1) * WEEK <= last]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="one week of one trace; prints, writes no doc")
    parser.add_argument("--trace", action="append", choices=FULL, default=None,
                        help="run only this trace's weeks (repeatable): a subset, printed, written to no doc")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--paths", type=int, default=MIN_PATHS,
                        help="demand paths sampled per week (default: the fewest burst cost takes, to keep the run short)")
    parser.add_argument("--rows", type=Path, default=None,
                        help="also write each week's raw figures (JSON) to this file")
    args = parser.parse_args()
    traces = tuple(args.trace or FULL)
    cases = [(SMALL[0], 1)] if args.small else [(n, w) for n in traces for w in weeks_of(n)]
    names, weeks = zip(*cases, strict=True)
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        rows = []
        for row in pool.map(one_week, names, weeks, [args.paths] * len(cases)):
            rows.append(row)
            print(f"[{len(rows)}/{len(cases)}] {row['trace']} from {row['start']:%Y-%m-%d}: P10/P50/P90 "
                  f"{row['p10']:,.0f} / {row['p50']:,.0f} / {row['p90']:,.0f}, actual {row['actual']:,.0f}",
                  file=sys.stderr, flush=True)
    if args.rows:
        args.rows.write_text(json.dumps(rows, default=str, indent=1), encoding="utf-8")
    lines = ["| trace | week from | forecast | level corr. | P10 $ | P50 $ | P90 $ | actual $ | P50 error | "
             "actual in P10-P90 | wait P95 s (median run / actual) |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        lines.append(f"| {r['trace']} | {r['start']:%Y-%m-%d} | {r['model']} | {r['level']:.2f} | {r['p10']:,.0f} | "
                     f"{r['p50']:,.0f} | {r['p90']:,.0f} | {r['actual']:,.0f} | {r['error']:.1%} | "
                     f"{'yes' if r['inside'] else 'no'} | {r['wait_p95']:,.0f} / {r['actual_wait_p95']:,.0f} |")
    inputs = ["| trace | week from | on-prem GPUs | demand GPU-h/day: paths P10 / P50 / P90 | actual | "
              "median run $: steady / on-demand / spot | actual $: steady / on-demand / spot |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        inputs.append(f"| {r['trace']} | {r['start']:%Y-%m-%d} | {r['onprem_gpus']} | "
                      f"{' / '.join(f'{v:,.0f}' for v in r['demand'])} | {r['actual_demand']:,.0f} | "
                      f"{' / '.join(f'{v:,.0f}' for v in r['tiers'])} | "
                      f"{' / '.join(f'{v:,.0f}' for v in r['actual_tiers'])} |")
    errors = sorted(r["error"] for r in rows)
    median = statistics.median(errors)
    inside = sum(r["inside"] for r in rows)
    need = -(-10 * len(rows) // 14)  # 10 of 14, scaled to the weeks run
    summary = (f"{len(rows)} weeks, {args.paths} demand paths each: median P50 error {median:.1%} (target at most 15%: "
               f"{'met' if median <= 0.15 else 'not met'}); {sum(e <= 0.15 for e in errors)} weeks at most 15%; "
               f"actual inside the P10-P90 band in {inside} of {len(rows)} weeks (target at least {need}: "
               f"{'met' if inside >= need else 'not met'}).")
    print("\n".join([*lines, "", *inputs, "", summary]))
    if not args.small and traces == FULL:
        write_doc(DOC, "cost_backtest.py", "Cost projection backtest",
                  "Each week is projected from the history before it, then replayed as it happened (see the script's "
                  "docstring for the method).", ["", *lines, "", "What each projection started from, against what happened:", "",
                                                 *inputs, "", summary, "", *kept_section(DOC)])
    print(summary, file=sys.stderr)


if __name__ == "__main__":
    main()
