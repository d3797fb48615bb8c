"""Rolling-origin backtests: how well each forecaster's quantiles would have done on a series' own past.

Folds: the last `folds` windows of `horizon` steps, back to back, each
forecast from everything before it (expanding window). Per model, over every
forecast step of every fold:

- `mase`: mean |actual - P50| over the mean |y[t] - y[t - day]| of the training
  part of the first fold (the in-sample daily seasonal-naive error), so 1.0
  is as good as repeating yesterday;
- `pinball_p50`, `pinball_p90`: mean pinball (quantile) loss in GPUs,
  max(q (y - f), (q - 1)(y - f)); lower is better;
- `coverage_p90`: the share of actuals at or below P90 (0.9 is calibrated);
- `fit_s`: wall seconds spent fitting and forecasting, all folds.

Models: `prophet` is burst's forecaster as the loop runs it (`forecast_series`,
guardrails and fallbacks included), `seasonal_naive` its fallback alone, and
`auto_ets` statsforecast's AutoETS (daily season; P90/P99 are the upper ends
of its 80% and 98% intervals) as an outside peer, when statsforecast is
installed (it is a development dependency).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from forecasting.models import (
    DAY_S,
    DemandSeries,
    QuantilePaths,
    SeriesError,
    forecast_series,
    seasonal_naive,
)

ModelFn = Callable[[DemandSeries, int], QuantilePaths]


@dataclass(frozen=True)
class Scores:
    """One model's backtest figures (see the module doc)."""

    mase: float
    pinball_p50: float
    pinball_p90: float
    coverage_p90: float
    fit_s: float

    def to_json(self) -> dict[str, float]:
        return {"mase": self.mase, "pinball_p50": self.pinball_p50, "pinball_p90": self.pinball_p90,
                "coverage_p90": self.coverage_p90, "fit_s": self.fit_s}


def burst_forecaster(series: DemandSeries, steps: int) -> QuantilePaths:
    """burst's forecaster with its guardrails, as quantile paths."""
    f = forecast_series(series, horizon_s=steps * series.step_s)
    return {q: list(v) for q, v in f.quantiles.items()}


def auto_ets(series: DemandSeries, steps: int) -> QuantilePaths:
    """statsforecast's AutoETS with a daily season (raises ImportError without statsforecast)."""
    import numpy as np
    from statsforecast.models import AutoETS

    season = max(1, int(round(DAY_S / series.step_s)))
    model = AutoETS(season_length=season).fit(np.asarray(series.values, dtype=float))
    out = model.predict(h=steps, level=[80, 98])
    return {0.5: [float(v) for v in out["mean"]], 0.9: [float(v) for v in out["hi-80"]],
            0.99: [float(v) for v in out["hi-98"]]}


MODELS: Mapping[str, ModelFn] = {"prophet": burst_forecaster, "seasonal_naive": seasonal_naive, "auto_ets": auto_ets}


def backtest(
    series: DemandSeries,
    *,
    horizon_steps: int,
    folds: int = 3,
    models: Mapping[str, ModelFn] = MODELS,
    on_fold: Callable[[str, int], None] | None = None,
) -> dict[str, Scores | str]:
    """Scores per model, or the reason a model could not run (e.g. statsforecast missing)."""
    if folds < 1 or horizon_steps < 1:
        raise SeriesError("folds and horizon must be at least 1")
    n = len(series.values)
    first_cut = n - folds * horizon_steps
    season = max(1, int(round(DAY_S / series.step_s)))
    if first_cut < 2 * season:
        raise SeriesError(
            f"{series.name}: {n} points cannot hold {folds} fold(s) of {horizon_steps} steps after two days of training"
        )
    train0 = series.values[:first_cut]
    scale = sum(abs(train0[t] - train0[t - season]) for t in range(season, len(train0))) / (len(train0) - season)
    scale = scale or 1.0
    results: dict[str, Scores | str] = {}
    for name, model in models.items():
        errors: list[float] = []
        pin50: list[float] = []
        pin90: list[float] = []
        covered = 0
        spent = 0.0
        try:
            for fold in range(folds):
                cut = first_cut + fold * horizon_steps
                train = DemandSeries(series.tenant, series.gpu_model, series.timestamps[:cut], series.values[:cut], series.step_s)
                t0 = time.perf_counter()
                paths = model(train, horizon_steps)
                spent += time.perf_counter() - t0
                actual = series.values[cut:cut + horizon_steps]
                for k, y in enumerate(actual):
                    p50, p90 = paths[0.5][k], paths[0.9][k]
                    errors.append(abs(y - p50))
                    pin50.append(pinball(y, p50, 0.5))
                    pin90.append(pinball(y, p90, 0.9))
                    covered += y <= p90
                if on_fold:
                    on_fold(name, fold)
        except ImportError as exc:
            results[name] = f"not run: {exc}"
            continue
        count = len(errors)
        results[name] = Scores(
            mase=sum(errors) / count / scale,
            pinball_p50=sum(pin50) / count,
            pinball_p90=sum(pin90) / count,
            coverage_p90=covered / count,
            fit_s=spent,
        )
    return results


def pinball(actual: float, forecast: float, q: float) -> float:
    """The pinball loss of forecasting `forecast` as the q quantile when `actual` happened."""
    diff = actual - forecast
    return max(q * diff, (q - 1) * diff) if math.isfinite(diff) else math.inf
