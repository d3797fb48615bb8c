"""Events wake the reconcile loop within the batch window (1 s quiet, 10 s at most); the interval is the heartbeat.

The daemon tests run the real loop (`run_loop` with the daemon's `Runtime.wakeup()`) over sim groups and the
embedded queue in a state file, on a fake clock: the wait advances the clock, and the test's own actions
(`burst submit` on the same state file, a spot interruption) happen when the clock passes their instant.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from burst.model import ActionKind, Job, JobState, NodeState, Plan
from burst.reconcile import TickReport, run_loop
from burst.runtime import Runtime, build_runtime, load_run_config
from burst.sim.engine import _Arrivals, _next_tick
from burst.sim.setup import default_setup
from burst.sim.strategies import StrategyRun
from burst.sim.traces import TraceStats
from burst.state import Store
from burst.wakeup import BATCH_MAX_S, Batch, WakeEvent, WakeReason, batch_end
from burst.workloads.queue import MemoryQueue
from providers.sim import ManualClock, SimProvider

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)

CONFIG = """\
cluster: ev
policies_dir: policies
clock: sim
sim_start: 2026-03-02T12:00:00Z
loop_interval: 60s
node_groups:
  - {id: onprem, provider: sim, region: dc1, tier: steady, capacity_type: onprem, instance_type: dgx-a100,
     gpu_model: A100, gpus_per_node: 8, min_size: 1, max_size: 1, initial_size: 1, boot_latency: 10m}
  - {id: od, provider: sim, region: us-east-1, tier: elastic, capacity_type: on_demand,
     instance_type: p4d.24xlarge, gpu_model: A100, gpus_per_node: 8, max_size: 4, boot_latency: 290s}
  - {id: spot, provider: sim, region: us-east-1, tier: elastic, capacity_type: spot, instance_type: p4d.24xlarge,
     gpu_model: A100, gpus_per_node: 8, min_size: 1, max_size: 4, initial_size: 1, boot_latency: 5m}
