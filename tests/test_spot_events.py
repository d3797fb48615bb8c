"""Spot events through the reconcile loop: rebalance recommendations, notices, and the configured offering cooldown."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from builders import T0, group, job

from burst.model import ActionKind, CapacityType, JobState, SpotPolicy, default_policy
from burst.reconcile import Controller
from burst.runtime import build_runtime, load_run_config, quickstart_config_path
from burst.state import Store
from burst.workloads.queue import MemoryQueue
from providers.sim import ManualClock, SimProvider

BOOT_S = 300.0


class Prices:
    def group_price(self, g: object) -> float:
        return {"od": 32.0, "spot": 8.0}[g.id]  # type: ignore[attr-defined]

    def standby_price(self, g: object) -> float:
        return 1.0


def spot_loop(clock: ManualClock) -> tuple[Controller, SimProvider, MemoryQueue]:
    od = dataclasses.replace(group("od", max_size=4), boot_latency_s=BOOT_S)
    spot = dataclasses.replace(group("spot", capacity_type=CapacityType.SPOT, max_size=4), boot_latency_s=BOOT_S)
    sim = SimProvider([od, spot], clock=clock, cluster="test")
    queue = MemoryQueue()
    policy = dataclasses.replace(default_policy("t"), spot=SpotPolicy(allowed=True))
    ctl = Controller(providers={"sim": sim}, source=queue, store=Store(":memory:"), policies=lambda: {"t": policy},
                     prices=Prices(), clock=clock, cluster="test")
    return ctl, sim, queue


def job_actions(report) -> list[tuple[ActionKind, str]]:
    kinds = (ActionKind.REQUEST_CHECKPOINT, ActionKind.EVICT_JOB, ActionKind.PLACE_JOB)
    return [(a.kind, a.target) for a in report.plan.actions if a.kind in kinds]


def test_a_rebalance_recommendation_checkpoints_early_and_the_notice_then_finds_the_work_saved() -> None:
    clock = ManualClock(T0)
    ctl, sim, queue = spot_loop(clock)
    queue.submit(job("ft", tenant="t", gpus=8, duration_s=7200.0, fault_tolerant=True, checkpoint_interval_s=1800.0,
                     checkpoint_duration_s=60.0))
    ctl.tick()
    clock.advance(BOOT_S)
    (node,) = [n.id for n in sim.nodes().values() if n.group_id == "spot"]
    assert job_actions(ctl.tick()) == [(ActionKind.PLACE_JOB, "ft")]
    started = clock()

    clock.advance(600)
    sim.inject_rebalance(node)
    report = ctl.tick()
    assert report.snapshot is not None and report.snapshot.rebalances == {node: clock()}
    assert job_actions(report) == [(ActionKind.REQUEST_CHECKPOINT, "ft")], "asked early, not evicted"
    asked = clock()
    assert (queue.jobs["ft"].state, queue.jobs["ft"].last_checkpoint_at) == (JobState.RUNNING, asked)

    clock.advance(60)
    assert job_actions(ctl.tick()) == [], "once per recommendation; the job keeps running"
    assert queue.jobs["ft"].node_ids == (node,)

    clock.advance(40)
    sim.inject_interruption(node, notice_s=120.0)
    report = ctl.tick()
    assert job_actions(report) == [(ActionKind.EVICT_JOB, "ft")], "100 s unsaved: not worth a checkpoint"
    assert [(j.id, lost) for j, lost in report.job_events.requeued] == [("ft", 100.0)]
    back = queue.jobs["ft"]
    assert (back.state, back.work_done_s) == (JobState.PENDING, (asked - started).total_seconds()), \
        "requeued under the same id at once, resuming from the checkpoint the recommendation asked"


def copy_quickstart(tmp_path: Path, extra: str = "") -> Path:
    shutil.copytree(quickstart_config_path().parent, tmp_path / "qs")
    config = tmp_path / "qs" / "burst.yaml"
    config.write_text(config.read_text() + extra)
    return config


def cooled_after_an_interruption(config: Path, state: Path) -> dict[str, str]:
    """The groups the daemon `config` describes holds back after one of its spot nodes is interrupted."""
    runtime = build_runtime(load_run_config(config), state_path=state)
    try:
        sim = runtime.providers["sim"]
        assert isinstance(sim, SimProvider)
        runtime.controller.tick()
        sim.inject_interruption(sim.launch_untracked("cloud-a100-spot"), notice_s=120.0)
        runtime.controller.tick()
        return runtime.controller.unavailable(runtime.now())
    finally:
        runtime.close()


def test_the_interruption_cooldown_comes_from_burst_yaml_and_is_off_by_default(tmp_path: Path) -> None:
    on = copy_quickstart(tmp_path / "on", "spot:\n  interruption_cooldown: 5m\n")
    assert load_run_config(on).spot.interruption_cooldown == 300.0
    cooled = cooled_after_an_interruption(on, tmp_path / "on.db")
    assert list(cooled) == ["cloud-a100-spot"] and cooled["cloud-a100-spot"].startswith("a spot interruption at")
    assert cooled_after_an_interruption(copy_quickstart(tmp_path / "off"), tmp_path / "off.db") == {}
