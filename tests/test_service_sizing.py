"""Service sizing rules (burst.planner.service_sizing) on small cases computed by hand."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from burst.model import Service, ServiceEvent, TokenCost
from burst.planner.service_sizing import (
    QUANTILE_CEILING,
    QUANTILE_FLOOR,
    ClampedReplicas,
    clamp_replicas,
    event_multiplier,
    forecast_level,
    forecast_quantile,
    lead_time_s,
    may_scale_in,
    needs_standby,
    replica_capacity_rps,
    replicas_for_rate,
)

T0 = datetime(2026, 11, 27, tzinfo=UTC)


def service(**fields: Any) -> Service:
    base: dict[str, Any] = dict(tenant="t", name="chat", gpu_model="H100", max_replicas=10, ready_within_s=120.0,
                                unserved_request_cost_usd=0.01, requests_per_s=5.0)
    base.update(fields)
    return Service(**base)


# ------------------------------------------------------------------ capacity


def test_a_declared_rate_is_the_capacity() -> None:
    assert replica_capacity_rps(service(requests_per_s=5.0)) == 5.0


def test_token_cost_arithmetic_of_an_llm_replica() -> None:
    # a = 0.0001, b = 0.01 GPU-s per token; 1000 context + 200 generated tokens: 0.1 + 2.0 = 2.1 GPU-s a request
    llm = service(requests_per_s=None, token_cost=TokenCost(0.0001, 0.01))
    assert llm.token_cost is not None and llm.token_cost.gpu_s_per_request(1000, 200) == pytest.approx(2.1)
    assert replica_capacity_rps(llm, 1000, 200) == pytest.approx(1 / 2.1)
    # a replica of 8 GPUs has 8 GPU-seconds a second
    assert replica_capacity_rps(service(requests_per_s=None, token_cost=TokenCost(0.0001, 0.01), gpus_per_replica=8),
                                1000, 200) == pytest.approx(8 / 2.1)


def test_token_cost_needs_the_token_counts() -> None:
    llm = service(requests_per_s=None, token_cost=TokenCost(0.0001, 0.01))
    with pytest.raises(ValueError, match="mean context and generated tokens"):
        replica_capacity_rps(llm)
    with pytest.raises(ValueError, match=">= 0"):
        replica_capacity_rps(llm, -1, 200)
    with pytest.raises(ValueError, match="no GPU time"):
        replica_capacity_rps(service(requests_per_s=None, token_cost=TokenCost(0.0, 0.01)), 1000, 0)


# ------------------------------------------------------------------ replicas for a rate


@pytest.mark.parametrize(
    ("rate", "capacity", "target", "replicas"),
    [
        (0.0, 5.0, 0.7, 0),
        (-3.0, 5.0, 0.7, 0),  # a forecast below zero needs nothing
        (3.5, 5.0, 0.7, 1),  # exactly one replica at target
        (3.6, 5.0, 0.7, 2),
        (10.0, 5.0, 1.0, 2),
        (2.1, 1.0, 0.7, 3),  # 2.1 / 0.7 is 3.0000000000000004 in floats: still 3
        (1.0, 1 / 2.1, 0.7, 3),  # 1 req/s of 2.1 GPU-s requests: 2.1 GPUs busy, at 70% 3 replicas
        (1.01, 1 / 2.1, 0.7, 4),
    ],
)
def test_replicas_for_rate(rate: float, capacity: float, target: float, replicas: int) -> None:
    assert replicas_for_rate(rate, capacity, target) == replicas


@pytest.mark.parametrize(("capacity", "target"), [(0.0, 0.7), (-1.0, 0.7), (math.inf, 0.7), (1.0, 0.0), (1.0, 1.5)])
def test_replicas_for_rate_refuses_a_capacity_or_target_it_cannot_use(capacity: float, target: float) -> None:
    with pytest.raises(ValueError):
        replicas_for_rate(1.0, capacity, target)


def test_clamping_names_the_bound_that_applied() -> None:
    bounded = service(min_replicas=2, max_replicas=6)
    assert clamp_replicas(bounded, 0) == ClampedReplicas(2, "min_replicas")
    assert clamp_replicas(bounded, 4) == ClampedReplicas(4, None)
    assert clamp_replicas(bounded, 9) == ClampedReplicas(6, "max_replicas")
    assert clamp_replicas(bounded, 9).reason == "held at max_replicas"


# ------------------------------------------------------------------ quantile


def test_the_newsvendor_quantile_by_hand() -> None:
    # 5 req/s at 70% for an hour: 12600 requests; at 0.001 USD each a short replica-hour loses 12.6 USD
    # against a replica-hour of 4.2 USD: q = 12.6 / (12.6 + 4.2) = 0.75
    assert forecast_quantile(0.001, 4.2, 5.0, 0.7) == pytest.approx(0.75)
    # the LLM replica above: 1/2.1 req/s at 70% x 3600 x 0.01 USD = 12 USD against 4 USD: 0.75, read from P90
    q = forecast_quantile(0.01, 4.0, 1 / 2.1, 0.7)
    assert q == pytest.approx(0.75) and forecast_level(q) == 0.9


def test_the_quantile_is_kept_within_its_range() -> None:
    assert forecast_quantile(0.0, 4.0, 5.0, 0.7) == QUANTILE_FLOOR == 0.5  # unserved requests cost nothing
    assert forecast_quantile(1e-6, 100.0, 1.0, 0.7) == QUANTILE_FLOOR  # q would be 0.025
    assert forecast_quantile(1.0, 0.0, 1.0, 0.7) == QUANTILE_CEILING == 0.99  # a free replica (on-prem, paid anyway)
    assert forecast_quantile(0.0, 0.0, 1.0, 0.7) == QUANTILE_FLOOR
    with pytest.raises(ValueError):
        forecast_quantile(-1.0, 4.0, 1.0, 0.7)


@pytest.mark.parametrize(("q", "level"), [(0.5, 0.5), (0.51, 0.9), (0.9, 0.9), (0.95, 0.99), (0.99, 0.99)])
def test_the_forecast_level_read_is_at_or_above_the_quantile(q: float, level: float) -> None:
    assert forecast_level(q) == level


# ------------------------------------------------------------------ lead time, standby, scale-in


def test_lead_time_and_standby() -> None:
    assert lead_time_s(300.0, 120.0) == 420.0  # cold boot + model load
    assert lead_time_s(60.0, 120.0) == 180.0  # wake from a stopped warm pool
    chat = service(ready_within_s=180.0)
    assert not needs_standby(chat, lead_time_s(60.0, 120.0))  # a warm node is in time
    assert needs_standby(chat, lead_time_s(300.0, 120.0))  # a cold boot is not: keep standby replicas
    with pytest.raises(ValueError):
        lead_time_s(-1.0, 120.0)


@pytest.mark.parametrize(
    ("current", "now", "over_lead", "may"),
    [
        (5, 3, 3, True),
        (5, 5, 3, False),  # the rate now needs every replica
        (5, 3, 5, False),  # the forecast within the lead time does
        (5, 3, 7, False),
        (0, 0, 0, False),
    ],
)
def test_scale_in_only_when_neither_now_nor_the_forecast_needs_the_replica(
    current: int, now: int, over_lead: int, may: bool
) -> None:
    assert may_scale_in(current, now, over_lead) is may


# ------------------------------------------------------------------ events


def test_event_multiplier_in_and_out_of_windows() -> None:
    day = ServiceEvent(T0, T0 + timedelta(days=1), 2.0, "promo")
    peak = ServiceEvent(T0 + timedelta(hours=9), T0 + timedelta(hours=11), 4.0)
    unsized = ServiceEvent(T0 + timedelta(days=3), T0 + timedelta(days=4))
    chat = service(events=(day, peak, unsized))
    assert event_multiplier(chat, T0 - timedelta(seconds=1)) == 1.0
    assert event_multiplier(chat, T0) == 2.0  # start is inclusive
    assert event_multiplier(chat, T0 + timedelta(hours=10)) == 4.0  # overlapping: the largest, not 8
    assert event_multiplier(chat, T0 + timedelta(days=1)) == 1.0  # end is exclusive
    assert event_multiplier(chat, T0 + timedelta(days=3, hours=1)) == 1.0  # no multiplier declared
    calm = service(events=(ServiceEvent(T0, T0 + timedelta(hours=1), 0.5),))
    assert event_multiplier(calm, T0) == 0.5
