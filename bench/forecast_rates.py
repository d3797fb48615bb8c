"""The request-rate part of bench/forecasts.py: burst's rate forecaster against seasonal naive and AutoETS.

Series: the six request-rate series of $BURST_DATA_DIR/services (NYC taxi at
30 minutes; the AWS load balancer and the four tweet series at 5 minutes) and
the six Helios "Earth" virtual clusters (running + pending GPUs, 5-minute
means of their 1-minute samples). The Azure LLM file is one hour of
requests: it cannot hold a day of training, so it is not benchmarked here.

At each of `ORIGINS` daily origins (00:00 UTC, the last one 24 h before the
series ends; the load balancer's 14 days hold `ELB_ORIGINS`), every model is
given the at most 14 days before the origin and nothing else, and forecasts
24 h ahead; the 1-hour horizon is scored on a forecast asked for 1 hour. burst
is `forecasting.rates.RateForecaster` (one per series, refitting at each
origin, as the simulator runs it), the peers `seasonal_naive` and `auto_ets`
are those of `forecasting.backtest`.

Per series and horizon: the mean P90 pinball loss and the share of actuals at
or below P90. A series' ratio is the geometric mean over the two horizons of
burst's loss over the better peer's at that horizon; its coverage the mean of
the two horizons' coverage.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from burst.settings import data_dir
from forecasting.backtest import auto_ets, pinball
from forecasting.models import DAY_S, DemandSeries, QuantilePaths, seasonal_naive
from forecasting.rates import RateForecaster
from forecasting.series import load_series

ORIGINS = 10
ELB_ORIGINS = 5
TRAIN_DAYS = 14
HORIZONS_S = (3600.0, DAY_S)
PEERS = ("seasonal_naive", "auto_ets")


@dataclass(frozen=True)
class RateSeries:
    """One benchmarked series: its label, what its value is, and how to load it."""

    label: str
    path: Path
    step_s: float
    options: dict[str, str]
    what: str
    origins: int = ORIGINS


def rate_series(small: bool) -> list[RateSeries]:
    """The twelve series (module doc); with `small`, NYC taxi alone."""
    services, helios = data_dir() / "services", data_dir() / "demand" / "helios-earth"
    nab = {"time_column": "timestamp", "value_column": "value"}
    out = [RateSeries("nyc-taxi", services / "nyc-taxi.csv", 1800.0, nab, "passengers / 30 min")]
    out.append(RateSeries("elb-request-count", services / "elb-request-count.csv", 300.0, nab, "requests / 5 min",
                          ELB_ORIGINS))
    out += [RateSeries(f"twitter-{t}", services / f"twitter-{t}.csv", 300.0, nab, "mentions / 5 min")
            for t in ("AMZN", "FB", "GOOG", "AAPL")]
    out += [RateSeries(f"helios {p.stem}", p, 300.0, {"value_expr": "running_gpu_num+pending_gpu_num"},
                       "GPUs demanded") for p in sorted(helios.glob("vc*.csv"))]
    return out[:1] if small else out


@dataclass
class Tally:
    """One model's P90 pinball losses and coverage at one horizon, summed over origins."""

    loss: float = 0.0
    covered: int = 0
    points: int = 0

    def add(self, actual: list[float], p90: list[float]) -> None:
        for y, f in zip(actual, p90, strict=False):
            self.loss += pinball(y, f, 0.9)
            self.covered += y <= f
            self.points += 1

    @property
    def pinball(self) -> float:
        return self.loss / self.points if self.points else math.nan

    @property
    def coverage(self) -> float:
        return self.covered / self.points if self.points else math.nan


def origins_of(series: DemandSeries, count: int) -> list[int]:
    """Indices of the last `count` 00:00 UTC instants with 24 h of the series after them, oldest first."""
    day = int(round(DAY_S / series.step_s))
    out = []
    for i in range(len(series.values) - day, 0, -1):
        t = series.timestamps[i]
        if t.hour == 0 and t.minute == 0 and t.second == 0:
            out.append(i)
            if len(out) == count:
                break
    return sorted(out)


