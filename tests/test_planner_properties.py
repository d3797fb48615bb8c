"""Hypothesis properties of plan(): bounds never crossed, determinism, feasible demand always planned."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from builders import T0, TablePrices, group, job, ready_node
from hypothesis import given, settings
from hypothesis import strategies as st

from burst.model import ActionKind, Budget, CapacityType, Job, Plan, Policy, Snapshot, SpotPolicy, Tier
from burst.planner import PlanIds, plan

TENANTS = ("a", "b", "c")


@st.composite
def worlds(draw: st.DrawFn, constrained: bool = True) -> tuple[Snapshot, dict[str, Policy], TablePrices]:
    groups, nodes, prices, targets = [], [], {}, {}
    steady_nodes = draw(st.integers(0, 4))
    if steady_nodes:
        g = group("onprem", tier=Tier.STEADY, gpus=draw(st.sampled_from([1, 4, 8])), min_size=steady_nodes, max_size=steady_nodes)
        groups.append(g)
        prices[g.id] = draw(st.floats(0.5, 10))
        nodes += [ready_node(f"onprem-{i}", g) for i in range(steady_nodes)]
        targets[g.id] = steady_nodes
    for i in range(draw(st.integers(1, 3))):
        ct = draw(st.sampled_from([CapacityType.ON_DEMAND, CapacityType.SPOT]))
        max_size = draw(st.integers(0, 6)) if constrained else 1000
        g = group(f"cloud{i}", capacity_type=ct, gpus=draw(st.sampled_from([1, 2, 8])), max_size=max_size)
        groups.append(g)
        prices[g.id] = draw(st.floats(1, 40))
        ready = draw(st.integers(0, max_size))
        idle_min = draw(st.integers(0, 30))
        nodes += [ready_node(f"cloud{i}-{k}", g, idle_since=T0 - timedelta(minutes=idle_min)) for k in range(ready)]
        targets[g.id] = ready + draw(st.integers(0, max_size - ready))
    jobs: list[Job] = []
    for k in range(draw(st.integers(0, 25))):
        jobs.append(
            job(
                f"j{k}",
                tenant=draw(st.sampled_from(TENANTS)),
                gpus=draw(st.sampled_from([1, 1, 2, 4, 8])),
                submitted=T0 - timedelta(seconds=draw(st.integers(0, 3600))),
                fault_tolerant=draw(st.booleans()),
            )
        )
    policies = {}
    for t in TENANTS:
        policies[t] = Policy(
            tenant=t,
            priority=draw(st.integers(0, 2)),
            steady_quota_gpus=draw(st.none() | st.integers(0, 16)) if constrained else None,
            burst_quota_gpus=draw(st.none() | st.integers(0, 32)) if constrained else None,
            budget=Budget(usd_per_hour=draw(st.none() | st.floats(1, 200))) if constrained else Budget(),
            spot=SpotPolicy(allowed=draw(st.booleans()), max_share=draw(st.floats(0, 1))),
            fair_share_weight=draw(st.floats(0.5, 4)),
        )
    snap = Snapshot(groups=tuple(groups), nodes=tuple(nodes), jobs=tuple(jobs), targets=targets)
    return snap, policies, TablePrices(prices)


def _plan(world: tuple[Snapshot, dict[str, Policy], TablePrices]) -> Plan:
    snap, policies, prices = world
    return plan(snap, [], policies, prices, now=T0, ids=PlanIds("p"))


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_never_over_group_max_quota_or_budget(world: tuple[Snapshot, dict[str, Policy], TablePrices]) -> None:
    snap, policies, prices = world
    p = _plan(world)
    by_id = {g.id: g for g in snap.groups}
    for a in p.of_kind(ActionKind.SCALE_UP):
        assert a.size is not None and a.size <= by_id[a.target].max_size
    for a in p.of_kind(ActionKind.SCALE_DOWN):
        assert a.size is not None and a.size >= by_id[a.target].min_size
    # Placements: quota and budget per tenant (nothing is running, so placements + launches are all the spend).
    steady: dict[str, float] = defaultdict(float)
    elastic: dict[str, float] = defaultdict(float)
    node_group = {n.id: n.group_id for n in snap.nodes}
    jobs = {j.id: j for j in snap.jobs}
    for a in p.of_kind(ActionKind.PLACE_JOB):
        g = by_id[node_group[a.node_ids[0]]]
        (steady if g.tier is Tier.STEADY else elastic)[a.tenant or ""] += jobs[a.target].gpus
        assert g.capacity_type is not CapacityType.SPOT or jobs[a.target].fault_tolerant
    for t, pol in policies.items():
        if pol.steady_quota_gpus is not None:
            assert steady[t] <= pol.steady_quota_gpus
        if pol.burst_quota_gpus is not None:
            assert elastic[t] <= pol.burst_quota_gpus
    launched_cost = sum(prices.group_price(by_id[a.target]) * (a.count or 0) for a in p.of_kind(ActionKind.SCALE_UP))
    placed_cost = sum(
        prices.group_price(by_id[node_group[a.node_ids[0]]]) / by_id[node_group[a.node_ids[0]]].gpus_per_node * (a.count or 0)
        for a in p.of_kind(ActionKind.PLACE_JOB)
    )
    caps = [pol.budget.usd_per_hour for pol in policies.values()]
    if all(c is not None for c in caps):
        assert launched_cost + placed_cost <= sum(c for c in caps if c is not None) + 1e-6


@settings(max_examples=200, deadline=None)
@given(worlds())
def test_plan_is_deterministic(world: tuple[Snapshot, dict[str, Policy], TablePrices]) -> None:
    assert _plan(world) == _plan(world)


@settings(max_examples=300, deadline=None)
@given(worlds(constrained=False))
def test_feasible_pending_demand_is_always_planned(world: tuple[Snapshot, dict[str, Policy], TablePrices]) -> None:
    """With no quota, no budget and room in the groups, every job that fits some group is placed or covered."""
    snap, policies, _ = world
    p = _plan(world)
    # Any job fits an on-demand elastic group of max_size 1000 (multi-node jobs take whole nodes).
    if snap.jobs and any(g.tier is Tier.ELASTIC and g.capacity_type is CapacityType.ON_DEMAND for g in snap.groups):
        assert not [h for h in p.holds if h.subject.startswith("tenant:")], p.holds
