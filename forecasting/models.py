"""Quantile demand forecasts for one series: Prophet, with a seasonal-naive fallback and guardrails.

`forecast_series` decides which model serves a series and returns a
`burst.model.Forecast` naming it:

- fewer than `min_history_s` (default 24 h) of history, or a series too flat
  to fit: the seasonal-naive fallback;
- otherwise Prophet (daily seasonality, weekly once a week of history
  exists), fitted on hourly means of the series (`fitting_points`) and
  predicting at the series' own step. P50 is Prophet's point forecast (`yhat`: trend + seasonality, no
  sampling noise, so a step-to-step rise is the model's and not the
  sampler's). P90 and P99 add to it the 90th and 99th percentiles of Prophet's
  own predictive samples (`Prophet.predictive_samples`, trend and observation
  noise included) less the point forecast, smoothed over 9 steps: quantiles
  of samples rather than its symmetric `interval_width` band, so the upper
  quantiles keep the skew of the samples;
- if Prophet raises, or returns a value that is NaN, infinite or below zero
  beyond rounding, the fallback serves and the reason is kept in the model
  name (``seasonal_naive (prophet failed: ...)``).

Every forecast is then made monotone across quantiles (P50 <= P90 <= P99)
and clipped to [0, quota].

Seasonal naive: P50 at a future step is the value one season earlier (a week
once two weeks of history exist, else a day; with less than a day, the last
value). P90 and P99 add the 90th and 99th percentiles of the series' own
seasonal differences (never less than zero), P10 its 10th percentile (never
more than zero), and P99 is floored at the largest
value of the last season (the recent-max floor), so a burst seen yesterday is
never forecast away.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from burst.model import QUANTILES, Forecast, SpecialEvent

DAY_S = 86400.0
WEEK_S = 7 * DAY_S
MIN_HISTORY_S = DAY_S


class SeriesError(ValueError):
    """A demand series cannot be used (empty, unordered, irregular or not finite)."""


@dataclass(frozen=True)
class DemandSeries:
    """GPUs demanded (running + pending) for one tenant and GPU model at a regular step."""

    tenant: str
    gpu_model: str
    timestamps: tuple[datetime, ...]
    values: tuple[float, ...]
    step_s: float

    def __post_init__(self) -> None:
        if len(self.timestamps) != len(self.values):
            raise SeriesError(f"{self.name}: {len(self.timestamps)} timestamps but {len(self.values)} values")
        if not self.timestamps:
            raise SeriesError(f"{self.name}: no points")
        if self.step_s <= 0:
            raise SeriesError(f"{self.name}: step must be positive, got {self.step_s}")
        for i, (a, b) in enumerate(zip(self.timestamps, self.timestamps[1:], strict=False), start=1):
            if abs((b - a).total_seconds() - self.step_s) > 1e-6:
                raise SeriesError(f"{self.name}: point {i} is {(b - a).total_seconds():g} s after the one before, not {self.step_s:g} s")
        for i, v in enumerate(self.values):
            if not math.isfinite(v) or v < 0:
                raise SeriesError(f"{self.name}: value {i} is {v!r}, not a finite number >= 0")

    @property
    def name(self) -> str:
        return f"{self.tenant}/{self.gpu_model}"

    def part(self, start: int, end: int) -> DemandSeries:
        """This series' points [start, end), as slicing picks them.

        A run of a checked series is as regular, finite and non-negative as
        the series, so only its having a point is checked again (a backtest
        takes hundreds of parts of one series; checking each point of each
        was a tenth of a refit).
        """
        stamps = self.timestamps[start:end]
        if not stamps:
            raise SeriesError(f"{self.name}: no points")
        out = object.__new__(DemandSeries)
        for field_name, value in (("tenant", self.tenant), ("gpu_model", self.gpu_model), ("timestamps", stamps),
                                  ("values", self.values[start:end]), ("step_s", self.step_s)):
            object.__setattr__(out, field_name, value)
        return out

    @property
    def history_s(self) -> float:
        return len(self.values) * self.step_s


QuantilePaths = dict[float, list[float]]
Fitter = Callable[..., QuantilePaths]
"""Fits a series and gives each quantile of QUANTILES at `steps` future steps: `fit(series, steps)`, and
`fit(series, steps, events=...)` when special events are configured."""


def seasonal_naive(series: DemandSeries, steps: int) -> QuantilePaths:
    """The fallback forecast (see the module doc) for `steps` steps after the series' last point."""
    values = list(series.values)
    season_s = WEEK_S if series.history_s >= 2 * WEEK_S else DAY_S
    season = int(round(season_s / series.step_s))
    recent_max = max(values[-season:])
    if len(values) <= season:
        season = 1  # less than a season: hold the last value, spread by step-to-step changes
    diffs = sorted(values[i] - values[i - season] for i in range(season, len(values)))
    down10 = min(0.0, _percentile(diffs, 0.1)) if diffs else 0.0
    up90 = max(0.0, _percentile(diffs, 0.9)) if diffs else 0.0
    up99 = max(0.0, _percentile(diffs, 0.99)) if diffs else 0.0
    p50 = [values[len(values) - season + (k % season)] for k in range(steps)]
    return {
        0.1: [max(0.0, v + down10) for v in p50],
        0.5: p50,
        0.9: [v + up90 for v in p50],
        0.99: [max(v + up99, recent_max) for v in p50],
    }


