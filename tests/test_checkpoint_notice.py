"""Checkpoint on notice: a spot reclaim notice moves jobs off the node, checkpointing first when it fits; a rebalance
recommendation asks for a checkpoint early."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from builders import T0, TablePrices, group, job, ready_node

from burst import progress
from burst.model import ActionKind, CapacityType, JobState, Plan, Snapshot
from burst.planner import PlanIds, plan
from burst.settings import data_dir
from burst.sim.compare import compare
from burst.sim.setup import default_setup
from burst.sim.traces import load_trace
from burst.workloads.queue import apply_job_action

SPOT = group("spot", capacity_type=CapacityType.SPOT)
OD = group("od")
DEADLINE = T0 + timedelta(seconds=120)
PRICES = TablePrices({"spot": 8.0, "od": 32.0})


def on_spot(jid: str, **kw: object):
    """A job 50 minutes into its run on spot-0, checkpointed every 30 minutes: 1200 s of work unsaved at T0."""
    return job(jid, gpus=kw.pop("gpus", 8), state=JobState.RUNNING, nodes=("spot-0",),
               started=T0 - timedelta(minutes=50), fault_tolerant=kw.pop("fault_tolerant", True),
               checkpoint_interval_s=1800.0, **kw)


def warned(*jobs, now=T0, notices=None, rebalances=None, od: bool = False) -> Plan:
    """One plan with spot-0 noticed (by default) or recommended for rebalance; `od`: an idle on-demand node too."""
    nodes = (ready_node("spot-0", SPOT), *((ready_node("od-0", OD, idle_since=now),) if od else ()))
    snap = Snapshot(groups=(SPOT, OD), nodes=nodes, jobs=tuple(jobs), targets={"spot": 1, "od": int(od)},
                    notices={"spot-0": DEADLINE} if notices is None else notices, rebalances=rebalances or {})
    return plan(snap, [], {}, PRICES, now=now, ids=PlanIds("p"))


def test_a_checkpoint_that_fits_the_notice_is_asked_then_the_job_is_evicted_once_it_lands() -> None:
    quick = on_spot("quick", checkpoint_duration_s=60.0)
    (ask,) = warned(quick).actions
    assert (ask.kind, ask.target, ask.step) == (ActionKind.REQUEST_CHECKPOINT, "quick", "checkpoint_on_notice")
    assert ask.reason == ("spot reclaim at 12:02:00, 110 s left (less a 10 s margin): checkpoint (60 s) before "
                          "moving off the reclaimed node (1200 s of work unsaved)")
    asked = apply_job_action(quick, ask, T0)
    during = warned(asked, now=T0 + timedelta(seconds=30))
    assert during.actions == (), "asked once per notice: the checkpoint under way is waited for"
    assert [h.reason for h in during.holds if h.subject == "job:quick"] == [
        "spot reclaim at 12:02:00, 80 s left (less a 10 s margin): its checkpoint is under way (30 of 60 s); "
        "then moving off the reclaimed node"]
    evict, release = warned(asked, now=T0 + timedelta(seconds=60)).actions
    assert (evict.kind, evict.target) == (ActionKind.EVICT_JOB, "quick")
    assert (release.kind, release.target, release.node_ids) == (ActionKind.SCALE_DOWN, "spot", ("spot-0",)), \
        "the emptied node goes now: kept to its deadline, its group would replace it"
    assert evict.reason.endswith("moving off the reclaimed node (60 s of work unsaved; requeued from its last "
                                 "checkpoint)")
    back = apply_job_action(asked, evict, T0 + timedelta(seconds=60))
    assert (back.id, back.state, back.work_done_s) == ("quick", JobState.PENDING, 3000.0), \
        "resumes from the checkpoint asked at the notice, 60 s before the deadline"


def test_a_checkpoint_that_does_not_fit_is_not_asked_the_job_is_evicted_at_once_and_placed_elsewhere() -> None:
    slow = on_spot("slow", gpus=4, checkpoint_duration_s=200.0)
    blind = on_spot("blind", gpus=2)
    fragile = on_spot("fragile", gpus=2, fault_tolerant=False)  # cannot resume: moving it saves nothing
    p = warned(slow, blind, fragile, od=True)
    assert [(a.kind, a.target) for a in p.actions] == [(ActionKind.EVICT_JOB, "slow"), (ActionKind.EVICT_JOB, "blind")]
    assert p.actions[0].reason == (
        "spot reclaim at 12:02:00, 110 s left (less a 10 s margin): moving off the reclaimed node (its 200 s "
        "checkpoint exceeds the 110 s budget; 1200 s of work unsaved; requeued from its last checkpoint)")
    assert "(no checkpoint to take; requeued from its last checkpoint)" in p.actions[1].reason
    back = apply_job_action(slow, p.actions[0], T0)
    assert (back.id, back.state, back.work_done_s, back.node_ids) == ("slow", JobState.PENDING, 1800.0, ())
    (place,) = warned(back, fragile, od=True, now=T0 + timedelta(seconds=10)).actions
    assert (place.kind, place.target, place.node_ids) == (ActionKind.PLACE_JOB, "slow", ("od-0",)), \
        "requeued under the same id and placed on another node before the noticed one goes"


def test_a_rebalance_recommendation_asks_for_a_checkpoint_once_and_evicts_nothing() -> None:
    quick, slow = on_spot("quick", gpus=4, checkpoint_duration_s=60.0), on_spot("slow", gpus=4, checkpoint_duration_s=200.0)
    p = warned(quick, slow, notices={}, rebalances={"spot-0": T0})
    (ask,) = p.actions
    assert (ask.kind, ask.target, ask.step) == (ActionKind.REQUEST_CHECKPOINT, "quick", "checkpoint_on_notice")
    assert ask.reason == ("spot rebalance recommended at 12:00:00: checkpoint (60 s) now; it keeps running "
                          "(1200 s of work unsaved)")
    assert [h.reason for h in p.holds if h.subject == "job:slow"] == [
        "spot rebalance recommended at 12:00:00: no checkpoint asked (its 200 s checkpoint exceeds the 110 s "
        "budget; 1200 s of work unsaved); it keeps running"]
    asked = apply_job_action(quick, ask, T0)
    later = T0 + timedelta(minutes=5)  # the checkpoint landed long ago: 300 s of work unsaved again
    assert warned(asked, notices={}, rebalances={"spot-0": T0}, now=later).actions == (), "once per recommendation"
    (again,) = warned(asked, notices={}, rebalances={"spot-0": later}, now=later).actions
    assert (again.kind, again.target) == (ActionKind.REQUEST_CHECKPOINT, "quick"), "a new recommendation asks again"


def test_a_requested_checkpoint_saves_work_only_once_it_has_completed() -> None:
    asked = job("j", gpus=8, state=JobState.RUNNING, nodes=("spot-0",), started=T0 - timedelta(minutes=50),
                fault_tolerant=True, checkpoint_interval_s=1800.0, checkpoint_duration_s=60.0, last_checkpoint_at=T0)
    assert progress.checkpointed_work(asked, T0 + timedelta(seconds=59)) == 1800.0, "not complete yet: the periodic one"
    assert progress.checkpointed_work(asked, T0 + timedelta(seconds=60)) == 3000.0, "saves the work as of the request"
    back, lost = progress.requeue(asked, DEADLINE)
    assert (back.work_done_s, lost) == (3000.0, 120.0)
    fresh = dataclasses.replace(asked, started_at=T0 - timedelta(minutes=10))  # no periodic checkpoint yet
    back, lost = progress.requeue(fresh, T0 + timedelta(seconds=30))  # lost before the request completed
    assert (back.work_done_s, back.last_checkpoint_at, lost) == (0.0, None, 630.0)


def test_checkpoint_on_notice_loses_less_work_than_periodic_checkpoints_alone() -> None:
    trace = load_trace(data_dir() / "traces" / "philly.csv").window(datetime(2017, 10, 2, tzinfo=UTC), days=0.5)
    setup = default_setup(trace.stats())
    stormy = dataclasses.replace(setup, spot_hazard_per_hour={"cloud-spot": 0.05})
    runs = compare(trace, ["burst-no-forecast", "burst-periodic-only"], setup=stormy, seed=3).results
    with_notice, periodic = runs["burst-no-forecast"], runs["burst-periodic-only"]
    assert with_notice.interruptions > 0 and periodic.interruptions > 0
    per_interruption = [r.lost_gpu_hours / r.interruptions for r in (with_notice, periodic)]
    assert per_interruption[0] < per_interruption[1]
    assert with_notice.checkpoint_violations == periodic.checkpoint_violations == 0


def test_a_noticed_node_emptied_by_its_evictions_is_released_in_the_same_plan_unless_a_job_stays() -> None:
    """Every job on spot-0 is evicted at the notice: the plan releases spot-0 at once (jobs are evicted before
    nodes are terminated), so its group does not replace it at the deadline after the jobs have gone elsewhere.
    A job that cannot move stays on it: then the node stays too."""
    slow = on_spot("slow", gpus=4, checkpoint_duration_s=200.0)
    p = warned(slow)
    assert [(a.kind, a.target, a.node_ids) for a in p.actions] == [
        (ActionKind.EVICT_JOB, "slow", ("spot-0",)), (ActionKind.SCALE_DOWN, "spot", ("spot-0",))]
    assert p.actions[1].reason == ("1 node(s) emptied by this plan's moves or reclaim notices released now, not kept "
                                   "idle to break-even (1 -> 0 nodes)")
    fragile = on_spot("fragile", gpus=2, fault_tolerant=False)
    assert [a.kind for a in warned(slow, fragile).actions] == [ActionKind.EVICT_JOB]
