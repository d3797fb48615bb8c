"""The node agent end to end: a real uvicorn controller on 127.0.0.1, real job subprocesses, real signals."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from burst.agent.channel import Assignment, CheckpointRequest, Eviction, GpuSummary, JobPhase
from burst.agent.node import NodeAgent
from burst.agent.router import PREFIX, load_tokens
from burst.agent.runner import JobRunner
from burst.model import GpuSharing
from providers.sim import ManualClock

from .conftest import TOKENS, Controller

JOB = r'''
import json, os, signal, subprocess, sys, time
mode = sys.argv[1]
child = subprocess.Popen(["sleep", "600"])   # a process of the job's own: it must die with the job
def on_checkpoint(signum, frame):
    if mode == "ack":
        request_id = open(os.environ["BURST_CHECKPOINT_REQUEST_FILE"]).read()
        open("checkpoint.bin", "w").write("model state")
        ack = os.environ["BURST_CHECKPOINT_ACK_FILE"]
        open(ack + ".tmp", "w").write(request_id)
        os.replace(ack + ".tmp", ack)
signal.signal(signal.SIGUSR1, on_checkpoint)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
names = ["CUDA_VISIBLE_DEVICES", "BURST_JOB_ID", "BURST_GPU_SHARE", "CUDA_MPS_PIPE_DIRECTORY",
         "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"]
info = {n: os.environ.get(n) for n in names} | {"pid": os.getpid(), "child": child.pid, "pgid": os.getpgid(0)}
json.dump(info, open("env.json.tmp", "w"))
os.replace("env.json.tmp", "env.json")
while True:
    time.sleep(0.02)
'''

GPUS = [GpuSummary(uuid=f"GPU-static-node-a-{i}", index=i, model="A100", memory_mib=81920) for i in range(4)]


def inventory() -> tuple[str, list[GpuSummary]]:
    return "NVML unavailable (test): serving the static inventory", GPUS


def wait_for(predicate: Callable[[], object], *, tick: Callable[[], object] | None = None, within_s: float = 20.0) -> None:
    deadline = time.monotonic() + within_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail("condition not met in time")
        if tick is not None:
            tick()
        time.sleep(0.02)


def gone(pid: int) -> bool:
    """No such process, or only a zombie left for its parent to reap."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return all(gone(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit() and _pgid(int(p.name)) == pgid)


def _pgid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[3])
    except (FileNotFoundError, IndexError, ValueError):
        return None


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 3, 2, 9, 0, tzinfo=UTC))


def make_agent(controller: Controller, tmp_path: Path, clock: ManualClock, **kw: object) -> NodeAgent:
    runner = JobRunner(tmp_path / "agent", clock=clock, **kw)  # type: ignore[arg-type]
    return NodeAgent(controller.url, "node-a", TOKENS["node-a"], runner, inventory, clock=clock)


def script(tmp_path: Path) -> str:
    path = tmp_path / "job.py"
    path.write_text(JOB)
    return str(path)


def env_of(tmp_path: Path, job_id: str) -> dict[str, object]:
    path = tmp_path / "agent" / "jobs" / job_id / "env.json"
    wait_for(path.exists)
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def test_job_runs_on_bound_gpus_acks_its_checkpoint_and_eviction_kills_its_group(
    controller: Controller, tmp_path: Path, clock: ManualClock
) -> None:
    agent = make_agent(controller, tmp_path, clock)
    bound = [GPUS[1].uuid, GPUS[2].uuid]
    controller.hub.assign("node-a", Assignment(job_id="train", command=[sys.executable, script(tmp_path), "ack"],
                                               gpu_uuids=bound))
    assert agent.tick().delivered
    env = env_of(tmp_path, "train")
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(bound)
    assert env["BURST_JOB_ID"] == "train"
    assert env["pgid"] == env["pid"]  # its own process group
    statuses, _ = controller.hub.drain()
    assert [(s.job_id, s.phase) for s in statuses] == [("train", JobPhase.STARTED)]
    view = controller.hub.views()["node-a"]
    assert [g.uuid for g in view.gpus.gpus] == [g.uuid for g in GPUS] and "static inventory" in view.discovery

    controller.hub.request_checkpoint(
        "node-a", CheckpointRequest(job_id="train", request_id="ck-1", deadline=clock.now + timedelta(seconds=120))
    )
    acks: list[object] = []

    def got_ack() -> bool:
        acks.extend(controller.hub.drain()[1])
        return bool(acks)

    wait_for(got_ack, tick=agent.tick)
    assert [(a.job_id, a.request_id) for a in acks] == [("train", "ck-1")]  # type: ignore[attr-defined]
    assert (tmp_path / "agent" / "jobs" / "train" / "checkpoint.bin").read_text() == "model state"

    controller.hub.evict("node-a", Eviction(job_id="train", reason="spot notice"))
    agent.tick()
    statuses, _ = controller.hub.drain()
    assert [(s.job_id, s.phase) for s in statuses] == [("train", JobPhase.KILLED)]
    assert "spot notice" in statuses[0].detail
    wait_for(lambda: group_gone(int(env["pgid"])) and gone(int(env["child"])))  # type: ignore[call-overload]
    assert agent.runner.jobs == {}


