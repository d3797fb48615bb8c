"""Request-rate forecasts for inference services: burst's selecting forecaster, refitted rarely and re-anchored often.

`RateForecaster.forecast` is what a service's controller (or the simulator,
once per simulated minute) calls. It is cheap between refits: no model is
fitted, only the last hour is read.

Refit (the first call, then at most every `refit_every_s`, or when a call
asks past what the last refit prepared): on the last `training_days` of the
history before the newest `ANCHOR_S` (an hour),

- the model is chosen and its P50 path computed by burst's selection
  (`forecasting.select.select_model`: Prophet, seasonal naive, AutoETS, the
  recent level, the week's profile scaled to the last day's level, their
  median, and the two peers with their own quantiles; `FOLD_ORIGINS`
  rolling-origin folds 12 h apart inside the window), at the series' own step, with daily seasonality and weekly once a
  week of history exists;
- that path (the template) runs from the start of the held-back hour to
  `refit_every_s` plus the horizon after the refit.

Each call re-anchors the template to the last `ANCHOR_S` observed: the ratio
r of the observed rate to the template over that hour, applied at lead j as
r ** w[j] (in log space, each value shifted by a floor `eps` so a zero rate
stays finite: of `EPS_SHARES` of the window's mean rate, the one whose
calibrated P90 loses least on the folds; a small floor makes the band scale
with the rate, a large one makes it additive, as a demand of a few GPUs
needs). w[j] is fitted at the refit
on the folds of the selection (regression through the origin of the log
error at lead j on the log ratio over the anchor hour, leads pooled within
`POOL_S`, clipped to [0, 1]): how long a surge or a lull has lasted on this
series' own past, rather than a fixed decay. So an intraday surge is followed
without a refit, and a 24-hour forecast leans on the template beyond the
leads where the ratio kept its value. Beside it, the last step's departure
from the hour's ratio gets its own weight v[j], fitted jointly: a series whose
level moves in steps (a GPU demand) follows its newest value at short leads,
where the hour's mean lags a step taken minutes ago, while on a noisy series
the fit leaves v near 0. Both ratios are clipped to 1/20 .. 20 when serving as
when fitting.

Quantiles are calibrated the same way (split conformal, per lead): on the
folds, each anchor point (hourly) gives the re-anchored P50 and the log error
at each lead; the quantiles of those errors, pooled over leads within
`POOL_S` (and within half the lead, so the first leads, which err least, are
not widened by those hours on), are offsets on the re-anchored P50 in the same
log space (with a small floor, bands that scale with the rate, narrow at night
and wide at the daily peak). Beyond the first hour the P90 offset is taken at
a conformal level rising to `FAR_P90_LEVEL`: errors a day ahead come in runs,
which a 0.9 quantile of six days' folds undercovers.

Declared events (`burst.model.ServiceEvent`, or a `SpecialEvent`'s whole
days): an event with an expected `multiplier` scales every quantile over its
window by it, and the history inside a past event's window is divided by it
before fitting and calibrating (so a holiday last week is not repeated as
seasonality); an event with no multiplier goes to Prophet as a holiday, whose
effect Prophet learns from the event's earlier occurrences in the window.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import numpy as np

from burst.model import QUANTILES, ServiceEvent, SpecialEvent
from forecasting.models import DAY_S, DemandSeries, QuantilePaths, SeriesError, seasonal_naive
from forecasting.select import (
    ETS_OWN,
    Fold,
    OriginCache,
    Selection,
    auto_ets_fit,
    candidates,
    folds_of,
    own_candidates,
    select_model,
    served_p50,
    truncated,
)
from forecasting.series import resample

ANCHOR_S = 3600.0
"""The observed span a forecast re-anchors to, held back from the refit's fit."""
POOL_S = 3 * 3600.0
"""Leads within this of each other share one calibration pool."""
EPS_SHARE = 0.05
"""The log-space floor `eps` as a share of the training window's mean rate where no calibration chose one."""
EPS_SHARES = (0.05, 0.3, 2.0)
"""The floors a calibration chooses among, as shares of the training window's mean rate (`calibrate`)."""
FAR_P90_LEVEL = 0.92
"""The conformal level of the P90 offsets from `POOL_S` ahead on (0.9 within the anchor's span, rising between):
a day ahead the folds' errors come in runs as long as a day, so their six days hold few independent samples and
their 0.9 quantile covers less of the next day than 90%; within the hour the anchor points are many and nearly
independent."""
FOLD_ORIGINS = 12
"""The selection's fold origins (12 h apart: the last six days), fewer than the GPU-demand forecaster's 20 so a
refit on 14 days takes seconds; the older ones trained on under a week and are not calibrated on anyway."""
MIN_CALIBRATION_TRAIN_S = 7 * DAY_S
"""Calibration reads the folds trained on at least a week (see `calibration_folds`)."""
MAX_LOG_RATIO = math.log(20.0)
"""The anchor ratio is clipped to 1/20 .. 20 when fitting the lead weights (one 100x spike must not set them)."""


