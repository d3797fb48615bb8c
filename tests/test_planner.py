"""Hand-worked planner cases with exact expected actions."""

from __future__ import annotations

from datetime import timedelta

from builders import T0, TablePrices, group, job, ready_node

from burst.model import ActionKind, Budget, JobState, Plan, Policy, Snapshot, SpotPolicy, Tier
from burst.planner import PlanIds, plan

ONPREM = group("onprem", tier=Tier.STEADY, gpus=8, min_size=1, max_size=1)
OD_A = group("od-a", gpus=8)
OD_B = group("od-b", gpus=8)
SPOT = group("spot", capacity_type=__import__("burst.model").model.CapacityType.SPOT, gpus=8)
PRICES = TablePrices({"onprem": 8.0, "od-a": 32.0, "od-b": 24.0, "spot": 8.0, "small": 4.0})


def run(snapshot: Snapshot, policies: dict[str, Policy] | None = None, now=T0) -> Plan:
    return plan(snapshot, [], policies or {}, PRICES, now=now, ids=PlanIds("p1"))


def kinds(p: Plan) -> list[tuple[str, str, int | None]]:
    return [(a.kind.value, a.target, a.count) for a in p.actions]


def test_steady_tier_is_filled_before_any_launch() -> None:
    snap = Snapshot(
        groups=(ONPREM, OD_A),
        nodes=(ready_node("onprem-0", ONPREM),),
        jobs=(job("j1", gpus=4), job("j2", gpus=4)),
        targets={"onprem": 1, "od-a": 0},
    )
    p = run(snap)
    assert kinds(p) == [("place_job", "j1", 4), ("place_job", "j2", 4)]
    assert all(a.node_ids == ("onprem-0",) for a in p.actions)


def test_overflow_launches_in_the_cheapest_feasible_group() -> None:
    snap = Snapshot(
        groups=(ONPREM, OD_A, OD_B),
        nodes=(ready_node("onprem-0", ONPREM),),
        jobs=(job("j1", gpus=8), job("j2", gpus=4, submitted=T0 + timedelta(seconds=1))),
        targets={"onprem": 1, "od-a": 0, "od-b": 0},
    )
    p = run(snap)
    assert kinds(p) == [("place_job", "j1", 8), ("scale_up", "od-b", 1)]
    up = p.actions[1]
    assert up.size == 1
    assert "cheapest feasible group" in up.reason and "$3.00/GPU-h" in up.reason


def test_booting_capacity_counts_and_stops_a_second_launch() -> None:
    snap = Snapshot(groups=(OD_B,), nodes=(), jobs=(job("j1", gpus=4),), targets={"od-b": 1})
    p = run(snap)
    assert p.actions == ()
    assert any("already booting" in h.reason for h in p.holds)


def test_non_fault_tolerant_jobs_never_go_to_spot() -> None:
    spot_ok = {"a": Policy(tenant="a", spot=SpotPolicy(allowed=True))}
    snap = Snapshot(
        groups=(SPOT, OD_B),
        nodes=(),
        jobs=(job("plain", gpus=8), job("ft", gpus=8, fault_tolerant=True, submitted=T0 + timedelta(seconds=1))),
        targets={"spot": 0, "od-b": 0},
    )
    p = run(snap, spot_ok)
    assert kinds(p) == [("scale_up", "od-b", 1), ("scale_up", "spot", 1)]
    # Without spot in the tenant's policy the fault-tolerant job goes on-demand too.
    p = run(snap, {})
    assert kinds(p) == [("scale_up", "od-b", 2)]


def test_spot_needs_checkpoints_as_often_as_the_policy_requires() -> None:
    strict = {"a": Policy(tenant="a", spot=SpotPolicy(allowed=True, required_checkpoint_interval_s=600))}
    rare = job("rare", gpus=8, fault_tolerant=True, checkpoint_interval_s=3600)
    often = job("often", gpus=8, fault_tolerant=True, checkpoint_interval_s=300, submitted=T0 + timedelta(1))
    snap = Snapshot(groups=(SPOT, OD_B), nodes=(), jobs=(rare, often), targets={})
    assert kinds(run(snap, strict)) == [("scale_up", "od-b", 1), ("scale_up", "spot", 1)]


