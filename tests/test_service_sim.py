"""The service replay (burst.sim.service_*): loaders, windows, the metric definitions on hand-computed series,
the fleet's rules, `burst simulate --service-trace`, and burst serving a surge that reactive misses."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from burst.cli import main
from burst.model import Service
from burst.sim.service_compare import run_service
from burst.sim.service_engine import (
    Fleet,
    Observation,
    Replay,
    Target,
    metrics,
    observed_rates,
    replay,
    slo_minutes_missed,
    ttc_samples,
    unserved,
    unserved_causes,
)
from burst.sim.service_forecasts import ForecastTrack, build_track, clairvoyant_track
from burst.sim.service_setup import ServiceSetup, default_service, read_service_config, service_setups
from burst.sim.service_strategies import Burst, Hpa, Static, initial_replicas
from burst.sim.service_traces import AZURE_TOKEN_COST, TICK_S, RateSeries, ServiceTraceError, load_rate_series
from policies import PolicyValidationError

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def nab_file(path: Path, values: list[float], step_s: int = 300, start: datetime = T0, skip: tuple[int, ...] = ()) -> Path:
    rows = ["timestamp,value"] + [f"{(start + timedelta(seconds=k * step_s)):%Y-%m-%d %H:%M:%S},{v:g}"
                                  for k, v in enumerate(values) if k not in skip]
    path.write_text("\n".join(rows) + "\n")
    return path


def series(counts: list[float], step_s: int = TICK_S, start: int = 0, name: str = "svc") -> RateSeries:
    return RateSeries(name, Path(f"{name}.csv"), "nab", step_s, T0, np.asarray(counts, dtype=float), start, len(counts))


def setup_of(s: RateSeries, capacity: float = 1.0, target: float = 0.5, **kw: float) -> ServiceSetup:
    service = Service("t", s.name, "A100", 100, 300.0, 1.0, requests_per_s=capacity, target_utilisation=target,
                      min_replicas=0)
    return ServiceSetup(s, service, capacity, on_demand_usd_h=3.6, spot_usd_h=1.8, warm_node_usd_h=0.036,
                        **kw)  # type: ignore[arg-type]


# ------------------------------------------------------------------ loaders


def test_nab_series_step_gap_and_window(tmp_path: Path) -> None:
    s = load_rate_series(nab_file(tmp_path / "shop.csv", [30, 60, 90, 120], skip=(2,)))
    assert s.format == "nab" and s.step_s == 300 and s.origin == T0
    # the missing third step repeats the one before it
    assert s.counts.tolist() == [30, 60, 60, 120]
    # under 14 days: the whole series is replayed
    assert (s.start, s.end) == (0, 4)
    # 300 s steps spread over 20 ticks of 15 s: 30 requests are 1.5 a tick
    fine = s.fine_counts()
    assert fine.shape == (80, 1) and fine[0, 0] == pytest.approx(1.5) and fine[60, 0] == pytest.approx(6.0)


def test_windows_by_series_name(tmp_path: Path) -> None:
    day = 86400
    tw = load_rate_series(nab_file(tmp_path / "twitter-X.csv", [1.0] * 40, step_s=day))
    assert (tw.start, tw.end) == (12, 40)  # the last 28 days
    elb = load_rate_series(nab_file(tmp_path / "elb-x.csv", [1.0] * 14, step_s=day))
    assert (elb.start, elb.end) == (7, 14)  # the last 7 days
    taxi = load_rate_series(nab_file(tmp_path / "nyc-taxi.csv", [1.0] * 200, step_s=day,
                                     start=datetime(2014, 7, 1, tzinfo=UTC)))
    assert taxi.window_start == datetime(2014, 10, 20, tzinfo=UTC)
    assert taxi.window_end == datetime(2015, 1, 5, tzinfo=UTC)
    assert tw.head(2).end == 14


def test_azure_trace_counts_per_second_and_token_capacity(tmp_path: Path) -> None:
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2023-11-16 18:00:00.2500000,1000,100\n"
                    "2023-11-16 18:00:00.7500000,2000,300\n"
                    "2023-11-16 18:00:02.1000000,3000,200\n")
    s = load_rate_series(path)
    assert s.format == "azure" and s.step_s == 1
    assert s.counts.tolist() == [2, 0, 1]
    assert s.mean_context_tokens == 2000 and s.mean_generated_tokens == 200
    # a 1.0e-4 x 2000 + b 3.0e-4 x 200 = 0.2 + 0.06 = 0.26 GPU-s a request: one A100 serves 1 / 0.26 req/s
    assert default_service(s).capacity_rps == pytest.approx(1 / 0.26)
    assert AZURE_TOKEN_COST.gpu_s_per_request(2000, 200) == pytest.approx(0.26)
    # per-second counts grouped by tick: 15 bins per tick, the 3 seconds padded with empty ones
    assert s.fine_counts().shape == (1, 15) and s.fine_counts()[0, :3].tolist() == [2, 0, 1]


def test_bad_rows_name_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,value\n2026-03-02 00:00:00,1\n2026-03-02 00:05:00,-3\n")
    with pytest.raises(ServiceTraceError, match=r"bad.csv:3: expected a finite number >= 0"):
        load_rate_series(bad)


def test_default_mapping_puts_the_history_median_at_eight_replicas(tmp_path: Path) -> None:
    # 14 days of history at 5.6 req/s median (1680 a 300 s step), then 7 days replayed
    values = [1680.0] * (21 * 288)
    s = load_rate_series(nab_file(tmp_path / "api.csv", values))
    setup = default_service(s)
    assert setup.capacity_rps == pytest.approx(5.6 / (8 * 0.7))
    assert int(setup.need(5.6)) == 8
    assert setup.service.max_replicas == 16  # 2 x the peak's 8
    assert (setup.on_demand_usd_h, setup.spot_usd_h) == (3.67339, 1.80385)
    assert setup.warm_node_usd_h == pytest.approx(200 * 0.17 / 730)


# ------------------------------------------------------------------ metrics


def test_observed_rate_is_the_minute_before() -> None:
    setup = setup_of(series([6.0, 6.0, 6.0, 6.0, 30.0, 30.0]))
    rates = observed_rates(setup, setup.series.fine_counts())
    # no history: the first minute sees nothing; at tick 4 the minute before holds 24 requests; at tick 5, 6+6+6+30
    assert rates.tolist() == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4, 0.8])


def test_unserved_slo_and_cost_on_a_hand_computed_series() -> None:
    # 8 ticks (2 minutes): 15 and then 45 requests a tick (1 and 3 req/s); capacity 1 req/s per replica
    s = series([15.0] * 4 + [45.0] * 4)
    setup = setup_of(s)
    serving = np.array([1, 1, 1, 1, 2, 2, 3, 3])
    fine = s.fine_counts()
    # above capacity: ticks 4-5 serve 30 of 45, ticks 6-7 all: 15 + 15 unserved of 240
    assert unserved(fine, serving, 1.0).tolist() == [0, 0, 0, 0, 15, 15, 0, 0]
    # minute 1: 60 requests over 60 replica-seconds, above 0.5 x 60; minute 2: 180 over 150 replica-seconds x 0.5
    assert slo_minutes_missed(fine, serving, 1.0, 0.5) == (2, 2)
    run = Replay(serving, serving + 1, np.zeros(8, dtype=int), np.ones(8, dtype=int), 0, 0)
    m = metrics(setup, run, fine)
    assert m.unserved_request_share == pytest.approx(30 / 240)
    assert m.slo_minutes_missed_share == 1.0
    # 22 billed on-demand node-ticks of 15 s at 3.6 $/h, 8 warm node-ticks at 0.036 $/h
    assert m.cost_usd == pytest.approx(22 * 15 / 3600 * 3.6 + 8 * 15 / 3600 * 0.036)
    assert m.replica_gpu_hours == pytest.approx(22 * 15 / 3600)


def test_time_to_capacity_counts_each_needed_replica() -> None:
    need = np.array([1, 3, 3, 3, 1, 2])
    serving = np.array([1, 1, 2, 3, 3, 3])
    # replica 1 serves when needed (0); replica 2 after 1 tick; replica 3 after 2 ticks; the second rise to 2: 0
    assert sorted(ttc_samples(need, serving, 15.0)) == [0.0, 0.0, 15.0, 30.0]
    # a need that falls away before the replica serves ends the wait then
    assert ttc_samples(np.array([0, 2, 0]), np.array([0, 0, 0]), 15.0) == [15.0, 15.0]


# ------------------------------------------------------------------ the fleet


def test_burst_is_told_the_prices_the_fleet_bills_a_replica_at() -> None:
    """A 2-GPU replica: compute is billed per GPU, a stopped warm node its disk once (`metrics`)."""
    s = setup_of(series([10.0] * 8))
    two = dataclasses.replace(s, service=dataclasses.replace(s.service, gpus_per_replica=2))
    told = Burst(two, None, pools=True).state(Observation(0.0, T0, 1.0, 0, 0, 0, 0, 0, 0))
    assert (told.replica_hour_usd, told.spot_replica_hour_usd, told.warm_node_hour_usd) == (7.2, 3.6, 0.036)


def test_a_new_replica_takes_an_idle_node_then_a_warm_one_then_boots() -> None:
    setup = setup_of(series([0.0] * 100))
    fleet = Fleet(setup, np.random.default_rng(0), idle_ttl_s=600.0, ready_od=2)
    fleet.apply(Target(1, warm_nodes=1), 0.0)  # one replica freed: its node is stopped into the warm pool
    assert (fleet.ready_od, fleet.warm, fleet.idle) == (1, 1, [])
    fleet.apply(Target(0, warm_nodes=1), 0.0)  # the pool is full: the freed node stays idle for the 600 s
    assert fleet.idle == [600.0]
    fleet.apply(Target(3, warm_nodes=0), 30.0)
    ready_at = sorted(s.ready_at for s in fleet.starting)
    # idle node: load only (120 s); warm node: wake 60 s + load; cold: boot 300 s + load
    assert ready_at == [150.0, 210.0, 450.0]
    fleet.advance(450.0)
    assert fleet.ready_od == 3 and fleet.serving() == 3


def test_spot_replicas_are_interrupted_and_the_controller_replaces_them() -> None:
    setup = setup_of(series([0.0] * 10), spot_hazard_per_h=1e9)  # every spot replica is interrupted at once
    fleet = Fleet(setup, np.random.default_rng(1), idle_ttl_s=0.0, ready_spot=2)
    assert fleet.interrupt(0.0, 15.0) == 2
    # both serve through their 30 s notice and nothing replaces them until a target asks
    assert fleet.serving() == 2 and fleet.ready_spot == 0 and fleet.starting == []
    fleet.advance(30.0)
    assert fleet.serving() == 0 and fleet.billed() == (0, 0, 0)
    fleet.apply(Target(2, spot=2), 30.0)  # replaced on spot: two cold spot boots (300 s + 120 s load)
    assert [(s.spot, s.ready_at) for s in fleet.starting] == [(True, 450.0), (True, 450.0)]
    assert fleet.billed() == (0, 2, 0)


def test_a_spot_replica_wakes_a_stopped_spot_node() -> None:
    setup = setup_of(series([0.0] * 100))
    fleet = Fleet(setup, np.random.default_rng(0), idle_ttl_s=600.0, ready_spot=3)
    fleet.apply(Target(2, spot=2, warm_nodes=1, warm_spot=1), 0.0)  # the freed spot node is stopped, not ended
    assert (fleet.ready_spot, fleet.warm_spot, fleet.warm, fleet.idle) == (2, 1, 0, [])
    assert fleet.billed() == (0, 2, 1)  # two spot nodes running, one stopped (its disk)
    fleet.apply(Target(1, spot=1, warm_nodes=1, warm_spot=1), 0.0)  # the pool is full: this one is terminated
    assert (fleet.ready_spot, fleet.warm_spot, fleet.idle) == (1, 1, [])
    fleet.apply(Target(3, spot=3, warm_nodes=1, warm_spot=1), 30.0)
    # one wakes the stopped spot node (60 s + 120 s load), one boots cold (300 s + load); the pool is refilled by
    # a spot node booting to be stopped, billed at the spot price meanwhile
    assert sorted(s.ready_at for s in fleet.starting) == [210.0, 450.0]
    assert all(s.spot for s in fleet.starting) and fleet.warm_spot == 0
    assert fleet.billed() == (0, 4, 0)
    fleet.advance(330.0)
    assert fleet.warm_spot == 1 and fleet.billed() == (0, 3, 1)


def test_each_capacity_type_moves_to_its_own_target() -> None:
    setup = setup_of(series([0.0] * 100))
    fleet = Fleet(setup, np.random.default_rng(0), idle_ttl_s=0.0, ready_spot=5, ready_od=2)
    fleet.apply(Target(6, spot=4), 0.0)  # only spot is above its share
    assert (fleet.ready_spot, fleet.ready_od) == (4, 2)
    fleet.apply(Target(4, spot=3), 0.0)  # both are: the dearer on-demand one and a spot one go
    assert (fleet.ready_spot, fleet.ready_od) == (3, 1)
    # an on-demand replica standing for a lost spot one: the spot replacement starts, and the on-demand one
    # stays until it serves
    fleet = Fleet(setup, np.random.default_rng(0), idle_ttl_s=0.0, ready_spot=3, ready_od=2)
    fleet.apply(Target(5, spot=4), 0.0)
    assert (fleet.ready_spot, fleet.ready_od, [s.spot for s in fleet.starting]) == (3, 2, [True])
    fleet.advance(420.0)
    fleet.apply(Target(5, spot=4), 420.0)
    assert (fleet.ready_spot, fleet.ready_od, fleet.starting) == (4, 1, [])


# ------------------------------------------------------------------ the CLI


def test_cli_service_trace_json_keys(tmp_path: Path) -> None:
    path = nab_file(tmp_path / "shop.csv", [300.0, 300.0, 900.0, 900.0, 300.0, 300.0] * 4)
    result = CliRunner().invoke(main, ["simulate", "--service-trace", str(path), "--service-strategy", "reactive",
                                       "--service-strategy", "oracle", "--service-strategy", "aws-predictive",
                                       "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data["strategies"]) == {"reactive", "oracle", "aws-predictive"}
    figures = data["strategies"]["reactive"]["services"]["shop"]
    assert {"unserved_request_share", "slo_minutes_missed_share", "cost_usd", "replica_gpu_hours",
            "ttc_p95_s"} <= set(figures)
    assert data["strategies"]["oracle"]["services"]["shop"]["unserved_request_share"] == 0.0
    mapping = data["services"]["shop"]
    assert mapping["target_utilisation"] == 0.7 and mapping["boot_s"] == 300.0 and mapping["replica_start_s"] == 120.0


def test_cli_strategy_names_with_a_service_form_run_on_the_services(tmp_path: Path) -> None:
    path = nab_file(tmp_path / "shop.csv", [300.0, 900.0] * 6)
    result = CliRunner().invoke(main, ["simulate", "--service-trace", str(path), "--strategy", "karpenter",
                                       "--strategy", "burst-clairvoyant", "--strategy", "karpenter-ml",
                                       "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert list(data["strategies"]) == ["karpenter", "burst-clairvoyant"]
    assert all("shop" in data["strategies"][n]["services"] for n in data["strategies"])
    assert set(data["services_not_run"]) == {"karpenter-ml"}
    refused = CliRunner().invoke(main, ["simulate", "--service-trace", str(path), "--service-strategy", "nope"])
    assert refused.exit_code == 2 and "'nope' is not one of" in refused.output


def test_cli_services_beside_a_batch_trace_share_the_strategy_objects(tmp_path: Path) -> None:
    jobs = tmp_path / "tiny.csv"
    jobs.write_text("job_id,submit_time,duration_s,gpus,tenant\na,2026-03-02T12:00:00Z,3600,8,t\n")
    rates = nab_file(tmp_path / "shop.csv", [300.0, 900.0] * 6)
    result = CliRunner().invoke(main, ["simulate", "--trace", str(jobs), "--service-trace", str(rates),
                                       "--strategy", "reactive", "--strategy", "oracle", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for name in ("reactive", "oracle"):
        # the batch figures and the service figures in one object per strategy
        assert data["strategies"][name]["jobs_completed"] == 1
        assert "shop" in data["strategies"][name]["services"]
    assert "trace" in data and "shop" in data["services"]


def test_cli_needs_a_trace_of_some_kind() -> None:
    result = CliRunner().invoke(main, ["simulate"])
    assert result.exit_code != 0 and "--service-trace" in result.output


def test_service_config_overrides_the_mapping_and_reports_bad_entries(tmp_path: Path) -> None:
    path = nab_file(tmp_path / "shop.csv", [300.0] * 24)
    config = tmp_path / "services.yaml"
    config.write_text("services:\n  - name: shop\n    gpu_model: A100\n    requests_per_s: 2.0\n"
                      "    max_replicas: 9\n    ready_within: 2m\n    unserved_request_cost: 0.01\n")
    (setup,) = service_setups([load_rate_series(path)], read_service_config(config))
    assert setup.capacity_rps == 2.0 and setup.service.max_replicas == 9 and setup.source == "--service-config"
    config.write_text("services:\n  - name: shop\n    gpu_model: A100\n    requests_per_s: -2\n"
                      "    max_replicas: 9\n    ready_within: 2m\n    unserved_request_cost: 0.01\n")
    with pytest.raises(PolicyValidationError) as err:
        read_service_config(config)
    assert any(e.line == 4 and "requests_per_s" in e.field for e in err.value.errors)
    result = CliRunner().invoke(main, ["simulate", "--service-trace", str(path), "--service-config", str(config)])
    assert result.exit_code != 0 and "services.yaml:4" in result.output


# ------------------------------------------------------------------ end to end


def _daily_surge(days: int, step_s: int = 300) -> list[float]:
    """A rate of 2 req/s with a daily step to 12 req/s from 09:00 to 11:00."""
    per_day = 86400 // step_s
    out = []
    for k in range(days * per_day):
        hour = (k % per_day) * step_s / 3600
        out.append((12.0 if 9 <= hour < 11 else 2.0) * step_s)
    return out


def _same_time_yesterday(times: list[datetime], values: list[float], now: datetime,
                         horizon_s: float) -> tuple[tuple[datetime, ...], dict[float, tuple[float, ...]]]:
    step = (times[1] - times[0]).total_seconds()
    k0 = int((now - times[0]).total_seconds() // step)
    at = tuple(times[0] + timedelta(seconds=step * k) for k in range(k0, k0 + int(horizon_s // step)))
    lag = int(86400 // step)
    path = tuple(values[k - lag] for k in range(k0, k0 + len(at)))
    return at, {q: path for q in (0.1, 0.5, 0.9, 0.99)}


def test_burst_with_pools_serves_a_step_surge_that_reactive_misses() -> None:
    counts = _daily_surge(3)
    s = series(counts, step_s=300, start=2 * 288, name="surge")
    setup = setup_of(s, capacity=1.0, target=0.7)
    track = build_track(s, setup.service, forecaster=_same_time_yesterday)
    assert isinstance(track, ForecastTrack) and track.at(s.window_start + timedelta(hours=8)) is not None
    burst = metrics(setup, replay(setup, Burst(setup, track, pools=True)))
    reactive = metrics(setup, replay(setup, Hpa(setup, initial_replicas(setup))))
    surge = 2 * 3600 * 12.0
    # reactive leaves most of the surge's first minutes unserved while its nodes boot; burst started them ahead
    assert reactive.unserved_request_share * (s.window().sum()) > 0.02 * surge
    assert burst.unserved_request_share < 0.1 * reactive.unserved_request_share
    assert burst.ttc_p95_s == 0.0 < reactive.ttc_p95_s


class _NoStoppedSpot:
    """burst's decisions with every warm node kept on demand (the fleet before stopped spot nodes)."""

    def __init__(self, inner: Burst) -> None:
        self.inner = inner
        self.idle_ttl_s = inner.idle_ttl_s

    def decide(self, obs: Observation) -> Target | None:
        target = self.inner.decide(obs)
        return None if target is None else dataclasses.replace(target, warm_spot=0)


