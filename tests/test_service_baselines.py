"""The service baselines' rules (burst.sim.service_strategies), one test per rule, on hand-computed cases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from burst.model import Service
from burst.sim.service_engine import Fleet, Observation, Target, metrics, replay
from burst.sim.service_setup import ServiceSetup
from burst.sim.service_strategies import (
    AwsPredictive,
    Hpa,
    Overprovision,
    Static,
    hour_of_week_forecast,
    oracle_replay,
    overprovision_placeholders,
    peak_replicas,
)
from burst.sim.service_traces import TICK_S, RateSeries

T0 = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday, 00:00


def setup_of(counts: list[float], step_s: int = TICK_S, start: int = 0, max_replicas: int = 100) -> ServiceSetup:
    """Capacity 1 req/s per replica at target 0.5: a rate r needs ceil(2 r) replicas."""
    s = RateSeries("svc", Path("svc.csv"), "nab", step_s, T0, np.asarray(counts, dtype=float), start, len(counts))
    service = Service("t", "svc", "A100", max_replicas, 300.0, 1.0, requests_per_s=1.0, target_utilisation=0.5,
                      min_replicas=1)
    return ServiceSetup(s, service, 1.0, on_demand_usd_h=3.6, spot_usd_h=1.8, warm_node_usd_h=0.036)


def obs(t: float, rate: float, ready: int, starting: int = 0) -> Observation:
    return Observation(t, T0 + timedelta(seconds=t), rate, ready, starting, 0, 0, 0, 0)


# ------------------------------------------------------------------ reactive: the HPA v2 defaults


def test_hpa_tolerance_keeps_the_count_within_ten_percent() -> None:
    hpa = Hpa(setup_of([0.0]), initial=10)
    # 10 pods at 0.5 req/s each is the target: 5.4 req/s is a ratio of 1.08, inside the 10% tolerance
    assert hpa.desired(obs(0, 5.4, ready=10)) == 10
    # 5.6 req/s is 1.12: ceil(10 x 1.12) = 12
    assert hpa.desired(obs(15, 5.6, ready=10)) == 12


def test_hpa_scale_up_is_capped_at_max_of_double_and_four_pods_per_sync() -> None:
    hpa = Hpa(setup_of([0.0]), initial=2)
    assert hpa.desired(obs(0, 50.0, ready=2)) == 6  # 2 + max(100% of 2, 4)
    big = Hpa(setup_of([0.0]), initial=10)
    assert big.desired(obs(0, 50.0, ready=10)) == 20  # 10 + max(100% of 10, 4)
    assert big.desired(obs(15, 50.0, ready=10, starting=10)) == 40  # capped again from 20; unready pods at 0 usage


def test_hpa_unready_pods_count_as_zero_on_scale_up() -> None:
    hpa = Hpa(setup_of([0.0]), initial=10)
    # 4 ready pods see 4 req/s (ratio 2) but 6 more are starting: over all 10 the ratio is 0.8, not a scale-up
    assert hpa.desired(obs(0, 4.0, ready=4, starting=6)) == 10


def test_hpa_scale_down_waits_out_the_300_s_stabilisation_window() -> None:
    hpa = Hpa(setup_of([0.0]), initial=10)
    assert hpa.desired(obs(0, 5.0, ready=10)) == 10
    # the rate halves: each sync recommends 5, but the highest recommendation of the last 300 s is still 10
    for t in range(15, 300, 15):
        assert hpa.desired(obs(t, 2.5, ready=10)) == 10
    assert hpa.desired(obs(315, 2.5, ready=10)) == 5


def test_reactive_nodes_boot_cold_and_linger_ten_minutes() -> None:
    hpa = Hpa(setup_of([0.0]), initial=1)
    assert hpa.idle_ttl_s == 600.0
    setup = setup_of([15.0] * 4 + [150.0] * 60)  # 1 req/s, then 10 req/s (20 replicas)
    run = replay(setup, Hpa(setup, initial=2))
    # the surge is seen one tick later; cold boot + model load: 420 s before the first new replica serves
    first = int(np.argmax(run.serving > 2))
    assert first * TICK_S == 4 * TICK_S + TICK_S + 420


# ------------------------------------------------------------------ reactive-overprovision


def test_overprovision_placeholders_are_ten_percent_of_the_first_week_p95() -> None:
    # the first week needs 20 replicas (10 req/s) at its P95; the second week 100: only the first counts
    week = 7 * 86400 // TICK_S
    setup = setup_of([150.0] * week + [750.0] * week)
    assert overprovision_placeholders(setup) == 2


def test_overprovision_keeps_booted_nodes_so_a_replica_only_loads_its_model() -> None:
    setup = setup_of([15.0] * 200)
    fleet = Fleet(setup, np.random.default_rng(0), idle_ttl_s=600.0, ready_od=1)
    ctl = Overprovision(setup, initial=1, placeholders=2)
    fleet.apply(Target(1, idle_nodes=ctl.placeholders), 0.0)
    fleet.advance(300.0)  # the placeholder nodes are booted
    assert fleet.placeholders == 2
    fleet.apply(Target(2, idle_nodes=2), 300.0)
    assert [s.ready_at for s in fleet.starting] == [420.0]  # model load only
    # the displaced placeholder pod goes pending: a node boots for it
    assert fleet.placeholders == 1 and fleet.placeholder_prep == [600.0]


# ------------------------------------------------------------------ aws-predictive


def test_aws_forecast_is_the_mean_of_the_same_hour_of_week_over_two_weeks() -> None:
    hour = T0 + timedelta(days=14, hours=9)
    hourly = {hour - timedelta(days=7): 10.0, hour - timedelta(days=14): 20.0, hour - timedelta(days=1): 99.0}
    assert hour_of_week_forecast(hourly, hour, T0) == 15.0
    # one week of history: that week's hour alone
    assert hour_of_week_forecast({hour - timedelta(days=7): 10.0}, hour, T0) == 10.0
    # under a week: the same hour of the day over the days there are
    short = T0 + timedelta(days=3, hours=9)
    assert hour_of_week_forecast({short - timedelta(days=1): 4.0, short - timedelta(days=2): 8.0}, short, T0) == 6.0
    # under 24 h of history: no forecast
    assert hour_of_week_forecast({}, T0 + timedelta(hours=20), T0) is None


def test_aws_launches_a_scheduling_buffer_ahead_of_the_hour() -> None:
    # two weeks and a day of 5-minute history: 1 req/s, except 09:00-10:00 at 10 req/s
    per_hour = 12
    counts = [(10.0 if (k // per_hour) % 24 == 9 else 1.0) * 300 for k in range(15 * 24 * per_hour)]
    setup = setup_of(counts, step_s=300, start=14 * 24 * per_hour + 1)
    aws = AwsPredictive(setup, initial=2)
    nine = T0 + timedelta(days=14, hours=9)
    assert aws.predicted(nine - timedelta(seconds=301)) == 2  # the 08:00 hour's forecast, 1 req/s
    assert aws.predicted(nine - timedelta(seconds=300)) == 20  # from 08:55: the 09:00 hour's, 10 req/s


def test_aws_target_tracking_scales_out_after_three_minutes_above_target() -> None:
    setup = setup_of([15.0] * 10)
    aws = AwsPredictive(setup, initial=2)
    aws.history_start = T0  # no history: target tracking alone
    targets = [aws.decide(obs(60.0 * m, 5.0, ready=2)) for m in range(3)]
    assert [t.replicas for t in targets if t] == [2, 2, 10]


# ------------------------------------------------------------------ static-peak and oracle


def test_static_peak_holds_the_window_peak() -> None:
    setup = setup_of([15.0, 15.0, 75.0, 15.0])  # peak 5 req/s: 10 replicas
    assert peak_replicas(setup) == 10
    run = replay(setup, Static(10), initial=10)
    assert run.serving.tolist() == [10, 10, 10, 10]


def test_oracle_serves_the_need_and_pays_each_boot_before() -> None:
    # one minute at 1 req/s (2 replicas), one at 2 req/s (4 replicas), one at 1 req/s
    setup = setup_of([15.0] * 4 + [30.0] * 4 + [15.0] * 4)
    run = oracle_replay(setup)
    assert run.serving.tolist() == [2] * 4 + [4] * 4 + [2] * 4
    m = metrics(setup, run)
    assert m.unserved_request_share == 0.0 and m.slo_minutes_missed_share == 0.0
    # 2 added replicas each pay boot 300 s + load 120 s = 28 ticks before they serve (all before the window here)
    lead_ticks = 28
    boots_in_window = 2 * 4  # the 4 ticks before tick 4 carry both boots
    assert run.od_nodes.sum() == run.serving.sum() + boots_in_window
    assert lead_ticks > 4 and m.cost_usd == pytest.approx((32 + boots_in_window) * TICK_S / 3600 * 3.6)