def run_series(spec: RateSeries, origins: int | None = None) -> tuple[dict[str, dict[float, Tally]], float, int]:
    """Every model's tallies per horizon on `spec`, burst's seconds spent, and the origins scored."""
    series = load_series(spec.path, step_s=spec.step_s, **spec.options).series  # type: ignore[arg-type]
    steps = {h: max(1, int(round(h / series.step_s))) for h in HORIZONS_S}
    tallies = {m: {h: Tally() for h in HORIZONS_S} for m in ("burst", *PEERS)}
    forecaster = RateForecaster(series.step_s, training_days=TRAIN_DAYS)
    peers: dict[str, Callable[[DemandSeries, int], QuantilePaths]] = {"seasonal_naive": seasonal_naive,
                                                                      "auto_ets": auto_ets}
    spent = 0.0
    chosen = origins_of(series, origins or spec.origins)
    for o in chosen:
        start = max(0, o - int(round(TRAIN_DAYS * DAY_S / series.step_s)))
        train = series.part(start, o)
        now = series.timestamps[o]
        for h in sorted(HORIZONS_S, reverse=True):  # the day first: it is the refit, the hour re-anchors to it
            t0 = time.perf_counter()
            _, q = forecaster.forecast(train.timestamps, train.values, now, h)
            spent += time.perf_counter() - t0
            tallies["burst"][h].add(list(series.values[o:o + steps[h]]), list(q[0.9][:steps[h]]))
        for name, fit in peers.items():
            paths = fit(train, steps[DAY_S])
            for h in HORIZONS_S:
                tallies[name][h].add(list(series.values[o:o + steps[h]]), paths[0.9][:steps[h]])
    return tallies, spent, len(chosen)


def ratio_of(tallies: dict[str, dict[float, Tally]]) -> tuple[float, dict[float, float]]:
    """burst's P90 loss over the better peer's per horizon, and their geometric mean."""
    per = {}
    for h in HORIZONS_S:
        best = min(tallies[p][h].pinball for p in PEERS)
        ours = tallies["burst"][h].pinball
        per[h] = ours / best if best > 0 else (1.0 if ours == 0 else math.inf)
    return math.exp(sum(math.log(max(r, 1e-9)) for r in per.values()) / len(per)), per