FIT_STEP_S = 3600.0
"""Prophet is fitted on means over this step (or the series' own, if coarser), then predicts at the series' step."""


def fitting_points(series: DemandSeries) -> tuple[list[datetime], list[float]]:
    """The points Prophet is fitted on: means over whole `FIT_STEP_S` blocks, each at its block's middle.

    Blocks end at the series' last point (a partial block at its start is
    dropped). Prophet is a continuous-time model, so it still predicts at the
    series' own step; fitting on hourly means makes a refit about three times
    faster on a month of 15-minute history and gives the same daily and weekly
    shape (GPU demand moves in jobs of hours, so the means keep its level and
    most of its step-to-step noise).
    """
    k = max(1, int(round(FIT_STEP_S / series.step_s)))
    if k == 1 or len(series.values) < 2 * k:
        return list(series.timestamps), list(series.values)
    first = len(series.values) % k
    middle = timedelta(seconds=series.step_s * (k - 1) / 2)
    stamps = [series.timestamps[i] + middle for i in range(first, len(series.values), k)]
    values = [sum(series.values[i : i + k]) / k for i in range(first, len(series.values), k)]
    return stamps, values


def prophet_fit(
    series: DemandSeries, steps: int, *, samples: int = 300, seed: int = 0, events: Sequence[SpecialEvent] = (),
    point_only: bool = False,
) -> QuantilePaths:
    """Prophet's forecast (see the module doc; seeded, so the same series gives the same forecast).

    With `point_only` it draws no samples and gives the P50 path alone (what
    model selection, which calibrates its own quantiles, needs).

    `events` become Prophet holidays: one effect per event name, on each day
    from its start for its `days`, fitted from the history's past occurrences.
    """
    import numpy as np

    Prophet = _import_prophet()
    import pandas as pd

    stamps, values = fitting_points(series)
    last = pd.Timestamp(series.timestamps[-1].replace(tzinfo=None))
    holidays = None
    if events:
        holidays = pd.DataFrame({
            "holiday": [e.name for e in events],
            "ds": pd.to_datetime([e.start.isoformat() for e in events]),
            "lower_window": [0] * len(events),
            "upper_window": [e.days - 1 for e in events],
        })
    model = Prophet(
        daily_seasonality=True,
        weekly_seasonality=series.history_s >= WEEK_S,
        yearly_seasonality=False,
        uncertainty_samples=0 if point_only else samples,
        holidays=holidays,
    )
    backend = model.stan_backend
    backend.model = _JsonDataModel(backend.model)
    # Without holidays the matrix depends on the feature columns and modes alone: every fit shares one cache.
    built = _COMPONENT_MATRICES if holidays is None else {}
    model.regressor_column_matrix = _ComponentMatrixOnce(model.regressor_column_matrix, built)
    model.make_all_seasonality_features = _LastFeatures(model.make_all_seasonality_features)
    step = pd.Timedelta(seconds=series.step_s)
    future = pd.DataFrame({"ds": pd.date_range(start=last + step, periods=steps, freq=step)})
    ds = pd.to_datetime([t.replace(tzinfo=None) for t in stamps])
    with warnings.catch_warnings():  # Prophet's own pandas deprecations are not the user's to act on
        warnings.simplefilter("ignore")
        model.fit(pd.DataFrame({"ds": ds, "y": values}))
        future = model.setup_dataframe(future)  # once, for the samples and the point forecast alike
        if not point_only:
            np.random.seed(seed)  # Prophet draws its samples from numpy's global generator
            draws = model.sample_posterior_predictive(future, vectorized=True)["yhat"]
        model.uncertainty_samples = 0  # the point forecast: predict()'s yhat, without its intervals
        trend = model.predict_trend(future)
        seasonal = model.predict_seasonal_components(future)
        point = (trend * (1 + seasonal["multiplicative_terms"]) + seasonal["additive_terms"]).to_numpy()
    if point_only:
        return {0.5: [float(v) for v in point]}
    offsets = np.quantile(draws - point[:, None], [q for q in QUANTILES if q != 0.5], axis=1)
    out = {0.5: [float(v) for v in point]}
    for q, row in zip([q for q in QUANTILES if q != 0.5], offsets, strict=True):
        out[q] = [float(v) for v in point + _moving_average(row, SPREAD_SMOOTHING_STEPS)]
    return out


