"""The Karpenter baselines and graceful termination: one scripted plan sequence per cited rule."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from builders import T0, TablePrices, group, job, ready_node

from burst.model import (
    Action,
    ActionKind,
    CapacityType,
    Job,
    JobState,
    Node,
    NodeState,
    Plan,
    Policy,
    Snapshot,
    SpotPolicy,
    Tier,
    Transition,
)
from burst.planner import PlanIds, plan
from burst.sim.registry import strategy_run
from burst.sim.setup import default_setup
from burst.sim.strategies import ClusterAutoscalerScaleDown, StrategyRun
from burst.sim.traces import Trace

OD = group("od", max_size=40)
SPOT = group("spot", capacity_type=CapacityType.SPOT, max_size=40)
ONPREM = group("onprem", tier=Tier.STEADY, max_size=4, min_size=0)
PRICES = TablePrices({"od": 32.0, "spot": 8.0, "onprem": 10.0})
POLICIES = {"a": Policy(tenant="a", spot=SpotPolicy(allowed=True))}
HOUR_AGO = T0 - timedelta(hours=1)


def _run(name: str = "karpenter") -> StrategyRun:
    stats = Trace(path=Path("scripted.csv"), format="csv", jobs=(job("x"),)).stats()
    return strategy_run(name, default_setup(stats), stats)


def _plan(run: StrategyRun, nodes: Sequence[Node], jobs: Sequence[Job], *, at: datetime = T0,
          notices: dict[str, datetime] | None = None) -> Plan:
    groups = (ONPREM, OD, SPOT)
    targets = {g.id: sum(1 for n in nodes if n.group_id == g.id) for g in groups}
    snap = Snapshot(groups=groups, nodes=tuple(nodes), jobs=tuple(jobs), targets=targets, notices=notices or {})
    return plan(snap, [], POLICIES, PRICES, now=at, ids=PlanIds("p"), pipeline=run.pipeline)


def _running(jid: str, node: str, gpus: int = 2, *, ft: bool = False, priority: int | None = None,
             checkpoint_s: float | None = None, started: datetime = HOUR_AGO) -> Job:
    return job(jid, gpus=gpus, state=JobState.RUNNING, nodes=(node,), started=started, duration_s=1e6,
               fault_tolerant=ft, checkpoint_interval_s=1800.0 if ft else None, checkpoint_duration_s=checkpoint_s,
               priority=priority, submitted=started)


def _booting(nid: str) -> Node:
    return Node(id=nid, group_id=OD.id, state=NodeState.BOOTING, gpus=8, created_at=T0,
                history=(Transition(NodeState.BOOTING, T0),))


def _od(n: int, prefix: str = "n") -> list[Node]:
    return [ready_node(f"{prefix}{i:02d}", OD) for i in range(n)]


def _kinds(result: Plan, kind: ActionKind) -> list[Action]:
    return [a for a in result.actions if a.kind is kind]


def _removed(result: Plan) -> list[str]:
    return sorted(n for a in _kinds(result, ActionKind.SCALE_DOWN) for n in a.node_ids)


def _full(nodes: Sequence[Node]) -> list[Job]:
    """A job holding all 8 GPUs of each node, so no node is empty or has room."""
    return [_running(f"full-{n.id}", n.id, gpus=8) for n in nodes]


# ---------------------------------------------------------------- provisioning


def test_provisioning_waits_one_quiet_second_before_launching() -> None:
    """BATCH_IDLE_DURATION = 1s: a pending pod with nothing more arriving is launched for a second later."""
    run = _run()
    pending = [job("p1", gpus=8, submitted=T0)]
    first = _plan(run, [], pending, at=T0)
    assert _kinds(first, ActionKind.SCALE_UP) == []
    assert any("batch window" in h.reason for h in first.holds)
    assert run.next_due(T0) == T0 + timedelta(seconds=1)
    second = _plan(run, [], pending, at=T0 + timedelta(seconds=1))
    assert [(a.target, a.count) for a in _kinds(second, ActionKind.SCALE_UP)] == [("od", 1)]


def test_provisioning_closes_a_busy_batch_after_ten_seconds() -> None:
    """BATCH_MAX_DURATION = 10s: pods arriving every second keep the batch open until 10 s after it opened."""
    run = _run()
    pending: list[Job] = []
    launched_at = None
    for second in range(12):
        at = T0 + timedelta(seconds=second)
        pending.append(job(f"p{second}", gpus=1, submitted=at))
        result = _plan(run, [], pending, at=at)
        if _kinds(result, ActionKind.SCALE_UP) and launched_at is None:
            launched_at = second
            assert sum(a.count or 0 for a in _kinds(result, ActionKind.SCALE_UP)) == 2  # 11 one-GPU pods: 2 nodes
    assert launched_at == 10


def test_provisioning_launches_the_cheapest_capacity_spot_only_for_pods_that_tolerate_it() -> None:
    run = _run()
    ft = job("ft", gpus=8, fault_tolerant=True, checkpoint_interval_s=1800.0)
    rigid = job("rigid", gpus=8)
    _plan(run, [], [ft, rigid], at=T0)
    result = _plan(run, [], [ft, rigid], at=T0 + timedelta(seconds=1))
    assert sorted((a.target, a.count) for a in _kinds(result, ActionKind.SCALE_UP)) == [("od", 1), ("spot", 1)]


# ---------------------------------------------------------------- consolidation


def test_empty_nodes_go_first_and_at_once_consolidate_after_zero() -> None:
    """Empty node consolidation comes before multi- and single-node consolidation, with consolidateAfter 0s: a
    node that emptied this instant goes now (20 nodes: a budget of 2)."""
    busy = _od(18)
    empty = [ready_node("e1", OD, idle_since=T0), ready_node("e2", OD, idle_since=T0)]
    light = [ready_node("l1", OD), ready_node("l2", OD)]
    jobs = [*_full(busy[:16]), _running("small1", "l1", 1), _running("small2", "l2", 1)]
    nodes = [*busy[:16], *light, *empty]
    result = _plan(_run(), nodes, jobs)
    assert _removed(result) == ["e1", "e2"]  # the light nodes wait: one method per round


def test_multi_node_consolidation_deletes_several_nodes_whose_pods_fit_elsewhere() -> None:
    """Two light nodes whose pods fit together on a third node's free GPUs go in one action (20 nodes)."""
    nodes = [*_od(17), ready_node("l1", OD), ready_node("l2", OD), ready_node("room", OD)]
    jobs = [*_full(nodes[:17]), _running("a1", "l1", 2), _running("a2", "l2", 3), _running("r", "room", 2)]
    result = _plan(_run(), nodes, jobs)
    assert _removed(result) == ["l1", "l2"]
    assert "multi node consolidation" in _kinds(result, ActionKind.SCALE_DOWN)[0].reason


