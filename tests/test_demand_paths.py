"""Sampled demand paths: seeded, calibrated, correlated as the errors were, and costed path by path."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from statistics import NormalDist

import pytest

from burst.model import Forecast, Job, Policy, SpotPolicy
from burst.projection.arrivals import JobTemplate
from burst.projection.demand import series_of_jobs
from burst.projection.project import path_jobs, project
from burst.projection.report import daily_band, render
from burst.projection.runs import per_bin
from burst.projection.whatif import run_for
from burst.sim.engine import simulate
from burst.state import CostEntry
from forecasting.models import DemandSeries
from forecasting.paths import (
    COMONOTONE,
    Dependence,
    dependence_of,
    fit_dependence,
    horizon_errors,
    quantile,
    sample_paths,
)
from forecasting.select import OriginCache, candidates, own_candidates, select_model
from tests.test_projection import NO_STATS, tiny_setup

T0 = datetime(2026, 3, 2, tzinfo=UTC)
N01 = NormalDist()
KNOTS = (0.1, 0.5, 0.9, 0.99)


def normal_forecast(mean: list[float], sd: float) -> Forecast:
    """A forecast whose every step is N(mean_k, sd): its quantile paths are the normal's quantiles."""
    stamps = tuple(T0 + timedelta(hours=k) for k in range(len(mean)))
    return Forecast(tenant="all", gpu_model="any", timestamps=stamps, model="scripted",
                    quantiles={q: tuple(m + sd * N01.inv_cdf(q) for m in mean) for q in KNOTS})


def truth_path(rng: random.Random, mean: list[float], sd: float, level: float, phi: float) -> list[float]:
    """One draw of the process the forecast describes: a level error held over the path plus a unit AR(1)."""
    shared, e, out = rng.gauss(0, 1), rng.gauss(0, 1), []
    for k, m in enumerate(mean):
        if k:
            e = phi * e + math.sqrt(1 - phi * phi) * rng.gauss(0, 1)
        out.append(m + sd * (math.sqrt(level) * shared + math.sqrt(1 - level) * e))
    return out


def overflow_cost(path: list[float], steady: float = 40.0, usd_per_gpu_hour: float = 3.0) -> float:
    """A cost that is not linear in demand: GPUs above an owned steady tier are bought by the hour."""
    return sum(max(0.0, v - steady) * usd_per_gpu_hour for v in path)


def test_paths_are_reproducible_for_a_seed_and_differ_across_seeds() -> None:
    forecast = normal_forecast([50.0] * 48, 10.0)
    dep = Dependence(0.4, 0.9, "scripted")
    first = sample_paths(forecast, dep, 30, seed=7)
    assert sample_paths(forecast, dep, 30, seed=7) == first
    assert sample_paths(forecast, dep, 30, seed=8) != first
    assert len(first) == 30 and all(len(p) == 48 for p in first)
    assert all(v >= 0.0 for p in first for v in p)


def test_each_step_of_the_paths_follows_the_forecasts_quantiles() -> None:
    forecast = normal_forecast([20.0 + k for k in range(24)], 4.0)
    paths = sample_paths(forecast, Dependence(0.3, 0.8, "scripted"), 2000, seed=1)
    for k in (0, 11, 23):
        column = [p[k] for p in paths]
        for q in (0.1, 0.5, 0.9):
            share = sum(v <= forecast.quantiles[q][k] for v in column) / len(column)
            assert share == pytest.approx(q, abs=0.03), (k, q)


