"""Sampled demand paths: draws from a forecast's per-step distribution, correlated across steps as its errors were.

A forecast says how each step is distributed (its quantile paths, P10 / P50 /
P90 / P99, calibrated per horizon step by `forecasting.select`). A cost over
a horizon also depends on how the steps move together: a week whose demand
runs high on Monday tends to run high on Tuesday. `sample_paths` draws whole
paths with both.

Marginals: a path's value at step k is the forecast's quantile function at
step k evaluated at u_k, linear in normal score (Φ⁻¹(q)) between the
forecast's quantile knots and continued along the outer segments beyond
them, floored at zero.

Dependence (a Gaussian copula): u_k = Φ(z_k) with
``z_k = sqrt(a)·L + sqrt(1 - a)·e_k``: `L` ~ N(0, 1) is one level error held
over the whole path and `e` a unit AR(1) with coefficient `phi`, so the
correlation of two steps h apart is ``a + (1 - a)·phi**h``. `dependence_of`
fits (a, phi) to the serving model's out-of-sample residuals at the fold
origins before the forecast origin (the folds its selection was scored and
calibrated on): each residual is standardised by its step's calibrated
spread (by the fold's own quantiles, for a model served with them), the correlation at each lag is pooled over folds, and (a, phi) is the
point of a fixed grid whose curve fits those correlations best, weighted by
the pairs behind each lag. Without `MIN_FOLDS` folds to learn from (a forecast
from the fallback, or a selection just after a level shift), every step
moves together (a = 1): the widest band, said so in `Dependence.source`.

Everything is a pure function of its arguments; a seed gives the same paths.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from burst.model import Forecast
from forecasting.models import DemandSeries
from forecasting.select import OWN, OriginCache, SelectingForecaster, Selection, truncated

DEFAULT_PATHS = 50
MIN_PATHS = 20
MIN_FOLDS = 5
MIN_PAIRS = 10
_NORMAL = NormalDist()
_Z10 = _NORMAL.inv_cdf(0.9) - _NORMAL.inv_cdf(0.1)  # P10-P90 width of a unit normal
_LEVEL_GRID = tuple(i / 50 for i in range(50))  # a: 0, 0.02, ..., 0.98
_DECAY_GRID_H = tuple(0.5 * 1.25**i for i in range(36))  # AR(1) e-folding time: 0.5 h to about 1,300 h


@dataclass(frozen=True)
class Dependence:
    """How a forecast's errors move together across steps: correlation ``level + (1 - level) * phi**lag``."""

    level: float
    phi: float
    source: str

    def correlation(self, lag: int) -> float:
        """The correlation of two steps `lag` apart."""
        return self.level + (1.0 - self.level) * self.phi ** abs(lag)

    def to_json(self) -> dict[str, object]:
        return {"level": round(self.level, 4), "phi": round(self.phi, 4), "source": self.source}


COMONOTONE = Dependence(1.0, 1.0, "no out-of-sample errors to learn from: every step moves together (the widest band)")


def forecast_with_dependence(series: DemandSeries, horizon_s: float) -> tuple[Forecast, Dependence]:
    """burst's forecast of `series` over `horizon_s` (the selecting forecaster the daemon runs) and the dependence
    of its errors across steps (`dependence_of` on the folds its selection used; `COMONOTONE` on a fallback)."""
    forecaster = SelectingForecaster()
    forecast = forecaster(series, horizon_s=horizon_s)
    selection = forecaster.selections.get(series.name)
    if selection is None or selection.model != forecast.model:
        return forecast, COMONOTONE
    return forecast, dependence_of(series, selection, forecaster.cache)


def fold_residuals(history: DemandSeries, selection: Selection, cache: OriginCache) -> list[list[float]]:
    """Per fold of `selection`, the serving model's residuals (actual - P50) at each horizon step it observed."""
    steps = len(selection.offsets[0.5])
    out = []
    for f in selection.folds:
        path = cache.path(truncated(history, f.train_start, f.origin), selection.model, steps)
        out.append([history.values[f.origin + k] - path[k] for k in range(min(steps, f.scored_until - f.origin))])
    return out


def dependence_of(history: DemandSeries, selection: Selection, cache: OriginCache) -> Dependence:
    """The dependence (module doc) of the serving model's errors on its selection's folds.

    A calibrated model's residuals are standardised by its per-step offsets;
    a model served with its own quantiles (an `_own` candidate) by the spread
    of its own quantiles in each fold.
    """
    residuals = fold_residuals(history, selection, cache)
    if not selection.model.endswith(OWN):
        return fit_dependence(residuals, selection.offsets, history.step_s)
    steps = len(selection.offsets[0.5])
    scores: list[list[float | None]] = []
    for f, fold in zip(selection.folds, residuals, strict=True):
        own = cache.quantiles(truncated(history, f.train_start, f.origin), selection.model, steps)
        low, high = own.get(0.1, own[0.5]), own.get(0.9, own[0.5])
        scores.append([_standardised(r, 0.0, high[k] - low[k]) for k, r in enumerate(fold)])
    return fit_scores(scores, history.step_s)


