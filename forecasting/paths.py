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

The level of a whole horizon (its mean demand) is calibrated on its own:
calibrated steps and a fitted correlation curve need not give a band for a
week's total that holds a week's total one time in five below P10 and above
P90 (the curve is fitted mostly on short lags, the selection's folds mostly
observe hours to days, and a forecaster can be off for a week by more than
its hourly band says). `horizon_residuals` refits the serving model at
origins a day apart before the forecast origin, until `HORIZON_ORIGINS` of
them observed the whole horizon (on the
selection's fold grid, so the folds it already fitted are reused; after a
level shift, only origins a day after it) and `horizon_errors` takes, per
origin, the error of the served P50's mean (actual - P50) over the whole
horizon where at least `MIN_FOLDS` origins
observed all of it, else over the part observed by origins that saw at least
`MIN_OBSERVED` of it: out-of-sample errors at this horizon before the origin.
`sample_paths` then ranks the paths by their mean and scales each path so
that its mean is the forecast's P50 mean moved by the absolute-error
quantile of its rank: the path of rank quantile u (of n paths, u = (r +
0.5) / n) by sign(u - 0.5) times the |2u - 1| quantile of the errors'
absolute values (split conformal with the absolute error as score: the P10
and P90 paths sit at the P50 less and plus the 80% quantile, at the (n + 1)
plotting position between order statistics, clamped to the largest). The
band is centred on the forecaster's own P50: a handful of origins is too few
to move the centre by (their median shifted a quiet week's P50 by half its
level), while one quantile of all of them is what split conformal
guarantees. Each path keeps its shape. With fewer than `MIN_FOLDS` such
origins the copula's own spread stands, said so in `Dependence.source`.

Everything is a pure function of its arguments; a seed gives the same paths.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from burst.model import Forecast
from forecasting.models import DAY_S, DemandSeries
from forecasting.select import (
    MIN_TRAIN_S,
    OWN,
    OriginCache,
    SelectingForecaster,
    Selection,
    fit_start,
    served_p50,
    truncated,
)

DEFAULT_PATHS = 50
MIN_PATHS = 20
MIN_FOLDS = 5
MIN_PAIRS = 10
MIN_OBSERVED = 0.5
HORIZON_ORIGINS = 14
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
    horizon_errors: tuple[float, ...] = ()  # sorted out-of-sample errors of the horizon's mean demand (module doc)

    def correlation(self, lag: int) -> float:
        """The correlation of two steps `lag` apart."""
        return self.level + (1.0 - self.level) * self.phi ** abs(lag)

    def to_json(self) -> dict[str, object]:
        return {"level": round(self.level, 4), "phi": round(self.phi, 4), "source": self.source,
                "horizon_folds": len(self.horizon_errors)}

    def with_horizon_errors(self, errors: Sequence[float]) -> Dependence:
        """This dependence with the horizon mean calibrated on `errors` (module doc), or left to the copula, said
        so in `source`, when there are fewer than `MIN_FOLDS` of them."""
        if len(errors) < MIN_FOLDS:
            return dataclasses.replace(self, horizon_errors=(), source=(
                f"{self.source}; horizon mean not calibrated: {len(errors)} origin(s) before the forecast's observed "
                f"at least {MIN_OBSERVED:.0%} of the horizon, under the {MIN_FOLDS} it needs"))
        return dataclasses.replace(self, horizon_errors=tuple(sorted(errors)), source=(
            f"{self.source}; horizon mean calibrated on its out-of-sample errors from {len(errors)} origin(s)"))


COMONOTONE = Dependence(1.0, 1.0, "no out-of-sample errors to learn from: every step moves together (the widest band)")


def forecast_with_dependence(series: DemandSeries, horizon_s: float) -> tuple[Forecast, Dependence]:
    """burst's forecast of `series` over `horizon_s` (the selecting forecaster the daemon runs) and the dependence
    of its errors across steps (`dependence_of` on the folds its selection used; `COMONOTONE` on a fallback)."""
    forecaster = SelectingForecaster()
    forecast = forecaster(series, horizon_s=horizon_s)
    selection = forecaster.selections.get(series.name)
    if selection is None or selection.model != forecast.model:
        return forecast, COMONOTONE
    steps = len(forecast.timestamps)
    centre = [0.0] * steps if selection.model.endswith(OWN) else list(selection.offsets[0.5])
    errors = horizon_errors(horizon_residuals(series, selection, forecaster.cache, steps), centre, steps)
    return forecast, dependence_of(series, selection, forecaster.cache).with_horizon_errors(errors)


