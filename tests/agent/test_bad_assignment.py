"""One job that cannot start fails alone: the rest of its agent's batch starts (real agent, real subprocesses)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from burst.agent.channel import Assignment, JobPhase
from providers.sim import ManualClock

from .conftest import Controller
from .test_agent import env_of, make_agent, script


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 3, 2, 9, 0, tzinfo=UTC))


def test_a_job_that_cannot_start_does_not_stop_the_others_in_its_batch(
    controller: Controller, tmp_path: Path, clock: ManualClock
) -> None:
    # A NUL in one job's argv made Popen raise ValueError, which ended the agent's tick: the jobs after it in
    # the same batch (another tenant's among them) never started, and the work was already drained.
    agent = make_agent(controller, tmp_path, clock)
    job = [sys.executable, script(tmp_path), "plain"]
    batch = [
        Assignment(job_id="first", command=job),
        Assignment(job_id="nul-argv", command=[sys.executable, "-c", "print('x')\x00"]),
        Assignment(job_id="nul-env", command=job, env={"TOKEN": "a\x00b"}),
        Assignment(job_id="../escape", command=job),
        Assignment(job_id="missing", command=[str(tmp_path / "no-such-program")]),
        Assignment(job_id="last", command=job),
    ]
    for assignment in batch:
        controller.hub.assign("node-a", assignment)
    result = agent.tick()
    assert result.delivered and not result.error
    statuses, _ = controller.hub.drain()
    phases = {s.job_id: s.phase for s in statuses}
    assert phases == {"first": JobPhase.STARTED, "nul-argv": JobPhase.FAILED_TO_START,
                      "nul-env": JobPhase.FAILED_TO_START, "../escape": JobPhase.FAILED_TO_START,
                      "missing": JobPhase.FAILED_TO_START, "last": JobPhase.STARTED}
    details = {s.job_id: s.detail for s in statuses}
    assert "null" in details["nul-argv"] and "directory name" in details["../escape"]
    assert env_of(tmp_path, "first")["BURST_JOB_ID"] == "first"
    assert env_of(tmp_path, "last")["BURST_JOB_ID"] == "last"  # running, after the bad ones
    assert sorted(agent.runner.jobs) == ["first", "last"]
    assert not (tmp_path / "agent" / "escape").exists()
    agent.runner.stop_all()
