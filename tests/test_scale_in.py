"""Break-even scale-in: an idle cloud node goes once idle for its group's boot latency (no forecast), as soon as
forecast demand would not use it (with one), after an explicit cooldown when one is set, and never before the
provider's minimum billed time."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from builders import T0, TablePrices, group, ready_node

from burst.catalog import min_billed_s
from burst.model import ActionKind, Node, NodeGroup, Plan, Snapshot, Tier
from burst.planner import BASELINE_PIPELINE, PlanIds, plan
from burst.planner.context import PlanContext, build_context
from burst.planner.scale_down import idle_release_s, release_idle

BOOT_S = 300.0
OD = dataclasses.replace(group("od", cooldown_s=None), boot_latency_s=BOOT_S)
PRICES = TablePrices({"od": 32.0})


def idle_for(seconds: float, g: NodeGroup = OD, nid: str = "od-0", *, age_s: float | None = None) -> Node:
    node = ready_node(nid, g, idle_since=T0 - timedelta(seconds=seconds))
    return dataclasses.replace(node, created_at=T0 - timedelta(seconds=age_s if age_s is not None else seconds + 600))


def run(*nodes: Node, g: NodeGroup = OD) -> Plan:
    snap = Snapshot(groups=(g,), nodes=nodes, jobs=(), targets={g.id: len(nodes)})
    return plan(snap, [], {}, PRICES, now=T0, ids=PlanIds("p"))


def test_an_idle_node_is_released_at_break_even_and_not_before() -> None:
    assert idle_release_s(OD) == BOOT_S, "no cooldown set: the group's boot latency"
    early = run(idle_for(BOOT_S - 1))
    assert early.actions == ()
    assert any("break-even" in h.reason and "next due in 0.0 min" in h.reason for h in early.holds)
    (down,) = run(idle_for(BOOT_S)).actions
    assert (down.kind, down.node_ids, down.size) == (ActionKind.SCALE_DOWN, ("od-0",), 0)
    assert "5 min break-even" in down.reason


def test_an_explicit_cooldown_overrides_break_even() -> None:
    slow = dataclasses.replace(OD, scale_down_cooldown_s=600.0)
    assert run(idle_for(BOOT_S), g=slow).actions == ()
    (down,) = run(idle_for(600.0), g=slow).actions
    assert down.kind is ActionKind.SCALE_DOWN and "10 min cooldown" in down.reason


def test_no_node_is_released_before_its_minimum_billed_time() -> None:
    assert min_billed_s(OD) == 60.0 and min_billed_s(group("rack", tier=Tier.STEADY)) == 0.0
    assert min_billed_s(group("ec2", provider="aws")) == min_billed_s(group("gce", provider="gcp")) == 60.0
    eager = dataclasses.replace(OD, scale_down_cooldown_s=0.0)
    young = run(idle_for(20.0, g=eager, age_s=40.0), g=eager)
    assert young.actions == () and any("60 s minimum billed time" in h.reason for h in young.holds)
    (down,) = run(idle_for(20.0, g=eager, age_s=60.0), g=eager).actions
    assert down.kind is ActionKind.SCALE_DOWN


def test_with_a_forecast_a_node_past_break_even_stays_only_while_forecast_demand_would_use_it() -> None:
    nodes = (idle_for(BOOT_S + 10, nid="od-0"), idle_for(BOOT_S + 20, nid="od-1"))
    snap = Snapshot(groups=(OD,), nodes=nodes, jobs=(), targets={"od": 2})

    def step(spare_gpus: float) -> PlanContext:
        ctx = build_context(snap, (), {}, PRICES, T0)
        ctx.forecast_spare_gpus["A100"] = spare_gpus
        release_idle(ctx)
        return ctx

    one_spare = step(8.0)  # the forecast needs one of the two nodes within the lead time
    (down,) = one_spare.actions
    assert down.node_ids == ("od-1",), "the longer-idle node goes"
    assert any("forecast demand" in h.reason for h in one_spare.holds)
    assert step(0.0).actions == [], "both needed: both kept past break-even"


def test_with_a_forecast_an_idle_node_no_demand_would_use_goes_at_once_not_at_break_even() -> None:
    """Idle 2 min (inside break-even): without a forecast it is kept; with one that needs none of it, released now,
    and one the forecast needs is kept. The minimum billed time still holds."""
    young = idle_for(120.0, nid="od-0")
    snap = Snapshot(groups=(OD,), nodes=(young,), jobs=(), targets={"od": 1})

    def step(spare_gpus: float | None, node: Node = young) -> PlanContext:
        ctx = build_context(dataclasses.replace(snap, nodes=(node,)), (), {}, PRICES, T0)
        if spare_gpus is not None:
            ctx.forecast_spare_gpus["A100"] = spare_gpus
        release_idle(ctx)
        return ctx

    assert step(None).actions == [], "no forecast: kept to break-even"
    (down,) = step(8.0).actions
    assert (down.kind, down.node_ids) == (ActionKind.SCALE_DOWN, ("od-0",))
    assert "forecast demand within the pre-scaling lead time would not use" in down.reason
    assert step(0.0).actions == [], "the forecast needs it: kept"
    assert step(8.0, idle_for(20.0, age_s=30.0)).actions == [], "inside the 60 s minimum billed time"


def test_the_frozen_baseline_still_keeps_idle_nodes_its_fixed_ten_minutes() -> None:
    snap = Snapshot(groups=(OD,), nodes=(idle_for(BOOT_S),), jobs=(), targets={"od": 1})
    baseline = plan(snap, [], {}, PRICES, now=T0, ids=PlanIds("p"), pipeline=BASELINE_PIPELINE)
    assert baseline.actions == () and any("10 min cooldown" in h.reason for h in baseline.holds)
    (down,) = run(idle_for(BOOT_S)).actions  # burst's own pipeline: break-even
    assert down.kind is ActionKind.SCALE_DOWN
