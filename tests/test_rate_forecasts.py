"""forecasting.rates: request-rate forecasts refitted rarely, re-anchored to the last hour, shifted by declared events."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pytest

from burst.model import QUANTILES, ServiceEvent, SpecialEvent
from burst.settings import data_dir
from forecasting.backtest import pinball
from forecasting.models import DemandSeries, seasonal_naive
from forecasting.rates import (
    Calibration,
    RateForecaster,
    Template,
    anchored,
    calibration_of,
    deevented,
    event_factors,
    holidays,
    rate_events,
)
from forecasting.series import load_series

T0 = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday
STEP = 300.0


def rate_series(days: float, seed: int, persistence: float = 0.0) -> tuple[list[datetime], list[float]]:
    """A seeded 5-minute request rate: a daily sine, weekends at 60%, multiplicative noise; with `persistence`, an
    hourly AR(1) level (deviations that last hours, as real traffic has)."""
    rng = np.random.default_rng(seed)
    n = int(days * 86400 / STEP)
    times = [T0 + timedelta(seconds=STEP * i) for i in range(n)]
    level, values = 0.0, []
    for i, t in enumerate(times):
        if persistence and i % 12 == 0:
            level = persistence * level + rng.normal(0, 0.15)
        hour = t.hour + t.minute / 60
        weekly = 0.6 if t.weekday() >= 5 else 1.0
        base = 100 * weekly * (1 + 0.6 * math.sin((hour - 8) / 24 * 2 * math.pi))
        values.append(float(base * math.exp(level + rng.normal(0, 0.1))))
    return times, values


def ordered(quantiles: dict[float, tuple[float, ...]]) -> bool:
    rows = [quantiles[q] for q in QUANTILES]
    return all(0 <= a <= b for lo, hi in zip(rows, rows[1:], strict=False) for a, b in zip(lo, hi, strict=True))


def test_beats_seasonal_naive_on_a_daily_and_weekly_cycle() -> None:
    times, values = rate_series(16, seed=1)
    day = int(86400 / STEP)
    origin = len(values) - day
    forecaster = RateForecaster(STEP)
    stamps, q = forecaster.forecast(times[:origin], values[:origin], times[origin], 86400)
    assert stamps[0] == times[origin] and len(stamps) == day
    assert ordered(q)
    actual = values[origin:]
    ours = sum(pinball(y, f, 0.9) for y, f in zip(actual, q[0.9], strict=True)) / day
    train = DemandSeries("s", "any", tuple(times[origin - 14 * day:origin]), tuple(values[origin - 14 * day:origin]),
                         STEP)
    naive = seasonal_naive(train, day)[0.9]
    theirs = sum(pinball(y, f, 0.9) for y, f in zip(actual, naive, strict=True)) / day
    assert ours < theirs, f"burst {ours:.2f} vs seasonal naive {theirs:.2f}"


def test_reanchoring_follows_an_intraday_surge_without_a_refit() -> None:
    times, values = rate_series(12, seed=2, persistence=0.9)
    origin = len(values) - 288
    forecaster = RateForecaster(STEP)
    forecaster.forecast(times[:origin], values[:origin], times[origin], 1800)
    assert forecaster.refits == 1
    later = origin + 72  # six hours on: the last hour surged to 3x
    surged = values[:later - 12] + [3 * v for v in values[later - 12:later]]
    now = times[later] + timedelta(minutes=1)
    _, calm = forecaster.forecast(times[:later], values[:later], now, 1800)
    _, surge = forecaster.forecast(times[:later], surged, now, 1800)
    assert forecaster.refits == 1, "re-anchoring fits nothing"
    assert surge[0.5][0] > 1.8 * calm[0.5][0]
    assert ordered(surge) and ordered(calm)


def test_anchored_scales_the_template_by_the_last_hours_ratio_to_its_lead_weight() -> None:
    cal = Calibration((1.0, 0.5), {q: (0.0, 0.0) for q in QUANTILES})
    tpl = Template(T0, T0, (10.0,) * 4, cal, 0.0, "x")
    out = anchored(tpl, [20.0, 20.0], 2, 2)
    assert out[0.5] == pytest.approx([20.0, 10 * math.sqrt(2)])
    assert out[0.1] == out[0.5] == out[0.99]


def test_calibration_fits_the_lead_weight_and_centres_the_offsets() -> None:
    xs = [[-1.0, 1.0, 2.0], [-1.0, 1.0, 2.0]]
    ys = [[-0.5, 0.5, 1.0], [0.0, 0.0, 0.0]]
    cal = calibration_of(xs, ys, 0)
    assert cal.weights == pytest.approx((0.5, 0.0))
    assert all(cal.log_offsets[q] == pytest.approx((0.0, 0.0)) for q in QUANTILES)
    assert calibration_of([[2.0]], [[5.0]], 0).weights == (1.0,), "a weight is at most 1"


def test_a_serving_ratio_is_clipped_as_the_weights_were_fitted() -> None:
    # the anchor hour ran at 1000x the template: the weights were fitted on ratios clipped to 20x, so is this one
    wild = anchored(Template(T0, T0, (1.0,) * 3, Calibration((1.0,), {q: (0.0,) for q in QUANTILES}), 0.0, "x"),
                    [1000.0], 1, 1)
    assert wild[0.5] == pytest.approx([20.0])


def test_events_without_a_multiplier_are_prophet_holidays_over_the_days_they_touch() -> None:
    evening = ServiceEvent(datetime(2026, 11, 26, 18, tzinfo=UTC), datetime(2026, 11, 27, 2, tzinfo=UTC), None, "sale")
    sized = ServiceEvent(datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC), 2.0)
    events = rate_events([evening, sized, SpecialEvent("xmas", date(2026, 12, 25), 2)])
    assert holidays(events) == (SpecialEvent("sale", date(2026, 11, 26), 2), SpecialEvent("xmas", date(2026, 12, 25), 2))


def test_a_declared_thanksgiving_lowers_the_taxi_forecast_over_its_window() -> None:
    path = data_dir() / "services" / "nyc-taxi.csv"
    if not path.exists():
        pytest.skip(f"no {path}: the shared data directory is absent")
    series = load_series(path, time_column="timestamp", value_column="value", step_s=1800.0).series
    now = datetime(2014, 11, 26, tzinfo=UTC)
    end = series.timestamps.index(now)
    times, values = series.timestamps[end - 14 * 48:end], series.values[end - 14 * 48:end]
    day = ServiceEvent(datetime(2014, 11, 27, tzinfo=UTC), datetime(2014, 11, 28, tzinfo=UTC), 0.6, "thanksgiving")
    stamps, plain = RateForecaster(1800.0).forecast(times, values, now, 2 * 86400)
    _, declared = RateForecaster(1800.0, events=[day]).forecast(times, values, now, 2 * 86400)
    inside = [k for k, t in enumerate(stamps) if day.in_force(t)]
    assert len(inside) == 48
    assert all(declared[0.5][k] < plain[0.5][k] for k in inside)
    assert sum(declared[0.5][k] for k in inside) == pytest.approx(0.6 * sum(plain[0.5][k] for k in inside), rel=1e-6)
    outside = [k for k in range(len(stamps)) if k not in inside]
    assert [declared[0.5][k] for k in outside] == pytest.approx([plain[0.5][k] for k in outside])
    assert ordered(declared)


def test_a_declared_surge_raises_every_quantile_over_its_window_and_past_windows_are_divided_out() -> None:
    cal = Calibration((1.0, 1.0, 1.0), {q: (0.0, 0.0, 0.0) for q in QUANTILES})
    tpl = Template(T0, T0, (10.0,) * 4, cal, 0.0, "x", (1.0, 1.0, 3.0, 1.0))
    out = anchored(tpl, [10.0], 1, 3)
    assert out[0.5] == pytest.approx([10.0, 30.0, 10.0])
    assert out[0.99] == pytest.approx([10.0, 30.0, 10.0])
    # the anchor hour inside a window is compared with the template times the multiplier: no double counting
    assert anchored(tpl, [30.0], 3, 1)[0.5] == pytest.approx([10.0])
    sale = ServiceEvent(T0 + timedelta(minutes=5), T0 + timedelta(minutes=10), 3.0)
    events = rate_events([sale])
    series = DemandSeries("s", "any", tuple(T0 + timedelta(minutes=5 * i) for i in range(3)), (10.0, 30.0, 10.0),
                          STEP)
    assert deevented(series, events).values == (10.0, 10.0, 10.0)
    assert event_factors(series.timestamps, events) == [1.0, 3.0, 1.0]


def test_a_day_of_history_is_served_by_seasonal_naive_following_the_last_hour() -> None:
    times, values = rate_series(1.5, seed=3)
    end = len(values)
    forecaster = RateForecaster(STEP)
    stamps, q = forecaster.forecast(times, values, times[-1] + timedelta(seconds=STEP), 3600)
    assert forecaster.model.startswith("seasonal_naive") and len(stamps) == 12
    assert ordered(q)
    doubled = values[:end - 12] + [2 * v for v in values[end - 12:]]
    _, up = forecaster.forecast(times, doubled, times[-1] + timedelta(seconds=STEP), 3600)
    assert forecaster.refits == 1
    eps = forecaster.template.eps if forecaster.template else 0.0
    ratio = (sum(doubled[-12:]) + 12 * eps) / (sum(values[-12:]) + 12 * eps)  # weight 1: the whole ratio
    assert [v + eps for v in up[0.5]] == pytest.approx([(v + eps) * ratio for v in q[0.5]])


def gpu_demand(days: float, seed: int, busy: float = 20.0) -> tuple[list[datetime], list[float]]:
    """A seeded 5-minute GPU demand that moves in steps: a level (whole GPUs around `busy`, or 0 to 3 with
    `busy` below 1) held for an exponential number of steps (mean 3 h), no noise between steps."""
    rng = np.random.default_rng(seed)
    n = int(days * 86400 / STEP)
    times = [T0 + timedelta(seconds=STEP * i) for i in range(n)]
    values: list[float] = []
    while len(values) < n:
        level = float(rng.integers(0, 4) if busy < 1 else max(1, round(busy * math.exp(rng.normal(0, 0.4)))))
        values += [level] * max(1, int(rng.exponential(36)))
    return times, values[:n]


def test_the_hour_ahead_follows_a_step_in_demand_taken_minutes_before_the_origin() -> None:
    times, values = gpu_demand(14, seed=4)
    origin = len(values) - 12
    level = values[origin - 13]
    stepped = values[:origin - 12] + [level] * 9 + [2 * level] * 3  # the demand doubled 15 minutes ago
    forecaster = RateForecaster(STEP)
    _, q = forecaster.forecast(times[:origin], stepped, times[origin], 3600)
    assert forecaster.template is not None and max(forecaster.template.calibration.last_weights[:12]) > 0.5
    # the hour's mean is 1.25x the old level; the newest steps say 2x, and demand that moves in steps holds them
    assert all(abs(v - 2 * level) <= 0.2 * level for v in q[0.5][:6]), (level, q[0.5][:6])


def test_a_demand_of_a_few_gpus_gets_a_band_in_gpus_not_a_multiple_of_a_near_zero_rate() -> None:
    times, values = gpu_demand(16, seed=5, busy=0.5)
    _, busy = gpu_demand(16, seed=105, busy=0.5)
    values = [v if b >= 2 else 0.0 for v, b in zip(values, busy, strict=True)]  # 0 to 3 GPUs, idle half the time
    origin = len(values) - 288
    forecaster = RateForecaster(STEP)
    _, q = forecaster.forecast(times[:origin], values[:origin], times[origin], 86400)
    assert ordered(q)
    # a P90 many times the most ever demanded is a multiplicative band on a floor far below one GPU
    assert max(q[0.9]) <= 1.5 * max(values[:origin]), max(q[0.9])
