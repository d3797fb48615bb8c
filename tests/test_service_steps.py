"""The planner's decision for one service (burst.planner.services.plan_service) on small cases computed by hand.

Unless a test says otherwise: one replica serves 5 req/s, run at 70% (3.5 req/s); a replica-hour costs $3;
an unserved request $0.001, so the forecast is read at P90 (5 x 0.7 x 3600 x 0.001 = 12.6 against 3:
quantile 0.81), at full capacity (5 req/s), beside its median at 70%; a cold node boots in 300 s, a warm one
wakes in 60 s, a model loads in 120 s.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from burst.model import RateForecast, Service, ServiceEvent
from burst.planner.service_sizing import forecast_level
from burst.planner.services import (
    Need,
    RecentNeeds,
    ServiceDecision,
    ServiceState,
    plan_service,
    surge_margin,
)

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


def service(**fields: Any) -> Service:
    base: dict[str, Any] = dict(tenant="shop", name="recs", gpu_model="A100", max_replicas=10, ready_within_s=600.0,
                                unserved_request_cost_usd=0.001, requests_per_s=5.0)
    base.update(fields)
    return Service(**base)


def forecast(minutes: tuple[int, ...], p50: tuple[float, ...], p90: tuple[float, ...], p99: tuple[float, ...],
             **kw: Any) -> RateForecast:
    return RateForecast(at=tuple(T0 + m * MIN for m in minutes), quantiles={0.5: p50, 0.9: p90, 0.99: p99}, **kw)


FLAT = forecast((5, 10, 15), (3.0, 3.0, 3.0), (7.0, 10.5, 20.0), (9.0, 14.0, 30.0))
"""P50 3 req/s (1 replica at 70%); P90 7 req/s (2 at full capacity) within a 420 s cold lead, 10.5 (3) by 10
minutes; P99 9 (2) within the cold lead."""


def state(svc: Service | None = None, **fields: Any) -> ServiceState:
    base: dict[str, Any] = dict(service=svc or service(), now=T0, observed_rps=0.0, ready=0, starting=0, warm_nodes=0,
                                capacity_rps=5.0, replica_hour_usd=3.0, spot_replica_hour_usd=None, boot_s=300.0,
                                wake_s=60.0, forecast=None)
    base.update(fields)
    return ServiceState(**base)


def reason(decision: ServiceDecision, rule: str) -> str:
    lines = [r for r in decision.reasons if r.startswith(rule + ":")]
    assert len(lines) == 1, decision.reasons
    return lines[0]


# ------------------------------------------------------------------ now


def test_now_sizes_the_observed_rate() -> None:
    d = plan_service(state(observed_rps=7.1))  # 7.1 / 3.5 = 2.03
    assert d.replicas == 3
    assert "7.1 req/s observed / (5 req/s x 0.7) -> 3 replicas" in reason(d, "now")
    assert reason(d, "ahead") == "ahead: skipped, no forecast"
    assert reason(d, "replicas") == "replicas: now = 3, within min_replicas .. max_replicas -> 3"


# ------------------------------------------------------------------ ahead


def test_ahead_reads_the_cost_chosen_quantile_over_the_lead() -> None:
    d = plan_service(state(observed_rps=3.0, forecast=FLAT))  # now: 1; ahead: P50 3 -> 1 at 70%, P90 7 -> 2 at 100%
    assert d.replicas == 2
    line = reason(d, "ahead")
    assert line.startswith("ahead: over the 420 s lead (boot 300 s + load 120 s), P50 peaks at 3 req/s -> 1 "
                           "replicas at the 0.7 target, P90 (quantile 0.808")
    assert line.endswith("at 7 req/s -> 2 at full capacity -> 2 replicas")
    # an unserved request at $0.01: 126 against 3, quantile 0.977 -> P99; a 600 s boot reaches its 14 req/s -> 3
    dear = plan_service(state(service(unserved_request_cost_usd=0.01), observed_rps=3.0, forecast=FLAT, boot_s=600.0))
    assert dear.replicas == 3 and "P99 (quantile 0.977" in reason(dear, "ahead")
    # a nearly free unserved request: the floor, P50 3 req/s -> 1 replica either way
    cheap = plan_service(state(service(unserved_request_cost_usd=0.00001), observed_rps=3.0, forecast=FLAT))
    assert cheap.replicas == 1 and "P50 (quantile 0.5" in reason(cheap, "ahead")


def test_ahead_holds_the_median_at_the_target_utilisation() -> None:
    # P50 8 req/s needs 3 replicas at 70% (8 / 3.5 = 2.3); P90 9 needs only 2 at full capacity: the median binds,
    # and the headroom of the target is not added again on top of the P90
    narrow = forecast((5,), (8.0,), (9.0,), (10.0,))
    d = plan_service(state(observed_rps=3.0, forecast=narrow))
    assert d.replicas == 3
    line = reason(d, "ahead")
    assert "P50 peaks at 8 req/s -> 3 replicas at the 0.7 target" in line and "at 9 req/s -> 2 at full capacity" in line


def test_the_lead_window_is_a_cold_boot_or_a_warm_wake() -> None:
    # a 600 s boot: the 720 s lead reaches the P90 of 10.5 at 10 minutes -> 3 replicas
    cold = plan_service(state(observed_rps=3.0, forecast=FLAT, boot_s=600.0))
    assert cold.replicas == 3 and "over the 720 s lead" in reason(cold, "ahead")
    # a warm node held: wake 60 s + load 120 s; the window ends before the first instant: its 7 -> 2 replicas
    warm = plan_service(state(observed_rps=3.0, forecast=FLAT, boot_s=600.0, warm_nodes=1))
    assert warm.replicas == 2 and "over the 180 s lead (wake 60 s + load 120 s)" in reason(warm, "ahead")


def test_a_forecast_ending_before_now_is_skipped() -> None:
    stale = forecast((-10, -5), (30.0, 30.0), (40.0, 40.0), (50.0, 50.0))
    d = plan_service(state(observed_rps=3.0, forecast=stale))
    assert d.replicas == 1 and reason(d, "ahead") == "ahead: skipped, the forecast has no instant after now"


WIDE = forecast((5, 10, 15), (3.0, 3.0, 3.0), (15.0, 15.0, 15.0), (20.0, 20.0, 20.0))
"""P50 3, P90 15, P99 20 req/s: a wide spread."""


def test_a_surge_the_forecast_missed_raises_it_to_the_rate_seen() -> None:
    # seen 20 req/s -> 6 now; the forecast's P50 at its first instant is 3 < 0.5 x 20: raised by 17,
    # so P50 20 -> 6 at 70% and P90 15 + 17 = 32 req/s -> 7 at full capacity (unraised it would ask for 3)
    d = plan_service(state(observed_rps=20.0, forecast=WIDE))
    assert d.replicas == 7
    line = reason(d, "ahead")
    assert "at 32 req/s -> 7 at full capacity" in line and "a surge it missed" in line and "raised by 17 req/s" in line
    # the spread is raised too: P99 20 + 17 = 37 req/s -> 8 replicas at full capacity, 1 beyond 7
    assert d.warm_nodes == 1
    # seen 5 req/s is under twice the median: no surge, the forecast stands
    assert "missed" not in reason(plan_service(state(observed_rps=5.0, forecast=FLAT)), "ahead")


def test_a_fall_the_forecast_expects_by_its_next_instant_is_no_missed_surge() -> None:
    # the forecast's median is 20 now and 3 from minute 5 (a promotion ending): seen 20 req/s is what it expected
    # now, so nothing is raised: ahead sizes for the 20 in force now, 6 replicas at 70%, not 20 + 17
    ending = forecast((0, 5, 10), (20.0, 3.0, 3.0), (22.0, 4.0, 4.0), (25.0, 5.0, 5.0))
    d = plan_service(state(observed_rps=20.0, forecast=ending))
    assert "missed" not in reason(d, "ahead") and d.replicas == 6


def test_a_missed_surge_never_pulls_ahead_below_now() -> None:
    # the forecast falls to nothing: raised by 20 - 0.5 = 19.5, yet ahead is held at the now rule's 6
    falling = forecast((1, 5), (0.5, 0.0), (0.5, 0.0), (0.5, 0.0))
    d = plan_service(state(observed_rps=20.0, forecast=falling))
    assert "-> 6 replicas" in reason(d, "ahead") and d.replicas == 6


# ------------------------------------------------------------------ declared events


def promo(start_min: int, multiplier: float, hours: int = 4) -> ServiceEvent:
    start = T0 + start_min * MIN
    return ServiceEvent(start=start, end=start + timedelta(hours=hours), multiplier=multiplier, name="promo")


def test_an_event_starting_now_multiplies_the_observed_rate() -> None:
    d = plan_service(state(service(events=(promo(0, 3.0),)), observed_rps=3.5))  # 3.5 x 3 = 10.5 -> 3
    assert d.replicas == 3 and "x 3 (a declared event's multiplier" in reason(d, "now")


def test_an_event_in_force_all_along_is_not_counted_twice() -> None:
    d = plan_service(state(service(events=(promo(-60, 3.0),)), observed_rps=10.5))  # the minute seen carries it
    assert d.replicas == 3 and "x 3" not in reason(d, "now")


def test_ahead_scales_for_an_event_that_starts_within_the_lead() -> None:
    # the promotion starts at 6 minutes, inside the 420 s lead: P90 7 x 2 = 14 req/s -> 3 replicas, before it starts
    d = plan_service(state(service(events=(promo(6, 2.0),)), observed_rps=3.0, forecast=FLAT))
    assert d.replicas == 3 and "at 14 req/s -> 3 at full capacity" in reason(d, "ahead")
    # one at 8 minutes is beyond the lead: not yet
    assert plan_service(state(service(events=(promo(8, 2.0),)), observed_rps=3.0, forecast=FLAT)).replicas == 2
    # a forecast that already carries the event is not multiplied again
    carried = forecast((5, 10, 15), (3.0, 3.0, 3.0), (7.0, 10.5, 20.0), (9.0, 14.0, 30.0), events_included=True)
    assert plan_service(state(service(events=(promo(6, 2.0),)), observed_rps=3.0, forecast=carried)).replicas == 2


# ------------------------------------------------------------------ scale-in


RISING = forecast((1, 6), (3.0, 20.0), (3.0, 20.0), (3.0, 20.0))
"""A surge at 6 minutes, inside the 420 s lead: 20 req/s -> 6 replicas."""


def test_scale_in_is_held_while_the_forecast_over_the_lead_needs_the_replicas() -> None:
    d = plan_service(state(observed_rps=3.5, ready=6, forecast=RISING))  # now 1, ahead 6
    assert d.replicas == 6
    assert reason(d, "scale-in") == ("scale-in: none, the observed rate needs 1 of the 6 serving or starting but the "
                                     "forecast over the 420 s lead needs 6")


def test_scale_in_steps_down_when_neither_rule_needs_the_replicas() -> None:
    d = plan_service(state(observed_rps=3.5, ready=6, forecast=FLAT))  # now 1, ahead 2: max(1, ceil(0.6)) = 1 a tick
    assert d.replicas == 5
    assert "the observed rate needs 1 and the forecast over the 420 s lead 2" in reason(d, "scale-in")
    assert "= 1 a tick -> 5" in reason(d, "scale-in")
    big = service(max_replicas=30)
    assert plan_service(state(big, observed_rps=3.5, ready=20, forecast=FLAT)).replicas == 18  # ceil(2.0) = 2
    assert plan_service(state(big, observed_rps=3.5, ready=18, starting=3, forecast=FLAT)).replicas == 18  # ceil(2.1)
    assert plan_service(state(observed_rps=3.5, ready=3, forecast=FLAT)).replicas == 2  # never below the need
    assert "no forecast" in reason(plan_service(state(observed_rps=3.5, ready=3)), "scale-in")


def test_scale_in_keeps_the_highest_need_of_the_last_two_minutes() -> None:
    held = plan_service(state(observed_rps=3.5, ready=6, forecast=FLAT, recent_need=6))  # now 1, ahead 2, 6 lately
    assert held.replicas == 6 and held.need == 2
    assert reason(held, "scale-in") == ("scale-in: none, the need was 6 within the last 120 s (scale-down "
                                        "stabilisation), 6 serving or starting")
    partly = plan_service(state(service(max_replicas=30), observed_rps=3.5, ready=20, forecast=FLAT, recent_need=19))
    assert partly.replicas == 19  # one a tick would be 18: the recent need keeps 19
    recent = RecentNeeds()
    recent.add(T0, 6)
    recent.add(T0 + timedelta(seconds=60), 3)
    assert recent.peak(T0 + timedelta(seconds=120)) == 6  # 6 is 120 s old: still inside the window
    assert recent.peak(T0 + timedelta(seconds=121)) == 3
    assert recent.peak(T0 + timedelta(seconds=181)) == 0


def test_standby_and_hedge_replicas_are_not_counted_against_the_need() -> None:
    # 9 ready, 2 of them standby and 1 a spot hedge: 6 serve the need, which the forecast keeps
    d = plan_service(state(observed_rps=3.5, ready=9, standby=2, hedge_running=1, forecast=RISING))
    assert d.replicas == 6 and "of the 6 serving or starting" in reason(d, "scale-in")


# ------------------------------------------------------------------ hot capacity


SPREAD = forecast((5, 10), (3.0, 3.0), (7.0, 7.0), (17.5, 17.5))
"""P90 7 -> 2 replicas; P99 17.5 -> 4 replicas, both at full capacity: a spread of 2."""


def test_warm_nodes_hold_the_forecast_spread_over_the_lead() -> None:
    d = plan_service(state(observed_rps=3.0, forecast=SPREAD))
    assert (d.replicas, d.warm_nodes, d.standby) == (2, 2, 0)
    line = reason(d, "hot capacity")
    assert "P99 peaks at 17.5 req/s over the 420 s cold lead" in line
    assert "-> 4 replicas at full capacity, 2 beyond 2" in line and "so 2 warm nodes" in line
    capped = plan_service(state(service(max_replicas=3), observed_rps=3.0, forecast=SPREAD))
    assert capped.warm_nodes == 1 and "capped at max_replicas - replicas = 1" in reason(capped, "hot capacity")
    # no spread above the need: none
    assert plan_service(state(observed_rps=3.0, forecast=forecast((5,), (3.0,), (7.0,), (7.0,)))).warm_nodes == 0


def test_a_priced_warm_node_reads_the_spread_at_the_quantile_it_is_worth() -> None:
    """A warm node made for the cold lead pays a boot at $3 a replica-hour and the lead's disk at $0.06 an hour;
    it saves (boot - wake) s x 5 req/s of requests when a surge uses it. The margin is read at 1 - cost / saving,
    never below the level the ahead rule reads (P90 at these prices)."""
    ahead = Need(2, 3.0, "")
    # $0.001 a request: $0.257 against $1.2 saved, 0.786, below the ahead rule's P90 (quantile 0.81): P90, 7 req/s
    cheap = plan_service(state(observed_rps=3.0, forecast=SPREAD, warm_node_hour_usd=0.06))
    assert (cheap.replicas, cheap.warm_nodes) == (2, 0)
    assert ("P90 at quantile 0.9 (a warm node's $0.257 to make and hold over the lead against $1.2 saved when a "
            "surge uses it, at least the ahead rule's P90) peaks at 7 req/s") in reason(cheap, "hot capacity")
    # a 600 s boot, an instant wake, $0.002 a request (ahead: 25.2 / 28.2 = 0.894, P90): $0.5 + $0.012 against
    # $6 saved, 0.9147, between P90 (7) and P99 (40): 7 + 0.163 x 33 = 12.38 req/s -> 3 replicas, 1 beyond 2
    wide = forecast((5, 10), (3.0, 3.0), (7.0, 7.0), (40.0, 40.0))
    between = state(service(unserved_request_cost_usd=0.002), observed_rps=3.0, forecast=wide, boot_s=600.0,
                    wake_s=0.0, warm_node_hour_usd=0.06)
    margin, words = surge_margin(between, 2, ahead, warm=True)
    assert margin == 1 and "P90..P99 at quantile 0.915" in words and "peaks at 12.38 req/s" in words
    # no saving (requests free): the ahead rule's level, P50 3 req/s, nothing beyond 2 (the top would give 6 more)
    free = dataclasses.replace(between, service=service(unserved_request_cost_usd=0.0))
    assert surge_margin(free, 2, ahead, warm=True)[0] == 0
    # standby replicas, or no price for a warm node: the top quantile, 40 req/s -> 8, 6 beyond 2
    assert surge_margin(between, 2, ahead, warm=False)[0] == 6
    assert surge_margin(dataclasses.replace(between, warm_node_hour_usd=None), 2, ahead, warm=True)[0] == 6


def test_without_a_forecast_a_tenth_is_kept_warm_while_there_is_demand() -> None:
    assert plan_service(state(observed_rps=7.1)).warm_nodes == 1  # 3 replicas: max(1, ceil(0.3))
    assert plan_service(state(service(max_replicas=30), observed_rps=70.0)).warm_nodes == 2  # 20: ceil(2.0)
    idle = plan_service(state())
    assert idle.warm_nodes == 0 and "no requests" in reason(idle, "hot capacity")
    assert plan_service(state(service(min_replicas=2))).warm_nodes == 0  # replicas held by a bound are no demand


def test_standby_replicas_when_even_a_warm_node_is_late() -> None:
    # wake 60 s + load 120 s = 180 s > ready_within 90 s: the spread of 2 runs as standby replicas
    d = plan_service(state(service(ready_within_s=90.0), observed_rps=3.0, forecast=SPREAD))
    assert (d.replicas, d.warm_nodes, d.standby, d.running) == (2, 0, 2, 4)
    assert "180 s > ready_within 90 s, so 2 standby replicas" in reason(d, "hot capacity")


def test_pools_off_keeps_no_hot_capacity() -> None:
    d = plan_service(state(service(ready_within_s=90.0), observed_rps=3.0, forecast=SPREAD, pools=False,
                           boot_s=600.0, warm_nodes=1))
    assert (d.warm_nodes, d.standby) == (0, 0)
    assert reason(d, "hot capacity") == "hot capacity: pools off, no warm nodes and no standby replicas"
    assert "(boot 600 s + load 120 s)" in reason(d, "ahead")  # a warm node left over does not shorten the lead


# ------------------------------------------------------------------ spot


def test_spot_share_split_and_hedge() -> None:
    svc = service(spot_share=0.8)
    d = plan_service(state(svc, observed_rps=21.0, spot_replica_hour_usd=1.0))  # 6 replicas
    # floor(6 x 0.8) = 4 of the need on spot, 2 on demand, hedge ceil(0.4) = 1 beyond it
    assert (d.replicas, d.spot, d.hedge, d.on_demand) == (6, 5, 1, 2)
    assert d.running == 7 + d.standby
    assert "floor(6 x 0.8) = 4 of the need on spot, 2 on demand, + a hedge of 1" in reason(d, "spot")
    big = plan_service(state(service(spot_share=0.8, max_replicas=30), observed_rps=70.0, spot_replica_hour_usd=1.0))
    assert (big.replicas, big.spot, big.hedge) == (20, 18, 2)  # 16 + ceil(1.6)
    # the spot share of the warm pool is kept as stopped spot nodes, for the spot replicas a rise starts
    assert big.warm_nodes == 2 and big.warm_spot == 1  # floor(2 x 0.8)
    assert "1 of the 2 warm nodes stopped spot nodes" in reason(big, "spot")
    assert plan_service(state(observed_rps=70.0, spot_replica_hour_usd=1.0)).warm_spot == 0  # no spot share


def test_spot_lost_to_a_notice_beyond_the_hedge_is_replaced_on_demand() -> None:
    d = plan_service(state(service(spot_share=0.8), observed_rps=21.0, ready=4, spot_ready=1,
                           spot_replica_hour_usd=1.0, spot_lost=3))
    assert (d.spot, d.hedge, d.fallback, d.on_demand) == (5, 1, 2, 4)
    assert "3 lost to a notice, 2 beyond the hedge replaced on demand" in reason(d, "spot")


def test_no_spot_without_a_share_an_offer_or_a_saving() -> None:
    assert reason(plan_service(state(observed_rps=21.0, spot_replica_hour_usd=1.0)), "spot") == \
        "spot: none, the service allows no spot share"
    offered_none = plan_service(state(service(spot_share=0.8), observed_rps=21.0))
    assert offered_none.spot == 0 and reason(offered_none, "spot") == "spot: none, no spot group offered"
    dear = plan_service(state(service(spot_share=0.8), observed_rps=21.0, spot_replica_hour_usd=3.0))
    assert dear.spot == 0 and "no cheaper" in reason(dear, "spot")


def test_the_hedge_stays_within_max_replicas() -> None:
    d = plan_service(state(service(spot_share=0.5, max_replicas=6), observed_rps=21.0, spot_replica_hour_usd=1.0))
    assert (d.replicas, d.spot, d.hedge) == (6, 3, 0)


# ------------------------------------------------------------------ bounds


def test_clamped_to_min_and_max_naming_the_bound() -> None:
    low = plan_service(state(service(min_replicas=2)))
    assert low.replicas == 2 and reason(low, "replicas") == "replicas: now = 0, held at min_replicas 2 -> 2"
    high = plan_service(state(service(max_replicas=4), observed_rps=35.0))  # 10 needed
    assert high.replicas == 4 and reason(high, "replicas") == "replicas: now = 10, held at max_replicas 4 -> 4"
    assert high.warm_nodes == 0  # no room above the bound
    over = plan_service(state(service(max_replicas=4), observed_rps=3.5, ready=8))
    assert over.replicas == 4 and reason(over, "scale-in") == "scale-in: 8 serving or starting, down to max_replicas 4 at once"
    held = plan_service(state(service(min_replicas=3), observed_rps=3.5, ready=3))
    assert held.replicas == 3 and "min_replicas keeps 3" in reason(held, "scale-in")


def test_every_figure_has_its_reason() -> None:
    d = plan_service(state(service(spot_share=0.8), observed_rps=20.0, ready=2, starting=1, forecast=SPREAD,
                           spot_replica_hour_usd=1.0))
    assert [r.split(":")[0] for r in d.reasons] == ["now", "ahead", "replicas", "hot capacity", "spot"]


# ------------------------------------------------------------------ inputs


def test_forecast_levels_are_read_from_what_a_forecast_gives() -> None:
    assert forecast_level(0.81, (0.5, 0.95)) == 0.95
    assert forecast_level(0.99, (0.5, 0.9)) == 0.9  # the highest given when none reaches it
    only = RateForecast(at=(T0 + 5 * MIN,), quantiles={0.5: (3.0,), 0.95: (10.0,)})
    d = plan_service(state(observed_rps=3.0, forecast=only))  # P95 10 -> 2 at full capacity; P95 is also the top
    assert d.replicas == 2 and "P95 (quantile 0.808" in reason(d, "ahead") and d.warm_nodes == 0


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="0.9 has 1 values for 2 instants"):
        RateForecast(at=(T0, T0 + MIN), quantiles={0.5: (1.0, 1.0), 0.9: (1.0,)})
    with pytest.raises(ValueError, match="strictly ascend"):
        RateForecast(at=(T0, T0), quantiles={0.5: (1.0, 1.0)})
    with pytest.raises(ValueError, match="counted within ready"):
        state(ready=1, standby=2)
    with pytest.raises(ValueError, match="capacity per replica"):
        state(capacity_rps=0.0)
    with pytest.raises(ValueError, match="timezone-aware"):
        state(now=datetime(2026, 11, 26))