@dataclass(frozen=True)
class RateEvent:
    """A declared window of unusual demand, as the forecaster uses it: [start, end), an expected multiplier
    (None: learnt by Prophet as a holiday), and the name Prophet learns its effect under."""

    start: datetime
    end: datetime
    multiplier: float | None
    name: str


def rate_events(events: Sequence[SpecialEvent | ServiceEvent]) -> tuple[RateEvent, ...]:
    """The forecaster's view of declared events: a `SpecialEvent` is its whole days (UTC) with no multiplier."""
    out = []
    for e in events:
        if isinstance(e, SpecialEvent):
            start = datetime.combine(e.start, time(0), tzinfo=UTC)
            out.append(RateEvent(start, start + timedelta(days=e.days), None, e.name))
        else:
            start, end = _utc(e.start), _utc(e.end)
            out.append(RateEvent(start, end, e.multiplier, e.name or f"event {start:%Y-%m-%d %H:%M}"))
    return tuple(out)


def holidays(events: Sequence[RateEvent]) -> tuple[SpecialEvent, ...]:
    """The events without a multiplier as Prophet holidays: every UTC day the window touches."""
    out = []
    for e in events:
        if e.multiplier is None:
            first: date = e.start.date()
            last: date = (e.end - timedelta(microseconds=1)).date()
            out.append(SpecialEvent(e.name, first, (last - first).days + 1))
    return tuple(out)


def event_factors(stamps: Sequence[datetime], events: Sequence[RateEvent]) -> list[float]:
    """The multiplier in force at each of `stamps`: the largest of the events in force with one (overlapping
    events give the largest, as a service's policy reads them), 1.0 where none is."""
    out = []
    for t in stamps:
        found = [e.multiplier for e in events if e.multiplier is not None and e.start <= t < e.end]
        out.append(max(found) if found else 1.0)
    return out


@dataclass(frozen=True)
class Calibration:
    """Per lead (steps after the anchor point): the weight of the anchor's log ratio, and each quantile's log offset
    from the template scaled by it."""

    weights: tuple[float, ...]
    log_offsets: dict[float, tuple[float, ...]]
    last_weights: tuple[float, ...] = ()

    def last_weight(self, lead: int) -> float:
        """The weight of the last step's departure from the anchor hour's ratio at `lead` (0.0 where none was
        fitted)."""
        return self.last_weights[lead] if lead < len(self.last_weights) else 0.0


@dataclass(frozen=True)
class Template:
    """A refit: the P50 path from `start` at the series' step (without events), its calibration, its floor, and
    the declared events' factor at each of its steps."""

    start: datetime
    fitted_at: datetime
    p50: tuple[float, ...]
    calibration: Calibration
    eps: float
    model: str
    factors: tuple[float, ...] = ()

    def factor(self, i: int) -> float:
        """The declared events' factor at template step `i` (1.0 with no event)."""
        return self.factors[i] if i < len(self.factors) else 1.0

    def index(self, at: datetime, step_s: float) -> int:
        """The template step holding `at`."""
        return int(round((at - self.start).total_seconds() / step_s))