def test_fractional_job_gets_the_sharing_modes_environment(
    controller: Controller, tmp_path: Path, clock: ManualClock
) -> None:
    agent = make_agent(controller, tmp_path, clock)
    controller.hub.assign("node-a", Assignment(
        job_id="small", command=[sys.executable, script(tmp_path), "ack"], gpu_uuids=[GPUS[0].uuid],
        sharing=GpuSharing.MPS, share=0.25,
    ))
    agent.tick()
    env = env_of(tmp_path, "small")
    assert env["CUDA_VISIBLE_DEVICES"] == GPUS[0].uuid
    assert env["BURST_GPU_SHARE"] == "0.25"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == str(tmp_path / "agent" / "mps" / "pipe")
    started = controller.hub.drain()[0][0]
    assert "MPS" in started.detail  # no MPS daemon on this machine: the agent says the GPU is time-sliced
    agent.runner.stop_all()


def test_unacknowledged_checkpoint_gets_sigterm_at_the_deadline_then_sigkill(
    controller: Controller, tmp_path: Path, clock: ManualClock
) -> None:
    agent = make_agent(controller, tmp_path, clock, kill_grace_s=10.0)
    controller.hub.assign("node-a", Assignment(job_id="deaf", command=[sys.executable, script(tmp_path), "stubborn"]))
    agent.tick()
    env = env_of(tmp_path, "deaf")
    controller.hub.request_checkpoint(
        "node-a", CheckpointRequest(job_id="deaf", request_id="ck-9", deadline=clock.now + timedelta(seconds=30))
    )
    agent.tick()
    controller.hub.drain()
    clock.advance(31)
    agent.tick()
    statuses, acks = controller.hub.drain()
    assert acks == []
    assert [s.phase for s in statuses] == [JobPhase.RUNNING] and "SIGTERM" in statuses[0].detail
    time.sleep(0.2)  # SIGTERM is ignored by this job: it must still be there
    assert not gone(int(env["pid"]))  # type: ignore[call-overload]
    clock.advance(10)
    agent.tick()
    statuses, _ = controller.hub.drain()
    assert [s.phase for s in statuses] == [JobPhase.KILLED] and "SIGKILL" in statuses[0].detail
    wait_for(lambda: group_gone(int(env["pgid"])))  # type: ignore[call-overload]


def test_a_job_that_exits_reports_its_code_even_across_a_controller_outage(
    controller: Controller, tmp_path: Path, clock: ManualClock
) -> None:
    agent = make_agent(controller, tmp_path, clock)
    agent.runner.start(Assignment(job_id="short", command=[sys.executable, "-c", "raise SystemExit(3)"]))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}{PREFIX}"
    live = agent.http.base_url
    agent.http.base_url = httpx.URL(dead)
    wait_for(lambda: agent.runner.jobs.get("short") is None or agent.runner.jobs["short"].process.poll() is not None)
    result = agent.tick()
    assert not result.delivered and "unreachable" in result.error
    agent.http.base_url = live
    assert agent.tick().delivered
    statuses, _ = controller.hub.drain()
    assert [(s.job_id, s.phase, s.exit_code) for s in statuses] == [("short", JobPhase.EXITED, 3)]


