"""Forecasts kept fresh for the reconcile loop: refits on a schedule, never on the tick's time.

`ForecastService.forecasts(now)` is what the loop calls each tick. It returns
the latest cached forecasts at once and, when a refit is due (default every
6 h), starts one: in a background thread for the daemon (the tick never waits
on Prophet; a refit still running when the next falls due is not doubled), or
synchronously for the simulator (`background=False`), where refits happen at
fixed simulated times and are cached by (series, cutoff) so results are
deterministic and fit time is kept apart from simulated time (`fit_s`).

Each series is fitted by `fit`, by default burst's `SelectingForecaster`
(the model chosen per series by a rolling-origin backtest of its own
history, reselected daily, with calibrated quantiles).

History comes in as `burst.model.DemandPoint`s (running and pending GPUs per
tenant and GPU model at an instant), read by the caller from wherever it keeps
them (the state store's demand history); this module does not read the store.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta

from burst.model import DemandPoint, Forecast
from forecasting.models import DemandSeries, SeriesError
from forecasting.select import SelectingForecaster
from forecasting.series import resample

REFIT_EVERY_S = 6 * 3600.0
HORIZON_S = 48 * 3600.0


def series_from_samples(samples: Iterable[DemandPoint], step_s: float) -> list[DemandSeries]:
    """One regular series per (tenant, GPU model) of running + pending GPUs: averaged per step, gaps carried forward."""
    grouped: dict[tuple[str, str], list[tuple[datetime, float]]] = defaultdict(list)
    for s in samples:
        grouped[(s.tenant, s.gpu_model)].append((s.at, s.demand_gpus))
    return [resample(sorted(points), step_s, tenant, model)[0] for (tenant, model), points in sorted(grouped.items())]


class ForecastService:
    """The loop's source of forecasts (see the module doc)."""

    def __init__(
        self,
        history: Callable[[datetime], Iterable[DemandPoint]],
        *,
        step_s: float = 3600.0,
        horizon_s: float = HORIZON_S,
        refit_every_s: float = REFIT_EVERY_S,
        quotas: Mapping[str, float] | None = None,
        background: bool = True,
        fit: Callable[..., Forecast] | None = None,
    ) -> None:
        self.history = history
        self.step_s = step_s
        self.horizon_s = horizon_s
        self.refit_every_s = refit_every_s
        self.quotas = dict(quotas or {})
        self.background = background
        self.fit: Callable[..., Forecast] = fit if fit is not None else SelectingForecaster()
        self.fit_s = 0.0
        self.fits = 0
        self.models_fitted: dict[str, int] = {}  # fits served by each model (fallback reasons folded in)
        self.errors: dict[str, str] = {}
        self._latest: tuple[Forecast, ...] = ()
        self._cache: dict[tuple[str, str, datetime], Forecast] = {}
        self._last_refit: datetime | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def forecasts(self, now: datetime) -> tuple[Forecast, ...]:
        """The latest forecasts, starting a refit first when one is due (it does not wait on it in background)."""
        due = self._last_refit is None or (now - self._last_refit).total_seconds() >= self.refit_every_s
        if due and not self.refitting:
            self._last_refit = now
            if self.background:
                self._thread = threading.Thread(target=self._refit, args=(now,), name="burst-forecast-refit", daemon=True)
                self._thread.start()
            else:
                self._refit(now)
        return self.latest()

    def latest(self) -> tuple[Forecast, ...]:
        """The latest forecasts, never starting a refit."""
        with self._lock:
            return self._latest

    def next_refit_at(self) -> datetime | None:
        """When the next refit falls due (None before the first)."""
        if self._last_refit is None:
            return None
        return self._last_refit + timedelta(seconds=self.refit_every_s)

    @property
    def refitting(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for a running background refit; whether none is running afterwards."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        return not self.refitting

    def served_by(self) -> dict[str, str]:
        """Which model served each series in the latest forecasts ('tenant/model' -> model name)."""
        with self._lock:
            return {f"{f.tenant}/{f.gpu_model}": f.model for f in self._latest}

    def serving(self) -> dict[str, dict[str, object]]:
        """Per series in the latest forecasts: the serving model and its backtest P90 pinball loss (None when no
        backtest chose it, e.g. too little history)."""
        with self._lock:
            return {f"{f.tenant}/{f.gpu_model}": {"model": f.model, "backtest_p90_pinball": f.backtest_p90_pinball}
                    for f in self._latest}

    def _refit(self, now: datetime) -> None:
        t0 = time.perf_counter()
        fresh: list[Forecast] = []
        errors: dict[str, str] = {}
        try:
            all_series = series_from_samples(self.history(now), self.step_s)
        except ValueError as exc:  # SeriesError included
            with self._lock:
                self.errors = {"history": str(exc)}
            return
        for series in all_series:
            key = (series.tenant, series.gpu_model, series.timestamps[-1])
            found = self._cache.get(key)
            if found is None:
                try:
                    found = self.fit(series, horizon_s=self.horizon_s + (now - series.timestamps[-1]).total_seconds(),
                                     quota=self.quotas.get(series.tenant))
                except SeriesError as exc:
                    errors[series.name] = str(exc)
                    continue
                self._cache[key] = found
                self.fits += 1
                base = found.model.split(" (")[0]
                self.models_fitted[base] = self.models_fitted.get(base, 0) + 1
            fresh.append(found)
        with self._lock:
            self._latest = tuple(fresh)
            self.errors = errors
            self.fit_s += time.perf_counter() - t0


__all__ = ["ForecastService", "series_from_samples"]
