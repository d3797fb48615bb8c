"""Which model serves a series, and its calibrated quantiles: a rolling-origin backtest on the series' own past.

`select_model(history)` looks only at `history` (everything before the
forecast origin). Its inner folds start at the instants of a fixed grid
(`SPACING_S`, 12 h, aligned to the Unix epoch) over the last `ORIGINS` grid
points. Each candidate forecasts its P50 from each fold origin, trained on
the history before that origin alone, and is scored on the points of the
history from that origin on (at most one horizon; a fold whose horizon runs
past the end of the history is scored on the part observed).

Every fit, a fold's or the one that serves, trains on at most the
`TRAIN_WINDOW_S` (14 days, two weekly seasons) before its origin
(`fit_start`). So what a fold scores is what serves, fitted on as much
history, and a fold's training window depends on its origin alone, not on
where the history handed in starts: as a rolling history window moves, a
reselection fits only its new origins (`OriginCache`) instead of every fold
again.

Candidates (point forecasts; every quantile comes from calibration):

- `prophet`: Prophet's point forecast (`forecasting.models.prophet_fit`);
- `seasonal_naive`: the value one season earlier (a week with two weeks of
  history, else a day);
- `auto_ets`: statsforecast's AutoETS with a daily season, fitted on hourly means;
  its structure (error, trend, season, damping) is searched once per
  `STRUCTURE_PERIOD_S` (two days, counted from the Unix epoch), on the
  `STRUCTURE_WINDOW_S` (12 days) before the period's start, and every fit
  whose origin falls in that period fits its parameters on that structure
  (`EtsStructures.of_period`): the search tries 15 forms, a fit with the
  form given one;
- `recent_level`: the median of the last 6 h, held flat;
- `profile_level`: the seasonal profile (the mean around each step of the
  week over the whole weeks of history, of the day with less than eight
  days) scaled to the last day's level (`profile_level_point`);
- `median`: the median of the five above, step by step (the robust
  combination);
- `seasonal_naive_own`, `auto_ets_own`: the peers themselves, served with
  their own quantiles and no calibration (seasonal naive's spread of its
  seasonal differences, AutoETS's 80% and 98% intervals), so when a peer's
  own quantiles score best on the folds before the origin, burst serves
  exactly that peer. `auto_ets_own` and `auto_ets` share one fit (its mean
  is `auto_ets`' P50).

Calibration (split conformal, per horizon step): a candidate's residuals
(actual - P50) at step k of every fold, pooled with the steps within
`POOL_S` (3 h) of k (widened until at least `MIN_RESIDUALS` are pooled),
give its P10/P50/P90/P99 offsets at step k: the conformal quantiles of the
pool (the ceil((n+1)q)-th smallest residual for q >= 0.5, the
floor((n+1)q)-th for q < 0.5). The forecast is the P50 path plus each
offset, so a model with a bias has it corrected at P50 too, where the bias
was measured. From the first step that fewer than `BIAS_MIN_SHARE` of the
folds observed (the far steps of a long horizon, reached only by the oldest
folds, which all score the same stretch of history), neither the bias nor
the choice of model rests on enough folds: there the P50 is the far
combination's: step by step, the median of the five base candidates
(fitted on the serving window) and the mean daily profile of the window's
last week (`far_combination`), so a level the last hours set (a burst, a
quiet night) is carried a week ahead only where most candidates carry it;
after a level shift, where the fits and the week's profile may straddle the
shift, the serving model's own. Every quantile keeps its offset from the
pooled P50, so the band keeps its calibrated width around it (`served_p50`).
The choice itself is scored on every step observed.

The serving model is the candidate whose calibrated P90 (its own P90 for
an `_own` candidate) has the lowest mean pinball loss over every scored
point, each fold weighted by its recency: the weight halves every
`HALF_LIFE_S` (5 days, half the span of the folds) before the last fold's
origin, so a model that has stopped tracking the series loses the choice
within days rather than when its bad folds are half the window (ties: the
lower P50 pinball loss, then the order above). Its score is that weighted
loss, in GPUs. Calibration weighs every fold alike.

Level shifts: `level_shift` finds a step to a new level in the last
`SHIFT_WINDOW_S`: the median of the last whole days (at least
`SHIFT_MIN_AFTER_S`, a day) differs from the median of the `SHIFT_BEFORE_S`
before them by more than `SHIFT_THRESHOLD` robust spreads of either side
(whole days, so a daily cycle weighs the same on both sides); the step is
then placed, to the hour and at least `RECENT_S` before the end, where a
two-level fit of the window puts it.
After a shift, only folds starting a day or more after it are scored (what
happened before it says little about which model tracks the new level, and
in the first day a seasonal model still repeats the old level, which a
calibration fitted then would learn as a bias), candidates train on the
history from the shift on once it holds two days, and until such a fold
exists `recent_level` serves, calibrated on its residuals over the folds
before the shift; with fewer than `MIN_ORIGINS` such folds the `median`
serves (a choice on one or two folds is noise).
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from burst.model import QUANTILES, Forecast, SpecialEvent
from forecasting.models import (
    DAY_S,
    FIT_STEP_S,
    WEEK_S,
    DemandSeries,
    QuantilePaths,
    SeriesError,
    fitting_points,
    forecast_series,
    guarded_forecast,
    prophet_fit,
    seasonal_naive,
)

SPACING_S = 12 * 3600.0
ORIGINS = 20
MIN_ORIGINS = 3
MIN_TRAIN_S = 2 * DAY_S
TRAIN_WINDOW_S = 14 * DAY_S
STRUCTURE_PERIOD_S = 2 * DAY_S
"""How often AutoETS searches a series' structure: once per period of this length, counted from the Unix epoch."""
STRUCTURE_WINDOW_S = 12 * DAY_S
"""The history AutoETS's structure search fits: the days before the period's start, within every 14-day training
window whose origin falls in the period (so period + window <= `TRAIN_WINDOW_S`)."""
POOL_S = 3 * 3600.0
MIN_RESIDUALS = 30
BIAS_MIN_SHARE = 0.75
"""A step's P50 offset (the model's bias there) is kept only where at least this share of the folds observed the
step; the later steps are reached only by the oldest folds, which all score one stretch of history."""
RECENT_S = 6 * 3600.0
LEVEL_S = DAY_S
PROFILE_SMOOTH_S = 1800.0
"""`profile_level` averages the steps within this of each step of the season (one week of history is one noisy
sample per step)."""
"""The span whose level `profile_level` scales the seasonal profile to."""
PROFILE_S = 7 * DAY_S
SHIFT_WINDOW_S = 7 * DAY_S
SHIFT_BEFORE_S = 3 * DAY_S
SHIFT_MIN_AFTER_S = DAY_S
SHIFT_THRESHOLD = 3.0
RESELECT_EVERY_S = DAY_S
HALF_LIFE_S = 5 * DAY_S
COMBINATION = "median"
ETS_OWN = "auto_ets_own"
WITH_ETS = frozenset({"auto_ets", ETS_OWN, COMBINATION})
"""The candidates whose paths hold an AutoETS fit."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

PointFit = Callable[[DemandSeries, int], list[float]]
"""A candidate: the P50 path of `steps` steps after a series' last point."""
QuantileFit = Callable[[DemandSeries, int], QuantilePaths]
"""A candidate served with its own quantiles: each quantile's path of `steps` steps after a series' last point."""
OWN = "_own"
"""The suffix of a candidate served with its own quantiles; `X_own` and a point candidate `X` share one fit."""


