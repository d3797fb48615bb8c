"""Benchmark: backtest burst's forecaster against seasonal naive and AutoETS on every real demand series.

    python bench/forecasts.py            # both parts below; writes docs/benchmarks/forecasting.md and forecasting-rates.md
    python bench/forecasts.py --part rates   # the request-rate part alone
    python bench/forecasts.py --small    # one series and two origins per part (CI keeps the script from rotting)

Part `hourly` (forecasting.md):

Series: each Helios "Earth" virtual cluster (demand = running + pending GPUs)
and Philly's active nodes (occupancy capped by the cluster's size, not demand:
reported, not counted in the targets). All are averaged to 1-hour steps; each
is forecast 48 h ahead from `ORIGINS` origins 24 h apart, the last one 48 h
before the series ends, each from everything before it
(forecasting.backtest). burst's forecaster selects and calibrates from the
data before each origin only (forecasting.select).

Targets on the six Helios series: burst's P90 pinball loss at most 1.0x the
best peer's (seasonal naive, AutoETS) on every series and at most 0.85x as a
geometric mean; P90 coverage inside 0.85-0.95 on at least 4 of 6.

Part `rates` (forecasting-rates.md, bench/forecast_rates.py): burst's request-rate
forecaster (forecasting.rates) on the six request-rate series and the six Helios
series at a 5-minute or 30-minute step, 1 h and 24 h horizons, 10 daily origins
(the load balancer 5), at most 14 days of training. Targets: P90 pinball at or
under the better of seasonal naive and AutoETS on at least 10 of 12, geometric
mean ratio at most 0.85, P90 coverage inside 0.85-0.95 on at least 7 of 12.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import forecast_rates
from benchdoc import write_doc

from burst.settings import data_dir
from forecasting.backtest import Scores, backtest
from forecasting.series import load_series

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "forecasting.md"
RATES_DOC = ROOT / "docs" / "benchmarks" / "forecasting-rates.md"
PEERS = ("seasonal_naive", "auto_ets")
ORIGINS = 14
HORIZON = 48


def series_files(small: bool) -> list[tuple[str, Path, dict[str, str], str, bool]]:
    """(label, path, loader options, what the value is, counted in the targets) for each benchmarked series."""
    demand = data_dir() / "demand"
    helios = sorted(p for p in (demand / "helios-earth").glob("vc*.csv"))
    out = [(f"helios {p.stem}", p, {"value_expr": "running_gpu_num+pending_gpu_num"}, "demand (GPUs)", True)
           for p in helios]
    out.append(("philly active nodes", demand / "philly-active-nodes.csv", {"value_column": "active"},
                "occupancy (nodes, capped)", False))
    return out[:1] if small else out


NOTES = """## How burst forecasts here

- Selection: at each origin, every candidate (Prophet's point forecast,
  seasonal naive, AutoETS on hourly means, the recent level, the seasonal
  profile scaled to the last day's level, and their median, each with
  calibrated quantiles; and the two peers themselves,
  `seasonal_naive_own` and `auto_ets_own`, with their own quantiles) is
  backtested from up to 20 fold origins 12 h apart before the origin, each
  trained only on the data before it (at most the 14 days before it, as the
  serving fit is) and scored on what followed it up to the origin; the candidate whose P90 has the lowest pinball loss serves,
  each fold weighted by its recency (halving every 5 days before the last
  fold), so a model that stopped tracking the series loses the choice within
  days (`forecasting/select.py`). On vcLJZ, seasonal naive had led the
  folds for a week when the series changed; counted alike, those folds kept
  it serving for three more origins at about twice AutoETS's loss.
- Calibration: the serving model's P50 plus, per horizon step, the split
  conformal quantiles of its backtest residuals pooled over the steps within
  3 h (every fold weighs alike here). The fold residuals are autocorrelated
  and come from the last 10 days, so coverage moves when a series changes
  regime; AutoETS's own 80% interval (its P90 here) covers 0.91-1.00 of
  actuals. P10 coverage counts actuals at or below P10, so on a series that
  sits at zero (vcJkd) it counts every idle hour, where P10 is zero too.
  The P50's own offset (the model's bias) and the serving model are kept
  only at the steps at least three quarters of the folds observed; beyond,
  the median of the candidates and the last week's mean daily profile
  serves, uncorrected. Within 48 h that is
  every step unless the history is short; a week ahead it is the first
  days (`bench/week_ahead.py` measures the rule there).
- Level shifts: a step to a new level found on whole days after a split
  restricts the backtest to folds starting a day after it (the recent level
  serves until one exists, the median while there are fewer than three).
- vcJkd is idle almost always, with rare bursts: calibrated on its own last
  10 days, burst's P90 is near zero on the first burst days, which no fold
  before them could foresee (every candidate scores alike on idle folds);
  AutoETS's interval, wide from the whole month's bursts, loses less there.
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="one series, two origins per part; writes nothing")
    parser.add_argument("--part", choices=("all", "hourly", "rates"), default="all", help="which part to run")
    parser.add_argument("--origins", type=int, default=forecast_rates.ORIGINS,
                        help="rates part: daily origins per series (a reduced run says so in its doc)")
    args = parser.parse_args()
    if args.part in ("all", "hourly"):
        hourly(args.small)
    if args.part in ("all", "rates"):
        rates(args.small, args.origins)
    return 0