def test_spot_replicas_of_a_surge_wake_from_stopped_spot_nodes() -> None:
    counts = _daily_surge(3)
    s = series(counts, step_s=300, start=2 * 288, name="surge")
    setup = setup_of(s, capacity=1.0, target=0.7, spot_hazard_per_h=0.0)
    setup = dataclasses.replace(setup, service=dataclasses.replace(setup.service, spot_share=0.8))
    # no forecast: the surge is met as it comes, from the warm pool the past surges sized
    woken = replay(setup, Burst(setup, None, pools=True))
    cold = replay(setup, _NoStoppedSpot(Burst(setup, None, pools=True)))
    # the surge's spot replicas wake in 60 s + load where they booted cold in 300 s + load: fewer unserved
    assert metrics(setup, woken).unserved_request_share < metrics(setup, cold).unserved_request_share
    assert woken.spot_nodes.sum() > 0.5 * (woken.spot_nodes.sum() + woken.od_nodes.sum())  # still mostly on spot


def test_the_clairvoyant_track_is_the_true_future_from_the_step_in_progress() -> None:
    counts = [float(k) for k in range(600)]
    s = series(counts, step_s=300, start=300, name="ramp")
    track = clairvoyant_track(s, setup_of(s).service)
    now = s.window_start + timedelta(seconds=3 * 300 + 100)
    f = track.at(now)
    assert f is not None and f.at[0] == s.window_start + timedelta(seconds=3 * 300)
    # the step in progress (303) and the next eleven, as rates; every quantile the same
    assert [round(v * 300) for v in f.quantiles[0.5]] == list(range(303, 315))
    assert f.quantiles[0.1] == f.quantiles[0.99] and f.events_included