def prophet_point(series: DemandSeries, steps: int, events: Sequence[SpecialEvent] = ()) -> list[float]:
    """Prophet's point forecast (no samples drawn)."""
    return prophet_fit(series, steps, point_only=True, events=events)[0.5]


def seasonal_naive_point(series: DemandSeries, steps: int) -> list[float]:
    """The seasonal-naive P50 path."""
    return seasonal_naive(series, steps)[0.5]


def auto_ets_fit(series: DemandSeries, steps: int, structure: str | None = None) -> tuple[QuantilePaths, str]:
    """statsforecast's AutoETS (daily season) fitted on hourly means, held over each hour at the series' step: its
    mean as P50, the ends of its 80% interval as P10 and P90 and the top of its 98% interval as P99; and the
    structure it fitted (statsforecast's components: the error, trend and season types, then D for a damped trend
    or N, e.g. "ANAN" for additive errors and season with no trend).

    With `structure` the model keeps that form and fits only its parameters (about a tenth of the time); without,
    or when that form cannot fit this series (a season on too short a history, a fit that fails), AutoETS chooses
    the form by AICc as well.
    """
    import numpy as np
    from statsforecast.models import AutoETS

    _, values = fitting_points(series)
    fit_step = max(series.step_s, FIT_STEP_S) if len(values) < len(series.values) else series.step_s
    season = max(1, int(round(DAY_S / fit_step)))
    if len(values) <= 2 * season:
        season = 1
    hours = int(math.ceil(steps * series.step_s / fit_step - 1e-9))
    y = np.asarray(values, dtype=float)
    fitted = None
    if structure is not None and (season > 1 or structure[2] == "N"):
        try:
            fitted = AutoETS(season_length=season, model=structure[:3], damped=structure[3] != "N").fit(y)
        except Exception:  # noqa: BLE001 - that form does not fit this window: let AutoETS choose one
            fitted = None
    if fitted is None:
        fitted = AutoETS(season_length=season).fit(y)
    out = fitted.predict(h=hours, level=[80, 98])
    held = [min(hours - 1, int(math.ceil((k + 1) * series.step_s / fit_step - 1e-9)) - 1) for k in range(steps)]
    return ({q: [float(out[column][i]) for i in held]
             for q, column in ((0.1, "lo-80"), (0.5, "mean"), (0.9, "hi-80"), (0.99, "hi-98"))},
            str(fitted.model_["components"]))


def auto_ets_quantiles(series: DemandSeries, steps: int) -> QuantilePaths:
    """`auto_ets_fit`'s paths, the form chosen by AutoETS."""
    return auto_ets_fit(series, steps)[0]