def rates(small: bool, origins: int) -> None:
    """The request-rate part (bench/forecast_rates.py); writes forecasting-rates.md unless `small`."""
    lines, verdicts, summary = forecast_rates.run(small, origins)
    print("\n".join(lines + ["", *verdicts, "", *summary]))
    if not small:
        write_doc(RATES_DOC, "forecasts.py", "Request-rate forecasting benchmark",
                  forecast_rates.about(origins), [*lines, "", *verdicts, "", *summary, "", forecast_rates.NOTES])


def hourly(small: bool) -> None:
    """The hourly 48-hour part on the demand series; writes forecasting.md unless `small`."""
    origins = 2 if small else ORIGINS
    lines = [
        "| series | value | model | MASE | pinball P50 | pinball P90 | coverage P10 / P50 / P90 / P99 | fit s |",
        "|---|---|---|---:|---:|---:|---|---:|",
    ]
    verdicts = []
    ratios: list[float] = []
    calibrated = 0
    counted = 0
    t0 = time.perf_counter()
    for label, path, options, what, counts in series_files(small):
        series = load_series(path, step_s=3600.0, **options).series  # type: ignore[arg-type]
        scores = backtest(series, horizon_steps=HORIZON, folds=origins, spacing_steps=24)
        print(f"{label}: done ({time.perf_counter() - t0:.0f} s so far)", file=sys.stderr)
        for name, s in scores.items():
            if isinstance(s, Scores):
                cov = " / ".join(f"{s.coverage[q]:.2f}" if q in s.coverage else "-" for q in (0.1, 0.5, 0.9, 0.99))
                model = name + (f" ({', '.join(f'{m} x{n}' for m, n in s.served_by.items())})" if s.served_by else "")
                lines.append(f"| {label} | {what} | {model} | {s.mase:.3f} | {s.pinball_p50:.2f} | {s.pinball_p90:.2f} "
                             f"| {cov} | {s.fit_s:.1f} |")
            else:
                lines.append(f"| {label} | {what} | {name} | {s} | | | | |")
        ours = scores["burst"]
        peers = {p: scores[p] for p in PEERS if isinstance(scores.get(p), Scores)}
        if not isinstance(ours, Scores) or not peers:
            continue
        best_name, best = min(peers.items(), key=lambda kv: kv[1].pinball_p90)  # type: ignore[union-attr]
        assert isinstance(best, Scores)
        ratio = ours.pinball_p90 / best.pinball_p90 if best.pinball_p90 > 0 else (1.0 if ours.pinball_p90 == 0 else math.inf)
        inside = 0.85 <= ours.coverage_p90 <= 0.95
        if counts:
            counted += 1
            ratios.append(ratio)
            calibrated += inside
        verdicts.append(f"- {label}{'' if counts else ' (reported, not counted)'}: P90 pinball {ratio:.2f}x the best "
                        f"peer ({best_name}); P90 coverage {ours.coverage_p90:.2f} "
                        f"({'within' if inside else 'outside'} 0.85-0.95)")
    geomean = math.exp(sum(math.log(max(r, 1e-9)) for r in ratios) / len(ratios)) if ratios else math.nan
    worst = max(ratios, default=math.nan)
    summary = [
        f"On the {counted} Helios series: burst's P90 pinball loss is at most {worst:.2f}x the best peer's "
        f"(target <= 1.0x on every one: {'holds' if worst <= 1.0 else 'does not hold'}), "
        f"{geomean:.2f}x as a geometric mean (target <= 0.85x: {'holds' if geomean <= 0.85 else 'does not hold'}).",
        f"P90 coverage is inside 0.85-0.95 on {calibrated} of {counted} (target at least 4: "
        f"{'holds' if calibrated >= 4 else 'does not hold'}).",
    ]
    print("\n".join(lines + ["", *verdicts, "", *summary]))
    if not small:
        write_doc(DOC, "forecasts.py", "Forecasting benchmark",
                  f"Hourly series, 48 h horizon, {ORIGINS} forecast origins 24 h apart per series (the last 48 h before "
                  "the series ends), each from the data before it. `burst` is burst's forecaster: the model chosen per "
                  "series and origin by a rolling-origin backtest on the data before the origin, with P10/P50/P90/P99 "
                  "calibrated per horizon step from that backtest's residuals (split conformal); the models that "
                  "served it are in brackets. `prophet` is Prophet with its own sampled quantiles, `seasonal_naive` "
                  "and `auto_ets` (statsforecast's AutoETS) are the peers. Metric definitions: "
                  "`forecasting/backtest.py`; selection and calibration: `forecasting/select.py`. Philly's series is "
                  "occupancy capped by capacity, not demand: reported, not counted.",
                  [*lines, "", *verdicts, "", *summary, "", NOTES])


if __name__ == "__main__":
    raise SystemExit(main())
