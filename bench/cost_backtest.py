"""Benchmark: backtest of the cost projection on the real traces, week by week.

    python bench/cost_backtest.py            # the docs table: ITP clusters 02 and 04, every full week
    python bench/cost_backtest.py --small    # one week of one trace (CI keeps the script from rotting)
    python bench/cost_backtest.py --trace itp-cluster04.csv   # a subset: every week of the traces named; no doc
    python bench/cost_backtest.py --rows rows.json           # also keep each week's raw figures
    python bench/cost_backtest.py --from-rows rows.json      # replay nothing: the tables (and doc) from kept figures

For week N+1 (7 days from the trace's first midnight + 7(N+1) days; only full
weeks with a full week of history before them): the set-up is sized from the
history up to week N (burst.sim.setup.default_setup), the projection fits
burst's forecaster on the up to 30 days of demand before the cutoff (from the
trace's first job on), samples `--paths` demand paths from it and replays each
as synthetic jobs (burst.projection), the P10/P50/P90 being quantiles of those
runs' costs; then week N+1's real jobs are replayed on the same set-up with the
same strategy. Week-cut accounting: each replay (the paths', the actual
week's, the naive one's) takes only the jobs submitted in its week.

The naive projection (burst.projection.calibration.naive_projection) is last
week again: week N's jobs, each moved exactly 7 days, replayed on week N+1's
set-up with the same simulator and strategy as the actual week.

burst's band is calibrated per trace by split conformal on its own past
errors (burst.projection.calibration.calibrated_bands): week i's score
is max(log(P10 / actual), log(actual / P90)) and week i's P10 is divided, its
P90 multiplied, by exp(q), q the ceil((n + 1) x 0.8)-th smallest of the n
scores of the weeks before it in the same trace (never its own or a later
one); with 1 to 3 earlier weeks that rank would pass n (the guarantee would
need an unbounded band), so q is the largest earlier score and at least 0: the
band widens to hold every earlier week it missed and never narrows on so few;
the first week keeps its band as sampled. The P50 is not corrected: the past weeks' log errors of the P50
change sign from week to week (no bias a correction could take out), so it
is the sampled runs' median as projected.

Reported: per week, the P50 error of the weekly total, |P50 - actual| /
actual, whether the actual fell in the sampled [P10, P90] and in the
calibrated band, and the naive projection's cost and error; and, to say where
a miss comes from, the sampled paths' demand (GPU-hours per day, P10/P50/P90
over paths) against the week's real unconstrained demand, the on-prem size,
and the cost per line of the median run against the replay's. Targets,
reported not enforced: the actual inside burst's calibrated P10-P90 in 10 to
12 of the 14 weeks, and burst's median |P50 error| at most 0.8 x the naive
projection's over the same weeks. The strategy simulated is
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
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchdoc import write_doc

from burst.projection.arrivals import job_mix
from burst.projection.calibration import Band, calibrated_bands, naive_projection
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
    naive = naive_projection(strategy_run(STRATEGY, setup, stats), history, cut)
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


def with_calibration(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` with each week's calibrated band ("calibrated") and its errors: conformal per trace, earlier weeks only."""
    out = []
    for name in dict.fromkeys(r["trace"] for r in rows):
        weeks = sorted((r for r in rows if r["trace"] == name), key=lambda r: r["start"])
        bands = calibrated_bands([Band(r["p10"], r["p50"], r["p90"]) for r in weeks], [r["actual"] for r in weeks])
        for r, band in zip(weeks, bands, strict=True):
            out.append({**r, "calibrated": band, "calibrated_inside": band.holds(r["actual"]),
                        "calibrated_error": relative_error(band.p50, r["actual"]),
                        "naive_error": relative_error(r["naive"], r["actual"])})
    return out


def relative_error(projected: float, actual: float) -> float:
    """|projected - actual| / actual (NaN for a zero actual)."""
    return abs(projected - actual) / actual if actual else float("nan")


