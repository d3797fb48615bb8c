"""A service's record of past surges and the warm nodes it is worth (burst.planner.surges), on cases computed
by hand, and the planner's hot capacity taking them (burst.planner.services.plan_service)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from burst.model import RateForecast, Service
from burst.planner.services import ServiceState, plan_service
from burst.planner.surges import SurgeProfile, warm_nodes_for_surges

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def test_the_profile_keeps_the_peak_over_the_next_window_against_the_level_before() -> None:
    # steps of 60 s, a window of 60 s (the next step), levels over 120 s (the step and the one before it);
    # mean 3, floor 0.15
    profile = SurgeProfile.of([2.0, 2.0, 2.0, 8.0, 2.0, 2.0], step_s=60, window_s=60, level_s=120)
    # step 1: next 2 / median(2, 2) = 1; step 2: 8 / 2 = 4; step 3: 2 / max(median(2, 8), 8) = 0.25 (inside
    # the surge, measured from its rate); step 4: 2 / max(median(8, 2), 2) = 0.4
    assert profile.ratios == (0.25, 0.4, 1.0, 4.0)
    assert profile.level_rps == 2.0  # the median of the last 120 s
    assert profile.ratio_exceeded(0.0) == 4.0  # rarer than any case seen: the highest seen
    assert profile.ratio_exceeded(0.25) == 4.0  # exceeded in one case of four
    assert profile.ratio_exceeded(0.5) == 1.0
    assert profile.ratio_exceeded(1.0) == 0.25


def test_a_surge_from_silence_is_measured_against_the_floor() -> None:
    profile = SurgeProfile.of([0.0, 0.0, 10.0, 10.0], step_s=60, window_s=60, level_s=60)  # mean 5: floor 0.25
    assert profile.ratios == (0.0, 1.0, 40.0)  # 0 / 0.25, 10 / 0.25 (not 10 / 0), 10 / 10
    assert profile.level_rps == 10.0


def test_a_history_shorter_than_a_level_span_and_a_window_gives_no_record() -> None:
    profile = SurgeProfile.of([1.0, 2.0, 3.0], step_s=60, window_s=120, level_s=120)
    assert profile.ratios == () and profile.ratio_exceeded(0.1) is None
    pool = warm_nodes_for_surges(profile, replicas=1, capacity_rps=5.0, warm_node_hour_usd=0.05, saved_s=240.0,
                                 unserved_request_cost_usd=0.001)
    assert pool.warm_nodes == 0 and "no record" in pool.reason


# 100 windows: 90 calm (x1 the day's level), 9 at x3, 1 at x10; today's level 4 req/s
RECORD = SurgeProfile(window_s=420.0, level_rps=4.0, ratios=tuple([1.0] * 90 + [3.0] * 9 + [10.0]))


def test_the_pool_covers_the_surges_whose_share_pays_for_a_warm_node() -> None:
    # a warm node: $0.06/h, $0.007 over a 420 s window; it saves 240 s x 5 req/s x $0.001 = $1.2 when used:
    # share 0.007 / 1.2 = 0.58% -> the ratio exceeded in 0.58% of windows: index floor(0.9942 x 100) = 99 -> x10
    pool = warm_nodes_for_surges(RECORD, replicas=1, capacity_rps=5.0, warm_node_hour_usd=0.06,
                                 saved_s=240.0, unserved_request_cost_usd=0.001)
    assert pool.warm_nodes == 7  # 4 x 10 = 40 req/s -> 8 replicas at full capacity, 7 beyond 1
    assert "x10" in pool.reason and "8 replicas at full capacity, 7 beyond 1" in pool.reason
    # a warm node 10 x dearer ($0.07 per window, 5.8% of its saving): the x3 surges only
    dear = warm_nodes_for_surges(RECORD, replicas=1, capacity_rps=5.0, warm_node_hour_usd=0.6,
                                 saved_s=240.0, unserved_request_cost_usd=0.001)
    assert dear.warm_nodes == 2  # 12 req/s -> 3 replicas, 2 beyond 1


def test_no_saving_keeps_no_pool_for_surges_and_planned_replicas_count_against_it() -> None:
    for saved_s, cost in ((0.0, 0.001), (240.0, 0.0)):
        pool = warm_nodes_for_surges(RECORD, replicas=1, capacity_rps=5.0, warm_node_hour_usd=0.06,
                                     saved_s=saved_s, unserved_request_cost_usd=cost)
        assert pool.warm_nodes == 0
    covered = warm_nodes_for_surges(RECORD, replicas=9, capacity_rps=5.0, warm_node_hour_usd=0.06, saved_s=240.0,
                                    unserved_request_cost_usd=0.001)
    assert covered.warm_nodes == 0  # 8 replicas cover the surge: a surge in progress is not multiplied again


def state(**fields: Any) -> ServiceState:
    svc = Service(tenant="shop", name="recs", gpu_model="A100", max_replicas=10, ready_within_s=600.0,
                  unserved_request_cost_usd=0.001, requests_per_s=5.0)
    base: dict[str, Any] = dict(service=svc, now=T0, observed_rps=4.0, ready=1, starting=0, warm_nodes=0,
                                capacity_rps=5.0, replica_hour_usd=3.0, spot_replica_hour_usd=None, boot_s=300.0,
                                wake_s=60.0, forecast=None)
    base.update(fields)
    return ServiceState(**base)


def test_the_planner_keeps_warm_nodes_for_past_surges_beyond_the_forecast_margin() -> None:
    plain = plan_service(state())  # no forecast: a tenth of 2 replicas, at least 1
    assert (plain.replicas, plain.warm_nodes) == (2, 1)
    surged = plan_service(state(surges=RECORD, warm_node_hour_usd=0.06))
    # 40 req/s -> 8 at full capacity, 6 beyond the 2 replicas; capped by max_replicas - 2 = 8: 6 warm nodes
    assert (surged.replicas, surged.warm_nodes, surged.standby) == (2, 6, 0)
    line = next(r for r in surged.reasons if r.startswith("hot capacity:"))
    assert "surges: 0.58% of past 420 s windows rose over x10 the day's level" in line and "so 6 warm nodes" in line
    capped = plan_service(state(service=Service(tenant="shop", name="recs", gpu_model="A100", max_replicas=5,
                                                ready_within_s=600.0, unserved_request_cost_usd=0.001,
                                                requests_per_s=5.0), surges=RECORD, warm_node_hour_usd=0.06))
    assert capped.warm_nodes == 3  # max_replicas 5 - 2 replicas


def test_surges_never_turn_into_standby_replicas_or_pools_when_pools_are_off() -> None:
    late = plan_service(state(surges=RECORD, warm_node_hour_usd=0.06, wake_s=600.0))  # a warm node is late too
    assert late.warm_nodes == 0 and late.standby == 1  # the no-forecast margin only, running
    off = plan_service(state(surges=RECORD, warm_node_hour_usd=0.06, pools=False))
    assert off.warm_nodes == 0 and off.standby == 0


def test_warm_nodes_shorten_the_lead_only_while_they_cover_the_cold_leads_need() -> None:
    # P90 (read at quantile 0.81): 4 req/s at 2 minutes (within the 180 s wake lead), 30 at 6 (within the 420 s
    # cold lead only): 1 replica at full capacity over the wake lead, 6 over the cold one
    steps = tuple(T0 + timedelta(minutes=m) for m in (2, 6))
    fc = RateForecast(at=steps, quantiles={0.5: (3.0, 3.0), 0.9: (4.0, 30.0), 0.99: (5.0, 40.0)})
    covered = plan_service(state(observed_rps=3.0, forecast=fc, warm_nodes=5))  # 6 <= 1 + 5: wake when needed
    assert covered.need == 1 and "over the 180 s lead (wake 60 s + load 120 s)" in covered.reasons[1]
    short = plan_service(state(observed_rps=3.0, forecast=fc, warm_nodes=2))  # 6 > 1 + 2: start a cold lead ahead
    assert short.need == 6
    assert "over the 420 s lead (boot 300 s + load 120 s)" in short.reasons[1]
    assert "more than 1 over the 180 s wake lead + 2 warm nodes" in short.reasons[1]