@dataclass
class EtsStructures:
    """AutoETS as a candidate (`auto_ets_quantiles`) that searches its structure once per series and
    `STRUCTURE_PERIOD_S` (`of_period`) and remembers the structure of each training window, so a refit between
    reselections can keep the serving fit's (`SelectingForecaster`). A window that does not hold its period's
    search window (early history, or training from a level shift on) lets AutoETS choose its structure alone."""

    chosen: dict[tuple[str, datetime, datetime], str] = field(default_factory=dict)
    searched: dict[tuple[str, datetime], str] = field(default_factory=dict)  # per (series, period start)
    searches: int = 0

    def __call__(self, series: DemandSeries, steps: int) -> QuantilePaths:
        structure = self.of_period(series)
        paths, self.chosen[_window(series)] = auto_ets_fit(series, steps, structure)
        return paths

    def of_period(self, series: DemandSeries) -> str | None:
        """The structure AutoETS chooses on the `STRUCTURE_WINDOW_S` before the start of the `STRUCTURE_PERIOD_S`
        period of the forecast origin after `series` (searched once per series and period, and a function of the
        history alone); None when `series` does not hold that window."""
        origin = series.timestamps[-1] + timedelta(seconds=series.step_s)
        since = (origin - _EPOCH).total_seconds()
        period = _EPOCH + timedelta(seconds=since - since % STRUCTURE_PERIOD_S)
        first = period - timedelta(seconds=STRUCTURE_WINDOW_S)
        if series.timestamps[0] > first:  # checked first: a short window never takes a structure searched before it
            return None
        key = (series.name, period)
        if key in self.searched:
            return self.searched[key]
        start, end = bisect_left(series.timestamps, first), bisect_left(series.timestamps, period)
        self.searches += 1
        self.searched[key] = auto_ets_fit(series.part(start, end), 1)[1]
        return self.searched[key]

    def of(self, window: DemandSeries) -> str | None:
        """The structure AutoETS chose when it was fitted on `window` (None: it was not)."""
        return self.chosen.get(_window(window))

    def forget_before(self, instant: datetime) -> None:
        """Drop the structures of windows that ended before `instant`."""
        for key in [k for k in self.chosen if k[2] < instant]:
            del self.chosen[key]
        for searched in [k for k in self.searched if k[1] < instant]:
            del self.searched[searched]


def _window(series: DemandSeries) -> tuple[str, datetime, datetime]:
    return series.name, series.timestamps[0], series.timestamps[-1]


def auto_ets_point(series: DemandSeries, steps: int) -> list[float]:
    """AutoETS's mean (`auto_ets_quantiles`' P50)."""
    return auto_ets_quantiles(series, steps)[0.5]


def recent_level_point(series: DemandSeries, steps: int) -> list[float]:
    """The median of the last `RECENT_S` of the series, held flat."""
    n = max(1, int(round(RECENT_S / series.step_s)))
    return [float(statistics.median(series.values[-n:]))] * steps


def week_profile_point(series: DemandSeries, steps: int) -> list[float]:
    """The mean of each step of the day over the last `PROFILE_S` (a week) of the series, repeated: a level that
    the last hours do not move, with the weekdays and the weekend weighed as they come (a flat mean of that week
    where a day is not a whole number of steps)."""
    per = int(round(DAY_S / series.step_s))
    window = series.values[-max(1, int(round(PROFILE_S / series.step_s))):]
    n, m = len(series.values), len(window)
    mean = statistics.fmean(window)
    if per < 1 or abs(per * series.step_s - DAY_S) > 1e-6:
        return [mean] * steps
    by_phase: dict[int, list[float]] = {}
    for i, v in enumerate(window):
        by_phase.setdefault((n - m + i) % per, []).append(v)
    return [statistics.fmean(by_phase[(n + k) % per]) if (n + k) % per in by_phase else mean for k in range(steps)]


def profile_level_point(series: DemandSeries, steps: int) -> list[float]:
    """The seasonal profile scaled to the last day's level: at each future step the mean of the steps within
    `PROFILE_SMOOTH_S` of the same step of the season (a week with eight days of history, else a day) over every
    whole season of the history, times the last `LEVEL_S` observed over that profile at the same steps. Request rates keep their shape and move in level
    (a busy week, a quiet holiday week), which the seasonal-naive value of one season ago carries noise and all."""
    per = int(round((WEEK_S if series.history_s >= WEEK_S + LEVEL_S else DAY_S) / series.step_s))
    values, n = series.values, len(series.values)
    if per < 1 or n < per:
        return recent_level_point(series, steps)
    seasons, half = n // per, int(round(PROFILE_SMOOTH_S / series.step_s))
    first = n - per * seasons
    profile = []
    for p in range(per):
        near = [values[i] for s in range(seasons) for d in range(-half, half + 1)
                if first <= (i := n - per * (s + 1) + p + d) < n]
        profile.append(statistics.fmean(near))
    last = min(n, max(1, int(round(LEVEL_S / series.step_s))))
    floor = 0.05 * statistics.fmean(profile) + 1e-9  # a zero night does not make the level ratio explode
    expected = sum(profile[(per - last + i) % per] for i in range(last)) + floor * last
    ratio = (sum(values[n - last:]) + floor * last) / expected
    return [profile[k % per] * ratio for k in range(steps)]