def report(raw: list[dict[str, Any]], paths: int) -> tuple[list[str], str]:
    """The doc's tables and summary lines for the weeks in `raw`, and the one-line summary."""
    rows = with_calibration(raw)
    lines = ["| trace | week from | forecast | level corr. | P10 $ | P50 $ | P90 $ | actual $ | P50 error | "
             "actual in P10-P90 | wait P95 s (median run / actual) |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        lines.append(f"| {r['trace']} | {r['start']:%Y-%m-%d} | {r['model']} | {r['level']:.2f} | {r['p10']:,.0f} | "
                     f"{r['p50']:,.0f} | {r['p90']:,.0f} | {r['actual']:,.0f} | {r['error']:.1%} | "
                     f"{'yes' if r['inside'] else 'no'} | {r['wait_p95']:,.0f} / {r['actual_wait_p95']:,.0f} |")
    calibration = ["| trace | week from | actual $ | burst: calibrated P10 / P50 / P90 $ | actual in calibrated band | "
                   "burst P50 error | naive $ | naive error |",
                   "|---|---|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        band = r["calibrated"]
        calibration.append(f"| {r['trace']} | {r['start']:%Y-%m-%d} | {r['actual']:,.0f} | {band.p10:,.0f} / "
                           f"{band.p50:,.0f} / {band.p90:,.0f} | {'yes' if r['calibrated_inside'] else 'no'} | "
                           f"{r['calibrated_error']:.1%} | {r['naive']:,.0f} | {r['naive_error']:.1%} |")
    inputs = ["| trace | week from | on-prem GPUs | demand GPU-h/day: paths P10 / P50 / P90 | actual | "
              "median run $: steady / on-demand / spot | actual $: steady / on-demand / spot |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        inputs.append(f"| {r['trace']} | {r['start']:%Y-%m-%d} | {r['onprem_gpus']} | "
                      f"{' / '.join(f'{v:,.0f}' for v in r['demand'])} | {r['actual_demand']:,.0f} | "
                      f"{' / '.join(f'{v:,.0f}' for v in r['tiers'])} | "
                      f"{' / '.join(f'{v:,.0f}' for v in r['actual_tiers'])} |")
    n = len(rows)
    errors = sorted(r["error"] for r in rows)
    median = statistics.median(errors)
    burst_median = statistics.median(r["calibrated_error"] for r in rows)
    naive_median = statistics.median(r["naive_error"] for r in rows)
    inside = sum(r["inside"] for r in rows)
    held = sum(r["calibrated_inside"] for r in rows)
    low = -(-10 * n // 14)  # 10 to 12 of 14, scaled to the weeks run
    high = max(low, 12 * n // 14)
    beats = burst_median <= 0.8 * naive_median
    summary = (f"{n} weeks, {paths} demand paths each: actual inside burst's calibrated P10-P90 band in {held} of {n} "
               f"weeks (target {low} to {high}: {'met' if low <= held <= high else 'not met'}; the band as sampled: "
               f"{inside}); median |P50 error| burst {burst_median:.1%} against the naive projection's "
               f"{naive_median:.1%}, x{burst_median / naive_median:.2f} (target at most x0.80: "
               f"{'met' if beats else 'not met'}).")
    details = (f"The sampled projection alone: median P50 error {median:.1%}, {sum(e <= 0.15 for e in errors)} "
               f"weeks at most 15%.")
    body = [*lines, "", "burst's calibrated band (each week corrected only from the weeks before it in the same "
            "trace) against the naive projection (the week before, moved 7 days, replayed on this week's set-up):",
            "", *calibration, "", "What each projection started from, against what happened:", "", *inputs, "",
            summary, "", details]
    return body, summary


def replay_weeks(traces: tuple[str, ...], small: bool, paths: int, workers: int,
                 keep: Path | None = None) -> list[dict[str, Any]]:
    """`one_week` for every week of `traces` (or the small case), in `workers` processes, progress on stderr.

    With `keep`, the weeks done so far are rewritten there (JSON) as each one finishes.
    """
    cases = [(SMALL[0], 1)] if small else [(n, w) for n in traces for w in weeks_of(n)]
    names, weeks = zip(*cases, strict=True)
    rows = []
    with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        for row in pool.map(one_week, names, weeks, [paths] * len(cases)):
            rows.append(row)
            print(f"[{len(rows)}/{len(cases)}] {row['trace']} from {row['start']:%Y-%m-%d}: P10/P50/P90 "
                  f"{row['p10']:,.0f} / {row['p50']:,.0f} / {row['p90']:,.0f}, actual {row['actual']:,.0f}, naive "
                  f"{row['naive']:,.0f}", file=sys.stderr, flush=True)
            if keep:
                keep.write_text(json.dumps(rows, default=str, indent=1), encoding="utf-8")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="one week of one trace; prints, writes no doc")
    parser.add_argument("--trace", action="append", choices=FULL, default=None,
                        help="run only this trace's weeks (repeatable): a subset, printed, written to no doc")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--paths", type=int, default=MIN_PATHS,
                        help="demand paths sampled per week (default: the fewest burst cost takes, to keep the run short)")
    parser.add_argument("--rows", type=Path, default=None,
                        help="also write each week's raw figures (JSON) to this file, as each week finishes")
    parser.add_argument("--from-rows", type=Path, default=None,
                        help="replay nothing: render the tables (and, for the full set, the doc) from a --rows file")
    parser.add_argument("--replayed-at", default="an earlier commit",
                        help="with --from-rows: the commit the kept figures were replayed at, named in the doc")
    args = parser.parse_args()
    traces = tuple(args.trace or FULL)
    if args.from_rows:
        rows = [{**r, "start": datetime.fromisoformat(r["start"])}
                for r in json.loads(args.from_rows.read_text(encoding="utf-8"))]
        traces = tuple(dict.fromkeys(r["trace"] for r in rows))
    else:
        rows = replay_weeks(traces, args.small, args.paths, args.workers, args.rows)
    body, summary = report(rows, args.paths)
    print("\n".join(body))
    every_week = len(rows) == sum(len(weeks_of(n)) for n in FULL)
    if not args.small and traces == FULL and every_week:
        about = ("Each week is projected from the history before it, then replayed as it happened (see the script's "
                 "docstring for the method).")
        if args.from_rows:
            about += (f" The replays' figures (projections, actual and naive weeks) are those a full run kept with "
                      f"`--rows` at commit `{args.replayed_at}`; the calibration and the tables are this commit's.")
        write_doc(DOC, "cost_backtest.py", "Cost projection backtest", about, ["", *body, "", *kept_section(DOC)])
    print(summary, file=sys.stderr)


if __name__ == "__main__":
    main()