def fit_dependence(residuals: Sequence[Sequence[float]], offsets: Mapping[float, Sequence[float]],
                   step_s: float) -> Dependence:
    """(a, phi) fitted to per-fold residual trajectories standardised by the per-step offsets (module doc)."""
    centre, low, high = offsets[0.5], offsets.get(0.1, offsets[0.5]), offsets[0.9]
    scores: list[list[float | None]] = []
    for fold in residuals:
        row: list[float | None] = []
        for k, r in enumerate(fold):
            j = min(k, len(centre) - 1)
            row.append(_standardised(r, centre[j], high[j] - low[j]))
        scores.append(row)
    return fit_scores(scores, step_s)


def _standardised(residual: float, centre: float, p10_to_p90: float) -> float | None:
    spread = p10_to_p90 / _Z10
    return (residual - centre) / spread if spread > 1e-9 else None


def fit_scores(scores: Sequence[Sequence[float | None]], step_s: float) -> Dependence:
    """(a, phi) fitted to per-fold trajectories of standardised errors (None where a step has no spread)."""
    folds = sum(1 for s in scores if s)
    if folds < MIN_FOLDS:
        return Dependence(1.0, 1.0, f"{folds} fold(s) of out-of-sample errors, under the {MIN_FOLDS} a fit needs: every "
                                    "step moves together (the widest band)")
    lags = max((len(s) for s in scores), default=0)
    curve: list[tuple[int, float, int]] = []  # (lag, correlation, pairs)
    for h in range(1, lags):
        xy = xx = yy = 0.0
        n = 0
        for row in scores:
            for k in range(len(row) - h):
                x, y = row[k], row[k + h]
                if x is None or y is None:
                    continue
                xy, xx, yy, n = xy + x * y, xx + x * x, yy + y * y, n + 1
        if n >= MIN_PAIRS and xx > 0 and yy > 0:
            curve.append((h, xy / math.sqrt(xx * yy), n))
    if not curve:
        return COMONOTONE
    best: tuple[float, float, float] | None = None
    for level in _LEVEL_GRID:
        for tau_h in _DECAY_GRID_H:
            phi = math.exp(-step_s / (tau_h * 3600.0))
            loss = sum(n * (rho - level - (1.0 - level) * phi**h) ** 2 for h, rho, n in curve)
            if best is None or loss < best[0]:
                best = (loss, level, phi)
    assert best is not None
    _, level, phi = best
    return Dependence(level, phi, f"fitted on {folds} fold(s) of out-of-sample errors, lags 1-{curve[-1][0]} "
                                  f"steps: correlation {level:.2f} + {1 - level:.2f} x {phi:.3f}^lag")


def sample_paths(forecast: Forecast, dependence: Dependence, n: int, *, seed: int = 0,
                 steps: int | None = None) -> list[list[float]]:
    """`n` demand paths of `steps` steps (default: the whole forecast) drawn from `forecast` (module doc)."""
    if n < 1:
        raise ValueError(f"the number of paths must be at least 1, got {n}")
    steps = len(forecast.timestamps) if steps is None else min(steps, len(forecast.timestamps))
    knots = sorted(forecast.quantiles)
    zs = [_NORMAL.inv_cdf(q) for q in knots]
    rng = random.Random(f"paths:{seed}")
    a = min(1.0, max(0.0, dependence.level))
    phi = min(1.0, max(0.0, dependence.phi))
    out = []
    for _ in range(n):
        level = rng.gauss(0.0, 1.0)
        e = rng.gauss(0.0, 1.0)
        path = []
        for k in range(steps):
            if k:
                e = phi * e + math.sqrt(max(0.0, 1.0 - phi * phi)) * rng.gauss(0.0, 1.0)
            z = math.sqrt(a) * level + math.sqrt(1.0 - a) * e
            path.append(max(0.0, _quantile_at(zs, [forecast.quantiles[q][k] for q in knots], z)))
        out.append(path)
    return out


def _quantile_at(zs: Sequence[float], values: Sequence[float], z: float) -> float:
    """The value at normal score `z` of the piecewise-linear quantile function through (zs, values)."""
    if len(zs) == 1:
        return values[0]
    i = 1
    while i < len(zs) - 1 and z > zs[i]:
        i += 1
    z0, z1, v0, v1 = zs[i - 1], zs[i], values[i - 1], values[i]
    return v0 + (v1 - v0) * (z - z0) / (z1 - z0)


def quantile(values: Sequence[float], q: float) -> float:
    """The `q` quantile of `values` (linear between order statistics, as numpy's default)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


__all__ = ["COMONOTONE", "DEFAULT_PATHS", "MIN_PATHS", "Dependence", "dependence_of", "fit_dependence", "fit_scores",
           "fold_residuals", "forecast_with_dependence", "quantile", "sample_paths"]
