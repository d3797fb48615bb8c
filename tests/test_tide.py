"""The daily tide (burst.sim.tide): a service's replicas as jobs of its tenant beside batch, on hand-computed cases,
and the rules burst's own pipeline gives them on one on-prem tier."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from burst.model import Job, Policy, SpotPolicy
from burst.sim import registry
from burst.sim.engine import simulate
from burst.sim.setup import SimSetup, default_setup
from burst.sim.tide import aligned_start, replica_jobs, replica_lifetimes, serving_from_starts
from burst.sim.traces import TraceStats

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


def test_replica_lifetimes_start_on_rises_and_stop_the_latest_first() -> None:
    # 2 at the start; 4 at 1 min; 3 at 2 min; 1 at 3 min; 2 at 5 min; the window ends at 10 min
    decisions = [(T0 + MIN, 4), (T0 + 2 * MIN, 3), (T0 + 3 * MIN, 1), (T0 + 5 * MIN, 2), (T0 + 11 * MIN, 9)]
    lifetimes = replica_lifetimes(2, decisions, T0, T0 + 10 * MIN)
    assert lifetimes == [(T0, T0 + 3 * MIN), (T0, T0 + 10 * MIN), (T0 + MIN, T0 + 2 * MIN),
                         (T0 + MIN, T0 + 3 * MIN), (T0 + 5 * MIN, T0 + 10 * MIN)]
    # the replicas serving at the start began a model load before it
    early = replica_lifetimes(1, [], T0, T0 + MIN, initial_since=T0 - 2 * MIN)
    assert early == [(T0 - 2 * MIN, T0 + MIN)]


def test_replica_jobs_are_single_replica_jobs_that_cannot_move_on_the_batch_clock() -> None:
    jobs = replica_jobs([(T0, T0 + 3 * MIN)], tenant="inference", service="recs", gpus=2, gpu_model="A100",
                        shift=timedelta(days=7))
    assert len(jobs) == 1
    job = jobs[0]
    assert (job.tenant, job.gpus, job.gpu_model, job.duration_s) == ("inference", 2, "A100", 180.0)
    assert job.submitted_at == T0 + timedelta(days=7) and not job.fault_tolerant


def test_a_replica_serves_from_its_start_plus_the_model_load_until_its_run_ends() -> None:
    one = Job(id="r1", tenant="s", gpus=1, submitted_at=T0, duration_s=120.0)
    late = Job(id="r2", tenant="s", gpus=1, submitted_at=T0 + timedelta(seconds=15), duration_s=600.0)
    never = Job(id="r3", tenant="s", gpus=1, submitted_at=T0, duration_s=600.0)
    # r1 starts at once: loaded at 30 s, stops at 120 s -> ticks 2..7 (15 s each)
    # r2 waits 45 s: starts at 60 s, loaded at 90 s -> ticks 6..; r3 waits past the 12 ticks replayed
    serving = serving_from_starts([one, late, never], [0.0, 45.0, 180.0], load_s=30.0, start=T0, ticks=12)
    assert serving.tolist() == [0, 0, 1, 1, 1, 1, 2, 2, 1, 1, 1, 1]


def test_the_service_window_is_aligned_by_weekday_and_hour() -> None:
    batch = datetime(2021, 3, 4, 1, 23, 30, tzinfo=UTC)  # a Thursday
    at = aligned_start(batch, datetime(2014, 10, 20, tzinfo=UTC), datetime(2014, 12, 22, tzinfo=UTC))
    assert (at.weekday(), at.hour, at.minute) == (batch.weekday(), 1, 23)
    assert datetime(2014, 10, 20, tzinfo=UTC) <= at < datetime(2014, 10, 27, tzinfo=UTC)
    with pytest.raises(ValueError, match="no instant aligned"):
        aligned_start(batch, datetime(2014, 10, 20, 2, tzinfo=UTC), datetime(2014, 10, 22, tzinfo=UTC))


def _tide_setup(batch_fault_tolerant: bool) -> tuple[list[Job], SimSetup, TraceStats]:
    """One on-prem node of 8 GPUs filled by one batch job; a replica of the service's tenant (priority 1) arrives
    an hour later and needs 1 GPU."""
    stats = TraceStats(jobs=2, gpu_hours=8.0, peak_gpus=8.0, p50_gpus=8.0, start=T0, end=T0 + timedelta(hours=4))
    base = default_setup(stats)
    policies = {"inference": Policy(tenant="inference", priority=1, spot=SpotPolicy(allowed=False))}
    setup = dataclasses.replace(base, policies=policies)
    batch = Job(id="train", tenant="batch", gpus=8, submitted_at=T0, duration_s=4 * 3600.0,
                fault_tolerant=batch_fault_tolerant, checkpoint_interval_s=1800.0 if batch_fault_tolerant else None,
                checkpoint_duration_s=60.0 if batch_fault_tolerant else None)
    replica = Job(id="recs-replica-000000", tenant="inference", gpus=1, gpu_model="A100",
                  submitted_at=T0 + timedelta(hours=1), duration_s=6 * 3600.0)
    return [batch, replica], setup, stats


@pytest.mark.parametrize("movable", [True, False])
def test_a_replica_takes_the_steady_tier_from_work_that_can_move_and_bursts_past_work_that_cannot(
        movable: bool) -> None:
    jobs, setup, stats = _tide_setup(movable)
    run = registry.get("burst").simulated(setup, stats)
    result = simulate(run, jobs, start=T0, end=T0 + timedelta(hours=8), keep_ledger=True)
    replica_wait = result.waits_s[1]
    onprem_hours = sum(e.gpu_hours for e in result.ledger if e.tenant == "inference" and e.line == "steady")
    assert result.immovable_stopped == 0  # neither the replica nor a batch job that cannot move is stopped
    if movable:
        # the batch job checkpoints and yields its node: the replica runs on-prem within the checkpoint's minute
        # and a loop tick, long before a cloud node would boot (5 min)
        assert replica_wait < 300.0 and result.evictions == 1
        assert onprem_hours == pytest.approx(6.0, rel=0.05)
    else:
        # the batch job cannot move: the replica waits for a cloud node's boot and runs there
        assert replica_wait >= 300.0 and result.evictions == 0
        assert onprem_hours == 0.0
    assert np.isfinite(result.cost_usd)
