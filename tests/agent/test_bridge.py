"""The reconcile loop with a node agent: GPUs reported by the agent are bound by the planner, the job runs on
them as a real process, and its exit (or a checkpoint ack) comes back into the queue."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from datetime import timedelta
from pathlib import Path

from builders import T0, group, job

from burst.actuator import Actuator
from burst.agent.bridge import AgentBridge
from burst.agent.channel import GpuSummary
from burst.agent.node import NodeAgent
from burst.agent.runner import JobRunner
from burst.model import ActionKind, JobState, Tier
from burst.reconcile import Controller
from burst.state import Store
from burst.workloads.queue import StoreQueue
from providers.sim import ManualClock, SimProvider

from .conftest import Controller as Link

RACK = dataclasses.replace(group("rack", tier=Tier.STEADY, max_size=1, min_size=1), boot_latency_s=0.0)
NODE = "rack-00001"  # the sim's id for the rack's first node: the agent registers under it
GPUS = [GpuSummary(uuid=f"GPU-rack-{i}", index=i, model="A100", memory_mib=81920) for i in range(8)]


class Prices:
    def group_price(self, g: object) -> float:
        return 8.0

    def standby_price(self, g: object) -> float:
        return 0.0


def test_a_job_runs_on_the_gpus_the_planner_bound_and_its_exit_completes_it(controller: Link, tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = Store.open(tmp_path / "s.db")
    sim = SimProvider([RACK], clock=clock, cluster="t", initial={"rack": 1})
    bridge = AgentBridge(controller.hub, store, lambda: {})
    ctl = Controller(providers={"sim": sim}, source=StoreQueue(store), store=store, policies=lambda: {},
                     prices=Prices(), clock=clock, cluster="t", actuator=Actuator({"sim": sim}, store, cluster="t", clock=clock),
                     agents=bridge)
    agent = NodeAgent(controller.url, NODE, "token-rack", JobRunner(tmp_path / "agent"), lambda: ("test inventory", GPUS))
    agent.tick()  # first heartbeat: the controller now knows the node's GPUs

    script = "import json, os; json.dump(dict(os.environ), open('env.json', 'w'))"
    store.add_job(job("train", gpus=2, command=(sys.executable, "-c", script)), at=T0)
    report = ctl.tick()
    (place,) = report.plan.of_kind(ActionKind.PLACE_JOB)
    assert place.node_ids == (NODE,) and len(place.gpu_uuids) == 2 and "local scheduler" in place.reason
    assert store.get_job("train").gpu_uuids == place.gpu_uuids  # type: ignore[union-attr]

    agent.tick()  # fetches the assignment and starts the job
    env_file = tmp_path / "agent" / "jobs" / "train" / "env.json"
    deadline = time.monotonic() + 20
    while store.get_job("train").state is not JobState.SUCCEEDED:  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the job's exit never came back"
        agent.tick()
        clock.advance(10)
        ctl.tick()
        time.sleep(0.02)
    env = json.loads(env_file.read_text())
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(place.gpu_uuids)
    assert env["BURST_JOB_ID"] == "train"
    store.close()


def test_a_failing_job_fails_and_a_checkpoint_ack_moves_its_last_checkpoint(controller: Link, tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = Store.open(tmp_path / "s.db")
    bridge = AgentBridge(controller.hub, store, lambda: {})
    store.add_job(job("crash", gpus=1, command=(sys.executable, "-c", "raise SystemExit(2)")), at=T0)
    store.add_job(job("ckpt", gpus=1, state=JobState.RUNNING, nodes=(NODE,), started=T0), at=T0)
    agent = NodeAgent(controller.url, NODE, "token-rack", JobRunner(tmp_path / "agent"), lambda: ("test", GPUS))
    from burst.agent.channel import CheckpointAck, JobPhase, JobStatus, Report

    controller.hub.record(Report(node_id=NODE, at=clock.now,
                           jobs=[JobStatus(job_id="crash", phase=JobPhase.EXITED, at=clock.now, exit_code=2)],
                           acks=[CheckpointAck(job_id="ckpt", request_id="r1", at=clock.now + timedelta(seconds=5))]))
    bridge.sync(clock.now)
    assert store.get_job("crash").state is JobState.FAILED  # type: ignore[union-attr]
    assert store.get_job("ckpt").last_checkpoint_at == T0 + timedelta(seconds=5)  # type: ignore[union-attr]
    assert agent.runner.jobs == {}
    store.close()


def test_an_acked_checkpoint_was_taken_one_measured_duration_before_its_ack() -> None:
    from burst.agent.bridge import checkpoint_taken_at

    ran = job("ckpt", gpus=1, state=JobState.RUNNING, nodes=(NODE,), started=T0)
    measured = dataclasses.replace(ran, checkpoint_duration_s=30.0)
    assert checkpoint_taken_at(measured, T0 + timedelta(seconds=100)) == T0 + timedelta(seconds=70)
    assert checkpoint_taken_at(measured, T0 + timedelta(seconds=10)) == T0  # never before the run started
    assert checkpoint_taken_at(ran, T0 + timedelta(seconds=100)) == T0 + timedelta(seconds=100)  # nothing measured