def candidates(events: Sequence[SpecialEvent] = ()) -> dict[str, PointFit]:
    """The base candidates in tie-break order (the `median` combination is built from their paths)."""
    return {
        "prophet": (lambda s, k: prophet_point(s, k, events)) if events else prophet_point,
        "seasonal_naive": seasonal_naive_point,
        "auto_ets": auto_ets_point,
        "recent_level": recent_level_point,
        "profile_level": profile_level_point,
    }


def own_candidates() -> dict[str, QuantileFit]:
    """The peers served with their own quantiles (module doc), in tie-break order after the point candidates."""
    return {"seasonal_naive_own": seasonal_naive, "auto_ets_own": auto_ets_quantiles}


def truncated(series: DemandSeries, start: int, end: int) -> DemandSeries:
    """`series`' points [start, end)."""
    return series.part(start, end)


@dataclass
class OriginCache:
    """Each candidate's paths (floored at zero) from each fold origin, kept so a reselection refits only the new
    origins.

    `models` give a P50 path, `own` candidates every quantile's. Keyed by
    (series name, candidate, first and last instant trained on): the same
    training window gives the same paths, whatever came after it.
    """

    models: Mapping[str, PointFit] = field(default_factory=candidates)
    own: Mapping[str, QuantileFit] = field(default_factory=dict)
    paths: dict[tuple[str, str, datetime, datetime], QuantilePaths] = field(default_factory=dict)
    fits: int = 0

    def path(self, train: DemandSeries, model: str, steps: int) -> list[float]:
        """`model`'s P50 path for `steps` steps after `train` (fitted once per training window and length)."""
        return self.quantiles(train, model, steps)[0.5]

    def quantiles(self, train: DemandSeries, model: str, steps: int) -> QuantilePaths:
        """`model`'s paths for `steps` steps after `train`: every quantile for an `own` candidate, else P50 alone."""
        key = (train.name, model, train.timestamps[0], train.timestamps[-1])
        found = self.paths.get(key)
        if found is None or len(found[0.5]) < steps:
            if model == COMBINATION:
                found = {0.5: stepwise_median([self.path(train, m, steps) for m in self.models])}
            elif model + OWN in self.own:  # the point candidate is its own-quantile twin's P50: one fit for both
                found = {0.5: self.quantiles(train, model + OWN, steps)[0.5]}
            else:
                raw = self.own[model](train, steps) if model in self.own else {0.5: self.models[model](train, steps)}
                self.fits += 1
                found = {}
                below: list[float] | None = None  # the quantile under this one, already floored by those under it
                for q, row in sorted(raw.items()):
                    values = [float(v) for v in row]
                    if len(values) != steps or not all(math.isfinite(v) for v in values):
                        raise SeriesError(f"{model} gave {len(values)} values for {steps} steps, or a non-finite one")
                    # demand is never negative, and a quantile is never below the one under it
                    found[q] = below = ([max(0.0, v) for v in values] if below is None
                                        else [max(0.0, v, b) for v, b in zip(values, below, strict=True)])
            self.paths[key] = found
        return {q: row[:steps] for q, row in found.items()}

    def forget_before(self, instant: datetime) -> None:
        """Drop paths whose training ended before `instant` (they can no longer be a fold)."""
        for key in [k for k in self.paths if k[3] < instant]:
            del self.paths[key]


@dataclass(frozen=True)
class Fold:
    """One inner fold: trained on history [train_start, origin), scored on [origin, scored_until)."""

    train_start: int
    origin: int
    scored_until: int


@dataclass(frozen=True)
class Selection:
    """The model chosen for a series at `at` (the first instant it forecasts), its scores and calibration."""

    model: str
    at: datetime
    scores: Mapping[str, float]  # calibrated P90 pinball loss (GPUs) per candidate; inf if it could not run
    offsets: Mapping[float, tuple[float, ...]]  # per quantile, per horizon step: added to the P50 path
    folds: tuple[Fold, ...]
    train_start: int  # index of the first history point the serving fit trains on
    level_shift_at: datetime | None
    reason: str
    errors: Mapping[str, str] = field(default_factory=dict)
    rise_skill: float | None = None  # `rise_skill` of the serving model over the folds (None: no fold to measure)

    @property
    def score(self) -> float:
        """The serving model's calibrated P90 pinball loss in the backtest that chose it (GPUs)."""
        return self.scores.get(self.model, math.nan)

    def to_json(self) -> dict[str, object]:
        return {"model": self.model, "at": self.at.isoformat(), "backtest_p90_pinball": _finite(self.score),
                "scores": {m: _finite(v) for m, v in self.scores.items()}, "folds": len(self.folds),
                "level_shift_at": self.level_shift_at.isoformat() if self.level_shift_at else None,
                "reason": self.reason, "errors": dict(self.errors),
                "rise_skill": None if self.rise_skill is None else _finite(self.rise_skill)}


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