def test_the_p10_to_p90_of_sampled_costs_covers_the_truth_at_its_nominal_rate() -> None:
    # Demand follows a known process; the forecast states its exact per-step quantiles and its dependence. The
    # truth's cost (a nonlinear function of the whole path) falls inside the P10-P90 of 50 sampled paths' costs in
    # about 80% of 400 trials (a little less: the band is estimated from 50 draws).
    mean = [45.0 + 10.0 * math.sin(2 * math.pi * k / 24) for k in range(72)]
    sd, dep = 8.0, Dependence(0.5, 0.9, "the truth's")
    forecast = normal_forecast(mean, sd)
    rng = random.Random(2026)
    inside = 0
    trials = 400
    for trial in range(trials):
        costs = [overflow_cost(p) for p in sample_paths(forecast, dep, 50, seed=trial)]
        truth = overflow_cost(truth_path(rng, mean, sd, dep.level, dep.phi))
        inside += quantile(costs, 0.1) <= truth <= quantile(costs, 0.9)
    assert 0.72 <= inside / trials <= 0.86
    # Steps drawn as if independent give a band far too narrow for the same truth.
    narrow = 0
    for trial in range(100):
        costs = [overflow_cost(p) for p in sample_paths(forecast, Dependence(0.0, 0.0, "wrong"), 50, seed=trial)]
        narrow += quantile(costs, 0.1) <= overflow_cost(truth_path(rng, mean, sd, dep.level, dep.phi)) <= quantile(costs, 0.9)
    assert narrow / 100 < 0.5


def test_dependence_is_recovered_from_fold_residuals_of_a_known_process() -> None:
    rng = random.Random(5)
    steps, sd = 96, 3.0
    folds = [truth_path(rng, [0.0] * steps, sd, 0.6, 0.85) for _ in range(40)]
    offsets = {q: tuple(sd * N01.inv_cdf(q) for _ in range(steps)) for q in KNOTS}
    dep = fit_dependence(folds, offsets, 3600.0)
    assert dep.level == pytest.approx(0.6, abs=0.15)
    assert dep.phi == pytest.approx(0.85, abs=0.08)
    assert "40 fold(s)" in dep.source
    # Too few folds to say anything: every step moves together, and the source says so.
    few = fit_dependence(folds[:3], offsets, 3600.0)
    assert (few.level, few.phi) == (1.0, 1.0) and "under the 5" in few.source


def test_the_p90_of_cost_is_not_the_cost_of_the_p90_path() -> None:
    # 16 GPUs of demand +- a wide spread for 8 h, steps independent hour to hour: a path at its P90 at every hour
    # is far rarer than one in ten, so its run costs more than the P90 of the sampled paths' costs.
    setup = tiny_setup(prod=Policy(tenant="prod"))
    stamps = tuple(T0 + timedelta(hours=k) for k in range(8))
    forecast = Forecast(tenant="all", gpu_model="any", timestamps=stamps, model="scripted",
                        quantiles={0.1: (4.0,) * 8, 0.5: (16.0,) * 8, 0.9: (28.0,) * 8, 0.99: (32.0,) * 8})
    mix = [JobTemplate("prod", 8, 3600.0)]
    horizon = 8 * 3600.0
    result = project(setup, NO_STATS, forecast, mix, start=T0, horizon_s=horizon, strategy="burst-no-forecast",
                     paths=20, dependence=Dependence(0.0, 0.0, "independent hours"), seed=4)
    assert len(result.paths) == 20 and len(result.baseline.runs) == 20
    p90_path = simulate(run_for("burst-no-forecast", setup, NO_STATS, None),
                        path_jobs(forecast, 0.9, T0, horizon, mix, setup, 4), start=T0, end=T0 + timedelta(hours=8),
                        seed=4)
    p10_path = simulate(run_for("burst-no-forecast", setup, NO_STATS, None),
                        path_jobs(forecast, 0.1, T0, horizon, mix, setup, 4), start=T0, end=T0 + timedelta(hours=8),
                        seed=4)
    base = result.baseline
    assert base.cost(0.1) < base.cost(0.5) < base.cost(0.9)
    assert base.cost(0.9) < 0.9 * p90_path.cost_usd
    assert base.cost(0.1) > 1.1 * p10_path.cost_usd
    body = result.to_json()
    assert body["total_usd"] == {k: round(base.cost(q), 4) for k, q in (("p10", 0.1), ("p50", 0.5), ("p90", 0.9))}
    assert body["paths"] == {"count": 20, "level": 0.0, "phi": 0.0, "source": "independent hours", "horizon_folds": 0}
    # The report's cost-per-bin band is the P10-P90 of each bin's total over the runs, not of two paths' runs.
    band = daily_band(base)
    totals = [[sum(v) for v in zip(*spend.bins.values(), strict=True)] for spend in base.spend]
    for k in range(len(band[0.5])):
        day = [t[k] for t in totals]
        assert band[0.1][k] == quantile(day, 0.1) and band[0.9][k] == quantile(day, 0.9)
    assert any(lo < hi for lo, hi in zip(band[0.1], band[0.9], strict=True))
    page = render(result)
    assert "P10–P90 of each day" in page and "20 demand paths sampled from the forecast" in page
    assert 'data-key="total_usd.p10"' in page


