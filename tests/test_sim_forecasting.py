"""Forecasting in the simulator: history from the trace, synchronous refits, and pre-scaling ahead of a ramp."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from builders import T0, job

from burst.model import ALL_TENANTS, DemandPoint
from burst.sim.compare import compare
from burst.sim.forecasts import SimForecaster, SimForecasting, pooled, trace_demand
from burst.sim.setup import default_setup
from burst.sim.traces import load_trace
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
