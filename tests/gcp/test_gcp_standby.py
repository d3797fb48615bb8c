"""The MIG standby pool as burst's warm pool, on the local Compute API: sizing by patch (standby policy and
targetStoppedSize), stopped VMs beyond the target, scale-out drawing on them first, the states GCP cannot keep, and
the VM age exposed for rotation before Compute Engine's 60-day recreation."""

from __future__ import annotations

import pytest
from gcp_env import ZONES

from burst.model import NodeState, WarmState
from providers.base import GroupState, InvalidTarget, NotSupported
from providers.gcp import STANDBY_RECREATE_S, request_id

from .conftest import Gcp

PATCH = "compute.instanceGroupManagers.patch"


def in_state(p: object, group: str, state: NodeState) -> list[str]:
    return sorted(n.id for n in p.nodes().values() if n.group_id == group and n.state is state)  # type: ignore[attr-defined]


def test_the_standby_pool_is_sized_by_patch_and_held_beyond_the_target(gcp: Gcp) -> None:
    p = gcp.provider()
    assert p.group_state("od-a100").warm_pool == (0, WarmState.STOPPED)
    p.set_warm_pool("od-a100", 2, WarmState.STOPPED, key="warm-2")
    (query, body, status), = gcp.server.calls(PATCH)
    assert status == 200 and query == {"requestId": request_id("warm-2")}
    assert body == {"standbyPolicy": {"mode": "SCALE_OUT_POOL"}, "targetStoppedSize": 2, "targetSuspendedSize": 0}
    assert p.group_state("od-a100") == GroupState(0, 2, WarmState.STOPPED)
    p.refresh()
    assert len(in_state(p, "od-a100", NodeState.BOOTING)) == 2  # being prepared
    gcp.clock.advance(60)
    p.refresh()
    warm = in_state(p, "od-a100", NodeState.WARM)
    assert len(warm) == 2 and all(p.nodes()[w].warm_state is WarmState.STOPPED for w in warm)
    assert p.group_state("od-a100") == GroupState(0, 2, WarmState.STOPPED)
    p.set_warm_pool("od-a100", 1, WarmState.STOPPED, key="warm-1")
    gcp.clock.advance(10)
    p.refresh()
    assert len(in_state(p, "od-a100", NodeState.WARM)) == 1


def test_scale_out_starts_standby_vms_first_and_the_pool_is_replenished(gcp: Gcp) -> None:
    p = gcp.provider()
    p.set_warm_pool("od-a100", 1, WarmState.STOPPED, key="warm-1")
    gcp.clock.advance(60)
    p.refresh()
    (standby,) = in_state(p, "od-a100", NodeState.WARM)
    p.set_target("od-a100", 1, key="up")
    p.refresh()
    assert p.nodes()[standby].state is NodeState.WAKING  # started, not created: 20 s instead of a 60 s boot
    gcp.clock.advance(20)
    p.refresh()
    assert in_state(p, "od-a100", NodeState.READY) == [standby]
    assert [s.state for s in p.nodes()[standby].history][-3:] == [NodeState.WARM, NodeState.WAKING, NodeState.READY]
    gcp.clock.advance(60)
    p.refresh()
    (fresh,) = in_state(p, "od-a100", NodeState.WARM)  # SCALE_OUT_POOL: the MIG refills the pool
    assert fresh != standby


def test_states_gcp_cannot_keep_are_not_supported(gcp: Gcp) -> None:
    p = gcp.provider()
    with pytest.raises(NotSupported, match="cannot suspend a VM with GPUs"):
        p.set_warm_pool("od-a100", 1, WarmState.HIBERNATED, key="suspend")
    with pytest.raises(NotSupported, match="stopped or suspended"):
        p.set_warm_pool("od-a100", 1, WarmState.RUNNING, key="running")
    with pytest.raises(NotSupported, match="Spot"):
        p.set_warm_pool("spot-a100", 1, WarmState.STOPPED, key="spot")
    with pytest.raises(InvalidTarget):
        p.set_warm_pool("od-a100", -1, WarmState.STOPPED, key="negative")
    assert gcp.server.calls(PATCH) == [] and p.group_state("od-a100").warm_pool == (0, WarmState.STOPPED)


def test_standby_age_is_the_vms_age_and_rotation_comes_before_60_days(gcp: Gcp) -> None:
    p = gcp.provider()
    (group,) = [g for g in p.node_groups() if g.id == "od-a100"]
    p.set_warm_pool("od-a100", 1, WarmState.STOPPED, key="warm-1")
    created = gcp.clock()
    gcp.clock.advance(60)
    p.refresh()
    (standby,) = in_state(p, "od-a100", NodeState.WARM)
    assert p.nodes()[standby].created_at == created  # the VM's creationTimestamp, not when burst first saw it
    gcp.clock.advance(59 * 86400)
    p.refresh()
    assert p.standby_age_s(standby) == 59 * 86400 + 60
    node = p.nodes()[standby]
    age = (gcp.clock() - node.created_at).total_seconds()  # what the hot-pool step compares with max_age
    assert age >= group.warm_pool.max_age_s and group.warm_pool.max_age_s < STANDBY_RECREATE_S
    p.terminate([standby], key="rotate")  # a warm VM leaves the pool, not the target
    assert p.group_state("od-a100") == GroupState(0, 0, WarmState.STOPPED)
    assert gcp.server.migs[(ZONES[0], "od-a100")]["targetStoppedSize"] == 0