"""


# ---------------------------------------------------------------- the batch rule


def test_one_event_is_served_after_a_second_of_quiet() -> None:
    batch = Batch()
    assert batch.due() is None
    batch.note(WakeEvent(WakeReason.JOB_SUBMITTED, T0))
    assert batch.due() == T0 + S
    batch.clear()
    assert batch.due() is None and batch.reasons == []


def test_a_stream_of_events_is_served_ten_seconds_after_the_first() -> None:
    every_half_second = [T0 + i * S / 2 for i in range(60)]
    assert batch_end(every_half_second) == T0 + BATCH_MAX_S * S
    assert batch_end([T0, T0 + S / 2, T0 + 3 * S]) == T0 + S / 2 + S, "the event 3 s on is the next batch's"
    assert batch_end([]) is None
    with pytest.raises(ValueError, match="idle"):
        Batch(idle_s=5.0, max_s=1.0)


# ---------------------------------------------------------------- the simulator


def _runs() -> tuple[StrategyRun, StrategyRun]:
    stats = TraceStats(jobs=1, gpu_hours=8.0, peak_gpus=8.0, p50_gpus=8.0, start=None, end=None)
    polling = StrategyRun("polling", default_setup(stats), ())
    return polling, dataclasses.replace(polling, event_driven=True)


def test_the_simulator_serves_an_event_driven_strategy_after_the_batch_window() -> None:
    polling, driven = _runs()
    report = TickReport(at=T0, plan=Plan(id="p", at=T0, actions=()))
    idle = SimProvider([], clock=ManualClock(T0), cluster="t")
    queue = MemoryQueue()
    arrival = Job(id="a", tenant="t", gpus=1, submitted_at=T0 + 7 * S)
    assert _next_tick(polling, report, queue, idle, _Arrivals([arrival]), T0) == T0 + 60 * S
    assert _next_tick(driven, report, queue, idle, _Arrivals([arrival]), T0) == T0 + 8 * S
    burst_of = [dataclasses.replace(arrival, id=f"a{i}", submitted_at=T0 + 7 * S + i * S / 2) for i in range(40)]
    assert _next_tick(driven, report, queue, idle, _Arrivals(burst_of), T0) == T0 + 17 * S, "10 s at most"


# ---------------------------------------------------------------- the daemon, on a fake clock


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Runtime]:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "t.yaml").write_text("tenant: t\nspot:\n  allowed: true\n")
    (tmp_path / "burst.yaml").write_text(CONFIG)
    runtime = build_runtime(load_run_config(tmp_path / "burst.yaml"), state_path=tmp_path / "burst.db")
    try:
        yield runtime
    finally:
        runtime.close()


def run_until(runtime: Runtime, until: datetime, at: dict[datetime, Callable[[], None]]) -> list[TickReport]:
    """Run the daemon's loop on its fake clock until `until`, doing each of `at`'s actions once the clock passes it."""
    clock = runtime.sim_clock
    assert clock is not None
    pending = dict(sorted(at.items()))

    def wait(seconds: float) -> None:
        clock.advance(seconds)
        for when in [w for w in pending if w <= clock()]:
            pending.pop(when)()

    reports: list[TickReport] = []
    run_loop(runtime.controller, interval_s=runtime.config.loop_interval, wait=wait, stop=threading.Event(),
             until=until, on_tick=reports.append, wakeup=runtime.wakeup())
    return reports


def submit_from_another_process(runtime: Runtime, job: Job) -> None:
    """What `burst submit` does: add the job through its own connection to the same state file."""
    other = Store.open(runtime.state_path)
    try:
        other.add_job(job, at=job.submitted_at)
    finally:
        other.close()


def woken(reports: list[TickReport], reason: WakeReason) -> list[TickReport]:
    return [r for r in reports if reason in r.woken_by]


def test_a_submit_to_the_same_store_wakes_the_loop_within_the_batch_window(daemon: Runtime) -> None:
    when = T0 + 95 * S
    job = Job(id="j", tenant="t", gpus=8, submitted_at=when)
    reports = run_until(daemon, T0 + 10 * 60 * S, {when: lambda: submit_from_another_process(daemon, job)})
    tick = woken(reports, WakeReason.JOB_SUBMITTED)[0]
    assert when < tick.at <= when + BATCH_MAX_S * S
    assert any(a.kind is ActionKind.PLACE_JOB and a.target == "j" for a in tick.plan.actions), "placed on that tick"
    assert not any(r.woken_by for r in reports if r.at < when), "ticks before it were heartbeats"


def test_a_finish_wakes_the_loop_within_the_batch_window(daemon: Runtime) -> None:
    daemon.store.add_job(Job(id="short", tenant="t", gpus=8, submitted_at=T0, duration_s=130.0), at=T0)
    reports = run_until(daemon, T0 + 10 * 60 * S, {})
    assert reports[0].at == T0 and any(a.target == "short" for a in reports[0].plan.actions)
    tick = woken(reports, WakeReason.JOB_FINISHED)[0]
    assert T0 + 130 * S < tick.at <= T0 + 140 * S and [j.id for j in tick.job_events.completed] == ["short"]


def test_a_cancel_through_the_store_wakes_the_loop_as_a_finish(daemon: Runtime) -> None:
    daemon.store.add_job(Job(id="long", tenant="t", gpus=8, submitted_at=T0), at=T0)

    def cancel() -> None:
        other = Store.open(daemon.state_path)
        try:
            job = other.get_job("long")
            assert job is not None and job.state is JobState.RUNNING
            other.put_job(dataclasses.replace(job, state=JobState.CANCELLED), at=T0 + 200 * S)
        finally:
            other.close()

    reports = run_until(daemon, T0 + 10 * 60 * S, {T0 + 200 * S: cancel})
    tick = woken(reports, WakeReason.JOB_FINISHED)[0]
    assert T0 + 200 * S < tick.at <= T0 + 210 * S


def test_a_node_ready_wakes_the_loop_within_the_batch_window(daemon: Runtime) -> None:
    daemon.store.add_job(Job(id="fills", tenant="t", gpus=8, submitted_at=T0), at=T0)
    late = Job(id="bursts", tenant="t", gpus=8, submitted_at=T0 + 20 * S)
    reports = run_until(daemon, T0 + 10 * 60 * S, {late.submitted_at: lambda: submit_from_another_process(daemon, late)})
    launch = woken(reports, WakeReason.JOB_SUBMITTED)[0]
    assert any(a.kind is ActionKind.SCALE_UP for a in launch.plan.actions), "the second job needs a cloud node"
    tick = woken(reports, WakeReason.NODE_READY)[0]
    ready = launch.at + 290 * S  # the group's boot latency: off the heartbeat's minute marks
    assert ready <= tick.at <= ready + BATCH_MAX_S * S
    assert any(a.kind is ActionKind.PLACE_JOB and a.target == "bursts" for a in tick.plan.actions)


def test_an_interruption_notice_and_the_lost_node_each_wake_the_loop(daemon: Runtime) -> None:
    provider = daemon.providers["sim"]
    assert isinstance(provider, SimProvider)
    spot_node = next(n for n in provider.nodes().values() if n.group_id == "spot" and n.state is NodeState.READY)
    notice_at = T0 + 125 * S

    def interrupt() -> None:
        provider.inject_interruption(spot_node.id, notice_s=100.0)

    reports = run_until(daemon, T0 + 10 * 60 * S, {notice_at: interrupt})
    notice = woken(reports, WakeReason.INTERRUPTION)[0]
    assert notice_at <= notice.at <= notice_at + BATCH_MAX_S * S
    assert any(e.node_id == spot_node.id for e in notice.provider_events), "the tick gets the notice it woke on"
    lost = woken(reports, WakeReason.NODE_LOST)[0]
    assert notice_at + 100 * S <= lost.at <= notice_at + (100 + BATCH_MAX_S) * S


def test_with_loop_events_off_only_the_heartbeat_ticks(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "t.yaml").write_text("tenant: t\n")
    (tmp_path / "burst.yaml").write_text(CONFIG + "loop_events: false\n")
    runtime = build_runtime(load_run_config(tmp_path / "burst.yaml"), state_path=tmp_path / "burst.db")
    try:
        assert runtime.wakeup() is None
        runtime.store.add_job(Job(id="short", tenant="t", gpus=8, submitted_at=T0, duration_s=130.0), at=T0)
        ticks: list[TickReport] = []
        runtime.run(until=T0 + 5 * 60 * S, on_tick=ticks.append, realtime=False)
        assert [(r.at - T0).total_seconds() for r in ticks] == [0, 60, 120, 180, 240]
    finally:
        runtime.close()


# ---------------------------------------------------------------- the daemon, on the real clock


@pytest.mark.slow
def test_a_burst_submit_is_served_before_the_heartbeat_on_the_real_clock(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "t.yaml").write_text("tenant: t\n")
    (tmp_path / "burst.yaml").write_text(CONFIG.replace("clock: sim\nsim_start: 2026-03-02T12:00:00Z\n", ""))
    state = tmp_path / "burst.db"
    runtime = build_runtime(load_run_config(tmp_path / "burst.yaml"), state_path=state)
    ticks: list[TickReport] = []
    loop = threading.Thread(target=runtime.run, kwargs={"on_tick": ticks.append}, daemon=True)
    try:
        loop.start()
        deadline = time.monotonic() + 30
        while not ticks and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ticks, "the first tick runs at start"
        sent = time.monotonic()
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        out = subprocess.run([sys.executable, "-m", "burst.cli", "submit", "--config", str(tmp_path / "burst.yaml"),
                              "--state", str(state), "--tenant", "t", "--gpus", "8", "--id", "now", "--json"],
                             capture_output=True, text=True, env=env, timeout=60)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["state"] == "pending"
        while time.monotonic() < sent + 45:
            job = runtime.store.get_job("now")
            if job is not None and job.state is JobState.RUNNING:
                break
            time.sleep(0.2)
        served = time.monotonic() - sent
        job = runtime.store.get_job("now")
        assert job is not None and job.state is JobState.RUNNING, "served by an event, not the 60 s heartbeat"
        assert served < 45
        assert any(WakeReason.JOB_SUBMITTED in r.woken_by for r in ticks)
    finally:
        runtime.stop.set()
        loop.join(timeout=30)
        runtime.close()