class RateForecaster:
    """Quantile forecasts of one service's request rate (module doc): refitted at most every `refit_every_s`,
    re-anchored to the last hour on every call."""

    def __init__(self, step_s: float, events: Sequence[SpecialEvent | ServiceEvent] = (), training_days: float = 14,
                 refit_every_s: float = DAY_S) -> None:
        if step_s <= 0 or training_days <= 0 or refit_every_s <= 0:
            raise ValueError("step_s, training_days and refit_every_s must be positive")
        self.step_s = float(step_s)
        self.events = rate_events(events)
        self.training_s = training_days * DAY_S
        self.refit_every_s = float(refit_every_s)
        self.anchor_steps = max(1, int(round(ANCHOR_S / self.step_s)))
        self.ets = OneEtsForm()
        self.cache = OriginCache(candidates(holidays(self.events)), {**own_candidates(), ETS_OWN: self.ets})
        self.template: Template | None = None
        self.selection: Selection | None = None  # the last refit's choice, scores and folds
        self.refits = 0

    def forecast(self, times: Sequence[datetime], values: Sequence[float], now: datetime,
                 horizon_s: float) -> tuple[tuple[datetime, ...], dict[float, tuple[float, ...]]]:
        """Quantiles (QUANTILES: 0.1, 0.5, 0.9, 0.99) of the rate at each step from the first one not yet complete
        at `now` through the last one starting before `now + horizon_s` (at least one), from the history
        `times`/`values` (per-step mean rates at step starts, ascending; steps that end after `now` are not read).
        Refits when due (module doc); otherwise reads only the last `ANCHOR_S` of the history. Raises SeriesError
        when no step ends by `now`."""
        end = bisect_right(times, now - timedelta(seconds=self.step_s))  # complete steps end at or before now
        if end < 1:
            raise SeriesError("no complete step of history before now")
        first = times[end - 1] + timedelta(seconds=self.step_s)
        steps = max(1, int(math.ceil((now + timedelta(seconds=horizon_s) - first).total_seconds() / self.step_s
                                     - 1e-9)))
        if self._due(first, steps):
            self._refit(times, values, end, steps)
        tpl = self.template
        assert tpl is not None
        stamps = tuple(first + timedelta(seconds=self.step_s * k) for k in range(steps))
        paths = anchored(tpl, [float(v) for v in values[max(0, end - self.anchor_steps):end]],
                         tpl.index(first, self.step_s), steps)
        return stamps, {q: tuple(row) for q, row in paths.items()}

    def _due(self, first: datetime, steps: int) -> bool:
        tpl = self.template
        if tpl is None or first < tpl.fitted_at:
            return True
        if (first - tpl.fitted_at).total_seconds() >= self.refit_every_s:
            return True
        i = tpl.index(first, self.step_s)
        return i + steps > len(tpl.p50) or steps > len(tpl.calibration.weights) or i < self.anchor_steps

    def _refit(self, times: Sequence[datetime], values: Sequence[float], end: int, steps: int) -> None:
        """Select and fit on the training window before the held-back hour; calibrate the re-anchoring."""
        first = times[end - 1] + timedelta(seconds=self.step_s)
        start = bisect_right(times, first - timedelta(seconds=self.training_s + ANCHOR_S) - timedelta(microseconds=1))
        history = regular(times[start:end], values[start:end], self.step_s)
        n = len(history.values)
        clean = deevented(history, self.events)
        cut = n - min(self.anchor_steps, max(0, n - 1))
        fit_on = truncated(clean, 0, cut)
        leads = steps + self.anchor_steps  # room for a later call's horizon to reach a step further
        length = (n - cut) + int(math.ceil(self.refit_every_s / self.step_s)) + leads
        mean = max(float(np.mean(clean.values)), 1e-9)
        eps = EPS_SHARE * mean
        try:
            self.ets.search_on(fit_on, length)
            selection = self.selection = select_model(fit_on, length, cache=self.cache, origins=FOLD_ORIGINS)
        except SeriesError:  # too little history for the folds: seasonal naive, following the last hour
            self.selection = None
            p50, calibration, model = short_history_template(fit_on, length, leads, eps)
        else:
            p50 = template_p50(self.cache, fit_on, selection, length)
            calibration, eps = calibrate(clean, selection, self.cache, self.anchor_steps, leads,
                                         [share * mean for share in EPS_SHARES])
            model = selection.model
        self.cache.forget_before(fit_on.timestamps[0])
        tpl_start = fit_on.timestamps[-1] + timedelta(seconds=self.step_s)
        stamps = [tpl_start + timedelta(seconds=self.step_s * k) for k in range(length)]
        self.template = Template(tpl_start, first, tuple(p50), calibration, eps, model,
                                 tuple(event_factors(stamps, self.events)))
        self.refits += 1

    @property
    def model(self) -> str:
        """The model the last refit chose ('' before the first)."""
        return self.template.model if self.template else ""