def run(small: bool, origins: int = ORIGINS) -> tuple[list[str], list[str], list[str]]:
    """The table, the per-series verdicts and the summary (printed as it goes on stderr), from at most `origins`
    origins per series (the load balancer at most `ELB_ORIGINS`)."""
    lines = ["| series | value | origins | horizon | burst P90 pinball | seasonal naive | AutoETS | ratio to better peer "
             "| burst P90 coverage | burst s |", "|---|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    verdicts: list[str] = []
    ratios: list[float] = []
    calibrated = 0
    t0 = time.perf_counter()
    for spec in rate_series(small):
        tallies, spent, n = run_series(spec, 2 if small else min(origins, spec.origins))
        ratio, per = ratio_of(tallies)
        for h in HORIZONS_S:
            b = tallies["burst"][h]
            lines.append(f"| {spec.label} | {spec.what} | {n} | {h / 3600:g} h | {b.pinball:.3g} "
                         f"| {tallies['seasonal_naive'][h].pinball:.3g} | {tallies['auto_ets'][h].pinball:.3g} "
                         f"| {per[h]:.2f} | {b.coverage:.2f} | {spent:.0f} |")
        coverage = sum(tallies["burst"][h].coverage for h in HORIZONS_S) / len(HORIZONS_S)
        inside = 0.85 <= coverage <= 0.95
        ratios.append(ratio)
        calibrated += inside
        verdicts.append(f"- {spec.label}: P90 pinball {ratio:.2f}x the better peer (1 h: {per[HORIZONS_S[0]]:.2f}x, "
                        f"24 h: {per[HORIZONS_S[1]]:.2f}x); P90 coverage {coverage:.2f} "
                        f"({'within' if inside else 'outside'} 0.85-0.95)")
        print(f"{spec.label}: ratio {ratio:.2f}, coverage {coverage:.2f} ({time.perf_counter() - t0:.0f} s so far)",
              file=sys.stderr)
    return lines, verdicts, summary(ratios, calibrated)


def summary(ratios: list[float], calibrated: int) -> list[str]:
    """The targets: ratio <= 1 on at least 10 of 12, geometric mean <= 0.85, coverage inside on at least 7."""
    n = len(ratios)
    at_most = sum(r <= 1.0 for r in ratios)
    geomean = math.exp(sum(math.log(max(r, 1e-9)) for r in ratios) / n) if n else math.nan
    held = {True: "holds", False: "does not hold"}
    return [
        f"burst's P90 pinball is at or under the better peer's on {at_most} of {n} series "
        f"(target at least 10 of 12: {held[n == 12 and at_most >= 10]}); geometric mean ratio {geomean:.2f} "
        f"(target <= 0.85: {held[geomean <= 0.85]}).",
        f"P90 coverage is inside 0.85-0.95 on {calibrated} of {n} (target at least 7 of 12: "
        f"{held[n == 12 and calibrated >= 7]}).",
    ]


__all__ = ["ABOUT", "HORIZONS_S", "about", "NOTES", "ORIGINS", "RateSeries", "origins_of", "rate_series", "run", "run_series"]


def about(origins: int) -> str:
    """The doc's opening paragraph; a run with fewer than `ORIGINS` origins says it is reduced."""
    reduced = "" if origins >= ORIGINS else (
        f" **Reduced run: {origins} daily origins per series (the load balancer {min(origins, ELB_ORIGINS)}), not "
        f"{ORIGINS} ({ELB_ORIGINS}),** to fit the time on a shared 2-core machine "
        f"(`python bench/forecasts.py --part rates --origins {origins}`); the full run is the default.")
    return ABOUT + reduced


ABOUT = ("burst's request-rate forecaster (`forecasting/rates.py`) against seasonal naive and AutoETS "
         "(`forecasting/backtest.py`) on the six request-rate series in `$BURST_DATA_DIR/services` and the six Helios "
         "series, each at its own step (NYC taxi 30 min, the others 5 min; Helios' 1-minute samples are averaged to "
         "5 minutes, see below), horizons 1 h and 24 h, 10 daily origins at 00:00 UTC (the load balancer's 14 days "
         "hold 5), every model given at most the 14 days before each origin. A series' ratio is the geometric mean "
         "over the two horizons of burst's mean P90 pinball loss over the better peer's at that horizon; its "
         "coverage the mean over the two horizons of the share of actuals at or below P90. The Azure LLM hour cannot "
         "hold a day of training and is not benchmarked here.")

NOTES = """## How burst forecasts rates here

- `forecasting.rates.RateForecaster`, one per series, as a service's
  controller and the simulator run it: at each origin it refits (its refit
  interval is a day) on the 14 days before the origin, less the last hour.
  burst's model selection (`forecasting/select.py`: Prophet, seasonal naive,
  AutoETS on hourly means, the recent level, the seasonal profile scaled to
  the last day's level, their median, and the two peers with their own
  quantiles) backtests each candidate from 12 fold origins 12 h apart and
  serves the one whose calibrated P90 loses least; its P50 path is the
  template.
- Re-anchoring: each forecast scales the template by the ratio of the last
  hour's observed rate to the template there, raised at lead j to a weight
  w[j] in [0, 1] fitted on the folds (how long a deviation from the template
  has lasted on this series), so the 1-hour forecast follows the level the
  last hour set and the 24-hour one leans back on the template. The last
  step's departure from that ratio gets its own weight per lead, fitted
  jointly: a GPU demand, which moves in steps, follows its newest value an
  hour ahead (the hour's mean lags a step taken minutes ago); on the noisy
  tweet series the fit leaves it near 0.
- Quantiles: split conformal on the folds trained on at least a week, per
  lead, on log errors of the re-anchored P50 (leads pooled within 3 h and
  within half the lead, so the first steps keep their own narrow band). The
  log space's floor is chosen on the folds from 5%, 30% and 200% of the mean
  rate: a small floor makes the band scale with the rate (the request
  series), a large one makes it additive (a demand of 0 to 3 GPUs, as on
  vcJkd, where a 5% floor made the P90 tens of times the largest demand).
  The P90 is the conformal 0.9 quantile within the first hour, rising to
  0.92 from 3 h on: a day ahead the folds' errors come in day-long runs,
  and their 0.9 quantile covers less than 90% of the next day.
- The peers: `seasonal_naive` repeats the value one week earlier (one day
  with less than two weeks of history) plus the quantiles of its seasonal
  differences; `auto_ets` is statsforecast's AutoETS at the series' own step
  with a daily season, which statsforecast does not fit beyond 24 steps a
  season: at 5 and 30 minutes it is a non-seasonal (level and trend) model,
  strong an hour ahead and weak a day ahead.
- Helios is measured on 5-minute means of its 1-minute samples: at a 1-minute
  step a 24 h horizon is 1,440 steps per fold and the run does not fit the
  time on a shared 2-core machine.
- NYC taxi's last ten days hold the blizzard of 2015-01-26/27 (demand fell to
  a fraction of a normal day's), inside every origin's 14 days of training;
  no event is declared in this benchmark (the peers have no way to use one).
"""
