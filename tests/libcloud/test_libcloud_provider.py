"""The libcloud provider's own behaviour over the Dummy-based drivers (tests/libcloud/dummy_env.py): scaling by
create/destroy, key-derived names that make retried creates safe, stop/start warm pools, lost nodes, errors."""

from __future__ import annotations

import pytest
from dummy_env import GroupDriver, StopStartDriver
from libcloud.common.exceptions import BaseHTTPError
from libcloud.common.types import InvalidCredsError
from libcloud.compute.drivers.dummy import DummyNodeDriver
from libcloud.compute.types import NodeState as LcState
from libcloud_env import dummy_provider

from burst.model import EventKind, NodeState, WarmState
from providers.base import (
    CredentialsError,
    GroupState,
    InsufficientCapacity,
    NotFound,
    NotSupported,
    QuotaExceeded,
)
from providers.libcloud import (
    CLUSTER_KEY,
    GROUP_KEY,
    BackendUnavailable,
    GroupSpec,
    LibcloudConfigError,
    LibcloudProvider,
    node_name,
    supports_stop_start,
)
from providers.sim import ManualClock

GID = "od-a100"


def ours(driver: GroupDriver) -> list[str]:
    return sorted(str(n.name) for n in driver.list_nodes() if str(n.name).startswith("contract-"))


def states(p: LibcloudProvider, gid: str = GID) -> list[NodeState]:
    return sorted((n.state for n in p.nodes().values() if n.group_id == gid), key=lambda s: s.value)


def test_scale_up_creates_named_tagged_nodes_that_boot() -> None:
    clock = ManualClock()
    p, drv = dummy_provider(clock)
    p.set_target(GID, 2, key="up")
    assert ours(drv) == [node_name("contract", GID, "set_target", "up", i) for i in range(2)]
    for n in drv.list_nodes():
        if str(n.name).startswith("contract-"):
            assert n.extra["metadata"] == {CLUSTER_KEY: "contract", GROUP_KEY: GID}
    assert p.group_state(GID).target == 2
    assert states(p) == [NodeState.REQUESTED] * 2  # asynchronous: listed as asked for
    p.refresh()
    assert states(p) == [NodeState.BOOTING] * 2
    clock.advance(60)
    p.refresh()
    assert states(p) == [NodeState.READY] * 2
    assert {str(n.id) for n in drv.list_nodes()} - set(p.nodes()) == {"1", "2"}  # the Dummy's own: no group's


def test_scale_down_destroys_booting_nodes_first_then_the_newest() -> None:
    clock = ManualClock()
    p, drv = dummy_provider(clock)
    p.set_target(GID, 2, key="up-2")
    clock.advance(60)
    p.refresh()
    p.set_target(GID, 3, key="up-3")  # the third is still booting
    p.refresh()
    booting = [n.id for n in p.nodes().values() if n.state is NodeState.BOOTING]
    p.set_target(GID, 2, key="down-2")
    assert p.group_state(GID).target == 2
    assert booting[0] not in {str(n.id) for n in drv.list_nodes()}
    assert drv.calls["destroy_node"] == 1
    p.refresh()
    assert states(p) == [NodeState.READY] * 2
    p.set_target(GID, 0, key="down-0")
    p.refresh()
    assert ours(drv) == [] and p.nodes() == {}


def test_a_create_whose_reply_was_lost_is_not_repeated() -> None:
    clock = ManualClock()
    p, drv = dummy_provider(clock)
    drv.lose["create_node"] = 1  # the first create happens; its reply never arrives
    p.set_target(GID, 2, key="up")
    assert drv.calls["create_node"] == 2  # the retry re-listed and found the first node by its name
    assert ours(drv) == [node_name("contract", GID, "set_target", "up", i) for i in range(2)]
    assert p.group_state(GID).target == 2


def test_a_create_stopped_by_quota_keeps_what_it_made_and_the_same_key_finishes_it_after_a_restart() -> None:
    clock = ManualClock()
    p, drv = dummy_provider(clock)
    nova_quota = BaseHTTPError(403, "Quota exceeded for instances: Requested 1, but already used 8 of 8 instances")
    real_create = drv.create_node
    made: list[str] = []

    def create_then_quota(**kw: object) -> object:
        if made:
            raise nova_quota
        node = real_create(**kw)  # type: ignore[arg-type]
        made.append(str(node.name))
        return node

    drv.create_node = create_then_quota  # type: ignore[method-assign]
    with pytest.raises(QuotaExceeded, match="Quota exceeded for instances"):
        p.set_target(GID, 3, key="up-3")
    assert p.group_state(GID).target == 1  # the node made counts; the key was not consumed
    drv.create_node = real_create  # type: ignore[method-assign]

    restarted, _ = dummy_provider(clock, driver=drv)  # a new controller process over the same cloud
    assert restarted.group_state(GID).target == 1
    restarted.set_target(GID, 3, key="up-3")
    assert ours(drv) == [node_name("contract", GID, "set_target", "up-3", i) for i in range(3)]
    creates = drv.calls["create_node"]
    again, _ = dummy_provider(clock, driver=drv)
    again.set_target(GID, 3, key="up-3")  # fulfilled already: nothing more
    assert drv.calls["create_node"] == creates and again.group_state(GID).target == 3