class OneEtsForm:
    """AutoETS as a candidate whose form (error, trend, season, damping) is searched once per refit, on the
    training window of the refit's oldest fold (which every later fold's and the serving fit's window holds, so no
    fold's form looks past its origin); every fit of the refit fits only its parameters on that form. A search
    tries 15 forms: one per refit instead of one per fold keeps a refit within seconds."""

    def __init__(self) -> None:
        self.form: str | None = None

    def search_on(self, history: DemandSeries, steps: int) -> None:
        """Search the form on the training window of the oldest fold a selection of `history` will make."""
        folds = folds_of(history, steps, origins=FOLD_ORIGINS)
        self.form = None
        if folds:
            self.form = auto_ets_fit(truncated(history, folds[0].train_start, folds[0].origin), 1)[1]

    def __call__(self, series: DemandSeries, steps: int) -> QuantilePaths:
        return auto_ets_fit(series, steps, self.form)[0]


def short_history_template(train: DemandSeries, length: int, leads: int,
                           eps: float) -> tuple[list[float], Calibration, str]:
    """The template where the history holds too few folds to select on (about three days): seasonal naive's P50,
    re-anchored fully at every lead (the last hour is the best guide to the level), its quantiles' mean log ratio
    to its P50 over the first day as the offsets."""
    paths = seasonal_naive(train, length)
    day = max(1, min(length, int(round(DAY_S / train.step_s))))
    offsets = {q: math.fsum(math.log((paths[q][k] + eps) / (paths[0.5][k] + eps)) for k in range(day)) / day
               for q in QUANTILES}
    calibration = Calibration((1.0,) * leads, {q: (offsets[q],) * leads for q in QUANTILES})
    return list(paths[0.5]), calibration, "seasonal_naive (history too short to select)"


def regular(times: Sequence[datetime], values: Sequence[float], step_s: float) -> DemandSeries:
    """The history as a regular series at `step_s`: as given when it is regular, else bucketed (gaps carried)."""
    stamps = tuple(_utc(t) for t in times)
    vals = tuple(max(0.0, float(v)) for v in values)
    try:
        return DemandSeries("rate", "any", stamps, vals, step_s)
    except SeriesError:
        return resample(list(zip(stamps, vals, strict=True)), step_s, "rate", "any")[0]


def deevented(series: DemandSeries, events: Sequence[RateEvent]) -> DemandSeries:
    """`series` with each value inside a declared event's window divided by its multiplier."""
    factors = event_factors(series.timestamps, events)
    if all(f == 1.0 for f in factors):
        return series
    return DemandSeries(series.tenant, series.gpu_model, series.timestamps,
                        tuple(v / f for v, f in zip(series.values, factors, strict=True)), series.step_s)


def template_p50(cache: OriginCache, train: DemandSeries, selection: Selection, steps: int) -> list[float]:
    """The selection's P50 path after `train` (its serving model, bias-corrected where the folds measured it)."""
    raw = served_p50(cache, train, selection, steps)
    bias = selection.offsets[0.5]
    return [max(0.0, v + (bias[k] if k < len(bias) else 0.0)) for k, v in enumerate(raw)]


