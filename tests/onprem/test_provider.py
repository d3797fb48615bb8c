"""OnPremProvider: racked hosts from an inventory file, switched by real power commands, READY on heartbeats."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from burst.model import (
    CapacityType,
    EventKind,
    GpuShape,
    NodeGroup,
    NodeId,
    NodeState,
    PowerSaving,
    Tier,
    WarmState,
)
from providers.base import InsufficientCapacity, InvalidTarget, NotFound, NotSupported, QuotaExceeded
from providers.onprem.provider import (
    InventoryError,
    OnPremProvider,
    PowerCommandFailed,
    PowerCommands,
    load_inventory,
)
from providers.sim import ManualClock

INVENTORY = """groups:
  rack-a:
    hosts:
      - gpu-01
      - {name: gpu-02, address: 10.0.0.12}
      - {name: gpu-03, gpus: 8}
"""


def rack_group(*, power_saving: bool = False, min_size: int = 0) -> NodeGroup:
    group = NodeGroup(id="rack-a", provider="onprem", region="dc1", tier=Tier.STEADY, capacity_type=CapacityType.ONPREM,
                      shape=GpuShape("A100", 8), instance_type="dgx-a100", min_size=min_size, max_size=16,
                      boot_latency_s=120.0)
    return group.with_power_saving(PowerSaving(suspend_after_s=600.0)) if power_saving else group


class Beats:
    """The agents' last heartbeats, as the runtime passes them from the AgentHub: set by the test."""

    def __init__(self) -> None:
        self.last: dict[NodeId, datetime] = {}

    def __call__(self) -> dict[NodeId, datetime]:
        return dict(self.last)


@pytest.fixture
def power(tmp_path: Path) -> tuple[Path, Path]:
    """A real power command (a script) that appends its argv to a log, and that log."""
    log = tmp_path / "argv.log"
    script = tmp_path / "power"
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    script.chmod(0o755)
    return script, log


def commands(script: Path) -> PowerCommands:
    return PowerCommands(power_on=(str(script), "chassis", "power", "on", "-H", "{host}", "{node}", "{group}"),
                         power_off=(str(script), "chassis", "power", "off", "-H", "{host}"))


def provider(tmp_path: Path, clock: ManualClock, *, group: NodeGroup | None = None,
             cmds: PowerCommands | None = None, beats: Beats | None = None, initial: int = 0,
             **kw: float) -> OnPremProvider:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(INVENTORY)
    g = group or rack_group()
    return OnPremProvider([g], load_inventory(inv), clock=clock, cluster="c1", prices={"rack-a": 17.3},
                          commands=cmds or PowerCommands(), heartbeats=beats, initial={"rack-a": initial}, **kw)


def states(p: OnPremProvider) -> dict[str, tuple[NodeState, WarmState | None]]:
    return {nid: (n.state, n.warm_state) for nid, n in sorted(p.nodes().items())}


def log_lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_the_inventory_fixes_the_group_size_and_the_offering(tmp_path: Path) -> None:
    p = provider(tmp_path, ManualClock())
    (group,) = p.node_groups()
    assert (group.min_size, group.max_size) == (0, 3)  # burst.yaml said 16; three hosts are racked
    (offering,) = p.offerings("rack-a")
    assert offering == dataclasses.replace(offering, instance_type="dgx-a100", capacity_type=CapacityType.ONPREM,
                                           price_per_hour=17.3, available=True)
    with pytest.raises(InvalidTarget, match=r"rack-a: size 4 is outside \[0, 3\] \(3 host\(s\) racked in the inventory\)"):
        p.set_target("rack-a", 4, key="too-many")
    with pytest.raises(NotFound):
        p.set_target("rack-b", 1, key="x")