def test_terminate_destroys_exactly_those_and_unknown_ids_are_not_found() -> None:
    clock = ManualClock()
    p, drv = dummy_provider(clock)
    p.set_target(GID, 3, key="up")
    clock.advance(60)
    p.refresh()
    victim, *rest = sorted(p.nodes())
    with pytest.raises(NotFound, match="i-nope"):
        p.terminate([victim, "i-nope"], key="kill")
    assert p.group_state(GID).target == 2
    assert p.nodes()[victim].state is NodeState.TERMINATING
    p.refresh()
    assert sorted(p.nodes()) == rest
    with pytest.raises(NotFound):
        p.terminate([victim], key="kill-again")
    assert drv.calls["destroy_node"] == 1


def test_warm_pool_nodes_are_created_then_stopped_and_woken_before_any_create() -> None:
    clock = ManualClock()
    p, drv = dummy_provider(clock, stop_start=True)
    assert p.group_state(GID).warm_pool == (0, WarmState.STOPPED)
    p.set_warm_pool(GID, 2, WarmState.STOPPED, key="warm-2")
    assert p.group_state(GID) == GroupState(0, 2, WarmState.STOPPED)
    p.refresh()
    assert states(p) == [NodeState.BOOTING] * 2
    clock.advance(60)
    p.refresh()  # running now: the provider stops them
    assert drv.calls["stop_node"] == 2
    p.refresh()
    warm = [n for n in p.nodes().values() if n.state is NodeState.WARM]
    assert len(warm) == 2 and all(n.warm_state is WarmState.STOPPED for n in warm)
    assert {str(n.state) for n in drv.list_nodes() if str(n.name).startswith("contract-")} == {LcState.STOPPED}
    creates = drv.calls["create_node"]
    p.set_target(GID, 1, key="up-1")
    assert drv.calls["start_node"] == 1 and drv.calls["create_node"] == creates  # a warm node, not a new one
    assert states(p).count(NodeState.WAKING) == 1 and p.group_state(GID).target == 1
    clock.advance(30)
    p.refresh()
    assert states(p) == sorted([NodeState.READY, NodeState.WARM], key=lambda s: s.value)
    p.set_warm_pool(GID, 0, WarmState.STOPPED, key="warm-0")
    p.refresh()
    assert states(p) == [NodeState.READY] and p.group_state(GID).target == 1


def test_a_stopped_node_found_at_start_is_a_warm_node() -> None:
    clock = ManualClock()
    p, drv = dummy_provider(clock, stop_start=True)
    p.set_warm_pool(GID, 1, WarmState.STOPPED, key="warm-1")
    clock.advance(60)
    p.refresh()
    p.refresh()
    restarted, _ = dummy_provider(clock, driver=drv)
    assert restarted.group_state(GID) == GroupState(0, 1, WarmState.STOPPED)
    assert [n.state for n in restarted.nodes().values()] == [NodeState.WARM]


def test_no_warm_pool_without_stop_and_start() -> None:
    clock = ManualClock()
    p, drv = dummy_provider(clock, stop_start=False)
    with pytest.raises(NotSupported, match="cannot stop and start"):
        p.set_warm_pool(GID, 1, WarmState.STOPPED, key="warm")
    assert drv.calls["create_node"] == 0
    assert not supports_stop_start(drv) and not supports_stop_start(DummyNodeDriver(0))
    assert supports_stop_start(StopStartDriver(clock))
    from libcloud.compute.drivers.ec2 import EC2NodeDriver
    from libcloud.compute.drivers.openstack import OpenStack_2_NodeDriver

    assert supports_stop_start(EC2NodeDriver("k", "s")) and hasattr(OpenStack_2_NodeDriver, "ex_stop_node")


@pytest.mark.parametrize("state", [WarmState.RUNNING, WarmState.HIBERNATED, WarmState.POWERED_OFF])
def test_warm_states_other_than_stopped_are_not_supported(state: WarmState) -> None:
    p, _ = dummy_provider(ManualClock(), stop_start=True)
    with pytest.raises(NotSupported):
        p.set_warm_pool(GID, 1, state, key=f"warm-{state}")


def test_a_node_that_vanishes_is_reported_lost_and_leaves_the_target() -> None:
    clock = ManualClock()
    p, drv = dummy_provider(clock)
    p.set_target(GID, 2, key="up")
    clock.advance(60)
    p.refresh()
    gone = sorted(p.nodes())[0]
    drv.vanish(gone)
    p.refresh()
    assert p.group_state(GID).target == 1 and gone not in p.nodes()
    events = p.poll_events()
    assert [(e.kind, e.node_id) for e in events] == [(EventKind.NODE_LOST, gone)]
    assert p.poll_events() == []