def test_single_node_consolidation_takes_the_node_with_fewest_then_lowest_priority_pods() -> None:
    """Room (on an on-prem node) for one node's pods only: the node with fewer pods goes; between equals, the
    lower priority one."""
    nodes = [*_od(8), ready_node("two", OD), ready_node("one", OD), ready_node("room", ONPREM)]
    jobs = [*_full(nodes[:8]), _running("t1", "two", 1), _running("t2", "two", 1), _running("o1", "one", 2),
            _running("r", "room", 6)]
    assert _removed(_plan(_run(), nodes, jobs)) == ["one"]
    nodes = [*_od(8), ready_node("hi", OD), ready_node("lo", OD), ready_node("room", ONPREM)]
    jobs = [*_full(nodes[:8]), _running("h", "hi", 2, priority=5), _running("l", "lo", 2, priority=1),
            _running("r", "room", 6)]
    assert _removed(_plan(_run(), nodes, jobs)) == ["lo"]


def test_a_node_is_replaced_by_one_cheaper_spot_node_ready_before_it_is_drained() -> None:
    """An on-demand node of spot-tolerant pods that fit nowhere else: a spot replacement is launched, and the
    old node is drained only once a new spot node is ready."""
    run = _run()
    nodes = [*_od(9), ready_node("old", OD)]
    jobs = [*_full(nodes[:9]), _running("f1", "old", 4, ft=True), _running("f2", "old", 2, ft=True)]
    first = _plan(run, nodes, jobs)
    assert [(a.target, a.count) for a in _kinds(first, ActionKind.SCALE_UP)] == [("spot", 1)]
    assert _removed(first) == []
    waiting = _plan(run, nodes, jobs, at=T0 + timedelta(seconds=60))  # replacement still booting
    assert _removed(waiting) == [] and _kinds(waiting, ActionKind.SCALE_UP) == []
    ready = _plan(run, [*nodes, ready_node("spot-new", SPOT, idle_since=T0)], jobs, at=T0 + timedelta(seconds=300))
    assert _removed(ready) == ["old"]