def test_each_path_draws_its_own_jobs_so_the_band_holds_which_jobs_realise_the_demand() -> None:
    # No spread in demand at all; half of the work is one 16-GPU job for 4 h, half 2-GPU jobs for 1 h, and the
    # batch tenant's jobs may move to spot. Which jobs arrive (and which may move) still moves the bill.
    batch = Policy(tenant="batch", spot=SpotPolicy(allowed=True, fault_tolerant_fraction=0.5))
    setup = tiny_setup(batch=batch)
    stamps = tuple(T0 + timedelta(hours=k) for k in range(6))
    forecast = Forecast(tenant="all", gpu_model="any", timestamps=stamps, model="scripted",
                        quantiles={q: (16.0,) * 6 for q in KNOTS})
    mix = [JobTemplate("batch", 16, 4 * 3600.0), JobTemplate("batch", 2, 3600.0)]
    result = project(setup, NO_STATS, forecast, mix, start=T0, horizon_s=6 * 3600.0, strategy="burst-no-forecast",
                     paths=20, dependence=COMONOTONE, seed=2)
    assert len(set(result.paths)) == 1  # one demand path, twenty times
    costs = [r.cost_usd for r in result.baseline.runs]
    assert len(set(costs)) > 3 and result.baseline.cost(0.1) < result.baseline.cost(0.9)
    again = project(setup, NO_STATS, forecast, mix, start=T0, horizon_s=6 * 3600.0, strategy="burst-no-forecast",
                    paths=20, dependence=COMONOTONE, seed=2)
    assert [r.cost_usd for r in again.baseline.runs] == costs  # seeded


def test_a_trace_history_starts_at_its_first_job_not_at_zeros_before_it() -> None:
    # Two days of jobs before the cutoff, a 30-day window: the series holds the two days, not 28 days of zeros
    # that a forecaster would read as a rising trend.
    cutoff = T0 + timedelta(days=30)
    jobs = [Job(id=f"j{k}", tenant="a", gpus=4, submitted_at=cutoff - timedelta(hours=48 - k), duration_s=7200.0)
            for k in range(0, 48, 3)]
    series = series_of_jobs(jobs, cutoff)
    assert series.timestamps[0] == cutoff - timedelta(hours=48)
    assert len(series.values) == 48 and series.values[0] > 0


@pytest.mark.parametrize("model", ["seasonal_naive", "seasonal_naive_own"])
def test_dependence_is_learnt_from_the_serving_models_folds_calibrated_or_served_with_its_own_quantiles(
        model: str) -> None:
    # Twelve days of a daily cycle plus a slowly wandering AR(1) error: whether the model is calibrated (offsets per
    # step) or served with its own quantiles, its fold errors give a fitted dependence with hour-to-hour memory.
    rng = random.Random(11)
    values, e = [], 0.0
    for k in range(12 * 24):
        e = 0.95 * e + math.sqrt(1 - 0.95**2) * rng.gauss(0, 1)
        values.append(max(0.0, 40.0 + 15.0 * math.sin(2 * math.pi * k / 24) + 6.0 * e))
    stamps = tuple(T0 + timedelta(hours=k) for k in range(len(values)))
    history = DemandSeries("all", "any", stamps, tuple(values), 3600.0)
    cache = OriginCache(candidates(), own_candidates())
    selection = select_model(history, 48, cache=cache, names=[model])
    assert selection.model == model
    dep = dependence_of(history, selection, cache)
    assert dep.source.startswith("fitted on") and dep.correlation(1) > 0.5


