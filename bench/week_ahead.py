"""Benchmark: burst's forecaster a week ahead, the horizon `burst cost` projects over.

    python bench/week_ahead.py            # every series; writes docs/benchmarks/forecasting-week.md
    python bench/week_ahead.py --small    # one Helios virtual cluster, two origins (CI keeps the script from rotting)

Series: each Helios "Earth" virtual cluster (demand = running + pending GPUs)
and the unconstrained GPU demand of each ITP cluster's jobs (ITP clusters
01-05), hourly. Origins: every 72 h from 14 days of history to a week before
the series ends, at most `ORIGINS` of them spread evenly. From each origin
burst's forecaster (forecasting.select, on the 30 days before it, as `burst
cost` fits it) forecasts the next 168 h, and its P50 is scored against what
followed: the error of the week's mean demand (|forecast - actual| / actual,
what a weekly cost total follows) and the hourly mean absolute error over the
week's mean demand.

Three rules for the far steps, side by side on the same origins:

- `burst`: at the steps at least `BIAS_MIN_SHARE` of the selection's folds
  observed, the serving model's P50 with its bias corrected; from the first
  step fewer folds observed, the far combination's P50 (the median of the
  four base candidates and the week's mean daily profile), uncorrected
  (forecasting.select, `served_p50`, `far_combination`);
- `candidates' median`: the same, with the median of the four candidates
  alone at the far steps (the rule before the profile joined them; the
  serving model's own where the combination serves);
- `every step alike` (the rule before both): the serving model's P50 with
  its per-step bias at every step, the far ones included, where only the
  oldest few folds reach (`BIAS_MIN_SHARE` = 0).

`seasonal_naive` (last week repeated, or the last day with less than two
weeks of history) is the reference. No target: this is the measurement
behind the rule.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from benchdoc import write_doc

import forecasting.select as select
from burst.projection.demand import HISTORY_S, series_of_jobs
from burst.settings import data_dir
from burst.sim.traces import load_trace
from forecasting.models import DemandSeries
from forecasting.select import BIAS_MIN_SHARE, SelectingForecaster, far_combination, seasonal_naive_point
from forecasting.series import load_series

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "forecasting-week.md"
HORIZON = 168
SPACING = 72
ORIGINS = 6
FIRST = 14 * 24
ITP = tuple(f"itp-cluster0{i}.csv" for i in range(1, 6))
RULES = {"burst": BIAS_MIN_SHARE, "candidates' median": BIAS_MIN_SHARE, "every step alike": 0.0}


def candidates_median(cache: select.OriginCache, train: DemandSeries, steps: int) -> list[float]:
    """The far steps' P50 under `candidates' median`: the median of the four base candidates alone."""
    return cache.path(train, select.COMBINATION, steps)


def all_series(small: bool) -> list[tuple[str, DemandSeries]]:
    """(label, hourly series) for every benchmarked series."""
    demand = data_dir() / "demand" / "helios-earth"
    out = [(f"helios {p.stem}", load_series(p, step_s=3600.0, value_expr="running_gpu_num+pending_gpu_num").series)
           for p in sorted(demand.glob("vc*.csv"))]
    if small:
        return out[:1]
    for name in ITP:
        jobs = load_trace(data_dir() / "traces" / name).jobs
        out.append((name.removesuffix(".csv"), series_of_jobs(jobs, jobs[-1].submitted_at)))
    return out


def origins_of(series: DemandSeries, most: int) -> list[int]:
    """Up to `most` origins, spread evenly over every `SPACING` hours from `FIRST` to a week before the end."""
    every = list(range(FIRST, len(series.values) - HORIZON + 1, SPACING))
    if len(every) <= most:
        return every
    return [every[round(i * (len(every) - 1) / (most - 1))] for i in range(most)] if most > 1 else every[-1:]


def _scores(forecast: list[float], actual: tuple[float, ...]) -> tuple[float, float]:
    """(error of the week's mean, hourly MAE over the week's mean)."""
    mean = statistics.mean(actual) or 1.0
    week = abs(statistics.mean(forecast) - statistics.mean(actual)) / mean
    return week, statistics.mean(abs(f - a) for f, a in zip(forecast, actual, strict=True)) / mean


def one_origin(series: DemandSeries, origin: int) -> dict[str, tuple[float, float, str]]:
    """Each rule's and seasonal naive's scores from `origin`, with the model that served."""
    start = max(0, origin - int(HISTORY_S // 3600))
    history = replace(series, timestamps=series.timestamps[start:origin], values=series.values[start:origin])
    actual = series.values[origin:origin + HORIZON]
    out: dict[str, tuple[float, float, str]] = {}
    for rule, share in RULES.items():
        select.BIAS_MIN_SHARE = share
        select.far_combination = candidates_median if rule == "candidates' median" else far_combination
        forecast = SelectingForecaster()(history, horizon_s=HORIZON * 3600.0)
        out[rule] = (*_scores([max(0.0, v) for v in forecast.quantiles[0.5][:HORIZON]], actual),
                     forecast.model.split(" (")[0])
    select.BIAS_MIN_SHARE, select.far_combination = BIAS_MIN_SHARE, far_combination
    out["seasonal_naive"] = (*_scores(list(seasonal_naive_point(history, HORIZON)), actual), "seasonal_naive")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="one series, two origins; writes nothing")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    cases = [(label, s, o) for label, s in all_series(args.small) for o in origins_of(s, 2 if args.small else ORIGINS)]
    names = [*RULES, "seasonal_naive"]
    lines = ["| series | origin | " + " | ".join(f"{n}: week / hourly" for n in names) + " | served by: "
             + " / ".join(RULES) + " |", "|---|---|" + "---:|" * len(names) + "---|"]
    rows = []
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        for (label, series, origin), row in zip(cases, pool.map(one_origin, *zip(*[(s, o) for _, s, o in cases],
                                                                               strict=True)), strict=True):
            rows.append(row)
            print(f"[{len(rows)}/{len(cases)}] {label} from {series.timestamps[origin]:%Y-%m-%d %H:%M}", file=sys.stderr,
                  flush=True)
            lines.append(f"| {label} | {series.timestamps[origin]:%Y-%m-%d %H:%M} | "
                         + " | ".join(f"{row[n][0]:.0%} / {row[n][1]:.0%}" for n in names) + " | "
                         + " / ".join(row[n][2] for n in RULES) + " |")
    summary = ["| over every origin | week error: median / mean | hourly error: median / mean |", "|---|---:|---:|"]
    for n in names:
        week, hourly = [r[n][0] for r in rows], [r[n][1] for r in rows]
        summary.append(f"| {n} | {statistics.median(week):.1%} / {statistics.mean(week):.1%} | "
                       f"{statistics.median(hourly):.1%} / {statistics.mean(hourly):.1%} |")
    print("\n".join([*lines, "", *summary]))
    if not args.small:
        write_doc(DOC, "week_ahead.py", "Week-ahead forecasts",
                  f"{len(rows)} origins on {len(set(c[0] for c in cases))} series, each forecast {HORIZON} h ahead from "
                  "the 30 days before it; errors are of the P50 against what followed, over the week's mean demand "
                  "(see the script's docstring).", [*summary, "", *lines])
    return 0


if __name__ == "__main__":
    sys.exit(main())