def test_tokens_guard_every_endpoint_and_refused_calls_change_nothing(controller: Controller) -> None:
    report = {"node_id": "node-a", "at": "2026-03-02T09:00:00Z", "jobs": [], "acks": []}
    url = f"{controller.url}{PREFIX}/nodes/node-a"
    controller.hub.assign("node-a", Assignment(job_id="j", command=["true"]))
    with httpx.Client() as http:
        assert http.get(f"{url}/work").status_code == 401
        assert http.get(f"{url}/work", headers={"Authorization": "Bearer token-b"}).status_code == 401
        assert http.post(f"{url}/report", json=report, headers={"Authorization": "Bearer nope"}).status_code == 401
        unknown = http.get(f"{controller.url}{PREFIX}/nodes/node-z/work", headers={"Authorization": "Bearer x"})
        assert unknown.status_code == 403
        other = {**report, "node_id": "node-b"}
        assert http.post(f"{url}/report", json=other, headers={"Authorization": "Bearer token-a"}).status_code == 422
        assert http.post(f"{url}/report", json={**report, "extra": 1},
                         headers={"Authorization": "Bearer token-a"}).status_code == 422
        assert controller.hub.views() == {}
        work = http.get(f"{url}/work", headers={"Authorization": "Bearer token-a"})
        assert work.status_code == 200 and [a["job_id"] for a in work.json()["assignments"]] == ["j"]
        again = http.get(f"{url}/work", headers={"Authorization": "Bearer token-a"})
        assert again.json()["assignments"] == []  # drained: delivered once


def test_generated_tokens_file_is_private_and_stable(tmp_path: Path) -> None:
    path = tmp_path / "agent-tokens.yaml"
    first = load_tokens(path, create_for=("node-a", "node-b"))
    assert set(first) == {"node-a", "node-b"} and len(set(first.values())) == 2
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_tokens(path, create_for=("node-a",)) == first
    path.write_text("- not a mapping\n")
    with pytest.raises(ValueError, match="mapping of node id to token"):
        load_tokens(path)


def test_burst_agent_command_reports_its_static_inventory_without_nvml(controller: Controller, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from burst.cli import main

    config = tmp_path / "burst.yaml"
    config.write_text(
        "cluster: lab\npolicies_dir: policies\nnode_groups:\n"
        "  - {id: rack1, provider: onprem, region: dc1, tier: steady, capacity_type: onprem, instance_type: dgx-a100,\n"
        "     gpu_model: A100, gpus_per_node: 8, gpu_memory_gib: 80, min_size: 1, max_size: 1}\n"
    )
    (tmp_path / "policies").mkdir()
    token = tmp_path / "token"
    token.write_text("token-a\n")
    args = ["agent", "--controller", controller.url, "--node-id", "node-a", "--token-file", str(token),
            "--config", str(config), "--workdir", str(tmp_path / "w"), "--ticks", "1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "tick: reported" in result.output
    view = controller.hub.views()["node-a"]
    assert len(view.gpus.gpus) == 8 and {g.model for g in view.gpus.gpus} == {"A100"}
    assert "NVML" in view.discovery and "static" in view.discovery

    token.write_text("wrong\n")
    refused = CliRunner().invoke(main, [*args[:-1], "3"])
    assert refused.exit_code == 1 and "refused this node's token (HTTP 401)" in refused.output
    assert refused.output.count("tick:") == 1, "a refused token stops the agent at once"
    unknown = CliRunner().invoke(main, [*args[:4], "node-z", *args[5:]])  # a node the controller has no token for
    assert unknown.exit_code == 1 and "refused this node (HTTP 403)" in unknown.output
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{free.getsockname()[1]}"
    unreachable = CliRunner().invoke(main, [*args[:2], nowhere, *args[3:-1], "2"])
    assert unreachable.exit_code == 1 and unreachable.output.count("tick:") == 2, "unreachable is retried, not permanent"
    assert f"no heartbeat reached {nowhere} in 2 tick(s)" in unreachable.output
    missing = CliRunner().invoke(main, [*args[:5], "--token-file", str(tmp_path / "none"), *args[7:]])
    assert missing.exit_code != 0 and "--token-file" in missing.output


def test_the_agent_routes_declare_bearer_auth_in_the_openapi_schema() -> None:
    from burst.agent.hub import AgentHub
    from burst.agent.router import agent_app

    schema = agent_app(AgentHub({"n1": "t"})).openapi()
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    routes = {(path, verb): op for path, ops in schema["paths"].items() for verb, op in ops.items()}
    assert set(routes) == {("/agent/v1/nodes/{node_id}/report", "post"), ("/agent/v1/nodes/{node_id}/work", "get")}
    assert all(op["security"] == [{"bearerAuth": []}] for op in routes.values())
