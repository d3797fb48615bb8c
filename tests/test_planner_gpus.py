"""The planner on on-prem nodes that reported their GPUs: placement binds GPU UUIDs, unhealthy GPUs are vacated."""

from __future__ import annotations

from datetime import timedelta

from builders import T0, TablePrices, group, job, ready_node
from gpu_nodes import pcie_node

from burst.model import ActionKind, GpuHealth, JobState, NodeGpus, Plan, Snapshot, Tier
from burst.planner import PlanIds, plan
from burst.workloads.queue import apply_job_action

RACK = group("rack", tier=Tier.STEADY, max_size=2)
PRICES = TablePrices({"rack": 8.0})


def planned(jobs: tuple, gpus: dict[str, NodeGpus], now=T0) -> Plan:
    nodes = tuple(ready_node(n, RACK) for n in sorted(gpus))
    snap = Snapshot(groups=(RACK,), nodes=nodes, jobs=jobs, targets={"rack": len(nodes)}, node_gpus=gpus)
    return plan(snap, [], {}, PRICES, now=now, ids=PlanIds("p"))


def indices(node: NodeGpus, uuids: tuple[str, ...]) -> list[int]:
    by_uuid = {g.uuid: g.index for g in node.gpus}
    return sorted(by_uuid[u] for u in uuids)


def running(jid: str, node: NodeGpus, idx: list[int], **kw: object):
    return job(jid, gpus=len(idx), state=JobState.RUNNING, nodes=(node.node_id,), started=T0 - timedelta(hours=1),
               gpu_uuids=tuple(node.gpus[i].uuid for i in idx), **kw)


def test_placement_binds_the_gpus_the_local_scheduler_picks() -> None:
    n1 = pcie_node("n1")
    p = planned((job("two", gpus=2),), {"n1": n1})
    (place,) = [a for a in p.actions if a.kind is ActionKind.PLACE_JOB]
    assert place.node_ids == ("n1",) and indices(n1, place.gpu_uuids) == [0, 1]
    assert "local scheduler" in place.reason and "pcie_switch" in place.reason
    started = apply_job_action(job("two", gpus=2), place, T0)
    assert started.gpu_uuids == place.gpu_uuids and started.state is JobState.RUNNING


def test_gpus_of_running_jobs_are_taken_and_several_jobs_in_one_plan_do_not_collide() -> None:
    n1 = pcie_node("n1")
    p = planned((running("old", n1, [0, 1]), job("a", gpus=2), job("b", gpus=2)), {"n1": n1})
    places = {a.target: indices(n1, a.gpu_uuids) for a in p.actions if a.kind is ActionKind.PLACE_JOB}
    assert places == {"a": [2, 3], "b": [4, 5]}


def test_a_node_whose_jobs_predate_its_gpu_report_is_counted_right() -> None:
    n1 = pcie_node("n1")
    unbound = job("legacy", gpus=4, state=JobState.RUNNING, nodes=("n1",), started=T0 - timedelta(hours=1))
    p = planned((unbound, job("new", gpus=4), job("too-many", gpus=2)), {"n1": n1})
    places = {a.target: indices(n1, a.gpu_uuids) for a in p.actions if a.kind is ActionKind.PLACE_JOB}
    assert places == {"new": [0, 1, 2, 3]}  # the legacy job's 4 GPUs are booked as the highest 4


def test_unhealthy_gpus_take_no_new_work() -> None:
    n1 = pcie_node("n1", health={0: GpuHealth.UNHEALTHY, 1: GpuHealth.UNHEALTHY})
    p = planned((job("two", gpus=2),), {"n1": n1})
    (place,) = [a for a in p.actions if a.kind is ActionKind.PLACE_JOB]
    assert indices(n1, place.gpu_uuids) == [2, 3]
    full = planned((job("eight", gpus=8),), {"n1": n1})
    assert not [a for a in full.actions if a.kind is ActionKind.PLACE_JOB]
    assert any("local_gpus" not in h.reason and "8 free healthy GPUs" in h.reason for h in full.holds)


def test_a_job_on_an_unhealthy_gpu_is_checkpointed_then_evicted() -> None:
    n1 = pcie_node("n1", health={1: GpuHealth.UNHEALTHY})
    victim = running("victim", n1, [0, 1], fault_tolerant=True, checkpoint_duration_s=60.0)
    first = planned((victim,), {"n1": n1})
    (ask,) = [a for a in first.actions if a.step == "gpu_health"]
    assert ask.kind is ActionKind.REQUEST_CHECKPOINT and "GPU 1 of n1 is unhealthy" in ask.reason

    asked = apply_job_action(victim, ask, T0)
    during = planned((asked,), {"n1": n1}, now=T0 + timedelta(seconds=30))
    assert not [a for a in during.actions if a.step == "gpu_health"]
    assert any("checkpoint is under way (30 of 60 s)" in h.reason for h in during.holds)

    after = planned((asked,), {"n1": n1}, now=T0 + timedelta(seconds=70))
    (evict,) = [a for a in after.actions if a.step == "gpu_health"]
    assert evict.kind is ActionKind.EVICT_JOB and "moving to healthy GPUs (70 s of work unsaved" in evict.reason
    back = apply_job_action(asked, evict, T0 + timedelta(seconds=70))
    assert back.state is JobState.PENDING and back.gpu_uuids == () and back.last_checkpoint_at == T0


def test_a_job_that_cannot_checkpoint_is_evicted_at_once_and_healthy_ones_stay() -> None:
    n1 = pcie_node("n1", health={3: GpuHealth.UNHEALTHY})
    fine = running("fine", n1, [0, 1])
    hit = running("hit", n1, [2, 3])
    p = planned((fine, hit), {"n1": n1})
    moves = [(a.kind, a.target) for a in p.actions if a.step == "gpu_health"]
    assert moves == [(ActionKind.EVICT_JOB, "hit")]
    assert "no checkpoint to take" in next(a.reason for a in p.actions if a.target == "hit")


def test_without_gpu_reports_placement_is_by_count_as_before() -> None:
    snap = Snapshot(groups=(RACK,), nodes=(ready_node("n1", RACK),), jobs=(job("j", gpus=2),), targets={"rack": 1})
    p = plan(snap, [], {}, PRICES, now=T0, ids=PlanIds("p"))
    (place,) = [a for a in p.actions if a.kind is ActionKind.PLACE_JOB]
    assert place.gpu_uuids == () and place.node_ids == ("n1",)
