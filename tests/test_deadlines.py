"""Deadline "uniform progress": a job whose slack is gone runs on on-demand, not spot (through the real plan())."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from builders import T0, TablePrices, group, job, ready_node

from burst import progress
from burst.model import ActionKind, CapacityType, JobState, Plan, Policy, Snapshot, SpotPolicy
from burst.planner import PlanIds, plan
from burst.planner.context import build_context
from burst.planner.deadlines import uniform_lag_s
from burst.reconcile import Controller
from burst.state import Store
from burst.workloads.queue import MemoryQueue
from policies import load_policy_file
from providers.sim import ManualClock, SimProvider

SPOT = group("spot", capacity_type=CapacityType.SPOT)
OD = group("od")  # boot_latency_s 300: the default margin is 300 s + the job's 60 s checkpoint
PRICES = TablePrices({"spot": 8.0, "od": 24.0})
POLICY = Policy(tenant="a", spot=SpotPolicy(allowed=True))


def deadline_job(jid: str, deadline_in_s: float, **kw: object):
    fields: dict[str, object] = {"fault_tolerant": True, "checkpoint_interval_s": 1800.0,
                                 "checkpoint_duration_s": 60.0, "duration_s": 3600.0,
                                 "declared_duration_s": 3600.0, **kw}
    return job(jid, gpus=8, deadline=T0 + timedelta(seconds=deadline_in_s), **fields)


def on_spot(jid: str, deadline_in_s: float, **kw: object):
    return deadline_job(jid, deadline_in_s, state=JobState.RUNNING, nodes=("spot-0",),
                        started=T0 - timedelta(minutes=40), **kw)


def planned(*jobs, now=T0, policy: Policy = POLICY) -> Plan:
    nodes = (ready_node("spot-0", SPOT, idle_since=T0), ready_node("od-0", OD, idle_since=T0))  # not idle long
    snap = Snapshot(groups=(SPOT, OD), nodes=nodes, jobs=tuple(jobs), targets={"spot": 1, "od": 1})
    return plan(snap, [], {"a": policy}, PRICES, now=now, ids=PlanIds("p"))


def test_a_pending_job_with_plenty_of_slack_goes_to_spot() -> None:
    p = planned(deadline_job("j", 7200.0))  # 7200 s left, 3600 s of work: slack 3600 s >= 360 s
    (place,) = p.actions
    assert (place.kind, place.target, place.node_ids) == (ActionKind.PLACE_JOB, "j", ("spot-0",))
    assert not [h for h in p.holds if h.step == "deadline"]


def test_a_pending_job_whose_slack_is_below_the_margin_goes_to_on_demand() -> None:
    p = planned(deadline_job("j", 3700.0))  # slack 100 s < 300 s boot + 60 s checkpoint
    (place,) = p.actions
    assert (place.kind, place.target, place.node_ids) == (ActionKind.PLACE_JOB, "j", ("od-0",))
    (hold,) = [h for h in p.holds if h.step == "deadline"]
    assert (hold.subject, hold.reason) == ("job:j", "deadline slack 100 s < margin 360 s: placed on on-demand only, not spot")


def test_progress_to_the_last_checkpoint_counts_for_a_requeued_job() -> None:
    resumed = deadline_job("j", 2200.0, work_done_s=1800.0)  # 1800 s left to do in 2200 s: slack 400 s
    assert planned(resumed).actions[0].node_ids == ("spot-0",)
    assert planned(deadline_job("j", 2100.0, work_done_s=1800.0)).actions[0].node_ids == ("od-0",)  # slack 300 s


def test_the_policy_margin_replaces_the_default() -> None:
    strict = Policy(tenant="a", spot=SpotPolicy(allowed=True, deadline_margin_s=4000.0))
    p = planned(deadline_job("j", 7200.0), policy=strict)  # slack 3600 s < 4000 s
    assert p.actions[0].node_ids == ("od-0",)
    assert [h.reason for h in p.holds if h.step == "deadline"] == [
        "deadline slack 3600 s < margin 4000 s: placed on on-demand only, not spot"]


def test_a_running_spot_job_behind_its_deadline_checkpoints_then_is_requeued_to_on_demand() -> None:
    running = on_spot("j", 1500.0)  # 40 min in, checkpointed at 30 min: 1800 s left in 1500 s
    p = planned(running)
    (ask,) = p.actions
    assert (ask.kind, ask.target, ask.step, ask.node_ids) == (ActionKind.REQUEST_CHECKPOINT, "j", "deadline", ("spot-0",))
    assert ask.reason == ("deadline slack -300 s < margin 360 s: checkpoint (60 s) before moving to on-demand "
                          "(600 s of work unsaved)")

    asked = on_spot("j", 1500.0, last_checkpoint_at=T0)  # the job source records the request
    waiting = planned(asked, now=T0 + timedelta(seconds=30))
    assert waiting.actions == ()
    assert [h.reason for h in waiting.holds if h.step == "deadline"] == [
        "deadline slack -330 s < margin 360 s: its checkpoint is under way (30 of 60 s); then moving to on-demand"]

    done_at = T0 + timedelta(seconds=60)  # the checkpoint saved 2400 s of work: 1200 s left in 1440 s
    moved = planned(asked, now=done_at)
    (evict,) = moved.actions
    assert (evict.kind, evict.target, evict.step) == (ActionKind.EVICT_JOB, "j", "deadline")
    assert evict.reason == ("deadline slack 240 s < margin 360 s: moving to on-demand (60 s of work unsaved; "
                            "requeued from its last checkpoint)")

    back, lost = progress.requeue(asked, done_at)
    assert (back.state, back.work_done_s, lost) == (JobState.PENDING, 2400.0, 60.0)
    (place,) = planned(back, now=done_at).actions
    assert (place.kind, place.target, place.node_ids) == (ActionKind.PLACE_JOB, "j", ("od-0",))


def test_a_checkpoint_that_restores_the_slack_keeps_the_job_on_spot() -> None:
    (ask,) = planned(on_spot("j", 1900.0)).actions  # slack 100 s, but behind only by 600 s of unsaved work
    assert ask.kind is ActionKind.REQUEST_CHECKPOINT
    asked = on_spot("j", 1900.0, last_checkpoint_at=T0)
    later = planned(asked, now=T0 + timedelta(seconds=60))  # 1200 s left in 1840 s: slack 640 s
    assert later.actions == () and not [h for h in later.holds if h.step == "deadline"]


def test_an_evicted_job_frees_its_spot_gpus_for_this_plan() -> None:
    cannot = on_spot("j", 1500.0, checkpoint_duration_s=None)
    other = job("k", gpus=8, fault_tolerant=True, submitted=T0 - timedelta(minutes=1))
    p = planned(cannot, other)
    assert [(a.kind, a.target, a.node_ids) for a in p.actions] == [
        (ActionKind.EVICT_JOB, "j", ("spot-0",)), (ActionKind.PLACE_JOB, "k", ("spot-0",))]
    assert "(no checkpoint to take; requeued" in p.actions[0].reason


def test_jobs_without_a_deadline_or_spot_eligibility_are_left_alone() -> None:
    no_deadline = job("j", gpus=8, fault_tolerant=True, duration_s=3600.0)
    assert planned(no_deadline).actions[0].node_ids == ("spot-0",)
    rigid = deadline_job("r", 3700.0, fault_tolerant=False)  # never on spot: no deadline hold
    p = planned(rigid)
    assert p.actions[0].node_ids == ("od-0",) and not [h for h in p.holds if h.step == "deadline"]


def test_the_policy_file_gives_the_deadline_margin(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("spot:\n  allowed: true\n  deadline_margin: 15m\n")
    assert load_policy_file(path).spot == SpotPolicy(allowed=True, deadline_margin_s=900.0)


def test_through_the_reconcile_loop_a_job_out_of_slack_checkpoints_leaves_spot_and_resumes_on_on_demand() -> None:
    clock = ManualClock(T0)
    sim = SimProvider([dataclasses.replace(g, boot_latency_s=300.0) for g in (SPOT, OD)], clock=clock, cluster="test")
    queue = MemoryQueue()
    policies = {"a": POLICY}
    ctl = Controller(providers={"sim": sim}, source=queue, store=Store(":memory:"), policies=lambda: policies,
                     prices=LoopPrices(), clock=clock, cluster="test")
    queue.submit(deadline_job("j", 4500.0))  # slack 900 s: spot

    def step(seconds: float) -> Plan:
        clock.advance(seconds)
        return ctl.tick().plan

    assert [(a.kind, a.target) for a in step(0).actions] == [(ActionKind.SCALE_UP, "spot")]
    (place,) = step(300).actions
    assert place.kind is ActionKind.PLACE_JOB and place.node_ids[0].startswith("spot")
    policies["a"] = Policy(tenant="a", spot=SpotPolicy(allowed=True, deadline_margin_s=2000.0))  # a stricter tenant
    (ask,) = step(600).actions
    assert (ask.kind, ask.reason) == (ActionKind.REQUEST_CHECKPOINT, "deadline slack 0 s < margin 2000 s: checkpoint "
                                      "(60 s) before moving to on-demand (600 s of work unsaved)")
    assert step(30).actions == ()  # the checkpoint runs
    (evict,) = step(30).actions
    assert (evict.kind, evict.reason) == (ActionKind.EVICT_JOB, "deadline slack 540 s < margin 2000 s: moving to "
                                          "on-demand (60 s of work unsaved; requeued from its last checkpoint)")
    (back,) = [j for j in queue.peek(clock(), {}) if j.id == "j"]
    assert (back.state, back.work_done_s) == (JobState.PENDING, 600.0)
    ups = step(1).of_kind(ActionKind.SCALE_UP)
    assert [(a.target, a.count) for a in ups] == [("od", 1)]
    (on_demand,) = step(300).of_kind(ActionKind.PLACE_JOB)
    assert on_demand.target == "j" and on_demand.node_ids[0].startswith("od")


class LoopPrices:
    def group_price(self, g: object) -> float:
        return PRICES.per_node[g.id]  # type: ignore[attr-defined]

    def standby_price(self, g: object) -> float:
        return 0.0


def test_a_pending_job_behind_uniform_progress_goes_to_on_demand_though_it_has_slack() -> None:
    # Submitted 2000 s ago with 6000 s to its deadline and 3000 s of work: 1000 s of it are due by now.
    late = deadline_job("j", 4000.0, duration_s=3000.0, declared_duration_s=3000.0, submitted=T0 - timedelta(seconds=2000))
    p = planned(late)  # slack 4000 - 3000 = 1000 s >= 360 s, but 1000 s behind the line > 360 s
    assert p.actions[0].node_ids == ("od-0",)
    assert [h.reason for h in p.holds if h.step == "deadline"] == [
        "behind uniform progress to its deadline by 1000 s of work > margin 360 s: placed on on-demand only, not spot"]
    # With 700 s of work saved it is 300 s behind: within one move's overhead, so spot serves it.
    resumed = deadline_job("j", 4000.0, duration_s=3000.0, declared_duration_s=3000.0, submitted=T0 - timedelta(seconds=2000), work_done_s=700.0)
    assert planned(resumed).actions[0].node_ids == ("spot-0",)


def test_a_running_spot_job_is_held_to_its_slack_not_to_the_uniform_line() -> None:
    # 10000 s into a 13600 s window, 3000 s of work: 2206 s due, 1800 s saved by its periodic checkpoint,
    # so 406 s behind the line (> the 360 s margin) but with 3600 - 1200 = 2400 s of slack: it stays on spot.
    running = on_spot("j", 3600.0, duration_s=3000.0, declared_duration_s=3000.0, submitted=T0 - timedelta(seconds=10000))
    snap_ctx = build_context(Snapshot(groups=(SPOT, OD), nodes=(), jobs=(running,)), (), {}, PRICES, T0)
    assert uniform_lag_s(running, snap_ctx) == pytest.approx(3000 * 10000 / 13600 - 1800)
    p = planned(running)
    assert [a for a in p.actions if a.step == "deadline"] == []
    assert [h for h in p.holds if h.step == "deadline"] == []
