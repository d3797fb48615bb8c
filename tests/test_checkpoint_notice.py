"""Checkpoint on notice: a spot reclaim notice asks jobs whose checkpoint fits to checkpoint, and it saves their work."""

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

SPOT = group("spot", capacity_type=CapacityType.SPOT)
DEADLINE = T0 + timedelta(seconds=120)


def on_spot(jid: str, **kw: object):
    return job(jid, gpus=8, state=JobState.RUNNING, nodes=("spot-0",), started=T0 - timedelta(hours=1),
               fault_tolerant=True, checkpoint_interval_s=1800.0, **kw)


def noticed(*jobs, now=T0) -> Plan:
    snap = Snapshot(groups=(SPOT,), nodes=(ready_node("spot-0", SPOT),), jobs=tuple(jobs), targets={"spot": 1},
                    notices={"spot-0": DEADLINE})
    return plan(snap, [], {}, TablePrices({"spot": 8.0}), now=now, ids=PlanIds("p"))


def test_a_checkpoint_that_fits_the_notice_is_requested_and_one_that_does_not_is_held() -> None:
    p = noticed(on_spot("quick", checkpoint_duration_s=60.0), on_spot("slow", checkpoint_duration_s=200.0))
    (ask,) = p.actions
    assert (ask.kind, ask.target, ask.step) == (ActionKind.REQUEST_CHECKPOINT, "quick", "checkpoint_on_notice")
    assert "its 60 s checkpoint fits the 110 s left (less a 10 s margin)" in ask.reason
    (hold,) = [h for h in p.holds if h.subject == "job:slow"]
    assert "its 200 s checkpoint does not fit" in hold.reason and "last periodic checkpoint" in hold.reason
    asked = on_spot("quick", checkpoint_duration_s=60.0, last_checkpoint_at=T0)
    assert noticed(asked, now=T0 + timedelta(seconds=30)).actions == (), "asked once per notice"
    unmeasured = noticed(on_spot("blind"))
    assert unmeasured.actions == () and "no measured checkpoint duration" in unmeasured.holds[0].reason


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
