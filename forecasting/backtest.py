"""Rolling-origin backtests: how well each forecaster's quantiles would have done on a series' own past.

Folds: `folds` forecast origins `spacing_steps` apart (default: one horizon,
so the windows are back to back), the last one a horizon before the series'
end; each forecasts `horizon` steps from everything before its origin
(expanding window). Per model, over every forecast step of every fold:

- `mase`: mean |actual - P50| over the mean |y[t] - y[t - day]| of the training
  part of the first fold (the in-sample daily seasonal-naive error), so 1.0
  is as good as repeating yesterday;
- `pinball_p50`, `pinball_p90`: mean pinball (quantile) loss in GPUs,
  max(q (y - f), (q - 1)(y - f)); lower is better;
- `coverage_p90`: the share of actuals at or below P90 (0.9 is calibrated), and
  `coverage` the same for every quantile the model gives (P10, P50, P90, P99);
- `fit_s`: wall seconds spent fitting and forecasting, all folds.

Models: `burst` is burst's forecaster as the loop runs it
(`forecasting.select.SelectingForecaster`: the model chosen per series by
its own rolling-origin backtest before each origin, with conformally
calibrated quantiles; one instance per backtest, so fits of earlier origins'
folds are reused, never data after an origin), `prophet` Prophet with its own
sampled quantiles (`forecast_series`, guardrails and fallbacks included),
`seasonal_naive` the fallback alone, and `auto_ets` statsforecast's AutoETS
(daily season; P10/P90/P99 are the ends of its 80% and 98% intervals).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from burst.model import QUANTILES
from forecasting.models import (
    DAY_S,
    DemandSeries,
    QuantilePaths,
    SeriesError,
    forecast_series,
    seasonal_naive,
)
from forecasting.select import SelectingForecaster

ModelFn = Callable[[DemandSeries, int], QuantilePaths]


@dataclass(frozen=True)
class Scores:
    """One model's backtest figures (see the module doc)."""

    mase: float
    pinball_p50: float
    pinball_p90: float
    coverage_p90: float
    fit_s: float
    coverage: Mapping[float, float] = field(default_factory=dict)  # per quantile the model gives
    served_by: Mapping[str, int] = field(default_factory=dict)  # folds served by each model (burst only)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"mase": self.mase, "pinball_p50": self.pinball_p50, "pinball_p90": self.pinball_p90,
                                  "coverage_p90": self.coverage_p90, "fit_s": self.fit_s,
                                  "coverage": {f"p{round(q * 100)}": c for q, c in sorted(self.coverage.items())}}
        if self.served_by:
            out["served_by"] = dict(sorted(self.served_by.items()))
        return out


class BurstForecaster:
    """burst's forecaster (model selection and calibration) as quantile paths; remembers which model served."""

    def __init__(self) -> None:
        self.forecaster = SelectingForecaster()
        self.served: list[str] = []

    def __call__(self, series: DemandSeries, steps: int) -> QuantilePaths:
        f = self.forecaster(series, horizon_s=steps * series.step_s)
        self.served.append(f.model.split(" (")[0])
        return {q: list(v) for q, v in f.quantiles.items()}


def prophet_forecaster(series: DemandSeries, steps: int) -> QuantilePaths:
    """Prophet with its own sampled quantiles and burst's guardrails, as quantile paths."""
    f = forecast_series(series, horizon_s=steps * series.step_s)
    return {q: list(v) for q, v in f.quantiles.items()}


def auto_ets(series: DemandSeries, steps: int) -> QuantilePaths:
    """statsforecast's AutoETS with a daily season (raises ImportError without statsforecast)."""
    import numpy as np
    from statsforecast.models import AutoETS

    season = max(1, int(round(DAY_S / series.step_s)))
    model = AutoETS(season_length=season).fit(np.asarray(series.values, dtype=float))
    out = model.predict(h=steps, level=[80, 98])
    return {0.1: [float(v) for v in out["lo-80"]], 0.5: [float(v) for v in out["mean"]],
            0.9: [float(v) for v in out["hi-80"]], 0.99: [float(v) for v in out["hi-98"]]}


def default_models() -> dict[str, ModelFn]:
    """The backtest's models (see the module doc), fresh: `burst` keeps state across one backtest's folds."""
    return {"burst": BurstForecaster(), "prophet": prophet_forecaster, "seasonal_naive": seasonal_naive,
            "auto_ets": auto_ets}


def backtest(
    series: DemandSeries,
    *,
    horizon_steps: int,
    folds: int = 3,
    spacing_steps: int | None = None,
    models: Mapping[str, ModelFn] | None = None,
    on_fold: Callable[[str, int], None] | None = None,
) -> dict[str, Scores | str]:
    """Scores per model, or the reason a model could not run (e.g. statsforecast missing)."""
    if folds < 1 or horizon_steps < 1:
        raise SeriesError("folds and horizon must be at least 1")
    models = default_models() if models is None else models
    spacing = horizon_steps if spacing_steps is None else spacing_steps
    if spacing < 1:
        raise SeriesError("fold spacing must be at least 1 step")
    n = len(series.values)
    first_cut = n - horizon_steps - (folds - 1) * spacing
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
        below: dict[float, int] = dict.fromkeys(QUANTILES, 0)
        given: set[float] = set()
        spent = 0.0
        try:
            for fold in range(folds):
                cut = first_cut + fold * spacing
                train = series.part(0, cut)
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
                    for q in below:
                        if q in paths:
                            given.add(q)
                            below[q] += y <= paths[q][k]
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
            coverage={q: c / count for q, c in below.items() if q in given},
            served_by=_counts(model.served) if isinstance(model, BurstForecaster) else {},
        )
    return results


def _counts(names: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in names:
        out[n] = out.get(n, 0) + 1
    return out


def pinball(actual: float, forecast: float, q: float) -> float:
    """The pinball loss of forecasting `forecast` as the q quantile when `actual` happened."""
    diff = actual - forecast
    return max(q * diff, (q - 1) * diff) if math.isfinite(diff) else math.inf