def test_power_on_and_off_run_the_configured_commands_once_per_key(tmp_path: Path, power: tuple[Path, Path]) -> None:
    script, log = power
    clock = ManualClock()
    p = provider(tmp_path, clock, cmds=commands(script))
    p.set_target("rack-a", 2, key="up-2")
    p.set_target("rack-a", 2, key="up-2")  # a retry of the same key runs nothing
    assert log_lines(log) == ["chassis power on -H gpu-01 gpu-01 rack-a", "chassis power on -H 10.0.0.12 gpu-02 rack-a"]
    assert p.group_state("rack-a").target == 2
    p.set_target("rack-a", 1, key="down-1")
    assert log_lines(log)[2:] == ["chassis power off -H 10.0.0.12"]  # the newest goes first
    assert p.group_state("rack-a").target == 1
    p.terminate(["gpu-01"], key="kill-1")
    assert log_lines(log)[3:] == ["chassis power off -H gpu-01"]
    assert p.group_state("rack-a").target == 0
    # Listed from their first power-on, and never dropped after: powered off they are warm powered_off.
    assert states(p) == {"gpu-01": (NodeState.WARM, WarmState.POWERED_OFF),
                         "gpu-02": (NodeState.WARM, WarmState.POWERED_OFF)}
    p.terminate(["gpu-01"], key="kill-again")  # already off: nothing runs
    assert len(log_lines(log)) == 4
    with pytest.raises(NotFound, match="gpu-03, gpu-99"):  # never on (not listed) and not racked
        p.terminate(["gpu-03", "gpu-99"], key="kill-unlisted")
    p.set_target("rack-a", 1, key="up-again")  # the first powered off is the first back
    assert log_lines(log)[4:] == ["chassis power on -H gpu-01 gpu-01 rack-a"]
    assert states(p)["gpu-01"] == (NodeState.WAKING, None)
    clock.advance(120)  # no heartbeat source: ready after the wake latency (the boot latency here)
    p.refresh()
    assert states(p)["gpu-01"] == (NodeState.READY, None)


def test_a_failing_power_command_raises_with_its_stderr_and_keeps_the_key(tmp_path: Path) -> None:
    script = tmp_path / "fail"
    script.write_text('#!/bin/sh\necho "BMC 10.0.0.12 unreachable" >&2\nexit 3\n')
    script.chmod(0o755)
    clock = ManualClock()
    p = provider(tmp_path, clock, cmds=PowerCommands(power_on=(str(script), "{host}"), power_off=(str(script), "{host}")))
    with pytest.raises(InsufficientCapacity) as err:
        p.set_target("rack-a", 1, key="up-1")
    assert str(err.value) == f"gpu-01: power on command {str(script)!r} exited 3: BMC 10.0.0.12 unreachable"
    assert p.group_state("rack-a").target == 0 and p.nodes() == {}
    missing = PowerCommands(power_on=(str(tmp_path / "no-such-tool"), "{host}"), power_off=("true",))
    p = provider(tmp_path, clock, cmds=missing)
    with pytest.raises(InsufficientCapacity, match="power on command .*no-such-tool' not found"):
        p.set_target("rack-a", 1, key="up-1")
    p = provider(tmp_path, clock, cmds=PowerCommands(power_on=("true",), power_off=(str(script), "{host}")), initial=1)
    with pytest.raises(PowerCommandFailed, match="gpu-01: power off command .* exited 3: BMC"):
        p.set_target("rack-a", 0, key="down-0")
    assert p.group_state("rack-a").target == 1  # still on


def test_heartbeats_make_powered_on_hosts_ready(tmp_path: Path) -> None:
    clock, beats = ManualClock(), Beats()
    p = provider(tmp_path, clock, beats=beats)
    beats.last["gpu-01"] = clock.now - timedelta(seconds=5)  # from before the power on: does not count
    p.set_target("rack-a", 2, key="up-2")
    clock.advance(30)
    p.refresh()
    assert states(p) == {"gpu-01": (NodeState.BOOTING, None), "gpu-02": (NodeState.BOOTING, None)}
    beats.last["gpu-01"] = clock.now
    clock.advance(5)
    p.refresh()
    assert states(p) == {"gpu-01": (NodeState.READY, None), "gpu-02": (NodeState.BOOTING, None)}
    node = p.nodes()["gpu-01"]
    assert [t.state for t in node.history] == [NodeState.REQUESTED, NodeState.BOOTING, NodeState.READY]
    assert node.tags == {"burst:cluster": "c1", "burst:group": "rack-a", "burst:host": "gpu-01"}
    assert node.gpus == 8
    assert p.poll_events() == []


