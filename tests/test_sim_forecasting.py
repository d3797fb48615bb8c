"""Forecasting in the simulator: history from the trace, synchronous refits, and pre-scaling ahead of a ramp."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from builders import T0, job

from burst.model import ALL_TENANTS, DemandPoint, Job
from burst.sim.compare import compare
from burst.sim.forecasts import ClairvoyantForecaster, SimForecaster, SimForecasting, pooled, trace_demand
from burst.sim.setup import default_setup, with_fault_tolerance
from burst.sim.traces import Trace, TraceStats, load_trace
from burst.state import Store

D0 = datetime(2026, 3, 2, tzinfo=UTC)


def test_trace_demand_counts_each_job_from_submission_for_its_duration() -> None:
    jobs = [job("a", gpus=8, submitted=T0, duration_s=7200.0), job("b", gpus=4, submitted=T0 + timedelta(minutes=30),
                                                                       duration_s=3600.0)]
    points = trace_demand(jobs, T0, T0 + timedelta(hours=3), 3600.0)
    assert [(p.at - T0, p.running_gpus) for p in points] == [
        (timedelta(0), 8.0), (timedelta(hours=1), 12.0), (timedelta(hours=2), 0.0),  # intervals are half-open
    ]
    assert {p.tenant for p in points} == {ALL_TENANTS}


def test_pooled_demand_sums_tenants_per_instant_and_model() -> None:
    points = [DemandPoint(T0, "a", "any", 2.0, 1.0), DemandPoint(T0, "b", "any", 3.0, 0.0),
              DemandPoint(T0, "b", "H100", 8.0, 0.0)]
    assert pooled(points) == [DemandPoint(T0, ALL_TENANTS, "H100", 8.0, 0.0), DemandPoint(T0, ALL_TENANTS, "any", 5.0, 1.0)]


def ramp_trace(tmp_path: Path) -> Path:
    """A constructed test input: each morning one 8-GPU, 3-hour job every 5 minutes from 08:00 to 10:00."""
    rows = ["job_id,submit_time,duration_s,gpus,tenant"]
    for day in range(5):
        for i in range(24):
            at = D0 + timedelta(days=day, hours=8, minutes=5 * i)
            rows.append(f"d{day}j{i},{at:%Y-%m-%dT%H:%M:%SZ},10800,8,t")
    path = tmp_path / "ramp.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_forecasting_pre_scales_ahead_of_a_daily_ramp_deterministically(tmp_path: Path) -> None:
    trace = load_trace(ramp_trace(tmp_path)).window(D0 + timedelta(days=3), days=2)
    assert len(trace.prior) == 72, "the three days before the window are the forecast's history"
    first = compare(trace, ["burst", "burst-no-forecast"], days=2).results
    burst, blind = first["burst"], first["burst-no-forecast"]
    # the fallback serves the first refits (too little history to select), then the model its backtest chooses
    assert burst.forecast_fits > 0 and "seasonal_naive" in burst.forecast_models
    assert set(burst.forecast_models) <= {"prophet", "seasonal_naive", "auto_ets", "recent_level", "median"}
    assert (blind.forecast_fits, blind.forecast_models, blind.forecast_fit_s) == (0, {}, 0.0)
    no_wait = [sum(1 for w in r.waits_s if w < 60) for r in (burst, blind)]
    assert no_wait[0] >= no_wait[1] + 5, f"jobs that found capacity ready on arrival: {no_wait}"
    assert burst.cost_usd > blind.cost_usd, "capacity ahead of demand is paid for"
    again = compare(trace, ["burst"], days=2).results["burst"]
    assert (again.waits_s, again.cost_usd, again.forecast_fits) == (burst.waits_s, burst.cost_usd, burst.forecast_fits)


def test_the_sim_ticks_when_a_forecast_step_enters_the_lead_time(tmp_path: Path) -> None:
    trace = load_trace(ramp_trace(tmp_path)).window(D0 + timedelta(days=3), days=2)
    setup = default_setup(trace.stats())
    start = D0 + timedelta(days=3)
    with Store.open(":memory:") as store:
        forecaster = SimForecaster(SimForecasting(), store, [*trace.prior, *trace.jobs], setup.groups, start)
        assert forecaster.next_due(start) is None, "nothing is due before the first refit"
        (f,) = forecaster(start)
        assert f.tenant == ALL_TENANTS and f.history_s >= 2 * 86400
        lead = forecaster.lead
        assert lead == timedelta(seconds=300 + 300)  # cloud-od's cold boot + the default buffer
        due = forecaster.next_due(start)
        assert due is not None and due + lead in f.timestamps and due > start
        assert forecaster.service.next_refit_at() == start + timedelta(hours=6)


def test_the_clairvoyant_forecaster_serves_the_true_future_demand_as_every_quantile() -> None:
    jobs = [job("a", gpus=8, submitted=T0 + timedelta(minutes=30), duration_s=3600.0),
            job("b", gpus=4, submitted=T0 + timedelta(minutes=45), duration_s=600.0)]
    settings = SimForecasting(step_s=300.0, horizon_s=3600.0, clairvoyant=True)
    setup = default_setup(load_trace_stats(jobs))
    with Store.open(":memory:") as store:
        seer = ClairvoyantForecaster(settings, store, jobs, setup.groups, T0)
        (f,) = seer(T0 + timedelta(minutes=7))  # served from the first step at or after now
        assert f.timestamps[0] == T0 + timedelta(minutes=10) and len(f.timestamps) == 12
        truth = [p.running_gpus for p in trace_demand(jobs, T0 + timedelta(minutes=10), T0 + timedelta(minutes=70), 300.0)]
        assert all(list(path) == truth for path in f.quantiles.values())
        assert truth[4] == 8.0 and truth[7] == 12.0, "a's 8 GPUs from 00:30, b's 4 more from 00:45"
        assert f.backtest_rise_skill == 0.0 and f.backtest_p90_pinball == 0.0, "every forecast-driven step trusts it"
        assert seer(T0 + timedelta(minutes=10))[0].timestamps[0] == T0 + timedelta(minutes=10), "on a step: that step"
        assert seer(T0 - timedelta(hours=3))[0].timestamps[0] == T0, "before the replay: its first step"
        assert seer.next_due(T0 + timedelta(hours=3)) is None, "nothing is due once the truth has no step left"
        due = seer.next_due(T0)
        assert due is not None and T0 < due <= T0 + timedelta(seconds=300) and (due + seer.lead - T0).total_seconds() % 300 == 0


def load_trace_stats(jobs: list[Job]) -> TraceStats:
    """Trace statistics of `jobs`, for a default set-up."""
    return Trace(path=Path("jobs.csv"), format="generic", jobs=tuple(jobs)).stats()


def test_clairvoyant_forecasts_pre_scale_for_a_ramp_that_real_forecasts_have_not_seen(tmp_path: Path) -> None:
    # the window is the ramp's first day: no forecast has history to select a model on, the truth needs none
    trace = load_trace(ramp_trace(tmp_path)).window(D0, days=1)
    result = compare(trace, ["burst", "burst-no-forecast", "burst-clairvoyant"], days=1)
    seer, blind, burst = (result.results[n] for n in ("burst-clairvoyant", "burst-no-forecast", "burst"))
    assert (burst.waits_s, burst.cost_usd) == (blind.waits_s, blind.cost_usd), "an unfitted forecast changes nothing"
    assert seer.forecast_fits == 0
    jobs = with_fault_tolerance(trace.jobs, result.setup, 0)
    booted = [i for i, w in enumerate(blind.waits_s) if w >= 250]
    assert any(not jobs[i].fault_tolerant for i in booted), "without forecasts a job that cannot use spot waits a boot"
    for i in booted:
        if not jobs[i].fault_tolerant:
            assert seer.waits_s[i] < 60, f"{jobs[i].id}: capacity pre-scaled for it was ready on arrival"
    still = [jobs[i] for i, w in enumerate(seer.waits_s) if w >= 250]
    assert all(j.fault_tolerant for j in still), "pre-scaling launches on-demand only: what still waits a boot is spot's"
    assert seer.cost_usd > blind.cost_usd, "capacity ahead of demand is paid for"