def level_shift(series: DemandSeries) -> int | None:
    """The index where the series stepped to a new level within `SHIFT_WINDOW_S` of its end, or None (module doc)."""
    n = len(series.values)
    step = series.step_s
    day = max(1, int(round(DAY_S / step)))
    before = int(round(SHIFT_BEFORE_S / step))
    min_after = max(1, int(round(SHIFT_MIN_AFTER_S / step)))
    stride = max(1, int(round(FIT_STEP_S / step)))
    values = series.values
    found: list[int] = []
    # detect on whole days after the split, so a daily cycle weighs the same on both sides
    for after in range(min_after, int(round(SHIFT_WINDOW_S / step)) + 1, day):
        s = n - after
        if s < before:
            break
        pre, post = values[s - before : s], values[s:]
        mid_pre, mid_post = statistics.median(pre), statistics.median(post)
        spread = max(_mad(pre, mid_pre), _mad(post, mid_post), 0.05 * max(mid_pre, mid_post), 0.5)
        if abs(mid_post - mid_pre) / spread > SHIFT_THRESHOLD:
            found.append(s)
    if not found:
        return None
    first = max(before, min(found) - day)
    lo = first - before
    segment = values[lo:]
    total = sum(segment)

    def cusum(s: int) -> float:  # the split of a two-level fit to the window: the largest weighted mean difference
        a, b = s - lo, n - s
        head = sum(segment[: s - lo])
        return abs((total - head) / b - head / a) * math.sqrt(a * b / (a + b))

    last = n - max(1, int(round(RECENT_S / step)))  # the step may lie inside the last day: at least 6 h before the end
    return max(range(first, last + 1, stride), key=cusum)


def _mad(values: Sequence[float], centre: float) -> float:
    """1.4826 x the median absolute deviation: the standard deviation of normal noise."""
    return 1.4826 * statistics.median(abs(v - centre) for v in values)


def fit_start(origin: int, step_s: float, since: int = 0) -> int:
    """The index of the first point a fit from `origin` trains on: `since` (where a level shift put the new level)
    once at least `MIN_TRAIN_S` lies between it and the origin, else the history's start; in either case no more
    than `TRAIN_WINDOW_S` before the origin."""
    start = since if origin - since >= int(math.ceil(MIN_TRAIN_S / step_s)) else 0
    return max(start, origin - int(round(TRAIN_WINDOW_S / step_s)))


def folds_of(history: DemandSeries, steps: int, *, since: int = 0, origins: int = ORIGINS) -> list[Fold]:
    """The inner folds of `history`: origins on the `SPACING_S` grid, the last `origins` of them with at least
    `MIN_TRAIN_S` of training before and one point after, none before `since`; each trains from `fit_start`."""
    n = len(history.values)
    min_train = int(math.ceil(MIN_TRAIN_S / history.step_s))
    out: list[Fold] = []
    for i in range(n - 1, max(min_train, since) - 1, -1):
        offset = (history.timestamps[i] - _EPOCH).total_seconds() % SPACING_S
        if min(offset, SPACING_S - offset) * 2 >= history.step_s:
            continue
        out.append(Fold(fit_start(i, history.step_s), i, min(n, i + steps)))
        if len(out) == origins:
            break
    return sorted(out, key=lambda f: f.origin)


def select_model(
    history: DemandSeries, steps: int, *, cache: OriginCache | None = None, names: Sequence[str] | None = None,
    origins: int = ORIGINS,
) -> Selection:
    """Choose the model that serves `history`'s next `steps` steps and calibrate its quantiles (module doc), on
    the last `origins` fold origins.

    Reads nothing but `history`: each fold trains on the points before its
    origin and is scored on points of `history` at or after it.
    """
    cache = cache if cache is not None else OriginCache(candidates(), own_candidates())
    base = list(names) if names is not None else [*cache.models, COMBINATION, *cache.own]
    at = history.timestamps[-1] + timedelta(seconds=history.step_s)
    shift = level_shift(history)
    since = 0 if shift is None else shift + int(round(DAY_S / history.step_s))
    min_train = int(math.ceil(MIN_TRAIN_S / history.step_s))
    train_start = shift if shift is not None and len(history.values) - shift >= min_train else 0
    folds = [Fold(fit_start(f.origin, history.step_s, train_start), f.origin, f.scored_until)
             for f in folds_of(history, steps, since=since, origins=origins)]
    shift_at = None if shift is None else history.timestamps[shift]
    errors: dict[str, str] = {}
    if shift is not None and not folds:
        every = [replace(f, scored_until=min(f.scored_until, shift)) for f in folds_of(history, steps, origins=origins)
                 if f.origin < shift]
        residuals = _residuals(history, cache, "recent_level", every, steps, errors)[0.5]
        offsets = _offsets(residuals, steps, history.step_s)
        return Selection("recent_level", at, {"recent_level": _score(residuals, offsets)}, offsets, tuple(every),
                         shift, shift_at,
                         f"level shift at {shift_at:%Y-%m-%d %H:%M}: the recent level serves until a fold starts "
                         "a day after it", errors, rise_skill(history, cache, "recent_level", every, steps))
    if len(folds) < MIN_ORIGINS and shift is None:
        raise SeriesError(f"{history.name}: {len(folds)} fold origin(s) in {history.history_s / 3600:g} h of history; "
                          f"selection needs {MIN_ORIGINS} (about {(MIN_TRAIN_S + MIN_ORIGINS * SPACING_S) / 3600:g} h)")
    few = shift is not None and len(folds) < MIN_ORIGINS
    if few:  # a choice on one or two folds is noise: the robust combination serves until there are enough
        base = [COMBINATION]
    scores: dict[str, float] = {}
    tiebreak: dict[str, float] = {}
    weights = _fold_weights(folds, steps, history.step_s)
    all_offsets: dict[str, dict[float, tuple[float, ...]]] = {}
    for name in base:
        by_quantile = _residuals(history, cache, name, folds, steps, errors)
        residuals = by_quantile[0.5]
        if not any(residuals):
            scores[name] = math.inf
            continue
        if name in cache.own:  # served with its own quantiles: scored on its own P90, nothing added
            offsets = {q: (0.0,) * steps for q in QUANTILES}
            scores[name] = _score(by_quantile[0.9], offsets, weights)
        else:
            offsets = _offsets(residuals, steps, history.step_s)
            scores[name] = _score(residuals, offsets, weights)
        all_offsets[name] = offsets
        tiebreak[name] = sum(abs(r - offsets[0.5][k]) for k, rs in enumerate(residuals) for r in rs)
    ranked = sorted((n for n in base if math.isfinite(scores[n])), key=lambda n: (scores[n], tiebreak[n], base.index(n)))
    if not ranked:
        raise SeriesError(f"{history.name}: no candidate model could run ({'; '.join(f'{k}: {v}' for k, v in errors.items())})")
    model = ranked[0]
    reason = (f"lowest calibrated P90 pinball over {len(folds)} fold(s)"
              + (f" after the level shift at {shift_at:%Y-%m-%d %H:%M}" if shift_at else ""))
    if few:
        reason = (f"{len(folds)} fold(s) since the level shift at {shift_at:%Y-%m-%d %H:%M}, under the "
                  f"{MIN_ORIGINS} a choice needs: the median of the candidates serves")
    return Selection(model, at, scores, all_offsets[model], tuple(folds), train_start, shift_at, reason, errors,
                     rise_skill(history, cache, model, folds, steps))