def test_missed_heartbeats_make_a_ready_host_lost_with_one_event(tmp_path: Path) -> None:
    clock, beats = ManualClock(), Beats()
    p = provider(tmp_path, clock, beats=beats, heartbeat_timeout_s=60.0)
    p.set_target("rack-a", 3, key="up-3")
    for nid in ("gpu-01", "gpu-02", "gpu-03"):
        beats.last[nid] = clock.now
    p.refresh()
    assert p.group_state("rack-a").target == 3
    last = clock.now
    for _ in range(13):  # gpu-02 stops heartbeating; the others go on every 5 s
        clock.advance(5)
        beats.last.update({"gpu-01": clock.now, "gpu-03": clock.now})
        p.refresh()
    assert states(p) == {"gpu-01": (NodeState.READY, None), "gpu-02": (NodeState.INTERRUPTED, None),
                         "gpu-03": (NodeState.READY, None)}
    assert p.group_state("rack-a").target == 2
    (event,) = p.poll_events()
    assert (event.kind, event.node_id, event.at) == (EventKind.NODE_LOST, "gpu-02", last + timedelta(seconds=65))
    assert event.detail == f"gpu-02: no agent heartbeat for 60 s (last {last.isoformat()})"
    clock.advance(5)
    p.refresh()
    assert p.poll_events() == []  # once
    with pytest.raises(QuotaExceeded, match=r"rack-a: 3 host\(s\) asked for, 2 can be on \(3 racked; failed or lost "
                                            r"until their agent heartbeats: gpu-02\)"):
        p.set_target("rack-a", 3, key="up-3-again")
    beats.last["gpu-02"] = clock.now  # its agent is back
    p.refresh()
    assert p.nodes()["gpu-02"].state is NodeState.READY and p.group_state("rack-a").target == 3


def test_a_resume_timeout_fails_the_wake(tmp_path: Path, power: tuple[Path, Path]) -> None:
    script, log = power
    clock, beats = ManualClock(), Beats()
    p = provider(tmp_path, clock, group=rack_group(power_saving=True), cmds=commands(script), beats=beats,
                 resume_timeout_s=300.0)
    assert states(p) == {f"gpu-0{i}": (NodeState.WARM, WarmState.POWERED_OFF) for i in (1, 2, 3)}
    p.set_target("rack-a", 1, key="wake-1")
    start = clock.now
    assert states(p)["gpu-01"] == (NodeState.WAKING, None)
    assert log_lines(log) == ["chassis power on -H gpu-01 gpu-01 rack-a"]
    clock.advance(300)
    p.refresh()
    assert states(p)["gpu-01"] == (NodeState.WAKING, None)  # at the timeout, not past it
    clock.advance(1)
    p.refresh()
    assert states(p)["gpu-01"] == (NodeState.FAILED, None) and p.group_state("rack-a").target == 0
    (event,) = p.poll_events()
    assert (event.kind, event.group_id, event.node_id, event.at) == (
        EventKind.LAUNCH_FAILED, "rack-a", "gpu-01", start + timedelta(seconds=301))
    assert event.detail == "gpu-01: no agent heartbeat within the 300 s resume timeout after power on"
    p.set_target("rack-a", 1, key="wake-another")  # the failed host is passed over
    assert states(p)["gpu-02"] == (NodeState.WAKING, None)
    p.terminate(["gpu-01"], key="off-failed")
    assert log_lines(log)[-1] == "chassis power off -H gpu-01"
    assert states(p)["gpu-01"] == (NodeState.WARM, WarmState.POWERED_OFF)
    assert p.poll_events() == []
    p.set_target("rack-a", 2, key="wake-third")  # hosts that failed fewer times go first
    assert states(p)["gpu-03"] == (NodeState.WAKING, None) and states(p)["gpu-01"][0] is NodeState.WARM