def test_a_node_in_error_is_failed_and_reported_once() -> None:
    clock = ManualClock()
    p, drv = dummy_provider(clock)
    p.set_target(GID, 1, key="up")
    (node,) = [n for n in drv.list_nodes() if str(n.name).startswith("contract-")]
    node.state = LcState.ERROR
    p.refresh()
    p.refresh()
    assert p.nodes()[str(node.id)].state is NodeState.FAILED
    assert [e.kind for e in p.poll_events()] == [EventKind.LAUNCH_FAILED]


def test_transient_errors_are_retried() -> None:
    clock = ManualClock()
    p, drv = dummy_provider(clock)
    drv.fail("create_node", BaseHTTPError(503, "Service Unavailable"), ConnectionResetError("reset"))
    p.set_target(GID, 1, key="up")
    assert drv.calls["create_node"] == 3 and len(ours(drv)) == 1


def test_errors_past_the_retries_are_backend_unavailable_and_keep_the_key() -> None:
    clock = ManualClock()
    p, drv = dummy_provider(clock)
    drv.fail("create_node", *[BaseHTTPError(500, "Internal Server Error")] * 4)
    with pytest.raises(BackendUnavailable, match="HTTP 500"):
        p.set_target(GID, 1, key="up")
    assert p.group_state(GID).target == 0
    p.set_target(GID, 1, key="up")  # the same key, sent again on the next tick
    assert p.group_state(GID).target == 1


def test_credentials_are_mapped_and_not_retried() -> None:
    clock = ManualClock()
    p, drv = dummy_provider(clock)
    drv.fail("list_nodes", InvalidCredsError("Invalid credentials with the provider"))
    with pytest.raises(CredentialsError, match="key_env"):
        p.refresh()
    assert drv.calls["list_nodes"] == 2  # one at construction, one refused: no retry


def test_no_capacity_marks_the_offering_unavailable_for_a_cooldown() -> None:
    clock = ManualClock()
    p, drv = dummy_provider(clock, capacity_cooldown_s=300)
    drv.fail("create_node", BaseHTTPError(500, "No valid host was found. There are not enough hosts available."))
    with pytest.raises(InsufficientCapacity):
        p.set_target(GID, 1, key="up")
    assert [o.available for o in p.offerings(GID)] == [False]
    with pytest.raises(InsufficientCapacity, match="cooling down"):
        p.set_target(GID, 1, key="up")
    assert drv.calls["create_node"] == 1  # the cooldown refused it without a call
    clock.advance(301)
    assert [o.available for o in p.offerings(GID)] == [True]
    p.set_target(GID, 1, key="up")
    assert p.group_state(GID).target == 1


def test_offerings_price_from_spec_then_lookup_then_driver() -> None:
    clock = ManualClock()
    p, _ = dummy_provider(clock)
    assert [o.price_per_hour for o in p.offerings(GID)] == [30.0]  # the driver's size price
    assert [o.price_per_hour for o in p.offerings("spot-a100")] == [0.0]  # no spot price in the driver
    looked, _ = dummy_provider(clock, prices=lambda t, r, c: 12.5 if c.value == "spot" else None)
    assert [o.price_per_hour for o in looked.offerings("spot-a100")] == [12.5]
    assert [o.price_per_hour for o in looked.offerings(GID)] == [30.0]


def test_a_spec_the_driver_cannot_honour_is_a_config_error() -> None:
    clock = ManualClock()
    _, drv = dummy_provider(clock)
    from libcloud_env import dummy_groups

    groups = dummy_groups()[:1]
    with pytest.raises(LibcloudConfigError, match="size 'no-such-size'"):
        LibcloudProvider(drv, groups, {GID: GroupSpec(size="no-such-size", image="ubuntu-22.04-cuda")},
                         cluster="contract", clock=clock)
    with pytest.raises(LibcloudConfigError, match="image 'no-such-image'"):
        LibcloudProvider(drv, groups, {GID: GroupSpec(size="gpu-8xa100", image="no-such-image")},
                         cluster="contract", clock=clock)
    with pytest.raises(LibcloudConfigError, match="location 'mars'"):
        LibcloudProvider(drv, groups, {GID: GroupSpec(size="gpu-8xa100", image="ubuntu-22.04-cuda", location="mars")},
                         cluster="contract", clock=clock)
    with pytest.raises(LibcloudConfigError, match="no libcloud group spec"):
        LibcloudProvider(drv, groups, {}, cluster="contract", clock=clock)


def test_another_clusters_nodes_are_left_alone() -> None:
    clock = ManualClock()
    other, drv = dummy_provider(clock, cluster="other")
    other.set_target(GID, 1, key="up")
    mine, _ = dummy_provider(clock, driver=drv)
    assert mine.group_state(GID).target == 0 and mine.nodes() == {}
