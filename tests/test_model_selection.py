"""forecasting.select: the model a backtest chooses, level shifts, calibrated quantiles, and no peeking."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from forecasting.models import DemandSeries, SeriesError
from forecasting.select import (
    BIAS_MIN_SHARE,
    ETS_OWN,
    STRUCTURE_PERIOD_S,
    STRUCTURE_WINDOW_S,
    TRAIN_WINDOW_S,
    WITH_ETS,
    EtsStructures,
    OriginCache,
    SelectingForecaster,
    auto_ets_fit,
    auto_ets_point,
    conformal_quantile,
    level_shift,
    recent_level_point,
    seasonal_naive_point,
    select_model,
    serve,
    serving_window,
    truncated,
    unmeasured_from,
    week_profile_point,
)

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def hourly(values: list[float]) -> DemandSeries:
    return DemandSeries("t", "any", tuple(T0 + timedelta(hours=i) for i in range(len(values))), tuple(values), 3600.0)


def end(train: DemandSeries) -> int:
    """The index (in hours after T0) of the first point after `train`: where a fit on it forecasts from."""
    return int((train.timestamps[-1] - T0).total_seconds() // 3600) + 1


def daily_wave(hours: int, *, mean: float = 50.0, amplitude: float = 20.0) -> list[float]:
    return [mean + amplitude * math.sin(2 * math.pi * (i % 24) / 24) for i in range(hours)]


def test_selection_picks_the_model_that_is_known_to_win() -> None:
    truth = daily_wave(14 * 24)
    series = hourly(truth)

    def exact(train: DemandSeries, steps: int) -> list[float]:
        return [truth[end(train) + k] if end(train) + k < len(truth) else 0.0 for k in range(steps)]

    def three_high(train: DemandSeries, steps: int) -> list[float]:
        return [v + 3.0 for v in exact(train, steps)]

    def flat(train: DemandSeries, steps: int) -> list[float]:
        return [train.values[-1]] * steps

    cache = OriginCache({"flat": flat, "three_high": three_high, "exact": exact})
    chosen = select_model(series, 24, cache=cache)
    assert chosen.model == "exact"
    assert chosen.score == pytest.approx(0.0)
    assert chosen.scores["flat"] > chosen.scores["exact"]
    # a constant bias is what calibration corrects: three_high, shifted down by its P50 offset, is exact too, and
    # loses only the tie to the model that needed no correction
    assert chosen.scores["three_high"] == pytest.approx(0.0)
    assert [round(v, 6) for v in select_model(series, 24, cache=cache, names=["three_high"]).offsets[0.5]] == [-3.0] * 24


def test_seasonal_naive_wins_a_noise_free_daily_wave_against_the_recent_level() -> None:
    series = hourly(daily_wave(10 * 24))
    cache = OriginCache({"seasonal_naive": seasonal_naive_point, "recent_level": recent_level_point})
    chosen = select_model(series, 48, cache=cache, names=["recent_level", "seasonal_naive"])
    assert chosen.model == "seasonal_naive" and chosen.level_shift_at is None
    assert chosen.scores["recent_level"] > 1.0 > chosen.scores["seasonal_naive"]


def test_a_level_shift_switches_the_model() -> None:
    before = daily_wave(12 * 24)
    cache = OriginCache({"seasonal_naive": seasonal_naive_point, "recent_level": recent_level_point})
    names = ["seasonal_naive", "recent_level"]
    steady = select_model(hourly(before), 48, cache=cache, names=names)
    assert steady.model == "seasonal_naive" and steady.level_shift_at is None
    # a day at the new level: the shift is found, and no fold starts a day after it yet
    shifted = hourly(before + [v + 80.0 for v in daily_wave(24)])
    assert level_shift(shifted) == len(before)
    chosen = select_model(shifted, 48, cache=cache, names=names)
    assert chosen.level_shift_at == T0 + timedelta(hours=len(before))
    assert chosen.model == "recent_level", "yesterday's seasonality is not served at the old level"
    assert "level shift" in chosen.reason
    paths = serve(shifted, chosen, 48, cache)
    assert min(paths[0.5]) > 100.0, "served at the new level"
    # 40 h after it, two folds start a day after the shift: too few to choose on, so the median serves
    few = select_model(hourly(before + [v + 80.0 for v in daily_wave(40)]), 48, cache=cache, names=names)
    assert few.model == "median" and "under the 3 a choice needs" in few.reason
    # 64 h after it, four: the choice is made on them, and seasonality is back
    later = hourly(before + [v + 80.0 for v in daily_wave(64)])
    again = select_model(later, 48, cache=cache, names=names)
    assert again.model == "seasonal_naive" and again.level_shift_at == chosen.level_shift_at
    assert all(f.origin >= len(before) + 24 for f in again.folds), "only folds a day after the shift are scored"


def test_a_daily_burst_is_not_a_level_shift() -> None:
    # idle all day but for five hours at 192 GPUs: whatever hour the history ends at, no shift
    spiky = [192.0 if 8 <= i % 24 < 13 else 0.0 for i in range(10 * 24)]
    assert all(level_shift(hourly(spiky[:end])) is None for end in range(8 * 24, 10 * 24))


def test_a_shift_too_recent_for_any_fold_is_served_by_the_recent_level() -> None:
    before = daily_wave(12 * 24)
    series = hourly(before + [v + 80.0 for v in daily_wave(24)])
    chosen = select_model(series, 24, cache=OriginCache({"seasonal_naive": seasonal_naive_point,
                                                         "recent_level": recent_level_point}))
    assert chosen.model == "recent_level" and chosen.level_shift_at is not None
    paths = serve(series, chosen, 24, OriginCache({"recent_level": recent_level_point}))
    assert min(paths[0.5]) > 100.0, "served at the new level (about 130), not the old one (about 50)"


def test_no_shift_is_found_in_a_noisy_daily_wave() -> None:
    rng = random.Random(3)
    assert level_shift(hourly([v + rng.gauss(0, 5) for v in daily_wave(20 * 24)])) is None


def test_the_selector_never_reads_the_fold_it_is_scored_on() -> None:
    series = hourly(daily_wave(12 * 24))
    seen: list[int] = []

    def spy(train: DemandSeries, steps: int) -> list[float]:
        seen.append(len(train.values))
        return [train.values[-1]] * steps

    chosen = select_model(series, 48, cache=OriginCache({"spy": spy}), names=["spy"])
    assert len(chosen.folds) >= 10
    # every fit trained on exactly the points before one fold's origin, and each fold is scored from its origin on
    assert sorted(seen) == sorted(f.origin for f in chosen.folds)
    assert all(f.train_start == 0 and f.origin < f.scored_until <= len(series.values) for f in chosen.folds)
    # what lies after the history is never read: a selection on the first part equals one made before the rest existed
    cut = 10 * 24
    early = select_model(truncated(series, 0, cut), 48, cache=OriginCache({"spy": spy}), names=["spy"])
    assert all(f.scored_until <= cut for f in early.folds)
    garbage = hourly(list(series.values[:cut]) + [1e6] * (len(series.values) - cut))
    assert select_model(truncated(garbage, 0, cut), 48, cache=OriginCache({"spy": spy}), names=["spy"]) == early


def test_every_fit_trains_on_the_window_before_its_origin_so_a_moving_history_refits_only_new_origins() -> None:
    series = hourly(daily_wave(40 * 24))
    window = int(TRAIN_WINDOW_S // 3600)
    trained: list[tuple[int, int]] = []

    def spy(train: DemandSeries, steps: int) -> list[float]:
        trained.append((end(train) - len(train.values), end(train)))
        return [train.values[-1]] * steps

    cache = OriginCache({"spy": spy})
    first = select_model(truncated(series, 0, 30 * 24), 48, cache=cache, names=["spy"])
    assert all(f.train_start == f.origin - window for f in first.folds)
    assert sorted(trained) == sorted((f.origin - window, f.origin) for f in first.folds)
    served = serve(truncated(series, 0, 30 * 24), first, 48, cache)
    assert trained[-1] == (30 * 24 - window, 30 * 24) and len(served[0.5]) == 48
    # a day later the 30-day history starts a day later, and two origins are new: the one the last serving fit
    # forecast from (its fit is that fold's) and the one 12 h after it, the only fit made
    trained.clear()
    later = select_model(truncated(series, 24, 31 * 24), 48, cache=cache, names=["spy"])
    assert trained == [(31 * 24 - 12 - window, 31 * 24 - 12)]
    assert all(f.origin - f.train_start == window for f in later.folds)


def test_autoets_given_the_structure_it_chose_fits_the_same_paths_and_falls_back_where_that_form_cannot_fit() -> None:
    rng = random.Random(11)
    series = hourly([v + rng.gauss(0, 3) for v in daily_wave(6 * 24)])
    paths, structure = auto_ets_fit(series, 48)
    again, kept = auto_ets_fit(series, 48, structure)
    assert kept == structure and structure[2] != "N", "a daily season is found and kept"
    assert again[0.5] == pytest.approx(paths[0.5]) and again[0.9] == pytest.approx(paths[0.9])
    # two days of history hold no daily season: a seasonal form cannot fit, so AutoETS chooses again
    short, chosen = auto_ets_fit(truncated(series, 0, 40), 6, structure)
    assert chosen[2] == "N" and len(short[0.5]) == 6


def test_autoets_searches_its_structure_once_a_period_on_the_days_before_it_and_fits_that_periods_windows_on_it() -> None:
    rng = random.Random(13)
    series = hourly([v + rng.gauss(0, 3) for v in daily_wave(20 * 24)])
    window, period = int(TRAIN_WINDOW_S // 3600), int(STRUCTURE_PERIOD_S // 3600)
    hours_since_epoch = int((T0 - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() // 3600)
    start = 15 * 24 - (hours_since_epoch + 15 * 24) % period  # the hour a period starts, on day 14 or 15
    first = truncated(series, start + 6 - window, start + 6)  # 14-day windows whose origins fall in that period
    last = truncated(series, start + period - 6 - window, start + period - 6)
    ets = EtsStructures()
    ets(first, 48)
    ets(last, 48)
    searched = auto_ets_fit(truncated(series, start - int(STRUCTURE_WINDOW_S // 3600), start), 1)[1]
    assert ets.searches == 1 and ets.of(first) == ets.of(last) == searched
    assert ets.of_period(last) == searched, "the period's last window still holds the days its search fitted"
    longer = EtsStructures()  # more history before the same origin: the same period's search, the same structure
    longer(truncated(series, 0, start + 6), 48)
    assert longer.of(truncated(series, 0, start + 6)) == searched
    ets(truncated(series, start + period + 6 - window, start + period + 6), 48)  # the next period searches again
    assert ets.searches == 2
    short = truncated(series, start + 6 - 10 * 24, start + 6)  # holds no 12 days before its period: chooses alone
    for structures in (EtsStructures(), ets):  # whether or not that period was searched for a longer window
        searches = structures.searches
        structures(short, 48)
        assert structures.searches == searches and structures.of(short) == auto_ets_fit(short, 48)[1]


def test_refits_between_reselections_keep_the_autoets_structure_of_the_reselections_serving_fit() -> None:
    rng = random.Random(12)
    series = hourly([v + rng.gauss(0, 3) for v in daily_wave(6 * 24)])
    forecaster = SelectingForecaster()
    forecaster.cache = OriginCache({"seasonal_naive": seasonal_naive_point, "auto_ets": auto_ets_point},
                                   {ETS_OWN: forecaster.ets})
    forecaster(truncated(series, 0, 120), horizon_s=48 * 3600.0)
    name = series.name
    forecaster.selections[name] = dataclasses.replace(forecaster.selections[name], model="auto_ets")
    forecaster.held.clear()
    forecaster(truncated(series, 0, 126), horizon_s=48 * 3600.0)  # 6 h on: a refit, AutoETS chooses its form
    structure = forecaster.ets.of(truncated(series, 0, 126))
    assert structure is not None and forecaster.held[name] == structure
    chosen, fits = dict(forecaster.ets.chosen), forecaster.cache.fits
    forecaster(truncated(series, 0, 132), horizon_s=48 * 3600.0)  # 6 h more: the same form, its parameters refitted
    assert unmeasured_from(forecaster.selections[name], 48) < 48  # 5 days of history: steps few folds saw...
    assert forecaster.ets.chosen == chosen and forecaster.cache.fits == fits + 2  # ...so seasonal naive fits for them
    assert forecaster.held[name] == structure
    forecaster(truncated(series, 0, 144), horizon_s=48 * 3600.0)  # a day after the selection: reselected in full
    reselected = forecaster.selections[name]
    assert reselected.at == series.timestamps[143] + timedelta(hours=1)
    if reselected.model in WITH_ETS:
        assert forecaster.held[name] == forecaster.ets.of(truncated(series, 0, 144))
    else:
        assert name not in forecaster.held


def test_calibration_reaches_nominal_coverage_on_a_series_with_known_noise() -> None:
    rng = random.Random(11)
    n = 40 * 24
    values = [max(0.0, v + rng.gauss(0.0, 6.0)) for v in daily_wave(n, mean=80.0)]
    series = hourly(values)
    cache = OriginCache({"seasonal_naive": seasonal_naive_point, "recent_level": recent_level_point})
    below = {0.1: 0, 0.5: 0, 0.9: 0, 0.99: 0}
    count = 0
    for origin in range(n - 48 - 20 * 24, n - 47, 24):  # 21 origins a day apart, the last 48 h before the end
        history = truncated(series, 0, origin)
        chosen = select_model(history, 48, cache=cache, names=["seasonal_naive", "recent_level"])
        paths = serve(history, chosen, 48, cache)
        for k in range(48):
            count += 1
            for q in below:
                below[q] += values[origin + k] <= paths[q][k]
    coverage = {q: c / count for q, c in below.items()}
    assert 0.05 <= coverage[0.1] <= 0.15, coverage
    assert 0.43 <= coverage[0.5] <= 0.57, coverage
    assert 0.85 <= coverage[0.9] <= 0.95, coverage
    assert coverage[0.99] >= 0.97, coverage


def test_the_steps_few_folds_observed_serve_the_far_combination_without_the_bias() -> None:
    rng = random.Random(5)
    series = hourly([50.0 + rng.gauss(0.0, 2.0) for _ in range(14 * 24)])

    def flat(v: float) -> Callable[[DemandSeries, int], list[float]]:
        return lambda train, steps: [v] * steps

    # `low` is 10 GPUs under the truth at every step and is made to serve; the median of the four candidates alone
    # would be 57.5, while the week's mean profile (about 50) is the median once it joins them
    cache = OriginCache({"low": flat(40.0), "middle": flat(45.0), "high": flat(70.0), "higher": flat(75.0)})
    chosen = select_model(series, 7 * 24, cache=cache, names=["low"])
    observed = [sum(f.scored_until - f.origin > k for f in chosen.folds) for k in range(7 * 24)]
    far = unmeasured_from(chosen, 7 * 24)
    assert observed[0] == len(chosen.folds) == 20
    assert observed[far - 1] >= BIAS_MIN_SHARE * 20 > observed[far] and 0 < far < 7 * 24
    paths = serve(series, chosen, 7 * 24, cache)
    profile = week_profile_point(serving_window(series, chosen), 7 * 24)
    assert paths[0.5][0] == pytest.approx(50.0, abs=1.0)  # the bias the folds measured, corrected
    for k in (far, 7 * 24 - 1):  # measured by the oldest folds alone: the far combination, unbiased
        assert paths[0.5][k] == pytest.approx(profile[k]) and profile[k] == pytest.approx(50.0, abs=2.0)
    for k in (0, far, 7 * 24 - 1):  # the band keeps its calibrated width around the P50 served
        assert paths[0.1][k] < paths[0.5][k] < paths[0.9][k]
        assert paths[0.9][k] - paths[0.1][k] == pytest.approx(2 * 1.2816 * 2.0, rel=0.35)  # P10-P90 of noise, sd 2


def test_the_week_profile_is_the_last_weeks_mean_hour_by_hour() -> None:
    wave = daily_wave(7 * 24, mean=50.0, amplitude=20.0)
    series = hourly([200.0] * 48 + [v + (3.0 if i // 24 == 2 else 0.0) for i, v in enumerate(wave)])  # 9 days
    profile = week_profile_point(series, 30)
    n = len(series.values)
    # the two days at 200 before the week are not in it; each hour is that hour's mean over the week's 7 days
    assert profile == pytest.approx([50.0 + 20.0 * math.sin(2 * math.pi * ((n + k) % 24) / 24) + 3.0 / 7
                                     for k in range(30)])
    values = [float(i % 5) for i in range(40)]  # 7 h steps: a day is no whole number of them, so the week's flat mean
    odd = DemandSeries("t", "any", tuple(T0 + timedelta(hours=7 * i) for i in range(40)), tuple(values), 7 * 3600.0)
    assert week_profile_point(odd, 3) == pytest.approx([statistics.fmean(values[-24:])] * 3)


def test_conformal_quantile_takes_the_finite_sample_rank() -> None:
    values = [float(i) for i in range(1, 10)]  # n = 9: (n + 1) q = 9 for q = 0.9, 1 for q = 0.1
    assert conformal_quantile(values, 0.9) == 9.0
    assert conformal_quantile(values, 0.1) == 1.0
    assert conformal_quantile(values, 0.5) == 5.0
    assert conformal_quantile(values, 0.99) == 9.0  # beyond the sample: its largest


def test_too_little_history_to_select_is_refused_and_the_forecaster_falls_back() -> None:
    series = hourly(daily_wave(48))
    with pytest.raises(SeriesError, match="selection needs"):
        select_model(series, 24, cache=OriginCache({"recent_level": recent_level_point}))
    forecast = SelectingForecaster()(hourly([0.0] * 10 + [1.0] * 10), horizon_s=3 * 3600)
    assert forecast.model.startswith("seasonal_naive") and forecast.backtest_p90_pinball is None


def test_the_forecaster_reselects_on_its_schedule_and_names_the_serving_model() -> None:
    series = hourly(daily_wave(10 * 24))
    forecaster = SelectingForecaster(reselect_every_s=86400.0)
    forecaster.cache = OriginCache({"seasonal_naive": seasonal_naive_point, "recent_level": recent_level_point})
    first = forecaster(truncated(series, 0, 8 * 24), horizon_s=24 * 3600)
    chosen = forecaster.selections["t/any"]
    assert first.model == chosen.model and first.backtest_p90_pinball == pytest.approx(chosen.score)
    forecaster(truncated(series, 0, 8 * 24 + 6), horizon_s=24 * 3600)
    assert forecaster.selections["t/any"] is chosen, "6 h later: the same selection, refitted"
    forecaster(truncated(series, 0, 9 * 24), horizon_s=24 * 3600)
    assert forecaster.selections["t/any"] is not chosen, "a day later: selected again"


def noisy_if(truth: list[float], noisy: Callable[[int], bool]) -> Callable[[DemandSeries, int], list[float]]:
    """A candidate that forecasts `truth` exactly, plus noise (sd 10) from the fold origins `noisy` picks."""

    def fit(train: DemandSeries, steps: int) -> list[float]:
        origin = end(train)
        rng = random.Random(origin)
        return [truth[origin + k] + (rng.gauss(0.0, 10.0) if noisy(origin) else 0.0) if origin + k < len(truth)
                else 0.0 for k in range(steps)]

    return fit


def test_recent_folds_weigh_more_so_a_model_that_stopped_tracking_loses_the_choice() -> None:
    truth = daily_wave(14 * 24)
    series = hourly(truth)
    # 20 folds 12 h apart, the last at hour 324: `stale` went wrong on the last 9 of them, `fresh` was wrong on the
    # 11 before. Counted alike, stale's bad folds are fewer (and the last ones only partly scored); weighed by
    # recency (halving every 5 days), they weigh more
    cut = 324 - 8 * 12
    cache = OriginCache({"stale": noisy_if(truth, lambda o: o >= cut), "fresh": noisy_if(truth, lambda o: o < cut)})
    chosen = select_model(series, 48, cache=cache, names=["stale", "fresh"])
    assert [f.origin for f in chosen.folds][-9] == cut and len(chosen.folds) == 20
    assert chosen.model == "fresh", chosen.scores
    assert chosen.scores["stale"] > chosen.scores["fresh"]


def test_a_peer_with_its_own_quantiles_is_a_candidate_and_serves_them_unchanged() -> None:
    # noise of sd 10 from 08:00 to 16:00, sd 1 otherwise: the point candidate's calibration pools horizon steps
    # from origins at 00:00 and 12:00, so only a model that knows the hours can be sharp at night and wide by day
    rng = random.Random(5)
    wave = daily_wave(16 * 24)
    sd = [10.0 if 8 <= i % 24 < 16 else 1.0 for i in range(len(wave))]
    series = hourly([max(0.0, v + rng.gauss(0.0, s)) for v, s in zip(wave, sd, strict=True)])

    def point(train: DemandSeries, steps: int) -> list[float]:
        return [wave[end(train) + k] if end(train) + k < len(wave) else 50.0 for k in range(steps)]

    def own(train: DemandSeries, steps: int) -> dict[float, list[float]]:
        p50 = point(train, steps)
        spread = [sd[min(len(sd) - 1, end(train) + k)] for k in range(steps)]
        return {0.1: [v - 1.2816 * s for v, s in zip(p50, spread, strict=True)], 0.5: p50,
                0.9: [v + 1.2816 * s for v, s in zip(p50, spread, strict=True)],
                0.99: [v + 2.3263 * s for v, s in zip(p50, spread, strict=True)]}

    cache = OriginCache({"point": point}, own={"hours_own": own})
    chosen = select_model(series, 48, cache=cache)
    assert set(chosen.scores) == {"point", "median", "hours_own"}
    assert chosen.model == "hours_own" and chosen.scores["hours_own"] < chosen.scores["point"]
    assert set(chosen.offsets[0.9]) == {0.0}, "its own quantiles are not recalibrated"
    served = serve(series, chosen, 48, cache)
    assert served[0.9] == pytest.approx(own(series, 48)[0.9])


def test_rise_skill_says_whether_a_forecasts_rises_beat_assuming_no_change() -> None:
    series = hourly(daily_wave(10 * 24))
    rng = random.Random(2)

    def jitter(train: DemandSeries, steps: int) -> list[float]:  # the right level, with rises that never come
        return [train.values[-1] + rng.uniform(-15.0, 15.0) for _ in range(steps)]

    cache = OriginCache({"seasonal_naive": seasonal_naive_point, "recent_level": recent_level_point, "jitter": jitter})
    # a flat forecast adds no rise: exactly the no-forecast rule
    assert select_model(series, 48, cache=cache, names=["recent_level"]).rise_skill == pytest.approx(1.0)
    # the exact wave foresees every rise and adds nothing on the falls: half the no-forecast error
    assert select_model(series, 48, cache=cache, names=["seasonal_naive"]).rise_skill == pytest.approx(0.5, abs=0.01)
    jittery = select_model(series, 48, cache=cache, names=["jitter"]).rise_skill
    assert jittery is not None and jittery > 1.0
    # the forecaster carries the serving model's figure to the planner
    forecaster = SelectingForecaster()
    forecaster.cache = OriginCache({"seasonal_naive": seasonal_naive_point, "recent_level": recent_level_point})
    forecast = forecaster(series, horizon_s=24 * 3600)
    assert forecast.backtest_rise_skill == pytest.approx(forecaster.selections["t/any"].rise_skill)
