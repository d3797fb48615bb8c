"""forecasting.models: which model serves a series, and the guardrails on what it returns."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from burst.model import QUANTILES, Forecast
from forecasting.models import DemandSeries, SeriesError, forecast_series, seasonal_naive

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def daily_series(hours: float, step_s: float = 900.0, seed: int = 0) -> DemandSeries:
    """A seeded test series: 20 GPUs at night, 60 at 14:00, with noise."""
    n = int(hours * 3600 / step_s)
    rng = np.random.default_rng(seed)
    ts = tuple(T0 + timedelta(seconds=step_s * i) for i in range(n))
    hour = np.array([t.hour + t.minute / 60 for t in ts])
    values = 40 - 20 * np.cos((hour - 2) / 24 * 2 * math.pi) + rng.normal(0, 2, n)
    return DemandSeries("ml", "A100", ts, tuple(float(max(0.0, v)) for v in values), step_s)


def monotone(forecast: Forecast) -> bool:
    rows = [forecast.quantiles[q] for q in QUANTILES]
    return all(a <= b for lo, hi in zip(rows, rows[1:], strict=False) for a, b in zip(lo, hi, strict=True))


def test_short_history_is_served_by_the_seasonal_naive_fallback() -> None:
    def never(series: DemandSeries, steps: int) -> dict[float, list[float]]:
        raise AssertionError("Prophet must not be fitted on 12 h of history")

    f = forecast_series(daily_series(12), horizon_s=6 * 3600, fit=never)
    assert f.model == "seasonal_naive (history 12 h < 24 h)"
    assert len(f.timestamps) == 24 and f.timestamps[0] == T0 + timedelta(hours=12)
    assert all(v == daily_series(12).values[-1] for v in f.quantiles[0.5])  # the last value held
    assert monotone(f)


def test_seasonal_naive_repeats_yesterday_and_floors_p99_at_the_recent_max() -> None:
    series = daily_series(48)
    paths = seasonal_naive(series, 96)
    assert paths[0.5] == list(series.values[-96:])
    assert min(paths[0.99]) >= max(series.values[-96:])
    assert all(a <= b for a, b in zip(paths[0.5], paths[0.9], strict=True))


@pytest.mark.parametrize(
    ("returned", "reason"),
    [
        (RuntimeError("Stan optimisation failed"), "prophet failed: RuntimeError: Stan optimisation failed"),
        ({0.5: [math.nan] * 8, 0.9: [1.0] * 8, 0.99: [1.0] * 8}, "prophet failed: P50 has a non-finite value"),
        ({0.5: [-5.0] * 8, 0.9: [1.0] * 8, 0.99: [1.0] * 8}, "prophet failed: P50 goes negative (-5.00)"),
    ],
)
def test_a_failing_or_nonsense_fit_falls_back_and_says_why(returned: object, reason: str) -> None:
    def fit(series: DemandSeries, steps: int) -> dict[float, list[float]]:
        if isinstance(returned, Exception):
            raise returned
        assert isinstance(returned, dict)
        return returned

    f = forecast_series(daily_series(48), horizon_s=2 * 3600, fit=fit)
    assert f.model == f"seasonal_naive ({reason})"
    assert f.quantiles[0.5] == tuple(daily_series(48).values[-96:-88])


def test_forecasts_are_monotone_and_clipped_to_zero_and_quota() -> None:
    def wild(series: DemandSeries, steps: int) -> dict[float, list[float]]:
        return {0.5: [-0.2, 50.0, 10.0, 300.0], 0.9: [5.0, 40.0, 12.0, 310.0], 0.99: [4.0, 45.0, 500.0, 320.0]}

    f = forecast_series(daily_series(48), horizon_s=3600, quota=100, fit=wild)
    assert f.model == "prophet"
    assert f.quantiles[0.5] == (0.0, 50.0, 10.0, 100.0)
    assert f.quantiles[0.9] == (5.0, 50.0, 12.0, 100.0)
    assert f.quantiles[0.99] == (5.0, 50.0, 100.0, 100.0)


def test_prophet_serves_a_long_enough_series_and_follows_its_daily_shape() -> None:
    series = daily_series(72)
    f = forecast_series(series, horizon_s=24 * 3600, quota=200)
    assert f.model == "prophet"
    assert monotone(f)
    p50 = f.quantiles[0.5]
    by_hour = {t.hour: v for t, v in zip(f.timestamps, p50, strict=True)}
    assert by_hour[14] > by_hour[2] + 25  # the afternoon peak is forecast, not a flat line
    assert all(0 <= v <= 200 for q in QUANTILES for v in f.quantiles[q])
    assert forecast_series(series, horizon_s=24 * 3600, quota=200) == f  # seeded: the same forecast again


def test_bad_series_are_rejected_with_the_offending_point() -> None:
    ts = (T0, T0 + timedelta(minutes=15), T0 + timedelta(minutes=45))
    with pytest.raises(SeriesError, match="point 2 is 1800 s after the one before, not 900 s"):
        DemandSeries("ml", "A100", ts, (1.0, 2.0, 3.0), 900.0)
    with pytest.raises(SeriesError, match="value 1 is nan"):
        DemandSeries("ml", "A100", ts[:2], (1.0, math.nan), 900.0)
    with pytest.raises(SeriesError, match="no points"):
        DemandSeries("ml", "A100", (), (), 900.0)


def test_configured_special_events_are_fitted_from_past_days_and_applied_to_coming_ones() -> None:
    from burst.model import SpecialEvent

    start = datetime(2026, 3, 2, tzinfo=UTC)
    event_days = (4, 9, 17, 22)  # irregular, so no seasonality explains them; day 22 is after the history
    rng = np.random.default_rng(3)
    stamps, values = [], []
    for h in range(21 * 24):
        at = start + timedelta(hours=h)
        stamps.append(at)
        quiet = (at - start).days in event_days
        values.append(float((4.0 if quiet else 40.0) + rng.normal(0, 1.0)))
    series = DemandSeries("t", "any", tuple(stamps), tuple(values), 3600.0)
    events = [SpecialEvent("maintenance", (start + timedelta(days=d)).date()) for d in event_days]
    with_events = forecast_series(series, horizon_s=2 * 86400.0, events=events)
    without = forecast_series(series, horizon_s=2 * 86400.0)
    assert with_events.model == without.model == "prophet"
    noon_22 = start + timedelta(days=22, hours=12)
    noon_21 = start + timedelta(days=21, hours=12)
    assert with_events.at(0.5, noon_22) < 15.0 < with_events.at(0.5, noon_21), "the coming event day is forecast low"
    assert without.at(0.5, noon_22) > 25.0, "without the event the day looks like any other"


def test_prophet_is_fitted_on_hourly_means_that_end_at_the_last_point() -> None:
    from forecasting.models import fitting_points

    ts = tuple(T0 + timedelta(seconds=900 * i) for i in range(10))
    stamps, values = fitting_points(DemandSeries("ml", "A100", ts, tuple(float(i) for i in range(10)), 900.0))
    # Two whole hours (points 2-5 and 6-9), each at its middle; points 0-1 are a partial block and dropped.
    assert values == [3.5, 7.5]
    assert stamps == [T0 + timedelta(seconds=2 * 900 + 1350), T0 + timedelta(seconds=6 * 900 + 1350)]
    hourly = tuple(T0 + timedelta(hours=i) for i in range(3))
    assert fitting_points(DemandSeries("ml", "A100", hourly, (1.0, 2.0, 3.0), 3600.0)) == (list(hourly), [1.0, 2.0, 3.0])


@pytest.mark.parametrize(("start", "end"), [(0, 96), (10, 50), (95, 96), (-24, 96), (0, 1000)])
def test_a_part_of_a_series_equals_the_checked_series_of_its_points(start: int, end: int) -> None:
    series = daily_series(24)
    part = series.part(start, end)
    assert part == DemandSeries(series.tenant, series.gpu_model, series.timestamps[start:end],
                                series.values[start:end], series.step_s)


def test_an_empty_part_of_a_series_is_refused() -> None:
    with pytest.raises(SeriesError, match="no points"):
        daily_series(24).part(50, 50)