def rise_skill(history: DemandSeries, cache: OriginCache, model: str, folds: Sequence[Fold], steps: int) -> float | None:
    """How well `model`'s P50 foresees the next step's rise, against no forecast, over `folds`: the summed
    |actual change - forecast rise| over the summed |actual change| from each scored step to the next.

    The forecast rise is max(0, P50[k + 1] - P50[k]), what pre-scaling adds
    to the demand it observes; the no-forecast rule adds nothing, so its
    error is the change itself. Below 1, the forecast's rises anticipate more
    change than they invent; 1 or more, acting on them does no better than
    reacting (a flat forecast scores exactly 1). None with no step to measure.
    """
    err = base = 0.0
    for f in folds:
        path = cache.path(truncated(history, f.train_start, f.origin), model, steps)
        for k in range(min(steps, f.scored_until - f.origin) - 1):
            change = history.values[f.origin + k + 1] - history.values[f.origin + k]
            err += abs(change - max(0.0, path[k + 1] - path[k]))
            base += abs(change)
    if base == 0.0:
        return None if err == 0.0 and not folds else (1.0 if err == 0.0 else math.inf)
    return err / base


def _residuals(
    history: DemandSeries, cache: OriginCache, name: str, folds: Sequence[Fold], steps: int, errors: dict[str, str]
) -> dict[float, list[list[float]]]:
    """Per quantile `name` gives (P50 alone for a point candidate), per horizon step, its residuals (actual - that
    quantile) over every fold ([] per step if it failed)."""
    out: dict[float, list[list[float]]] = {}
    try:
        for f in folds:
            paths = cache.quantiles(truncated(history, f.train_start, f.origin), name, steps)
            for q, path in paths.items():
                rows = out.setdefault(q, [[] for _ in range(steps)])
                for k in range(f.scored_until - f.origin):
                    rows[k].append(history.values[f.origin + k] - path[k])
    except Exception as exc:  # noqa: BLE001 - a candidate that fails is out of this selection, with the reason kept
        errors[name] = f"{type(exc).__name__}: {exc}"
        return {0.5: [[] for _ in range(steps)]}
    return out if out else {0.5: [[] for _ in range(steps)]}


def _offsets(residuals: Sequence[Sequence[float]], steps: int, step_s: float) -> dict[float, tuple[float, ...]]:
    """Per quantile, per step: the conformal quantile of the residuals pooled around the step (module doc)."""
    import numpy as np

    half = max(0, int(round(POOL_S / step_s)))
    # the residuals step after step in one array: the pool of steps [lo, hi) is its slice [starts[lo], starts[hi])
    starts = [0]
    for r in residuals[:steps]:
        starts.append(starts[-1] + len(r))
    flat = np.fromiter((v for r in residuals[:steps] for v in r), dtype=float, count=starts[-1])
    total = starts[-1]
    out: dict[float, list[float]] = {q: [] for q in QUANTILES}
    for k in range(steps):
        width = half
        while True:
            lo, hi = starts[max(0, k - width)], starts[min(steps, k + width + 1)]
            if hi - lo >= min(MIN_RESIDUALS, total) or width >= steps:
                break
            width = max(1, width * 2)
        at = _pool_quantiles(flat[lo:hi])
        bias = at[0.5] if _measured(len(residuals[k]), len(residuals[0])) else 0.0
        for q in QUANTILES:
            out[q].append(at[q] - at[0.5] + bias)
    return {q: tuple(v) for q, v in out.items()}


