"""How a job's work advances, is checkpointed and is lost (burst.progress), figures by hand."""

from __future__ import annotations

from datetime import timedelta

import pytest
from builders import T0, job

from burst import progress
from burst.model import Job, JobState


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def running(**kw: object) -> Job:
    return job("j", gpus=8, state=JobState.RUNNING, nodes=("n1",), started=T0, **kw)


def test_work_at_adds_the_current_run_to_banked_work() -> None:
    assert progress.work_at(running(), T0 + s(600)) == 600.0
    assert progress.work_at(running(work_done_s=100.0), T0 + s(600)) == 700.0
    assert (
        progress.work_at(running(work_done_s=100.0), T0 - s(60)) == 100.0
    )  # a clock behind the start adds nothing
    assert progress.work_at(running(duration_s=500.0), T0 + s(600)) == 500.0  # capped at the duration
    ckpt = job("c", gpus=8, state=JobState.CHECKPOINTING, nodes=("n1",), started=T0, work_done_s=50.0)
    assert progress.work_at(ckpt, T0 + s(10)) == 60.0  # checkpointing still runs


def test_work_at_of_a_job_not_running_is_its_banked_work() -> None:
    pending = job("p", work_done_s=1200.0, started=T0)
    assert progress.work_at(pending, T0 + s(9999)) == 1200.0
    done = job("d", state=JobState.SUCCEEDED, started=T0, work_done_s=300.0)
    assert progress.work_at(done, T0 + s(9999)) == 300.0


def test_checkpointed_work_counts_whole_intervals_for_fault_tolerant_jobs() -> None:
    ft = running(fault_tolerant=True, checkpoint_interval_s=600.0)
    assert progress.checkpointed_work(ft, T0 + s(599)) == 0.0
    assert progress.checkpointed_work(ft, T0 + s(600)) == 600.0
    assert progress.checkpointed_work(ft, T0 + s(1500)) == 1200.0
    banked = running(fault_tolerant=True, checkpoint_interval_s=600.0, work_done_s=300.0)
    assert progress.checkpointed_work(banked, T0 + s(1500)) == 1500.0  # 300 banked + 2 intervals
    assert progress.last_checkpoint_at(ft, T0 + s(1500)) == T0 + s(1200)


def test_checkpointed_work_is_nothing_without_fault_tolerance() -> None:
    assert progress.checkpointed_work(running(checkpoint_interval_s=600.0), T0 + s(1500)) == 0.0
    assert progress.checkpointed_work(running(), T0 + s(1500)) == 0.0


def test_requeue_of_a_fault_tolerant_job_loses_only_the_work_since_its_last_checkpoint() -> None:
    ft = running(fault_tolerant=True, checkpoint_interval_s=600.0, duration_s=7200.0)
    back, lost = progress.requeue(ft, T0 + s(1500))
    assert lost == 300.0
    assert back.state is JobState.PENDING
    assert back.work_done_s == 1200.0
    assert back.node_ids == () and back.started_at is None
    assert back.last_checkpoint_at == T0 + s(1200)
    # Placed again at T0+2000, it resumes from 1200 and loses 100 s on a second loss at T0+2700.
    again = progress.start(back, ("n2",), T0 + s(2000))
    assert progress.work_at(again, T0 + s(2700)) == 1900.0
    back2, lost2 = progress.requeue(again, T0 + s(2700))
    assert (back2.work_done_s, lost2) == (1800.0, 100.0)
    assert back2.last_checkpoint_at == T0 + s(2600)


def test_requeue_of_a_job_that_cannot_resume_loses_everything() -> None:
    plain = running(checkpoint_interval_s=600.0, duration_s=7200.0)  # checkpoints, but not fault tolerant
    back, lost = progress.requeue(plain, T0 + s(1500))
    assert (back.state, back.work_done_s, lost) == (JobState.PENDING, 0.0, 1500.0)
    back, lost = progress.requeue(running(), T0 + s(42))
    assert (back.work_done_s, lost) == (0.0, 42.0)