def test_the_disruption_budget_is_ten_percent_of_initialized_nodes_less_deleting_ones() -> None:
    """roundup(10% x 20) = 2 of 5 empty nodes go; nodes still booting are not initialized, so they neither count
    towards the total nor use the budget (Karpenter's BuildDisruptionBudgetMapping): with three booting, still 2;
    a node being deleted uses one (21 initialized: roundup 3 - 1)."""
    busy = _od(15)
    empty = [ready_node(f"e{i}", OD, idle_since=T0) for i in range(5)]
    assert len(_removed(_plan(_run(), [*busy, *empty], _full(busy)))) == 2
    booting = [_booting(f"b{i}") for i in range(3)]
    assert len(_removed(_plan(_run(), [*busy, *empty, *booting], _full(busy)))) == 2
    deleting = dataclasses.replace(ready_node("d0", OD), state=NodeState.DRAINING)
    assert len(_removed(_plan(_run(), [*busy, *empty, deleting], _full(busy)))) == 2
    assert len(_removed(_plan(_run(), [*busy[:10], *empty, deleting], _full(busy[:10])))) == 1


def test_do_not_disrupt_blocks_consolidation_of_busy_nodes_but_not_of_empty_ones_nor_interruptions() -> None:
    nodes = [*_od(8), ready_node("l1", OD), ready_node("room", ONPREM), ready_node("e", OD, idle_since=T0)]
    jobs = [*_full(nodes[:8]), _running("a1", "l1", 2), _running("r", "room", 2)]
    assert _removed(_plan(_run("karpenter-do-not-disrupt"), nodes, jobs)) == ["e"]
    run = _run("karpenter-do-not-disrupt")
    busy = [n for n in nodes if n.id != "e"]
    assert _removed(_plan(run, busy, jobs)) == []  # l1's pods would fit on room: karpenter would move them
    assert _removed(_plan(_run(), busy, jobs)) == ["l1"]
    spot = [ready_node("s1", SPOT)]
    noticed = _plan(run, [*busy, *spot], [*jobs, _running("ft", "s1", 8, ft=True)],
                    notices={"s1": T0 + timedelta(minutes=2)})
    assert _removed(noticed) == ["s1"]


def test_a_spot_interruption_warning_drains_and_deletes_the_node_ahead_of_the_deadline() -> None:
    run = _run()
    nodes = [*_od(3), ready_node("s1", SPOT)]
    jobs = [*_full(nodes[:3]), _running("ft", "s1", 8, ft=True)]
    result = _plan(run, nodes, jobs, notices={"s1": T0 + timedelta(minutes=2)})
    assert _removed(result) == ["s1"]
    assert "spot interruption warning" in _kinds(result, ActionKind.SCALE_DOWN)[0].reason


# ---------------------------------------------------------------- graceful termination