def test_fair_share_weights_two_to_one_split_contended_gpus_two_to_one() -> None:
    small = group("small", tier=Tier.STEADY, gpus=1, min_size=9, max_size=9)
    nodes = tuple(ready_node(f"small-{i}", small) for i in range(9))
    jobs = tuple(job(f"{t}{i}", tenant=t, submitted=T0 + timedelta(seconds=i)) for t in "ab" for i in range(10))
    policies = {"a": Policy(tenant="a", fair_share_weight=2), "b": Policy(tenant="b", fair_share_weight=1)}
    p = run(Snapshot(groups=(small,), nodes=nodes, jobs=jobs), policies)
    placed = [a.tenant for a in p.of_kind(ActionKind.PLACE_JOB)]
    assert placed.count("a") == 6 and placed.count("b") == 3
    assert any(h.tenant == "a" and "4 pending job(s)" in h.reason for h in p.holds)


def test_higher_priority_tenant_is_served_first() -> None:
    small = group("small", tier=Tier.STEADY, gpus=1, min_size=2, max_size=2)
    nodes = tuple(ready_node(f"small-{i}", small) for i in range(2))
    jobs = (job("low1", "low"), job("low2", "low"), job("high1", "high", submitted=T0 + timedelta(hours=1)))
    p = run(Snapshot(groups=(small,), nodes=nodes, jobs=jobs), {"high": Policy(tenant="high", priority=10)})
    assert [a.target for a in p.of_kind(ActionKind.PLACE_JOB)] == ["high1", "low1"]


def test_a_jobs_own_priority_orders_its_tenant_only() -> None:
    # The API says "priority within the tenant"; a batch job with priority 1000 used to be placed ahead of prod.
    small = group("small", tier=Tier.STEADY, gpus=1, min_size=2, max_size=2)
    nodes = tuple(ready_node(f"small-{i}", small) for i in range(2))
    jobs = (job("prod1", "prod", submitted=T0 + timedelta(hours=1)), job("batch-low", "batch"),
            job("batch-high", "batch", priority=1000, submitted=T0 + timedelta(minutes=1)))
    policies = {"prod": Policy(tenant="prod", priority=10), "batch": Policy(tenant="batch", priority=0)}
    p = run(Snapshot(groups=(small,), nodes=nodes, jobs=jobs), policies)
    assert [a.target for a in p.of_kind(ActionKind.PLACE_JOB)] == ["prod1", "batch-high"]


def test_budget_breach_is_refused_with_its_reason() -> None:
    policies = {"a": Policy(tenant="a", budget=Budget(usd_per_hour=20.0))}
    p = run(Snapshot(groups=(OD_B,), nodes=(), jobs=(job("j1", gpus=8),), targets={"od-b": 0}), policies)
    assert p.actions == ()
    (hold,) = [h for h in p.holds if h.tenant == "a"]
    assert "budget.usd_per_hour $20.00" in hold.reason and "$24.00/h" in hold.reason


def test_monthly_budget_counts_month_to_date_spend() -> None:
    policies = {"a": Policy(tenant="a", budget=Budget(usd_per_month=1000.0))}
    snap = Snapshot(groups=(OD_B,), nodes=(), jobs=(job("j1", gpus=8),), targets={}, spend_month_usd={"a": 990.0})
    p = run(snap, policies)
    assert p.actions == ()
    assert any("budget.usd_per_month" in h.reason for h in p.holds)
    snap = Snapshot(groups=(OD_B,), nodes=(), jobs=(job("j1", gpus=8),), targets={}, spend_month_usd={"a": 900.0})
    assert kinds(run(snap, policies)) == [("scale_up", "od-b", 1)]


def test_quota_caps_steady_and_burst_gpus() -> None:
    policies = {"a": Policy(tenant="a", steady_quota_gpus=4, burst_quota_gpus=8)}
    snap = Snapshot(
        groups=(ONPREM, OD_B),
        nodes=(ready_node("onprem-0", ONPREM),),
        jobs=tuple(job(f"j{i}", gpus=4, submitted=T0 + timedelta(seconds=i)) for i in range(4)),
        targets={"onprem": 1},
    )
    p = run(snap, policies)
    assert kinds(p) == [("place_job", "j0", 4), ("scale_up", "od-b", 1)]
    assert any("quota.burst_gpus 8" in h.reason for h in p.holds)