def test_burst_clairvoyant_serves_a_surge_no_history_foretells() -> None:
    counts = [30.0] * 288 * 2 + [30.0] * 100 + [600.0] * 24 + [30.0] * 164
    s = series(counts, step_s=300, start=2 * 288, name="news")
    setup = setup_of(s, capacity=1.0, target=0.7)
    seer = run_service("burst-clairvoyant", setup)
    blind = run_service("burst-no-forecast", setup)
    # the surge was never seen before: without the future burst reacts after it starts and loses at least the
    # surge's first minute above what the replicas held for 30 requests a step serve (2 req/s x 60 s); with it,
    # the replicas are ready when it starts
    assert blind.unserved_request_share * blind.requests > 2.0 * 60
    assert seer.unserved_request_share == 0.0


def test_static_peak_and_oracle_through_the_runner(tmp_path: Path) -> None:
    path = nab_file(tmp_path / "shop.csv", [300.0, 300.0, 1500.0, 300.0] * 3)
    (setup,) = service_setups([load_rate_series(path)])
    oracle = run_service("oracle", setup)
    peak = run_service("static-peak", setup)
    assert oracle.unserved_request_share == 0.0 and oracle.ttc_p95_s == 0.0
    assert peak.unserved_request_share == 0.0 and peak.slo_minutes_missed_share == 0.0
    assert peak.cost_usd > oracle.cost_usd
    assert isinstance(Static(3).decide, object) and math.isfinite(peak.cost_usd)