def calibrate(history: DemandSeries, selection: Selection, cache: OriginCache, anchor: int, leads: int,
              floors: Sequence[float]) -> tuple[Calibration, float]:
    """The calibration of the re-anchored forecast (module doc) and the floor `eps` it is fitted with: of
    `floors`, the one whose calibrated P90 loses least on the folds (`fold_rows`). A small floor makes the band
    multiplicative (it scales with the rate), a floor above the rate makes it additive (a demand of a few GPUs
    that moves between 0 and 3 has no ratio to scale by)."""
    rows = fold_rows(history, selection, cache, anchor, leads)
    half = max(0, int(round(POOL_S / history.step_s)))
    best: tuple[float, Calibration, float] | None = None
    for eps in floors:
        cal = rows.calibration(eps, half)
        loss = rows.p90_loss(cal, eps)
        if best is None or loss < best[0]:
            best = (loss, cal, eps)
    assert best is not None
    return best[1], best[2]


@dataclass(frozen=True)
class FoldRows:
    """Each fold's template re-anchored at every hour after its first `anchor` steps: per row (anchor point), the
    actual and template sums over the anchor hour, the last step's actual and template, and the
    actual and template at each lead after it (NaN where the fold did not observe it)."""

    hour_actual: np.ndarray
    hour_tpl: np.ndarray
    last_actual: np.ndarray
    last_tpl: np.ndarray
    actual: np.ndarray
    tpl: np.ndarray
    anchor: int

    def logs(self, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """With floor `eps`: the anchor hour's log ratio x, the last step's departure from it z, and the log
        error y of the template at each lead."""
        x = np.log((self.hour_actual + eps * self.anchor) / (self.hour_tpl + eps * self.anchor))
        z = np.log((self.last_actual + eps) / (self.last_tpl + eps)) - x
        return x, z, np.log((self.actual + eps) / (self.tpl + eps))

    def calibration(self, eps: float, half: int) -> Calibration:
        """`calibration_of` these rows with floor `eps` and pools of `half` leads, the P90's level rising from
        0.9 after the anchor's span to `FAR_P90_LEVEL` at `half`."""
        x, z, y = self.logs(eps)
        seen = ~np.isnan(y)
        leads = y.shape[1]
        return calibration_of([x[seen[:, j]] for j in range(leads)], [y[seen[:, j], j] for j in range(leads)], half,
                              [z[seen[:, j]] for j in range(leads)], FAR_P90_LEVEL, self.anchor)

    def p90(self, cal: Calibration, eps: float) -> np.ndarray:
        """The re-anchored P90 `cal` gives at every row and lead."""
        x, z, _ = self.logs(eps)
        x, z = np.clip(x, -MAX_LOG_RATIO, MAX_LOG_RATIO), np.clip(z, -MAX_LOG_RATIO, MAX_LOG_RATIO)
        shift = (np.outer(x, cal.weights) + np.outer(z, cal.last_weights or np.zeros(len(cal.weights)))
                 + np.asarray(cal.log_offsets[0.9]))
        p90: np.ndarray = (self.tpl + eps) * np.exp(shift) - eps
        return p90

    def p90_loss(self, cal: Calibration, eps: float) -> float:
        """The mean P90 pinball loss of the re-anchored forecast calibrated by `cal` over every observed lead."""
        d = self.actual - self.p90(cal, eps)
        loss = np.maximum(0.9 * d, -0.1 * d)
        return float(np.nanmean(loss)) if np.isfinite(loss).any() else math.inf


def fold_rows(history: DemandSeries, selection: Selection, cache: OriginCache, anchor: int, leads: int) -> FoldRows:
    """The re-anchoring samples of the selection's calibration folds (`FoldRows`), one anchor point an hour."""
    hour = max(1, int(round(3600.0 / history.step_s)))
    cols: list[list[float]] = [[], [], [], []]
    actual_rows: list[np.ndarray] = []
    tpl_rows: list[np.ndarray] = []
    pad = np.full(leads, np.nan)
    for fold in calibration_folds(selection, history.step_s):
        train = truncated(history, fold.train_start, fold.origin)
        span = fold.scored_until - fold.origin
        if span <= anchor:
            continue
        tpl = np.concatenate([np.asarray(template_p50(cache, train, selection, span)), pad])
        actual = np.concatenate([np.asarray(history.values[fold.origin:fold.scored_until], dtype=float), pad])
        for a in range(anchor, span, hour):
            for col, v in zip(cols, (actual[a - anchor:a].sum(), tpl[a - anchor:a].sum(), actual[a - 1],
                                     tpl[a - 1]), strict=True):
                col.append(float(v))
            actual_rows.append(actual[a:a + leads])
            tpl_rows.append(np.where(np.isnan(actual[a:a + leads]), np.nan, tpl[a:a + leads]))
    empty = np.zeros((0, leads))
    hour_actual, hour_tpl, last_actual, last_tpl = (np.asarray(c) for c in cols)
    return FoldRows(hour_actual, hour_tpl, last_actual, last_tpl, np.vstack(actual_rows) if actual_rows else empty,
                    np.vstack(tpl_rows) if tpl_rows else empty, anchor)


def calibration_folds(selection: Selection, step_s: float) -> list[Fold]:
    """The selection's folds trained on at least `MIN_CALIBRATION_TRAIN_S` (or half the longest fold's training,
    if less): a fold fitted on a few days, before the window held a weekend, errs as the serving fit on two weeks
    does not (all the folds where none is that long)."""
    span = {f: (f.origin - f.train_start) * step_s for f in selection.folds}
    need = min(MIN_CALIBRATION_TRAIN_S, max(span.values(), default=0.0) / 2)
    return [f for f in selection.folds if span[f] >= need] or list(selection.folds)


def _flat(values: Sequence[Sequence[float] | np.ndarray], total: int) -> np.ndarray:
    """The per-lead samples in one array, clipped to +-`MAX_LOG_RATIO`."""
    if not total:
        return np.zeros(0)
    flat: np.ndarray = np.clip(np.concatenate([np.asarray(v, dtype=float) for v in values]), -MAX_LOG_RATIO,
                               MAX_LOG_RATIO)
    return flat


def _weights(px: np.ndarray, pz: np.ndarray, py: np.ndarray) -> tuple[float, float]:
    """Least squares through the origin of y on x (the anchor hour's log ratio) and z (the last step's departure
    from it), each weight clipped to [0, 1]; z's weight is 0 when it adds nothing (or z is not given)."""
    sxx = float((px * px).sum())  # sums, not np.dot: BLAS threads spin on a loaded machine
    sxy = float((px * py).sum())
    only_x = min(1.0, max(0.0, sxy / sxx)) if sxx > 0 else 0.0
    if not len(pz):
        return only_x, 0.0
    szz, sxz, szy = float((pz * pz).sum()), float((px * pz).sum()), float((pz * py).sum())
    det = sxx * szz - sxz * sxz
    if det <= 1e-12 * max(sxx * szz, 1e-300):
        return only_x, 0.0
    w = min(1.0, max(0.0, (sxy * szz - szy * sxz) / det))
    v = min(1.0, max(0.0, (szy - w * sxz) / szz))
    return (w, v) if v > 0 else (only_x, 0.0)


def calibration_of(xs: Sequence[Sequence[float] | np.ndarray], ys: Sequence[Sequence[float] | np.ndarray],
                   half: int, zs: Sequence[Sequence[float] | np.ndarray] | None = None, far_p90: float = 0.9,
                   near: int = 0) -> Calibration:
    """Per lead j: the weights w[j] of x (the anchor hour's log ratio) and v[j] of z (the last step's departure
    from it, when `zs` is given) fitted on the pooled samples within min(`half`, j / 2) leads (`_weights`:
    through the origin, x and z clipped to +-`MAX_LOG_RATIO`, each weight to [0, 1]); each quantile's offset the
    conformal quantile of y - w[j] x - v[j] z there. Computed at every lead of the first `half / 6`, then at every
    `half / 6`-th, and interpolated between (neighbouring pools share most samples). No sample at all: no
    anchoring and no spread. The P90 offset is the conformal quantile at 0.9 up to lead `near`, rising to
    `far_p90` at lead `half` (`FAR_P90_LEVEL`).

    The pools narrow towards lead 0 because the first leads err least: pooled with leads hours on, the next
    step's band is as wide as theirs. The last step's weight lets a series whose level moves in steps (a GPU
    demand) follow its newest value at short leads, where the hour's mean lags it; on a noisy series, whose
    last step says little beyond the hour, the fit leaves it near 0."""
    leads = len(xs)
    counts = np.cumsum([0, *(len(v) for v in xs)])
    x = _flat(xs, int(counts[-1]))
    z = _flat(zs, int(counts[-1])) if zs is not None else np.zeros(0)
    y = np.concatenate([np.asarray(v, dtype=float) for v in ys]) if counts[-1] else np.zeros(0)
    every = max(1, half // 6)
    grid = sorted({*range(0, min(leads, every)), *range(0, leads, every), leads - 1})
    at_w: list[float] = []
    at_v: list[float] = []
    at_q: dict[float, list[float]] = {q: [] for q in QUANTILES}
    for j in grid:
        width = min(half, j // 2)
        lo, hi = counts[max(0, j - width)], counts[min(leads, j + width + 1)]
        px, py = x[lo:hi], y[lo:hi]
        pz = z[lo:hi] if len(z) else z
        w, v = _weights(px, pz, py)
        residuals = py - w * px - (v * pz if v else 0.0)
        at_w.append(w)
        at_v.append(v)
        far = min(1.0, max(0.0, (j - near) / max(1, half - near)))
        levels = [0.9 + (far_p90 - 0.9) * far if q == 0.9 else q for q in QUANTILES]
        for q, value in zip(QUANTILES, conformal_quantiles(residuals, levels), strict=True):
            at_q[q].append(value)
    lead = np.arange(leads)
    return Calibration(tuple(float(v) for v in np.interp(lead, grid, at_w)),
                       {q: tuple(float(v) for v in np.interp(lead, grid, at_q[q])) for q in QUANTILES},
                       tuple(float(v) for v in np.interp(lead, grid, at_v)) if zs is not None else ())


def conformal_quantiles(values: np.ndarray, qs: Sequence[float]) -> list[float]:
    """`forecasting.select.conformal_quantile` of each of `qs` over unsorted `values` (a partition, not a sort);
    0.0 for each with no value."""
    n = len(values)
    if not n:
        return [0.0] * len(qs)
    ranks = [min(n, max(1, math.ceil((n + 1) * q) if q >= 0.5 else math.floor((n + 1) * q))) - 1 for q in qs]
    parted = np.partition(values, sorted(set(ranks)))
    return [float(parted[r]) for r in ranks]


def anchored(tpl: Template, recent: Sequence[float], at: int, steps: int) -> dict[float, list[float]]:
    """The template's `steps` steps from index `at`, re-anchored to the `recent` values (those just before `at`,
    against the template times the events' factors there) and spread by the calibrated offsets, then times the
    events' factors: every quantile, monotone and never below zero."""
    n = len(recent)
    observed = sum(recent) + tpl.eps * n
    expected = sum(tpl.p50[i] * tpl.factor(i) for i in range(at - n, at)) + tpl.eps * n if n else 0.0
    log_ratio = _clipped(math.log(observed / expected)) if n and expected > 0 and observed > 0 else 0.0
    cal = tpl.calibration
    departure = 0.0
    if n and cal.last_weights:
        last = math.log((recent[-1] + tpl.eps) / (tpl.p50[at - 1] * tpl.factor(at - 1) + tpl.eps))
        departure = _clipped(last - log_ratio)
    out: dict[float, list[float]] = {q: [] for q in QUANTILES}
    for j in range(steps):
        base = math.log(tpl.p50[at + j] + tpl.eps) + cal.weights[j] * log_ratio + cal.last_weight(j) * departure
        floor = 0.0
        for q in QUANTILES:  # ascending: each quantile at least the one below
            v = max(floor, math.exp(base + cal.log_offsets[q][j]) - tpl.eps)
            floor = v
            out[q].append(v * tpl.factor(at + j))
    return out


def _clipped(log_ratio: float) -> float:
    """A log ratio within +-`MAX_LOG_RATIO`, as the weights were fitted on."""
    return min(MAX_LOG_RATIO, max(-MAX_LOG_RATIO, log_ratio))


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


__all__ = ["RateEvent", "RateForecaster", "anchored", "calibrate", "calibration_of", "deevented", "event_factors",
           "holidays", "rate_events"]