def test_a_ledger_row_is_spread_over_the_days_its_tick_interval_covers() -> None:
    # The simulator skips quiet ticks: a row written at hour 49 bills hours 1-49, so day 0 gets 23 h of it,
    # day 1 24 h and day 2 1 h, not all 48 USD on day 2.
    ledger = [CostEntry(at=T0 + timedelta(hours=1), line="steady", usd=1.0),
              CostEntry(at=T0 + timedelta(hours=49), line="steady", usd=48.0),
              CostEntry(at=T0 + timedelta(hours=49), line="elastic_on_demand", usd=96.0)]
    starts, lines = per_bin(ledger, T0, 3 * 86400.0)
    assert starts == [T0 + timedelta(days=k) for k in range(3)]
    assert lines["steady"] == pytest.approx([24.0, 24.0, 1.0])
    assert lines["elastic_on_demand"] == pytest.approx([46.0, 48.0, 2.0])
    assert sum(lines["steady"]) + sum(lines["elastic_on_demand"]) == pytest.approx(145.0)


def test_horizon_errors_are_the_served_p50s_errors_of_the_mean_over_the_whole_horizon_or_else_half_of_it() -> None:
    residuals = [[2.0, 4.0, 6.0, 8.0], [1.0, 1.0, 1.0], [5.0, 5.0], [9.0]]  # the last two saw under half of 6 steps
    assert horizon_errors(residuals, [1.0] * 6, 6) == [4.0, 0.0]
    whole = [[float(i)] * 6 for i in range(5)]  # five origins saw the whole horizon: the partial ones are left out
    assert horizon_errors([*whole, *residuals], [1.0] * 6, 6) == [-1.0, 0.0, 1.0, 2.0, 3.0]


def test_a_calibrated_horizon_band_covers_a_known_level_process_at_its_nominal_rate() -> None:
    # Truth: each week's mean demand is the forecast's P50 (100 GPUs) off by a level error ~ N(0, 15) that the
    # hourly band (+-5 GPUs) and hours correlated only over a few steps do not show; the folds before each origin
    # saw 12 such errors.
    hours, level_sd = 168, 15.0
    stamps = tuple(T0 + timedelta(hours=k) for k in range(hours))
    forecast = Forecast(tenant="all", gpu_model="any", timestamps=stamps, model="scripted",
                        quantiles={0.1: (95.0,) * hours, 0.5: (100.0,) * hours, 0.9: (105.0,) * hours})
    short_memory = Dependence(0.0, 0.5, "scripted")
    rng = random.Random(7)
    inside = {"calibrated": 0, "copula only": 0}
    trials = 300
    for trial in range(trials):
        truth = 100.0 + rng.gauss(0.0, level_sd)
        folds = [rng.gauss(0.0, level_sd) for _ in range(12)]
        for name, dep in (("calibrated", short_memory.with_horizon_errors(folds)), ("copula only", short_memory)):
            means = [sum(p) / hours for p in sample_paths(forecast, dep, 50, seed=trial)]
            inside[name] += quantile(means, 0.1) <= truth <= quantile(means, 0.9)
    assert 0.72 <= inside["calibrated"] / trials <= 0.88  # nominal 0.8
    assert inside["copula only"] / trials < 0.2


def test_a_horizon_band_with_too_few_folds_is_left_to_the_copula_and_says_so() -> None:
    dep = Dependence(0.3, 0.9, "scripted").with_horizon_errors([1.0, 2.0])
    assert dep.horizon_errors == () and "not calibrated" in dep.source