def test_group_max_is_never_exceeded() -> None:
    capped = group("od-b", max_size=2)
    snap = Snapshot(groups=(capped,), nodes=(), jobs=tuple(job(f"j{i}", gpus=8) for i in range(5)), targets={"od-b": 1})
    p = run(snap)
    assert kinds(p) == [("scale_up", "od-b", 1)]
    assert any("max_size 2" in h.reason for h in p.holds)


def test_scale_down_honours_the_cooldown() -> None:
    young = ready_node("od-b-0", OD_B, idle_since=T0 - timedelta(minutes=5))
    old = ready_node("od-b-1", OD_B, idle_since=T0 - timedelta(minutes=11))
    p = run(Snapshot(groups=(OD_B,), nodes=(young, old), jobs=(), targets={"od-b": 2}))
    (down,) = p.actions
    assert (down.kind, down.node_ids, down.size) == (ActionKind.SCALE_DOWN, ("od-b-1",), 1)
    assert any("cooldown (next due in 5.0 min)" in h.reason for h in p.holds)


def test_busy_and_steady_nodes_are_not_scaled_down() -> None:
    busy = ready_node("od-b-0", OD_B, idle_since=T0 - timedelta(hours=2))
    running = job("r", gpus=2, state=JobState.RUNNING, nodes=("od-b-0",), started=T0 - timedelta(hours=1))
    onprem = ready_node("onprem-0", ONPREM, idle_since=T0 - timedelta(days=1))
    p = run(Snapshot(groups=(OD_B, ONPREM), nodes=(busy, onprem), jobs=(running,), targets={"od-b": 1, "onprem": 1}))
    assert p.actions == ()


def test_jobs_past_max_runtime_are_reclaimed_and_their_gpus_reused() -> None:
    node = ready_node("onprem-0", ONPREM)
    old = job("old", gpus=8, state=JobState.RUNNING, nodes=("onprem-0",), started=T0 - timedelta(hours=25))
    new = job("new", gpus=8)
    policies = {"a": Policy(tenant="a", max_job_runtime_s=24 * 3600)}
    p = run(Snapshot(groups=(ONPREM,), nodes=(node,), jobs=(old, new), targets={"onprem": 1}), policies)
    assert kinds(p) == [("reclaim_job", "old", 8), ("place_job", "new", 8)]
    assert "max_job_runtime" in p.actions[0].reason


def test_multi_node_jobs_take_whole_nodes() -> None:
    snap = Snapshot(
        groups=(OD_B,),
        nodes=(ready_node("od-b-0", OD_B), ready_node("od-b-1", OD_B)),
        jobs=(job("big", gpus=16), job("big2", gpus=24, submitted=T0 + timedelta(seconds=1))),
        targets={"od-b": 2},
    )
    p = run(snap)
    assert kinds(p) == [("place_job", "big", 16), ("scale_up", "od-b", 3)]
    assert p.actions[0].node_ids == ("od-b-0", "od-b-1")


def test_disallowed_provider_and_gpu_model_give_a_hold() -> None:
    policies = {"a": Policy(tenant="a", allowed_providers=("aws",))}
    p = run(Snapshot(groups=(OD_B,), nodes=(), jobs=(job("j", gpus=1),)), policies)
    assert p.actions == () and "allowed by tenant a's policy" in p.holds[0].reason
    p = run(Snapshot(groups=(OD_B,), nodes=(), jobs=(job("j", gpus=1, gpu_model="H100"),)))
    assert "GPU model H100" in p.holds[0].reason


def test_action_ids_and_json_shape() -> None:
    p = run(Snapshot(groups=(OD_B,), nodes=(), jobs=(job("j", gpus=8),)))
    data = p.to_json()
    assert data["actions"][0]["id"] == "p1.1"
    assert {"kind", "target", "count", "reason"} <= set(data["actions"][0])