def _pool_quantiles(pool: Any) -> dict[float, float]:
    """`conformal_quantile` of a pool (a numpy array, unsorted) at each of `QUANTILES`: 0.0 for an empty pool.
    Only the ranks it reads are put in place (`numpy.partition`), so the values are the sorted pool's."""
    import numpy as np

    n = len(pool)
    if not n:
        return dict.fromkeys(QUANTILES, 0.0)
    index = {q: min(n, max(1, _conformal_rank(n, q))) - 1 for q in QUANTILES}
    placed = np.partition(pool, sorted(set(index.values())))
    return {q: float(placed[i]) for q, i in index.items()}


def conformal_quantile(sorted_values: Sequence[float], q: float) -> float:
    """The split-conformal q quantile of sorted residuals: the ceil((n+1)q)-th smallest for q >= 0.5, else the
    floor((n+1)q)-th (clamped to the sample)."""
    n = len(sorted_values)
    return sorted_values[min(n, max(1, _conformal_rank(n, q))) - 1]


def _conformal_rank(n: int, q: float) -> int:
    """The 1-based rank of `conformal_quantile`'s q quantile among n residuals, before clamping to [1, n]."""
    return math.ceil((n + 1) * q) if q >= 0.5 else math.floor((n + 1) * q)


def _fold_weights(folds: Sequence[Fold], steps: int, step_s: float) -> list[list[float]]:
    """Per horizon step, the weight of each residual `_residuals` gives there: its fold's, halving every
    `HALF_LIFE_S` before the last fold's origin."""
    if not folds:
        return [[] for _ in range(steps)]
    last = folds[-1].origin
    w = [0.5 ** ((last - f.origin) * step_s / HALF_LIFE_S) for f in folds]
    return [[w[i] for i, f in enumerate(folds) if k < f.scored_until - f.origin] for k in range(steps)]


def _score(residuals: Sequence[Sequence[float]], offsets: Mapping[float, Sequence[float]],
           weights: Sequence[Sequence[float]] | None = None) -> float:
    """Mean P90 pinball loss of P50 + the P90 offset over every scored point."""
    total = mass = 0.0
    for k, rs in enumerate(residuals):
        for i, r in enumerate(rs):
            d = r - offsets[0.9][k]
            w = weights[k][i] if weights is not None else 1.0
            total += w * max(0.9 * d, -0.1 * d)
            mass += w
    return total / mass if mass else math.inf


def serving_window(history: DemandSeries, selection: Selection) -> DemandSeries:
    """The part of `history` the serving fit trains on (`fit_start` from its end, at least its last point)."""
    n = len(history.values)
    return truncated(history, min(fit_start(n, history.step_s, selection.train_start), n - 1), n)


def serve(history: DemandSeries, selection: Selection, steps: int, cache: OriginCache) -> dict[float, list[float]]:
    """The selected model's paths after `history` (its P50 path, or its own quantiles for an `_own` candidate), with
    its calibrated offsets: every quantile's path. At the steps its folds did not measure, every path moves with
    the P50 to the far combination's (`served_p50`)."""
    window = serving_window(history, selection)
    paths = cache.quantiles(window, selection.model, steps)
    moved = [p - m for p, m in zip(served_p50(cache, window, selection, steps), paths[0.5], strict=True)]
    out: dict[float, list[float]] = {}
    for q in QUANTILES:
        offs = selection.offsets[q]
        out[q] = [v + moved[k] + (offs[k] if k < len(offs) else offs[-1])
                  for k, v in enumerate(paths.get(q, paths[0.5]))]
    return out


def unmeasured_from(selection: Selection, steps: int) -> int:
    """The first horizon step that fewer than `BIAS_MIN_SHARE` of the selection's folds observed (`steps` when
    they observed every one)."""
    folds = selection.folds
    for k in range(steps):
        if not _measured(sum(f.scored_until - f.origin > k for f in folds), len(folds)):
            return k
    return steps


def _measured(observing: int, folds: int) -> bool:
    """Whether a horizon step that `observing` of `folds` folds observed is measured (`BIAS_MIN_SHARE`)."""
    return observing >= BIAS_MIN_SHARE * folds


def served_p50(cache: OriginCache, train: DemandSeries, selection: Selection, steps: int) -> list[float]:
    """The P50 path the selection serves after `train`, before calibration: the serving model's where its folds
    measured it, and from `unmeasured_from` on the far combination's (`far_combination`), unless the selection
    follows a level shift (the candidates' fits and the week's profile may straddle it)."""
    own = list(cache.path(train, selection.model, steps))
    far = unmeasured_from(selection, steps)
    if far >= len(own) or selection.level_shift_at is not None:
        return own
    combined = far_combination(cache, train, steps)
    return own[:far] + combined[far:]