def test_karpenter_drains_with_a_30_s_grace_period_a_checkpoint_that_fits_lands_first() -> None:
    """A node going empty-of-room: its fault-tolerant job checkpoints in 20 s on SIGTERM, so the node waits for
    it and nothing is placed there meanwhile; a job whose checkpoint takes 60 s dies with its node."""
    run = _run()
    nodes = [*_od(9), ready_node("l1", OD), ready_node("room", ONPREM)]
    quick = _running("quick", "l1", 2, ft=True, checkpoint_s=20.0, started=T0 - timedelta(minutes=50))
    jobs = [*_full(nodes[:9]), quick, _running("r", "room", 2)]
    first = _plan(run, nodes, jobs)
    assert [a.target for a in _kinds(first, ActionKind.REQUEST_CHECKPOINT)] == ["quick"] and _removed(first) == []
    # while it checkpoints, a pending job that would fit on l1 goes elsewhere
    asked = T0
    checkpointing = dataclasses.replace(quick, last_checkpoint_at=asked)
    newcomer = job("new", gpus=6, submitted=T0)
    mid = _plan(run, nodes, [*jobs[:-2], checkpointing, jobs[-1], newcomer], at=T0 + timedelta(seconds=10))
    assert [p.node_ids for p in _kinds(mid, ActionKind.PLACE_JOB)] == [("room",)]
    done = _plan(run, nodes, [*jobs[:-2], checkpointing, jobs[-1]], at=T0 + timedelta(seconds=25))
    assert [a.target for a in _kinds(done, ActionKind.EVICT_JOB)] == ["quick"] and _removed(done) == ["l1"]
    slow = _running("slow", "l1", 2, ft=True, checkpoint_s=60.0)
    other = _plan(_run(), nodes, [*jobs[:-2], slow, jobs[-1]])
    assert _kinds(other, ActionKind.REQUEST_CHECKPOINT) == [] and _removed(other) == ["l1"]


def test_the_cluster_autoscaler_drains_with_a_30_s_grace_period_too() -> None:
    """reactive's scale-down of an unneeded node: a job whose checkpoint fits 30 s checkpoints before the node
    goes; one that does not dies with it, as before."""
    nodes = [ready_node("n1", OD), ready_node("n2", OD)]
    quick = _running("quick", "n1", 2, ft=True, checkpoint_s=20.0, started=T0 - timedelta(minutes=45))
    big = _running("big", "n2", 4)
    run = _run("reactive")
    step = next(s for _, s in run.pipeline if isinstance(s, ClusterAutoscalerScaleDown))
    step.last_scale_up = T0 - timedelta(hours=1)
    _plan(run, nodes, [quick, big], at=T0)
    first = _plan(run, nodes, [quick, big], at=T0 + timedelta(minutes=10))
    assert [a.target for a in _kinds(first, ActionKind.REQUEST_CHECKPOINT)] == ["quick"] and _removed(first) == []
    asked = T0 + timedelta(minutes=10)
    checkpointing = dataclasses.replace(quick, last_checkpoint_at=asked)
    done = _plan(run, nodes, [checkpointing, big], at=asked + timedelta(seconds=20))
    assert [a.target for a in _kinds(done, ActionKind.EVICT_JOB)] == ["quick"] and _removed(done) == ["n1"]
    slow_run = _run("reactive")
    slow_step = next(s for _, s in slow_run.pipeline if isinstance(s, ClusterAutoscalerScaleDown))
    slow_step.last_scale_up = T0 - timedelta(hours=1)
    slow = _running("slow", "n1", 2, ft=True, checkpoint_s=60.0)
    _plan(slow_run, nodes, [slow, big], at=T0)
    assert _removed(_plan(slow_run, nodes, [slow, big], at=T0 + timedelta(minutes=10))) == ["n1"]


def test_balanced_consolidation_moves_only_when_its_savings_outweigh_its_disruption() -> None:
    """score = (savings / pool cost) / (pods disrupted / pool pods) >= 1/2. Deleting a node of 5 small pods among
    10 equal nodes (14 pods) saves 10% of the cost for 36% of the pods: 0.28, declined (karpenter moves them);
    a node of 1 pod: 10% for 10%, 1.0, approved."""
    nodes = [*_od(9), ready_node("l1", OD), ready_node("room", ONPREM)]
    five = [_running(f"s{i}", "l1", 1) for i in range(5)]
    jobs = [*_full(nodes[:9]), *five, _running("r", "room", 2)]
    declined = _plan(_run("karpenter-balanced"), nodes, jobs)
    assert _removed(declined) == [] and any("Balanced consolidation declined" in h.reason for h in declined.holds)
    assert _removed(_plan(_run(), nodes, jobs)) == ["l1"]
    one = [*_full(nodes[:9]), _running("s0", "l1", 2), _running("r", "room", 2)]
    assert _removed(_plan(_run("karpenter-balanced"), nodes, one)) == ["l1"]


