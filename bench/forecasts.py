"""Benchmark: backtest burst's forecaster against seasonal naive and AutoETS on every real demand series.

    python bench/forecasts.py            # every series in $BURST_DATA_DIR/demand; writes docs/benchmarks/forecasting.md
    python bench/forecasts.py --small    # one Helios virtual cluster, one fold (CI keeps the script from rotting)

Series: each Helios "Earth" virtual cluster (demand = running + pending GPUs)
and Philly's active nodes (occupancy capped by the cluster's size, not demand:
its upper quantiles are bounded by capacity, which flatters every model).
All are averaged to 1-hour steps; each backtest forecasts 48 h ahead from an
expanding window, over the last 3 such windows (forecasting.backtest).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from benchdoc import write_doc

from burst.settings import data_dir
from forecasting.backtest import Scores, backtest
from forecasting.series import load_series

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "forecasting.md"
PEERS = ("seasonal_naive", "auto_ets")


def series_files(small: bool) -> list[tuple[str, Path, dict[str, str], str]]:
    """(label, path, loader options, what the value is) for each benchmarked series."""
    demand = data_dir() / "demand"
    helios = sorted(p for p in (demand / "helios-earth").glob("vc*.csv"))
    out = [(f"helios {p.stem}", p, {"value_expr": "running_gpu_num+pending_gpu_num"}, "demand (GPUs)") for p in helios]
    out.append(("philly active nodes", demand / "philly-active-nodes.csv", {"value_column": "active"}, "occupancy (nodes, capped)"))
    return out[:1] if small else out


CALIBRATION = """## Calibration

P90 coverage is the share of the 144 held-out hours (3 folds x 48 h) at or below
the forecast P90. Those hours are strongly autocorrelated, so one series'
coverage rests on a handful of independent days and moves by tenths from one
fold to the next. Where it is outside 0.85-0.95:

- too wide (0.98-1.00: vc3sl, vc6YE, vcJLV, Philly): Prophet's predictive
  samples carry its trend uncertainty, which widens with the horizon on series
  that then stay level. Philly's series is occupancy capped by the cluster's
  capacity, so no actual can pass a P90 drawn above the cap. Pinball loss
  charges an over-forecast a ninth of an under-forecast at P90, which is why
  these wide P90s still score best.
- too narrow (vcJkd 0.69, vc8Sj 0.80): vcJkd is almost always zero with rare
  spikes (MASE 28: the in-sample seasonal error it is scaled by is near zero),
  and vc8Sj steps to a new level inside the held-out folds.

Split-conformal rescaling of the P90/P99 spreads (fit without the last two or
seven days, scale the spread so those days would have been covered at P90)
was tried: coverage moved toward 0.9 on some series and away on others, and
P90 pinball loss rose on five of seven series (the seven-day version left
burst best on two of seven). burst keeps Prophet's own quantiles, and the
pre-scaling step bounds by the quantile rather than provisioning it.
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="one series, one fold; writes nothing")
    args = parser.parse_args()
    folds = 1 if args.small else 3
    lines = [
        "| series | value | model | MASE | pinball P50 | pinball P90 | P90 coverage | fit s |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    wins = 0
    total = 0
    verdicts = []
    t0 = time.perf_counter()
    for label, path, options, what in series_files(args.small):
        series = load_series(path, step_s=3600.0, **options).series  # type: ignore[arg-type]
        scores = backtest(series, horizon_steps=48, folds=folds)
        print(f"{label}: done ({time.perf_counter() - t0:.0f} s so far)", file=sys.stderr)
        for name, s in scores.items():
            if isinstance(s, Scores):
                lines.append(f"| {label} | {what} | {name} | {s.mase:.3f} | {s.pinball_p50:.2f} | {s.pinball_p90:.2f} "
                             f"| {s.coverage_p90:.2f} | {s.fit_s:.2f} |")
            else:
                lines.append(f"| {label} | {what} | {name} | {s} | | | | |")
        ours = scores["prophet"]
        peers = [scores[p] for p in PEERS if isinstance(scores.get(p), Scores)]
        if isinstance(ours, Scores) and peers:
            total += 1
            beat = all(ours.pinball_p90 < p.pinball_p90 for p in peers if isinstance(p, Scores))
            wins += beat
            calibrated = 0.85 <= ours.coverage_p90 <= 0.95
            verdicts.append(f"- {label}: {'beats' if beat else 'does not beat'} both peers on P90 pinball loss; "
                            f"P90 coverage {ours.coverage_p90:.2f} ({'within' if calibrated else 'outside'} 0.85-0.95)")
    summary = f"burst's forecaster has the lowest P90 pinball loss on {wins} of {total} series."
    print("\n".join(lines + ["", *verdicts, "", summary]))
    if not args.small:
        write_doc(DOC, "forecasts.py", "Forecasting benchmark",
                  "Hourly series, 48 h horizon, 3 rolling-origin folds; `prophet` is burst's forecaster with its "
                  "guardrails, `seasonal_naive` its fallback, `auto_ets` statsforecast's AutoETS. Metric definitions: "
                  "`forecasting/backtest.py`. Philly's series is occupancy capped by capacity, not demand.",
                  [*lines, "", *verdicts, "", summary, "", CALIBRATION, ""])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