def test_power_saving_powers_idle_hosts_off_into_warm_powered_off(tmp_path: Path, power: tuple[Path, Path]) -> None:
    script, log = power
    clock, beats = ManualClock(), Beats()
    p = provider(tmp_path, clock, group=rack_group(power_saving=True), cmds=commands(script), beats=beats, initial=2)
    beats.last.update({"gpu-01": clock.now, "gpu-02": clock.now})
    p.refresh()
    assert states(p) == {"gpu-01": (NodeState.READY, None), "gpu-02": (NodeState.READY, None),
                         "gpu-03": (NodeState.WARM, WarmState.POWERED_OFF)}
    clock.advance(10)
    p.terminate(["gpu-02"], key="suspend-1")  # the planner's power-off of an idle node
    assert log_lines(log) == ["chassis power off -H 10.0.0.12"]
    assert states(p)["gpu-02"] == (NodeState.WARM, WarmState.POWERED_OFF) and p.group_state("rack-a").target == 1
    assert [t.state for t in p.nodes()["gpu-02"].history][-3:] == [NodeState.READY, NodeState.DRAINING, NodeState.WARM]
    p.refresh()  # its last heartbeat is from before the power off: it stays off
    assert states(p)["gpu-02"] == (NodeState.WARM, WarmState.POWERED_OFF)
    p.terminate(["gpu-02"], key="rotate")  # already off: nothing to run
    assert len(log_lines(log)) == 1
    p.set_warm_pool("rack-a", 0, WarmState.POWERED_OFF, key="pool")
    assert p.group_state("rack-a").warm_pool == (0, WarmState.POWERED_OFF)
    with pytest.raises(NotSupported, match="powered_off only, not stopped"):
        p.set_warm_pool("rack-a", 1, WarmState.STOPPED, key="pool-stopped")
    p.set_target("rack-a", 3, key="wake-2")
    assert states(p)["gpu-02"] == (NodeState.WAKING, None) and states(p)["gpu-03"] == (NodeState.WAKING, None)
    assert p.group_state("rack-a").target == 3


def test_without_a_heartbeat_source_hosts_are_ready_as_declared(tmp_path: Path) -> None:
    clock = ManualClock()
    p = provider(tmp_path, clock, initial=1)  # no commands either: declared only
    assert states(p) == {"gpu-01": (NodeState.READY, None)}
    p.set_target("rack-a", 2, key="up-2")
    clock.advance(119)
    p.refresh()
    assert states(p)["gpu-02"] == (NodeState.BOOTING, None)
    clock.advance(1)  # the group's boot latency, 120 s
    p.refresh()
    assert states(p)["gpu-02"] == (NodeState.READY, None)
    with pytest.raises(NotSupported, match="no warm pool without power_saving"):
        p.set_warm_pool("rack-a", 1, WarmState.POWERED_OFF, key="pool")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("groups:\n  rack-a:\n    hosts: [a, a]\n", "groups.rack-a.hosts.1: host a is already listed in group rack-a"),
        ("groups:\n  rack-a:\n    hosts: []\n", "groups.rack-a: needs hosts:, a list of at least one host"),
        ("groups:\n  rack-a:\n    hosts: [{address: 10.0.0.1}]\n", "groups.rack-a.hosts.0.name: required"),
        ("groups:\n  rack-a:\n    hosts: [{name: a, gpus: 0}]\n", "groups.rack-a.hosts.0.gpus: must be a whole number"),
        ("hosts: [a]\n", "needs a groups: mapping of node group id to its hosts"),
    ],
)
def test_a_malformed_inventory_names_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    with pytest.raises(InventoryError) as err:
        load_inventory(path)
    assert str(err.value).startswith(f"{path}: {message}")


def test_the_inventory_must_match_the_groups(tmp_path: Path) -> None:
    clock = ManualClock()
    group = rack_group()
    with pytest.raises(InventoryError, match="no hosts in the inventory for onprem node group\\(s\\) rack-a"):
        OnPremProvider([group], {}, clock=clock, cluster="c1", prices={})
    inv = load_inventory(_write(tmp_path, "groups:\n  rack-a:\n    hosts: [a]\n  rack-z:\n    hosts: [z]\n"))
    with pytest.raises(InventoryError, match="inventory group\\(s\\) rack-z are not onprem node groups in burst.yaml"):
        OnPremProvider([group], inv, clock=clock, cluster="c1", prices={})
    inv = load_inventory(_write(tmp_path, "groups:\n  rack-a:\n    hosts: [{name: a, gpus: 4}]\n"))
    with pytest.raises(InventoryError, match="host\\(s\\) a declare a GPU count other than the group's gpus_per_node 8"):
        OnPremProvider([group], inv, clock=clock, cluster="c1", prices={})


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    return path