def test_a_failed_offering_is_skipped_for_three_minutes() -> None:
    """UnavailableOfferingsTTL = 3 min: after a failed launch the group cools down that long (provisioning falls
    back to the next offering), where the Cluster Autoscaler backs a group off 5 min."""
    assert _run().launch_failure_cooldown_s == 180.0 and _run("reactive").launch_failure_cooldown_s == 300.0
    assert _run().interruption_cooldown_s == 0.0


# ---------------------------------------------------------------- fidelity to the documented behaviour


def test_multi_node_consolidation_replaces_several_nodes_with_one_cheaper_node() -> None:
    """"Multi Node Consolidation - Try to delete two or more nodes in parallel, possibly launching a single
    replacement whose price is lower than that of all nodes being removed": two on-demand nodes holding 3 GPUs
    each, whose pods fit nowhere else, are replaced by one on-demand node and drained once it is ready."""
    run = _run()
    nodes = [*_od(18), ready_node("l1", OD), ready_node("l2", OD)]
    jobs = [*_full(nodes[:18]), _running("a1", "l1", 3), _running("a2", "l2", 3)]
    first = _plan(run, nodes, jobs)
    assert [(a.target, a.count) for a in _kinds(first, ActionKind.SCALE_UP)] == [("od", 1)]
    assert "multi node consolidation" in _kinds(first, ActionKind.SCALE_UP)[0].reason and _removed(first) == []
    ready = _plan(run, [*nodes, ready_node("od-new", OD, idle_since=T0)], jobs, at=T0 + timedelta(seconds=300))
    assert _removed(ready) == ["l1", "l2"]
    # SpotToSpotConsolidation is off by default, for many spot nodes to one too: two light spot nodes are not
    # replaced by one spot node; one is deleted, its pod fitting on the other
    spot = [ready_node("a1", SPOT), ready_node("a2", SPOT), *_od(18)]
    spot_jobs = [_running("f1", "a1", 3, ft=True), _running("f2", "a2", 3, ft=True), *_full(spot[2:])]
    result = _plan(_run(), spot, spot_jobs)
    assert _kinds(result, ActionKind.SCALE_UP) == [] and _removed(result) == ["a1"]


def _ca(run: StrategyRun) -> ClusterAutoscalerScaleDown:
    step = next(s for _, s in run.pipeline if isinstance(s, ClusterAutoscalerScaleDown))
    step.last_scale_up = T0 - timedelta(hours=1)
    return step


def test_the_cluster_autoscaler_counts_a_node_unneeded_only_while_its_pods_fit_elsewhere() -> None:
    """A node under 50% GPU requests whose pods fit nowhere else is not unneeded: its 10 minutes start when room
    appears, not when its utilisation fell."""
    run = _run("reactive")
    step = _ca(run)
    nodes = [ready_node("n1", OD), ready_node("n2", OD)]
    crowded = [_running("small", "n1", 2), _running("big", "n2", 8)]
    _plan(run, nodes, crowded, at=T0)
    assert "n1" not in step.unneeded_since
    roomy = [_running("small", "n1", 2), _running("big", "n2", 4)]
    assert _removed(_plan(run, nodes, roomy, at=T0 + timedelta(minutes=10))) == []
    assert _removed(_plan(run, nodes, roomy, at=T0 + timedelta(minutes=20))) == ["n1"]


def test_the_cluster_autoscaler_drains_one_non_empty_node_at_a_time_and_deletes_empty_ones_together() -> None:
    """--max-drain-parallelism 1: of three unneeded nodes with pods, one goes per pass; --max-scale-down-parallelism
    10: two empty ones go together."""
    run = _run("reactive")
    _ca(run)
    nodes = [ready_node("a", OD), ready_node("b", OD), ready_node("c", OD), ready_node("room", ONPREM)]
    jobs = [_running("ja", "a", 1), _running("jb", "b", 1), _running("jc", "c", 1)]
    _plan(run, nodes, jobs, at=T0)
    assert _removed(_plan(run, nodes, jobs, at=T0 + timedelta(minutes=10))) == ["a"]
    empty_run = _run("reactive")
    _ca(empty_run)
    empties = [ready_node("e1", OD, idle_since=T0), ready_node("e2", OD, idle_since=T0)]
    _plan(empty_run, empties, [], at=T0)
    assert _removed(_plan(empty_run, empties, [], at=T0 + timedelta(minutes=10))) == ["e1", "e2"]


