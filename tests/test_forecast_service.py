"""forecasting.service: the tick never waits on a refit; simulated refits are synchronous and cached."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from burst.model import DemandPoint, Forecast
from forecasting.models import DemandSeries, forecast_series
from forecasting.service import ForecastService, series_from_samples

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def point(at: datetime, tenant: str, model: str, gpus: float) -> DemandPoint:
    return DemandPoint(at=at, tenant=tenant, gpu_model=model, running_gpus=gpus / 2, pending_gpus=gpus / 2)


def samples(hours: int) -> list[DemandPoint]:
    return [point(T0 + timedelta(hours=h), "ml", "A100", float(10 + h % 24)) for h in range(hours)]


def test_samples_become_one_regular_series_per_tenant_and_model() -> None:
    raw = samples(3) + [point(T0 + timedelta(minutes=30), "ml", "A100", 20.0),
                        point(T0 + timedelta(hours=5), "ml", "A100", 4.0),
                        point(T0, "cv", "any", 1.0)]
    by_name = {s.name: s for s in series_from_samples(raw, 3600.0)}
    assert set(by_name) == {"ml/A100", "cv/any"}
    ml = by_name["ml/A100"]
    assert ml.values == (15.0, 11.0, 12.0, 12.0, 12.0, 4.0)  # hour 0 averaged, hours 3-4 carried forward
    assert ml.timestamps[0] == T0 and ml.step_s == 3600.0


def test_a_tick_gets_the_cached_forecasts_at_once_while_a_refit_runs() -> None:
    release = threading.Event()
    started = threading.Event()

    def slow_fit(series: DemandSeries, **kw: object) -> Forecast:
        started.set()
        assert release.wait(30), "the test never released the fit"
        return forecast_series(series, **kw)  # type: ignore[arg-type]

    service = ForecastService(lambda now: samples(12), fit=slow_fit)
    assert service.forecasts(T0 + timedelta(hours=12)) == ()  # first call starts the refit, returns what it has
    assert started.wait(30)
    assert service.refitting
    assert service.forecasts(T0 + timedelta(hours=12, minutes=1)) == ()  # still not blocked, no second refit
    release.set()
    assert service.wait(30)
    fresh = service.forecasts(T0 + timedelta(hours=12, minutes=2))
    assert [f.tenant for f in fresh] == ["ml"]
    assert service.served_by() == {"ml/A100": "seasonal_naive (history 12 h < 24 h)"}
    assert service.fits == 1


def test_simulated_refits_happen_in_the_call_on_schedule_and_are_cached_by_cutoff() -> None:
    calls: list[datetime] = []

    def history(now: datetime) -> list[DemandPoint]:
        calls.append(now)
        return [s for s in samples(48) if s.at < now]

    service = ForecastService(history, background=False, refit_every_s=6 * 3600)
    first = service.forecasts(T0 + timedelta(hours=10))
    assert first and first[0].timestamps[0] == T0 + timedelta(hours=10)
    assert service.forecasts(T0 + timedelta(hours=15)) is first  # not due: the cached forecasts
    assert len(calls) == 1
    service.forecasts(T0 + timedelta(hours=16))
    assert len(calls) == 2 and service.fits == 2
    # history that ends where it did (no new samples) is not refitted: the forecast is cached by cutoff
    service.forecasts(T0 + timedelta(hours=60))
    service.forecasts(T0 + timedelta(hours=66))
    assert len(calls) == 4 and service.fits == 3


def test_the_quickstart_daemon_forecasts_from_its_own_demand_history() -> None:
    from burst.runtime import build_runtime, load_run_config

    runtime = build_runtime(load_run_config(None), ephemeral=True)
    try:
        assert runtime.forecasts is not None and not runtime.forecasts.background  # sim clock: refits in the tick
        start = runtime.now()
        runtime.run(until=start + timedelta(hours=7), realtime=False)
        served = runtime.forecasts.served_by()
        tenants = {name.split("/")[0] for name in served}
        assert tenants == set(runtime.reloader.current)  # every tenant with demand has a forecast
        assert all(model.startswith("seasonal_naive (history") for model in served.values())  # < 24 h of history
        # the refit at the first tick had no history yet; the one 6 h later fitted each series once: each
        # tenant's jobs, and prod's chat service's replicas (A100 GPUs), which take GPUs as jobs do
        assert "prod/A100" in served
        assert runtime.forecasts.fits == len(served) == 4
    finally:
        runtime.close()


def test_the_serving_model_and_its_backtest_score_reach_the_status_document_and_the_metrics() -> None:
    from prometheus_client import generate_latest

    from burst.api.status import daemon_status
    from burst.metrics import ControllerMetrics
    from burst.model import Plan, Snapshot
    from burst.reconcile import TickReport
    from forecasting.select import OriginCache, SelectingForecaster, recent_level_point, seasonal_naive_point

    fit = SelectingForecaster()
    fit.cache = OriginCache({"seasonal_naive": seasonal_naive_point, "recent_level": recent_level_point})
    now = T0 + timedelta(days=10)
    service = ForecastService(lambda at: samples(10 * 24), background=False, fit=fit)
    (forecast,) = service.forecasts(now)
    serving = service.serving()
    chosen = fit.selections["ml/A100"]
    assert serving == {"ml/A100": {"model": chosen.model, "backtest_p90_pinball": chosen.score}}
    assert forecast.model == chosen.model == "seasonal_naive"  # the daily sawtooth repeats exactly
    report = TickReport(at=now, plan=Plan(id="p1", at=now, actions=()), snapshot=Snapshot(groups=(), nodes=(), jobs=()))
    assert daemon_status(report, lambda g: 0.0, serving)["forecasts"] == serving
    metrics = ControllerMetrics()
    metrics.observe_tick(report, seconds=0.1, forecasts=[forecast])
    text = generate_latest(metrics.registry).decode()
    assert (f'burst_forecast_backtest_p90_pinball_gpus{{gpu_model="A100",model="seasonal_naive",tenant="ml"}} '
            f"{chosen.score!r}") in text