def horizon_residuals(history: DemandSeries, selection: Selection, cache: OriginCache, steps: int) -> list[list[float]]:
    """The serving model's residuals (actual - model P50) over `steps` steps from origins a day apart, latest first,
    that observed at least `MIN_OBSERVED` of them, until `HORIZON_ORIGINS` of them observed all (module doc)."""
    n = len(history.values)
    day = max(1, int(round(DAY_S / history.step_s)))
    min_train = int(math.ceil(MIN_TRAIN_S / history.step_s))
    since = 0
    if selection.level_shift_at is not None:
        since = next((i for i, t in enumerate(history.timestamps) if t >= selection.level_shift_at), n) + day
    last = selection.folds[-1].origin if selection.folds else n - 1
    out: list[list[float]] = []
    whole = 0
    for origin in range(min(last, n - math.ceil(MIN_OBSERVED * steps)), max(min_train, since) - 1, -day):
        path = served_p50(cache, truncated(history, fit_start(origin, history.step_s, selection.train_start), origin),
                          selection, steps)
        seen = min(steps, n - origin)
        out.append([history.values[origin + k] - path[k] for k in range(seen)])
        whole += seen == steps
        if whole == HORIZON_ORIGINS:
            break
    return out


def horizon_errors(residuals: Sequence[Sequence[float]], centre: Sequence[float], steps: int) -> list[float]:
    """Per origin's residuals (actual - model), the mean over the horizon of the residual less the served P50's
    offset `centre` at each step: over all `steps` steps from the origins that observed them, where there are
    `MIN_FOLDS` of those, else over the observed part from those that saw at least `MIN_OBSERVED` of them."""
    whole = [fold for fold in residuals if len(fold) >= steps]
    if len(whole) < MIN_FOLDS:
        whole = [fold for fold in residuals if len(fold) >= max(1, math.ceil(MIN_OBSERVED * steps))]
    out = []
    for fold in whole:
        seen = min(len(fold), steps)
        out.append(sum(r - centre[min(k, len(centre) - 1)] for k, r in enumerate(fold[:seen])) / seen)
    return out


def fold_residuals(history: DemandSeries, selection: Selection, cache: OriginCache) -> list[list[float]]:
    """Per fold of `selection`, the serving model's residuals (actual - P50) at each horizon step it observed."""
    steps = len(selection.offsets[0.5])
    out = []
    for f in selection.folds:
        path = served_p50(cache, truncated(history, f.train_start, f.origin), selection, steps)
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
    if dependence.horizon_errors:
        centre = forecast.quantiles[0.5][:steps]
        return calibrated_means(out, sum(centre) / max(1, len(centre)), dependence.horizon_errors)
    return out


def calibrated_means(paths: Sequence[Sequence[float]], p50_mean: float, errors: Sequence[float]) -> list[list[float]]:
    """`paths` each scaled so that the path of rank r by mean (of n) has mean `p50_mean` moved by
    sign(u - 0.5) times the |2u - 1| quantile of `errors`' absolute values, u = (r + 0.5) / n (module doc), floored
    at zero; a path that is zero throughout is raised evenly."""
    spread = sorted(abs(e) for e in errors)
    rank = sorted(range(len(paths)), key=lambda i: (sum(paths[i]), i))
    out: list[list[float]] = [list(p) for p in paths]
    for r, i in enumerate(rank):
        u = (r + 0.5) / len(paths)
        target = max(0.0, p50_mean + math.copysign(_plotting_quantile(spread, abs(2.0 * u - 1.0)), u - 0.5))
        path = out[i]
        mean = sum(path) / max(1, len(path))
        out[i] = [v * target / mean for v in path] if mean > 0 else [target] * len(path)
    return out


def _plotting_quantile(ordered: Sequence[float], q: float) -> float:
    """The `q` quantile of sorted non-negative `ordered` at the (n + 1) plotting position: linear from 0 at q = 0 to
    the smallest at 1 / (n + 1), between order statistics above it, clamped to the largest."""
    pos = q * (len(ordered) + 1) - 1.0
    if pos < 0:
        return ordered[0] * max(0.0, pos + 1.0)
    pos = min(pos, len(ordered) - 1.0)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


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


__all__ = ["COMONOTONE", "DEFAULT_PATHS", "MIN_PATHS", "Dependence", "calibrated_means", "dependence_of", "fit_dependence", "fit_scores",
           "fold_residuals", "forecast_with_dependence", "horizon_errors", "horizon_residuals", "quantile", "sample_paths"]
