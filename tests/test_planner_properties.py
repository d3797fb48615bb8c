"""Hypothesis properties of plan(): bounds never crossed, determinism, feasible demand always planned."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from datetime import timedelta

from builders import T0, TablePrices, group, job, ready_node
from hypothesis import given, settings
from hypothesis import strategies as st

from burst.model import (
    ActionKind,
    Budget,
    CapacityType,
    Forecast,
    Job,
    JobState,
    Node,
    NodeState,
    Plan,
    Policy,
    PowerSaving,
    PrescalePolicy,
    Snapshot,
    SpotPolicy,
    Tier,
    Transition,
    WarmPoolSettings,
    WarmState,
)
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


@st.composite
def owned_worlds(draw: st.DrawFn) -> tuple[Snapshot, list[Forecast], dict[str, Policy], TablePrices]:
    """Each tenant with node groups of its own (a provider only it may use), so every scale-up is one tenant's:
    on-prem nodes ready and powered off (to wake), cloud groups with hot pools, running and pending work, a
    forecast rising within the pre-scaling lead time, and hourly and monthly budgets, some already spent."""
    groups, nodes, jobs, forecasts = [], [], [], []
    prices: dict[str, float] = {}
    targets: dict[str, int] = {}
    spend: dict[str, float] = {}
    policies: dict[str, Policy] = {}
    hour_ago = T0 - timedelta(hours=1)
    for t in TENANTS:
        provider = f"p-{t}"
        ready_nodes: list[Node] = []
        ready, off = draw(st.integers(0, 3)), draw(st.integers(0, 2))
        if ready + off:
            g = group(f"{t}-onprem", tier=Tier.STEADY, gpus=draw(st.sampled_from([4, 8])), max_size=ready + off,
                      provider=provider)
            g = g.with_power_saving(PowerSaving()) if off else g
            groups.append(g)
            prices[g.id], targets[g.id] = draw(st.floats(0.5, 10)), ready
            ready_nodes += [ready_node(f"{g.id}-{i}", g) for i in range(ready)]
            nodes += [Node(id=f"{g.id}-off{i}", group_id=g.id, state=NodeState.WARM, gpus=g.gpus_per_node,
                           created_at=hour_ago, history=(Transition(NodeState.WARM, hour_ago),),
                           warm_state=WarmState.POWERED_OFF) for i in range(off)]
        for i in range(draw(st.integers(1, 2))):
            max_size = draw(st.integers(0, 4))
            g = group(f"{t}-cloud{i}", capacity_type=draw(st.sampled_from([CapacityType.ON_DEMAND, CapacityType.SPOT])),
                      gpus=draw(st.sampled_from([1, 2, 8])), max_size=max_size, provider=provider)
            g = dataclasses.replace(g, warm_pool=WarmPoolSettings(max_prepared=draw(st.integers(0, 2))))
            groups.append(g)
            prices[g.id] = draw(st.floats(1, 40))
            up = draw(st.integers(0, max_size))
            ready_nodes += [ready_node(f"{g.id}-{k}", g) for k in range(up)]
            targets[g.id] = up + draw(st.integers(0, max_size - up))
        nodes += ready_nodes
        running = 0
        for n in ready_nodes:
            if draw(st.booleans()):
                gpus = draw(st.integers(1, n.gpus))
                running += gpus
                jobs.append(job(f"{n.id}-run", tenant=t, gpus=gpus, state=JobState.RUNNING, nodes=(n.id,),
                                started=hour_ago, submitted=hour_ago, fault_tolerant=draw(st.booleans())))
        pending = [draw(st.sampled_from([1, 2, 4, 8])) for _ in range(draw(st.integers(0, 6)))]
        jobs += [job(f"{t}-p{k}", tenant=t, gpus=gpus, submitted=T0 - timedelta(minutes=k),
                     fault_tolerant=draw(st.booleans())) for k, gpus in enumerate(pending)]
        if draw(st.booleans()):  # demand rising within the first ten minutes, then level
            now = float(running + sum(pending))
            top = now + draw(st.floats(0, 40))
            stamps = tuple(T0 + timedelta(minutes=m) for m in range(5, 65, 5))
            p50 = tuple(top if m >= 10 else now for m in range(5, 65, 5))
            forecasts.append(Forecast(tenant=t, gpu_model=draw(st.sampled_from(["A100", "any"])), timestamps=stamps,
                                      quantiles={0.1: p50, 0.5: p50, 0.9: tuple(v * 1.3 for v in p50),
                                                 0.99: tuple(v * 1.6 for v in p50)},
                                      model="scripted", history_s=7 * 86400.0, backtest_rise_skill=0.5))
        spend[t] = draw(st.floats(0, 2000))
        policies[t] = Policy(
            tenant=t,
            priority=draw(st.integers(0, 2)),
            steady_quota_gpus=draw(st.none() | st.integers(0, 16)),
            burst_quota_gpus=draw(st.none() | st.integers(0, 32)),
            budget=Budget(usd_per_hour=draw(st.none() | st.floats(1, 200)),
                          usd_per_month=draw(st.none() | st.floats(100, 5000))),
            spot=SpotPolicy(allowed=draw(st.booleans()), max_share=draw(st.floats(0, 1))),
            prescale=PrescalePolicy(wait_usd_per_gpu_hour=draw(st.sampled_from([None, 1e6]))),
            allowed_providers=(provider,),
        )
    snap = Snapshot(groups=tuple(groups), nodes=tuple(nodes), jobs=tuple(jobs), targets=targets, spend_month_usd=spend)
    return snap, forecasts, policies, TablePrices(prices)


@settings(max_examples=300, deadline=None)
@given(owned_worlds())
def test_no_action_takes_a_tenant_past_its_budget(
        world: tuple[Snapshot, list[Forecast], dict[str, Policy], TablePrices]) -> None:
    """What a plan adds to a tenant's spend (its jobs placed, at their GPUs' price; the nodes scaled up in its
    groups, by placement, pre-scaling or waking on-prem nodes, at whole nodes' price), on top of its running jobs
    the plan does not stop, stays within its hourly budget and within its monthly budget an hour on. Hot-pool
    sizes are no tenant's spend (the ledger's `hot_pool` line): they are not counted."""
    snap, forecasts, policies, prices = world
    p = plan(snap, forecasts, policies, prices, now=T0, ids=PlanIds("p"))
    groups = {g.id: g for g in snap.groups}
    tenant_of = {g.id: g.provider.removeprefix("p-") for g in snap.groups}
    node_group = {n.id: n.group_id for n in snap.nodes}
    jobs = {j.id: j for j in snap.jobs}

    def gpu_price(node_id: str) -> float:
        g = groups[node_group[node_id]]
        return prices.group_price(g) / g.gpus_per_node

    stopped = {a.target for a in p.actions if a.kind in (ActionKind.EVICT_JOB, ActionKind.RECLAIM_JOB)}
    before: dict[str, float] = defaultdict(float)
    added: dict[str, float] = defaultdict(float)
    for j in snap.running_jobs:
        if j.id not in stopped:
            before[j.tenant] += j.gpu_demand * gpu_price(j.node_ids[0])
    for a in p.of_kind(ActionKind.PLACE_JOB):
        added[jobs[a.target].tenant] += jobs[a.target].gpu_demand * gpu_price(a.node_ids[0])
    for a in p.of_kind(ActionKind.SCALE_UP):
        added[tenant_of[a.target]] += (a.count or 0) * prices.group_price(groups[a.target])
    for t, policy in policies.items():
        if added[t] <= 0:
            continue
        after = before[t] + added[t]
        hourly, monthly = policy.budget.usd_per_hour, policy.budget.usd_per_month
        assert hourly is None or after <= hourly + 1e-6, (t, after, hourly, p.actions)
        assert monthly is None or snap.spend_month_usd[t] + after <= monthly + 1e-6, (t, after, monthly, p.actions)