def test_the_node_termination_handler_drains_a_noticed_spot_node_under_the_cluster_autoscaler() -> None:
    """A spot interruption notice: the node is cordoned and drained (a checkpoint that fits the 30 s grace is
    asked, a job that cannot checkpoint is evicted at once); the cloud reclaims the node itself."""
    run = _run("reactive")
    _ca(run)
    nodes = [ready_node("s1", SPOT), ready_node("s2", SPOT)]
    quick = _running("quick", "s1", 4, ft=True, checkpoint_s=20.0, started=T0 - timedelta(minutes=40))
    rigid = _running("rigid", "s1", 4)
    result = _plan(run, nodes, [quick, rigid, _running("other", "s2", 8)], notices={"s1": T0 + timedelta(minutes=2)})
    assert [a.target for a in _kinds(result, ActionKind.REQUEST_CHECKPOINT)] == ["quick"]
    assert [a.target for a in _kinds(result, ActionKind.EVICT_JOB)] == ["rigid"]
    assert _removed(result) == []


# ---------------------------------------------------------------- karpenter-ml


def test_karpenter_ml_keeps_nodes_of_jobs_that_cannot_checkpoint_and_consolidates_the_others() -> None:
    """do-not-disrupt on a job that would start over: its node stays where `karpenter` moves it; a node whose
    job checkpoints is consolidated as under `karpenter`."""
    nodes = [*_od(8), ready_node("l1", OD), ready_node("room", ONPREM)]
    rigid = [*_full(nodes[:8]), _running("rigid", "l1", 2), _running("r", "room", 2)]
    result = _plan(_run("karpenter-ml"), nodes, rigid)
    assert _removed(result) == [] and any("do-not-disrupt" in h.reason for h in result.holds)
    assert _removed(_plan(_run(), nodes, rigid)) == ["l1"]
    ft = [*_full(nodes[:8]), _running("ft", "l1", 2, ft=True, checkpoint_s=20.0, started=T0 - timedelta(minutes=1)),
          _running("r", "room", 2)]
    assert _removed(_plan(_run("karpenter-ml"), nodes, ft)) == ["l1"]
    assert _removed(_plan(_run("karpenter-balanced-ml"), nodes, rigid)) == []


def test_karpenter_ml_gives_each_job_a_grace_period_of_at_least_its_checkpoint() -> None:
    """A 200 s checkpoint fits no 30 s grace (the job dies with its node under `karpenter`); under `karpenter-ml`
    the node waits for it, on consolidation and on a spot interruption alike."""
    nodes = [*_od(8), ready_node("l1", OD), ready_node("room", ONPREM)]
    slow = _running("slow", "l1", 2, ft=True, checkpoint_s=200.0, started=T0 - timedelta(minutes=50))
    jobs = [*_full(nodes[:8]), slow, _running("r", "room", 2)]
    plain = _plan(_run(), nodes, jobs)
    assert _kinds(plain, ActionKind.REQUEST_CHECKPOINT) == [] and _removed(plain) == ["l1"]
    ml = _run("karpenter-ml")
    first = _plan(ml, nodes, jobs)
    assert [a.target for a in _kinds(first, ActionKind.REQUEST_CHECKPOINT)] == ["slow"] and _removed(first) == []
    landed = dataclasses.replace(slow, last_checkpoint_at=T0)
    done = _plan(ml, nodes, [*jobs[:-2], landed, jobs[-1]], at=T0 + timedelta(seconds=200))
    assert [a.target for a in _kinds(done, ActionKind.EVICT_JOB)] == ["slow"] and _removed(done) == ["l1"]
    spot = [*_od(3), ready_node("s1", SPOT)]
    on_spot = _running("slow-spot", "s1", 8, ft=True, checkpoint_s=100.0, started=T0 - timedelta(minutes=50))
    noticed = _plan(_run("karpenter-ml"), spot, [*_full(spot[:3]), on_spot], notices={"s1": T0 + timedelta(minutes=2)})
    assert [a.target for a in _kinds(noticed, ActionKind.REQUEST_CHECKPOINT)] == ["slow-spot"]
    assert _removed(noticed) == []
