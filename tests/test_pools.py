"""Hot pools: targets for scripted forecasts, the planner step that applies them, and the pool's lifecycle."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from builders import T0, TablePrices, group, ready_node

from burst.model import (
    ActionKind,
    CapacityType,
    Forecast,
    HotPoolPolicy,
    Node,
    NodeState,
    Policy,
    Snapshot,
    Tier,
    Transition,
    WarmPoolSettings,
    WarmState,
    default_policy,
)
from burst.planner import PlanIds, plan
from pools.sizing import warm_pool_targets
from providers.sim import ManualClock, SimProvider


def pooled(gid: str, *, max_prepared: int, min_size: int = 0, state: WarmState = WarmState.STOPPED,
           capacity_type: CapacityType = CapacityType.ON_DEMAND, max_age_s: float = 30 * 86400.0):
    g = group(gid, capacity_type=capacity_type)
    return dataclasses.replace(g, warm_pool=WarmPoolSettings(min_size=min_size, max_prepared=max_prepared, state=state,
                                                             max_age_s=max_age_s))


OD_A = pooled("od-a", max_prepared=2)
OD_B = pooled("od-b", max_prepared=5)
SPOT = pooled("spot", max_prepared=5, capacity_type=CapacityType.SPOT)
ONPREM = group("onprem", tier=Tier.STEADY, min_size=2, max_size=2)
PRICES = TablePrices({"onprem": 8.0, "od-a": 24.0, "od-b": 32.0, "spot": 8.0})


def p90(value_at: dict[int, float], p50: float = 16.0, tenant: str = "a") -> Forecast:
    """A forecast over the next hour in 5-minute steps: P50 flat at `p50`, P90 as given at minute offsets (else P50)."""
    stamps = tuple(T0 + timedelta(minutes=m) for m in range(5, 65, 5))
    mid = tuple(p50 for _ in stamps)
    top = tuple(value_at.get(m, p50) for m in range(5, 65, 5))
    return Forecast(tenant=tenant, gpu_model="any", timestamps=stamps,
                    quantiles={0.5: mid, 0.9: top, 0.99: top}, model="prophet")


def targets(forecasts, *, policies=None, share: float = 1.0, groups=(OD_A, OD_B, SPOT)):
    pols = policies or {}
    out = warm_pool_targets(list(groups), forecasts, lambda t: pols.get(t) or default_policy(t), pols, T0,
                            on_demand_share=share)
    return {t.group_id: (t.size, t.state) for t in out}


def test_the_forecast_surge_within_the_boot_latency_fills_the_cheapest_pools_first() -> None:
    # P90 of 50 within the 5-minute boot window over a P50 of 16 now: 34 GPUs = od-a's 2 nodes, then 3 in od-b
    assert targets([p90({5: 50.0})]) == {"od-a": (2, WarmState.STOPPED), "od-b": (3, WarmState.STOPPED)}
    assert targets([p90({10: 50.0})]) == {"od-a": (0, WarmState.STOPPED), "od-b": (0, WarmState.STOPPED)}, \
        "a surge beyond the boot latency does not need warm nodes yet"
    assert targets([p90({5: 10.0})])["od-a"][0] == 0, "no surge, no pool"
    two = targets([p90({5: 24.0}), p90({5: 24.0}, tenant="b")])  # 8 + 8 GPUs: tenants' surges add up
    assert two == {"od-a": (2, WarmState.STOPPED), "od-b": (0, WarmState.STOPPED)}


def test_spot_share_minimums_and_opt_outs_shape_the_pool() -> None:
    assert targets([p90({5: 50.0})], share=0.5) == {"od-a": (2, WarmState.STOPPED), "od-b": (1, WarmState.STOPPED)}
    opted_out = {"a": Policy(tenant="a", hot_pool=HotPoolPolicy(enabled=False))}
    assert targets([p90({5: 50.0})], policies=opted_out)["od-a"][0] == 0
    minimum = {"b": Policy(tenant="b", hot_pool=HotPoolPolicy(min_gpus=20))}
    assert targets([], policies=minimum) == {"od-a": (2, WarmState.STOPPED), "od-b": (1, WarmState.STOPPED)}
    floor = pooled("od-a", max_prepared=4, min_size=3)
    assert targets([], groups=(floor,)) == {"od-a": (3, WarmState.STOPPED)}
    assert targets([p90({5: 500.0})], groups=(floor,)) == {"od-a": (4, WarmState.STOPPED)}, "max_prepared bounds it"


def test_a_models_pool_holds_the_larger_of_the_forecast_surge_and_the_services_hot_capacity() -> None:
    def sized(forecasts, service_gpus):
        out = warm_pool_targets([OD_A, OD_B], forecasts, default_policy, (), T0, service_gpus=service_gpus)
        return {t.group_id: t.size for t in out}, " ".join(t.reason for t in out)

    # services ask 20 GPUs warm, the forecast surge 34: the larger, 34 (od-a's 2 nodes, then 3 in od-b)
    assert sized([p90({5: 50.0})], {"A100": 20.0})[0] == {"od-a": 2, "od-b": 3}
    # services ask 40, the forecast 8 (1 node): 4 more nodes for the services (od-a's second, then 3 in od-b)
    sizes, why = sized([p90({5: 24.0})], {"A100": 40.0})
    assert sizes == {"od-a": 2, "od-b": 3} and "services' hot capacity of 40 A100 GPU(s) (8 warm for" in why
    assert sized([], {"A100": 8.0})[0] == {"od-a": 1, "od-b": 0}  # no forecast at all: the services' ask alone
    assert sized([], {"H100": 8.0})[0] == {"od-a": 0, "od-b": 0}  # no pooled group of that model


def test_a_spot_group_never_gets_a_pool_and_gpus_do_not_hibernate() -> None:
    assert "spot" not in targets([p90({5: 500.0})])
    hibernating = pooled("od-h", max_prepared=2, state=WarmState.HIBERNATED)
    (target,) = warm_pool_targets([hibernating], [p90({5: 32.0})], default_policy, (), T0)
    assert (target.size, target.state) == (2, WarmState.STOPPED)
    assert "hibernated is not available with GPUs attached" in target.reason


def run(snapshot: Snapshot, forecasts=(), now=T0):
    return plan(snapshot, list(forecasts), {}, PRICES, now=now, ids=PlanIds("p"))


def snap(*nodes: Node, warm: dict[str, tuple[int, WarmState]] | None = None, jobs=()) -> Snapshot:
    return Snapshot(groups=(ONPREM, OD_A, OD_B, SPOT),
                    nodes=(ready_node("onprem-0", ONPREM), ready_node("onprem-1", ONPREM), *nodes),
                    jobs=tuple(jobs), targets={"onprem": 2, "od-a": 0, "od-b": 0, "spot": 0}, warm_pools=warm or {})


def test_the_planner_sets_a_pool_when_its_target_changes_and_shrinks_it_only_by_half() -> None:
    p = run(snap(), [p90({5: 50.0})])  # the same 34-GPU surge as above; no jobs, so all of it on-demand
    pools = [(a.target, a.count, a.warm_state, a.step) for a in p.actions if a.kind is ActionKind.SET_WARM_POOL]
    assert pools == [("od-a", 2, WarmState.STOPPED, "hot_pool"), ("od-b", 3, WarmState.STOPPED, "hot_pool")]
    assert "hot pool 0 -> 2 warm node(s): +2 for a forecast surge of 34.0 any GPU(s) (P90 within 5 min" in p.actions[0].reason
    same = {"od-a": (2, WarmState.STOPPED), "od-b": (3, WarmState.STOPPED)}
    assert run(snap(warm=same), [p90({5: 50.0})]).actions == ()
    smaller = run(snap(warm=same), [p90({5: 45.0})])  # od-b's target falls to 2: more than half of 3, kept
    assert smaller.actions == () and any("hot pool kept at 3" in h.reason for h in smaller.holds)
    gone = run(snap(warm=same), [p90({5: 16.0})])
    assert [(a.target, a.count) for a in gone.actions] == [("od-a", 0), ("od-b", 0)]


def test_warm_nodes_older_than_max_age_are_replaced() -> None:
    aged = pooled("od-a", max_prepared=2, max_age_s=86400.0)

    def warm_node(nid: str, age_h: float) -> Node:
        at = T0 - timedelta(hours=age_h)
        return Node(id=nid, group_id="od-a", state=NodeState.WARM, gpus=8, created_at=at,
                    history=(Transition(NodeState.WARM, at),), warm_state=WarmState.STOPPED)

    s = Snapshot(groups=(aged,), nodes=(warm_node("w-old", 25), warm_node("w-new", 2)), jobs=(),
                 targets={"od-a": 0}, warm_pools={"od-a": (2, WarmState.STOPPED)})
    rotate = [a for a in run(s).actions if a.kind is ActionKind.TERMINATE_NODES]
    assert [(a.target, a.node_ids) for a in rotate] == [("od-a", ("w-old",))]
    assert "older than warm_pool.max_age (1 d)" in rotate[0].reason


def sim_with_pool(size: int, capacity: int = 10) -> tuple[SimProvider, ManualClock]:
    clock = ManualClock(T0)
    group_ = pooled("od-a", max_prepared=4)
    sim = SimProvider([group_], clock=clock, cluster="c", prices={"od-a": 24.0}, seed=0, capacity={"od-a": capacity})
    if size:
        sim.set_warm_pool("od-a", size, WarmState.STOPPED, key="pool")
        clock.advance(600)  # prepared: booted, then stopped
    return sim, clock


def of(sim: SimProvider, state: NodeState) -> list[Node]:
    return sorted((n for n in sim.nodes().values() if n.state is state), key=lambda n: n.id)


def test_demand_draws_the_fastest_warm_state_first_then_the_pool_refills() -> None:
    sim, clock = sim_with_pool(1)  # one stopped node, prepared first
    sim.set_warm_pool("od-a", 2, WarmState.RUNNING, key="pool-running")
    clock.advance(600)  # a second node prepared, running-idle
    warm = {n.warm_state: n.id for n in of(sim, NodeState.WARM)}
    assert set(warm) == {WarmState.STOPPED, WarmState.RUNNING}

    sim.set_target("od-a", 1, key="up")
    assert [n.id for n in of(sim, NodeState.WAKING)] == [warm[WarmState.RUNNING]], \
        "the running node (5 s to wake) is drawn before the older stopped one (60 s)"
    assert [n.id for n in of(sim, NodeState.WARM)] == [warm[WarmState.STOPPED]]
    (refill,) = of(sim, NodeState.BOOTING)
    assert refill.id not in warm.values() and refill.created_at == clock(), \
        "the pool is refilled in the same call, after the draw: the new node is not the one serving"
    clock.advance(5)
    assert [n.id for n in of(sim, NodeState.READY)] == [warm[WarmState.RUNNING]]
    clock.advance(600)
    assert sorted(n.id for n in of(sim, NodeState.WARM)) == sorted([warm[WarmState.STOPPED], refill.id])
    assert sim.nodes()[refill.id].warm_state is WarmState.RUNNING

    sim.set_target("od-a", 2, key="up-2")
    assert [n.id for n in of(sim, NodeState.WAKING)] == [refill.id], "running first again, though newest"


def test_an_empty_pool_falls_back_to_a_cold_launch_at_once() -> None:
    sim, _ = sim_with_pool(0)
    sim.set_target("od-a", 1, key="up")
    assert len(of(sim, NodeState.BOOTING)) == 1 and not of(sim, NodeState.WAKING)


def test_a_node_scaled_in_goes_back_to_a_pool_below_its_size() -> None:
    sim, clock = sim_with_pool(1, capacity=2)
    sim.set_target("od-a", 2, key="up")  # the warm node wakes, one cold launch; no room left to refill the pool
    clock.advance(900)
    ready = of(sim, NodeState.READY)
    assert len(ready) == 2 and not of(sim, NodeState.WARM)
    sim.terminate([ready[0].id], key="down")  # the pool is below its size 1: the node is parked, not terminated
    assert [n.id for n in of(sim, NodeState.WARM)] == [ready[0].id]
    assert sim.group_state("od-a").target == 1
    sim.terminate([ready[1].id], key="down-2")  # the pool is full again: this one terminates
    assert [n.id for n in of(sim, NodeState.WARM)] == [ready[0].id]
    assert sim.nodes()[ready[1].id].state is NodeState.TERMINATING


def test_burst_in_the_simulator_wakes_warm_nodes_for_a_burst(tmp_path) -> None:
    from burst.sim.compare import compare
    from burst.sim.setup import default_setup, with_hot_pool
    from burst.sim.traces import load_trace

    path = tmp_path / "t.csv"
    rows = ["job_id,submit_time,duration_s,gpus,tenant"]
    rows += [f"base{i},2026-03-02T12:00:00Z,36000,8,t" for i in range(2)]  # on-prem is sized to these (P50)
    rows += [f"j{i},2026-03-02T14:{i:02d}:00Z,3600,8,t" for i in range(6)]  # the burst goes to the cloud
    path.write_text("\n".join(rows) + "\n")
    trace = load_trace(path)
    setup = with_hot_pool(default_setup(trace.stats()))
    fixed = compare(trace, ["burst-fixed-pool", "burst-no-pool"], setup=setup, fixed_pool_nodes=2).results
    pool, none = fixed["burst-fixed-pool"], fixed["burst-no-pool"]
    assert pool.warm_nodes_avg > 0 and none.warm_nodes_avg == 0
    assert pool.cost_by_tier["hot_pool"] > 0 == none.cost_by_tier["hot_pool"]
    assert sum(pool.waits_s) < sum(none.waits_s), "woken nodes serve sooner than cold boots"