def test_unserved_requests_are_put_down_to_a_cause() -> None:
    # capacity 1 req/s; 8 ticks at 1 req/s then 3 req/s (15 then 45 a tick)
    s = series([15.0] * 4 + [45.0] * 4)
    setup = setup_of(s)
    serving = np.array([1, 1, 1, 1, 1, 2, 1, 3])
    starting = np.array([0, 0, 0, 0, 2, 0, 0, 0])
    run = Replay(serving, serving, np.zeros(8, dtype=int), np.zeros(8, dtype=int), 0, 0, starting)
    # tick 4 loses 30 while replicas start; tick 5 loses 15 with none starting and never more serving before;
    # tick 6 loses 30 after tick 5 served 2: scale-in too early
    causes = unserved_causes(setup, run)
    assert causes == pytest.approx({"boots too slow": 30 / 75, "scale-in too early": 30 / 75, "not asked for": 15 / 75})


def test_cli_report_writes_a_services_page(tmp_path: Path) -> None:
    path = nab_file(tmp_path / "shop.csv", [300.0, 900.0] * 6)
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["simulate", "--service-trace", str(path), "--strategy", "reactive",
                                       "--strategy", "oracle", "--report", str(out)])
    assert result.exit_code == 0, result.output
    page = (out / "services.html").read_text()
    assert "service shop" in page and 'data-key="unserved_request_share"' in page and "data:image/png" in page