def test_a_checkpoint_never_saves_more_than_the_work_done() -> None:
    # Regression: a job past its duration (complete_by_duration off) used to bank 1200 s of a
    # 1000 s job and report nothing lost. The 600 s checkpoint is the last one inside its work.
    ft = running(fault_tolerant=True, checkpoint_interval_s=600.0, duration_s=1000.0)
    assert progress.work_at(ft, T0 + s(1300)) == 1000.0
    assert progress.checkpointed_work(ft, T0 + s(1300)) == 600.0
    back, lost = progress.requeue(ft, T0 + s(1300))
    assert (back.work_done_s, lost) == (600.0, 400.0)
    assert back.last_checkpoint_at == T0 + s(600)


def test_a_fault_tolerant_job_keeps_work_banked_by_an_earlier_checkpoint() -> None:
    # Regression: without an interval the banked work (its last checkpoint) used to be thrown away.
    ft = running(fault_tolerant=True, work_done_s=900.0, last_checkpoint_at=T0 - s(60))
    back, lost = progress.requeue(ft, T0 + s(300))
    assert (back.work_done_s, lost) == (900.0, 300.0)
    assert back.last_checkpoint_at == T0 - s(60)


def test_a_requested_checkpoint_inside_the_run_is_where_work_resumes() -> None:
    # Periodic checkpoints at 600 s; one asked for at 900 s; the node is lost at 1100 s.
    ft = running(fault_tolerant=True, checkpoint_interval_s=600.0, last_checkpoint_at=T0 + s(900))
    assert progress.checkpointed_work(ft, T0 + s(1100)) == 900.0
    assert progress.last_checkpoint_at(ft, T0 + s(1100)) == T0 + s(900)
    # Past the next periodic checkpoint (1200 s) the periodic one is the latest.
    assert progress.checkpointed_work(ft, T0 + s(1300)) == 1200.0
    assert progress.last_checkpoint_at(ft, T0 + s(1300)) == T0 + s(1200)
    # A checkpoint from before this run started is already in work_done_s and adds nothing.
    old = running(fault_tolerant=True, work_done_s=500.0, last_checkpoint_at=T0 - s(100))
    assert progress.checkpointed_work(old, T0 + s(400)) == 500.0


def test_finishes_at() -> None:
    assert progress.finishes_at(running(duration_s=3600.0)) == T0 + s(3600)
    later = job("l", state=JobState.RUNNING, started=T0 + s(100), duration_s=3600.0, work_done_s=600.0)
    assert progress.finishes_at(later) == T0 + s(3100)
    overdone = running(duration_s=100.0, work_done_s=200.0)
    assert progress.finishes_at(overdone) == T0  # nothing left to do: finished at its start
    assert progress.finishes_at(running()) is None  # unknown duration
    assert progress.finishes_at(job("p", duration_s=60.0)) is None  # not started


def test_complete_and_end_bank_the_work_and_release_the_nodes() -> None:
    j = running(duration_s=3600.0, work_done_s=100.0)
    done = progress.complete(j, T0 + s(5000))
    assert (done.state, done.work_done_s, done.node_ids) == (JobState.SUCCEEDED, 3600.0, ())
    assert not done.active
    reclaimed = progress.end(j, JobState.RECLAIMED, T0 + s(1000))
    assert (reclaimed.state, reclaimed.work_done_s, reclaimed.node_ids) == (JobState.RECLAIMED, 1100.0, ())


def test_start_binds_the_nodes_and_keeps_banked_work() -> None:
    pending = job("p", work_done_s=1200.0)
    started = progress.start(pending, ("a", "b"), T0 + s(60))
    assert (started.state, started.node_ids, started.started_at) == (JobState.RUNNING, ("a", "b"), T0 + s(60))
    assert progress.work_at(started, T0 + s(120)) == pytest.approx(1260.0)