class _JsonDataModel:
    """Prophet's CmdStan model, handed its data as a JSON file written by the stdlib's C encoder.

    Prophet passes the data as nested lists, which cmdstanpy writes through
    stanio's pure-Python fallback encoder, value by value: that was about half
    of a refit. `json.dumps` writes the same text (floats by `repr` alike), so
    the fit is unchanged. Everything but `optimize` is the wrapped model's.
    """

    def __init__(self, model: Any) -> None:
        self._model = model

    def optimize(self, *, data: Mapping[str, Any], **kwargs: Any) -> Any:
        fd, path = tempfile.mkstemp(prefix="burst-prophet-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as out:
                out.write(json.dumps(data))
            return self._model.optimize(data=path, **kwargs)
        finally:
            os.remove(path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


class _LastFeatures:
    """Prophet's `make_all_seasonality_features`, handing back its last result for the same frame.

    The samples and the point forecast each build the future frame's
    features; the second call gets the first one's (they only read them).
    """

    def __init__(self, make: Callable[[Any], Any]) -> None:
        self._make = make
        self._last: tuple[Any, Any] | None = None

    def __call__(self, df: Any) -> Any:
        if self._last is not None and self._last[0] is df:
            return self._last[1]
        out = self._make(df)
        self._last = (df, out)
        return out


_COMPONENT_MATRICES: dict[tuple[Any, ...], Any] = {}
"""Component matrices of models without holidays or extra regressors, by feature columns and modes."""


class _ComponentMatrixOnce:
    """Prophet's `regressor_column_matrix`, built once per feature set and then handed back.

    Prophet rebuilds this small indicator matrix (a pandas crosstab, about a
    sixth of a refit) for the fit and again for each prediction, from the
    feature columns and mode lists (and the model's holidays and extra
    regressors, which burst's models have none of unless events are given);
    the same inputs give copies of the first result, kept in `built`.
    """

    def __init__(self, build: Callable[..., Any], built: dict[tuple[Any, ...], Any]) -> None:
        self._build = build
        self._built = built

    def __call__(self, seasonal_features: Any, modes: dict[str, list[str]]) -> tuple[Any, dict[str, list[str]]]:
        key = (tuple(seasonal_features.columns), tuple((m, tuple(names)) for m, names in sorted(modes.items())))
        found = self._built.get(key)
        if found is None:
            cols, out = self._build(seasonal_features, modes)
            found = self._built[key] = (cols.copy(), {m: list(names) for m, names in out.items()})
        cols, out = found
        modes.clear()
        modes.update({m: list(names) for m, names in out.items()})
        return cols.copy(), modes


SPREAD_SMOOTHING_STEPS = 4
"""Half-width of the centred moving average over each upper quantile's spread above the point forecast."""


def _moving_average(values: Sequence[float], half: int) -> list[float]:
    """Centred moving average of `values` over 2 * half + 1 steps (fewer at the ends)."""
    out = []
    for i in range(len(values)):
        window = values[max(0, i - half) : i + half + 1]
        out.append(sum(window) / len(window))
    return out


def forecast_series(
    series: DemandSeries,
    *,
    horizon_s: float,
    quota: float | None = None,
    min_history_s: float = MIN_HISTORY_S,
    fit: Fitter = prophet_fit,
    events: Sequence[SpecialEvent] = (),
) -> Forecast:
    """Forecast `series` over `horizon_s` after its last point: which model serves is in `Forecast.model`.

    `events` (holidays, special days) go to the fitter as its `events`
    argument; the seasonal-naive fallback does not use them.
    """
    steps = max(1, int(math.ceil(horizon_s / series.step_s - 1e-9)))
    model = "prophet"
    paths: QuantilePaths | None = None
    if series.history_s < min_history_s:
        model = f"seasonal_naive (history {series.history_s / 3600:g} h < {min_history_s / 3600:g} h)"
    elif max(series.values) == min(series.values):
        model = "seasonal_naive (constant history)"
    else:
        try:
            paths = fit(series, steps, events=events) if events else fit(series, steps)
            problem = _nonsense(paths, steps)
        except Exception as exc:  # noqa: BLE001 - any fit failure is served by the fallback
            problem = f"{type(exc).__name__}: {exc}"
        if problem:
            model = f"seasonal_naive (prophet failed: {problem})"
            paths = None
    if paths is None:
        paths = seasonal_naive(series, steps)
    return guarded_forecast(series, paths, steps, model=model, quota=quota)


def guarded_forecast(
    series: DemandSeries, paths: QuantilePaths, steps: int, *, model: str, quota: float | None = None,
    backtest_p90_pinball: float | None = None, backtest_rise_skill: float | None = None,
) -> Forecast:
    """`paths` as the Forecast of `series`' next `steps` steps: monotone across quantiles, clipped to [0, quota];
    a quantile below P50 that `paths` leaves out is its P50 path (no lower spread is claimed)."""
    upper = math.inf if quota is None else float(quota)
    guarded: dict[float, tuple[float, ...]] = {}
    floor = [0.0] * steps
    for q in QUANTILES:  # ascending: each quantile is at least the one below it
        source = paths[q] if q in paths or q >= 0.5 else paths[0.5]
        row = [min(upper, max(lo, v)) for lo, v in zip(floor, source[:steps], strict=True)]
        guarded[q] = tuple(row)
        floor = row
    last = series.timestamps[-1]
    stamps = tuple(last + timedelta(seconds=series.step_s * (k + 1)) for k in range(steps))
    return Forecast(tenant=series.tenant, gpu_model=series.gpu_model, timestamps=stamps, quantiles=guarded, model=model,
                    history_s=series.history_s, backtest_p90_pinball=backtest_p90_pinball,
                    backtest_rise_skill=backtest_rise_skill)


def _nonsense(paths: QuantilePaths, steps: int) -> str:
    """Why a fitted forecast cannot be used, or '' if it can (slightly negative values are rounding)."""
    for q in QUANTILES:
        row = paths.get(q)
        if row is None and q < 0.5:
            continue  # a fitter may leave out the lower quantiles (see `guarded_forecast`)
        if row is None or len(row) != steps:
            return f"no P{q * 100:g} path of {steps} steps"
        for v in row:
            if not math.isfinite(v):
                return f"P{q * 100:g} has a non-finite value"
            if v < -0.5 and q >= 0.5:  # a lower quantile below zero is only a wide band: the guard clips it
                return f"P{q * 100:g} goes negative ({v:.2f})"
    return ""


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th quantile of already sorted values (linear interpolation)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _import_prophet() -> type:
    """Prophet's class, imported with its and cmdstanpy's chatter silenced (setLevel does not stick)."""
    for name in ("cmdstanpy", "prophet", "prophet.plot"):
        logging.getLogger(name).disabled = True
    from prophet import Prophet

    return Prophet
