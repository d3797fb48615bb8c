"""provider: onprem groups in the daemon: `burst run` with an inventory file and power commands, the agent hub wired."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from burst.agent.channel import Report
from burst.model import NodeState, WarmState
from burst.runtime import build_runtime, load_run_config

ROOT = Path(__file__).parents[2]

CONFIG = """cluster: dc
clock: sim
clock_speed: 36000
sim_start: 2026-03-02T09:00:00Z
node_groups:
  - id: rack-a
    provider: onprem
    tier: steady
    capacity_type: onprem
    instance_type: dgx-a100
    region: dc1
    gpu_model: A100
    gpus_per_node: 8
    max_size: 2
    initial_size: 2
{extra}onprem:
  inventory: inventory.yaml
{onprem}"""


def write(tmp_path: Path, *, extra: str = "", onprem: str = "") -> Path:
    (tmp_path / "policies").mkdir(exist_ok=True)
    (tmp_path / "inventory.yaml").write_text("groups:\n  rack-a:\n    hosts: [gpu-01, {name: gpu-02, address: 10.0.0.2}]\n")
    config = tmp_path / "burst.yaml"
    config.write_text(CONFIG.format(extra=extra, onprem=onprem))
    return config


def burst(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burst.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_burst_run_powers_idle_onprem_hosts_off_with_the_configured_command(tmp_path: Path) -> None:
    log = tmp_path / "power.log"
    script = tmp_path / "power"
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    script.chmod(0o755)
    config = write(tmp_path, extra="    power_saving: {suspend_time: 10m}\n",
                   onprem=f"  power_on: [{script}, chassis, power, 'on', '{{host}}']\n"
                          f"  power_off: [{script}, chassis, power, 'off', '{{host}}']\n")
    out = burst("run", "--config", str(config), "--duration", "30m")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "2026-03-02 09:00 = status: 0 pending, 0 running (0 GPUs) | rack-a 2 ready | $17.30/h" in lines
    assert ("2026-03-02 09:10 - scale_down rack-a -> 0: power off 2 on-prem node(s) idle for at least the 10 min "
            "suspend time (2 -> 0 nodes on)") in lines
    assert log.read_text().splitlines() == ["chassis power off gpu-01", "chassis power off 10.0.0.2"]


def test_burst_run_without_commands_or_agents_serves_the_declared_hosts(tmp_path: Path) -> None:
    out = burst("run", "--config", str(write(tmp_path)), "--duration", "5m")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("burst: cluster dc; groups rack-a (steady/onprem, 2x8 A100);")
    assert "2026-03-02 09:00 = status: 0 pending, 0 running (0 GPUs) | rack-a 2 ready | $17.30/h" in out.stdout


def test_a_bad_inventory_is_one_clear_error(tmp_path: Path) -> None:
    config = write(tmp_path)
    (tmp_path / "inventory.yaml").write_text("groups:\n  rack-b:\n    hosts: [x]\n")
    out = burst("run", "--config", str(config), "--duration", "5m")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "onprem.inventory: no hosts in the inventory for onprem node group(s) rack-a" in out.stderr, out.stderr


def test_with_the_agent_link_hosts_are_ready_on_their_agents_heartbeats(tmp_path: Path) -> None:
    (tmp_path / "agents.yaml").write_text("gpu-01: t1\ngpu-02: t2\n")
    config = write(tmp_path, extra="    power_saving: {suspend_time: 10m}\n", onprem="  heartbeat_timeout: 30s\n")
    config.write_text(config.read_text() + "api:\n  agent_tokens: agents.yaml\n")
    runtime = build_runtime(load_run_config(config), state_path=tmp_path / "s.db")
    try:
        assert runtime.hub is not None
        provider = runtime.providers["onprem"]
        clock = runtime.sim_clock
        assert clock is not None
        runtime.controller.tick()
        assert {n: s.state for n, s in provider.nodes().items()} == {"gpu-01": NodeState.BOOTING,
                                                                    "gpu-02": NodeState.BOOTING}
        for node in ("gpu-01", "gpu-02"):
            runtime.hub.record(Report(node_id=node, at=clock.now))
        clock.advance(10)
        runtime.controller.tick()
        assert {n: s.state for n, s in provider.nodes().items()} == {"gpu-01": NodeState.READY,
                                                                    "gpu-02": NodeState.READY}
        clock.advance(20)
        runtime.hub.record(Report(node_id="gpu-01", at=clock.now))  # gpu-02's agent has gone quiet
        clock.advance(15)
        runtime.controller.tick()
        assert {n: s.state for n, s in provider.nodes().items()} == {"gpu-01": NodeState.READY,
                                                                    "gpu-02": NodeState.INTERRUPTED}
        assert provider.group_state("rack-a").target == 1
        clock.advance(5)
        runtime.hub.record(Report(node_id="gpu-02", at=clock.now))  # back
        clock.advance(5)
        runtime.controller.tick()
        assert provider.nodes()["gpu-02"].state is NodeState.READY
        for _ in range(70):  # idle: both are powered off after the 10 min suspend time, and their agents stop
            for node in (n for n, s in provider.nodes().items() if s.state is NodeState.READY):
                runtime.hub.record(Report(node_id=node, at=clock.now))
            clock.advance(10)
            runtime.controller.tick()
        assert {n: (s.state, s.warm_state) for n, s in provider.nodes().items()} == {
            "gpu-01": (NodeState.WARM, WarmState.POWERED_OFF), "gpu-02": (NodeState.WARM, WarmState.POWERED_OFF)}
    finally:
        runtime.close()