def far_combination(cache: OriginCache, train: DemandSeries, steps: int) -> list[float]:
    """The P50 at steps the folds did not measure: step by step, the median of the base candidates and the
    week's mean daily profile (`week_profile_point`), so a level the last hours set is not carried a week ahead
    unless most candidates carry it."""
    return stepwise_median([*(cache.path(train, m, steps) for m in cache.models), week_profile_point(train, steps)])


def stepwise_median(paths: Sequence[Sequence[float]]) -> list[float]:
    """The median of `paths` at each step (the combinations' rule)."""
    return [float(statistics.median(col)) for col in zip(*paths, strict=True)]


class SelectingForecaster:
    """burst's forecaster: per series, the model a backtest chose, recalibrated and reselected on a schedule.

    Called as the `ForecastService`'s fit (`fit(series, horizon_s=, quota=)`).
    A series reselects when it has no selection, when `reselect_every_s` has
    passed since the last, or when a level shift appears that the last did
    not know about; between reselections only the serving model is refitted,
    and AutoETS (alone or in the median) keeps the structure it chose for the
    reselection's serving fit, fitting only its parameters (the structure is
    part of the choice the backtest made, redone with it).
    A series with too little history for `MIN_ORIGINS` folds is served by
    `forecast_series` (Prophet with its own quantiles, or its fallbacks).
    """

    def __init__(self, *, reselect_every_s: float = RESELECT_EVERY_S, min_history_s: float = DAY_S,
                 events: Sequence[SpecialEvent] = ()) -> None:
        self.reselect_every_s = reselect_every_s
        self.min_history_s = min_history_s
        self.events = tuple(events)
        self.ets = EtsStructures()
        self.cache = OriginCache(candidates(self.events), {**own_candidates(), ETS_OWN: self.ets})
        self.selections: dict[str, Selection] = {}
        self.held: dict[str, str] = {}  # per series: the AutoETS structure refits keep until the next reselection

    def __call__(self, series: DemandSeries, *, horizon_s: float, quota: float | None = None) -> Forecast:
        """The forecast of `series` over `horizon_s` after its last point, from its selected model."""
        steps = max(1, int(math.ceil(horizon_s / series.step_s - 1e-9)))
        at = series.timestamps[-1] + timedelta(seconds=series.step_s)
        chosen = self.selections.get(series.name)
        shift = level_shift(series)
        shift_at = None if shift is None else series.timestamps[shift]
        due = (chosen is None or (at - chosen.at).total_seconds() >= self.reselect_every_s
               or len(chosen.offsets[0.5]) < steps or (shift_at is not None and chosen.level_shift_at is None))
        if due and series.history_s >= self.min_history_s and max(series.values) > min(series.values):
            self.held.pop(series.name, None)
            try:
                # whole days of steps, so a horizon that moves by a step between refits reuses the folds' fits
                day = max(1, int(round(DAY_S / series.step_s)))
                chosen = select_model(series, -(-steps // day) * day, cache=self.cache)
            except SeriesError:
                chosen = None
            self.cache.forget_before(series.timestamps[0])
            self.ets.forget_before(series.timestamps[0])
            if chosen is None:
                self.selections.pop(series.name, None)
            else:
                self.selections[series.name] = chosen
        if chosen is None or series.history_s < self.min_history_s:
            return forecast_series(series, horizon_s=horizon_s, quota=quota, min_history_s=self.min_history_s,
                                   events=self.events)
        if chosen.train_start and chosen.level_shift_at is not None:
            start = next((i for i, t in enumerate(series.timestamps) if t >= chosen.level_shift_at), 0)
            chosen = _with_train_start(chosen, start)
        paths = self._serve(series, chosen, steps)
        return guarded_forecast(series, paths, steps, model=chosen.model, quota=quota,
                                backtest_p90_pinball=_finite(chosen.score), backtest_rise_skill=chosen.rise_skill)

    def _serve(self, series: DemandSeries, chosen: Selection, steps: int) -> dict[float, list[float]]:
        """`serve` the selection; the first serving fit after a reselection lets AutoETS choose its structure
        (kept in `held`), the later ones keep it. Fits with a kept structure are not cached: a backtest fold
        on the same window would be a fit of another model."""
        structure = self.held.get(series.name)
        if structure is None or chosen.model not in WITH_ETS:
            paths = serve(series, chosen, steps, self.cache)
            if chosen.model in WITH_ETS:
                if (found := self.ets.of(serving_window(series, chosen))) is not None:
                    self.held[series.name] = found
            return paths
        kept = OriginCache(self.cache.models, {**self.cache.own, ETS_OWN: lambda s, k: auto_ets_fit(s, k, structure)[0]},
                           {k: v for k, v in self.cache.paths.items() if k[1] not in WITH_ETS})
        paths = serve(series, chosen, steps, kept)
        self.cache.paths.update((k, v) for k, v in kept.paths.items() if k[1] not in WITH_ETS)
        self.cache.fits += kept.fits
        return paths


def _with_train_start(selection: Selection, start: int) -> Selection:
    return replace(selection, train_start=start)


__all__ = ["OWN", "OriginCache", "SelectingForecaster", "Selection", "conformal_quantile", "fit_start", "level_shift",
           "far_combination", "own_candidates",
           "rise_skill", "select_model", "serve", "served_p50", "unmeasured_from", "week_profile_point"]
