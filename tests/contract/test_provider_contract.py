"""The provider contract (providers/base.py), run against every harness in conftest.HARNESSES."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import job

from burst.model import (
    ActionKind,
    CapacityType,
    EventKind,
    Node,
    NodeGroup,
    NodeState,
    Policy,
    SpotPolicy,
    WarmState,
)
from burst.reconcile import Controller
from burst.state import Store
from burst.workloads.queue import StoreQueue
from providers.base import InvalidTarget, NotFound, NotSupported, Provider

from .conftest import Harness


def group_nodes(h: Harness, group_id: str, state: NodeState | None = None) -> list[Node]:
    return sorted(
        (
            n
            for n in h.provider.nodes().values()
            if n.group_id == group_id and (state is None or n.state is state)
        ),
        key=lambda n: n.id,
    )


def ready_count(h: Harness, group_id: str) -> int:
    return len(group_nodes(h, group_id, NodeState.READY))


def settle_s(h: Harness) -> float:
    """Generous time for a launch to be listed READY."""
    return h.boot_latency_s + h.max_list_delay_s + 120.0


def scale_and_wait(h: Harness, group_id: str, size: int, key: str) -> list[Node]:
    h.provider.set_target(group_id, size, key=key)
    h.eventually(lambda: ready_count(h, group_id) == size, within_s=settle_s(h))
    return group_nodes(h, group_id, NodeState.READY)


def test_implements_the_protocol(harness: Harness) -> None:
    assert isinstance(harness.provider, Provider)
    ids = {g.id for g in harness.provider.node_groups()}
    assert {harness.group_id, harness.spot_group_id} <= ids


def test_offerings_describe_the_group(harness: Harness) -> None:
    group = next(g for g in harness.provider.node_groups() if g.id == harness.group_id)
    offerings = harness.provider.offerings(harness.group_id)
    assert offerings
    assert all(o.capacity_type is CapacityType.ON_DEMAND for o in offerings)
    assert group.instance_type in {o.instance_type for o in offerings}
    spot = harness.provider.offerings(harness.spot_group_id)
    assert all(o.capacity_type is CapacityType.SPOT for o in spot)


def test_set_target_launches_nodes_that_become_ready(harness: Harness) -> None:
    p = harness.provider
    p.set_target(harness.group_id, 2, key="scale-1")
    assert p.group_state(harness.group_id).target == 2  # recorded at once; the nodes come later
    assert ready_count(harness, harness.group_id) == 0  # asynchronous: nothing is ready yet
    harness.eventually(lambda: ready_count(harness, harness.group_id) == 2, within_s=settle_s(harness))
    harness.advance(harness.boot_latency_s)
    assert len(group_nodes(harness, harness.group_id)) == p.group_state(harness.group_id).target == 2


def test_repeated_key_is_applied_once(harness: Harness) -> None:
    p = harness.provider
    p.set_target(harness.group_id, 2, key="k-2")
    p.set_target(harness.group_id, 2, key="k-2")
    harness.eventually(lambda: ready_count(harness, harness.group_id) == 2, within_s=settle_s(harness))
    p.set_target(harness.group_id, 2, key="k-2-again")  # same size, new key: nothing more to do
    harness.advance(settle_s(harness))
    assert len(group_nodes(harness, harness.group_id)) == 2
    # A stale retry of an old key must not undo a later decision.
    p.set_target(harness.group_id, 1, key="k-1")
    p.set_target(harness.group_id, 2, key="k-2")
    assert p.group_state(harness.group_id).target == 1
    harness.advance(settle_s(harness))
    assert len(group_nodes(harness, harness.group_id)) == 1


@pytest.mark.parametrize("size", [-1, 5])
def test_target_outside_bounds_is_invalid(harness: Harness, size: int) -> None:
    with pytest.raises(InvalidTarget) as err:
        harness.provider.set_target(harness.group_id, size, key=f"bad-{size}")
    assert isinstance(err.value, ValueError)
    assert harness.provider.group_state(harness.group_id).target == 0


def test_a_call_that_raised_does_not_consume_its_key(harness: Harness) -> None:
    with pytest.raises(InvalidTarget):
        harness.provider.set_target(harness.group_id, 5, key="reused")
    harness.provider.set_target(harness.group_id, 1, key="reused")
    assert harness.provider.group_state(harness.group_id).target == 1


def test_unknown_group_is_not_found(harness: Harness) -> None:
    p = harness.provider
    with pytest.raises(NotFound):
        p.set_target("no-such-group", 1, key="x")
    with pytest.raises(NotFound):
        p.group_state("no-such-group")
    with pytest.raises(NotFound):
        p.offerings("no-such-group")
    with pytest.raises(NotFound):
        p.set_warm_pool("no-such-group", 1, WarmState.STOPPED, key="y")


def test_terminate_decrements_target_and_the_node_goes(harness: Harness) -> None:
    p = harness.provider
    victim, survivor = scale_and_wait(harness, harness.group_id, 2, "up-2")
    p.terminate([victim.id], key="kill-1")
    assert p.group_state(harness.group_id).target == 1
    harness.eventually(lambda: victim.id not in p.nodes(), within_s=600.0)
    harness.advance(settle_s(harness))  # no replacement: the desired size went down with it
    assert [n.id for n in group_nodes(harness, harness.group_id)] == [survivor.id]


def test_terminate_unknown_is_not_found_after_terminating_the_rest(harness: Harness) -> None:
    p = harness.provider
    (node,) = scale_and_wait(harness, harness.group_id, 1, "up-1")
    with pytest.raises(NotFound):
        p.terminate([node.id, "i-does-not-exist"], key="kill-mixed")
    assert p.group_state(harness.group_id).target == 0
    harness.eventually(lambda: node.id not in p.nodes(), within_s=600.0)
    with pytest.raises(NotFound):  # retried until NotFound: a terminated node is NotFound
        p.terminate([node.id], key="kill-retry")


def test_nodes_carry_the_cluster_tag(harness: Harness) -> None:
    nodes = scale_and_wait(harness, harness.group_id, 2, "up-tags")
    for n in nodes:
        assert n.tags["burst:cluster"] == harness.cluster
        assert n.tags["burst:group"] == harness.group_id


def test_poll_events_drains(harness: Harness) -> None:
    if harness.interrupt is None:
        pytest.skip(f"{harness.name}: no way to trigger an interruption")
    (node,) = scale_and_wait(harness, harness.spot_group_id, 1, "spot-1")
    harness.provider.poll_events()  # whatever came before
    harness.interrupt(node.id)
    events = harness.provider.poll_events()
    interruptions = [e for e in events if e.kind is EventKind.INTERRUPTION]
    assert [e.node_id for e in interruptions] == [node.id]
    assert interruptions[0].deadline is not None and interruptions[0].deadline >= interruptions[0].at
    assert all(e.kind is not EventKind.INTERRUPTION for e in harness.provider.poll_events())


def test_warm_pool_on_spot_is_not_supported(harness: Harness) -> None:
    with pytest.raises(NotSupported):
        harness.provider.set_warm_pool(harness.spot_group_id, 1, WarmState.STOPPED, key="warm-spot")


def test_warm_pool_prepares_warm_nodes(harness: Harness) -> None:
    if not harness.supports_warm_pool:
        with pytest.raises(NotSupported):
            harness.provider.set_warm_pool(harness.group_id, 1, WarmState.STOPPED, key="warm-1")
        return
    assert harness.provider.group_state(harness.group_id).warm_size == 0
    harness.provider.set_warm_pool(harness.group_id, 1, WarmState.STOPPED, key="warm-1")
    assert harness.provider.group_state(harness.group_id).warm_pool == (1, WarmState.STOPPED)
    harness.eventually(
        lambda: len(group_nodes(harness, harness.group_id, NodeState.WARM)) == 1, within_s=settle_s(harness)
    )
    (warm,) = group_nodes(harness, harness.group_id, NodeState.WARM)
    assert warm.warm_state is WarmState.STOPPED
    assert harness.provider.group_state(harness.group_id).target == 0  # warm nodes are beyond the target


def test_listing_lags_at_most_the_documented_delay(harness: Harness) -> None:
    p = harness.provider
    p.set_target(harness.group_id, 1, key="lag-1")
    assert p.group_state(harness.group_id).target == 1  # the size is consistent at once
    waited = harness.eventually(
        lambda: len(group_nodes(harness, harness.group_id)) == 1,
        within_s=harness.max_list_delay_s + 60.0,
        step_s=1.0,
    )
    assert waited <= harness.max_list_delay_s


class FlatPrices:
    """Spot cheaper than on-demand, so fault-tolerant work goes to the harness's spot group."""

    def group_price(self, g: NodeGroup) -> float:
        return 12.0 if g.capacity_type is CapacityType.SPOT else 32.0

    def standby_price(self, g: NodeGroup) -> float:
        return 0.0


@pytest.mark.slow
def test_an_interruption_reaches_the_eviction_path(harness: Harness, tmp_path: Path) -> None:
    """Through the real Controller: a backend's interruption notice (an SQS message on AWS, a preemption operation
    on GCP) is a typed event, the node's deadline is in the plan's snapshot, and the job on it is asked to
    checkpoint (ten minutes of unsaved work are more than a fresh checkpoint costs)."""
    if harness.interrupt is None:
        pytest.skip(f"{harness.name}: no way to trigger an interruption")
    store = Store.open(tmp_path / "burst.db")
    clock = harness.clock
    store.add_job(job("ft", tenant="batch", gpus=8, submitted=clock(), fault_tolerant=True,
                      checkpoint_interval_s=1800.0, checkpoint_duration_s=20.0, duration_s=4 * 3600.0), at=clock())
    ctl = Controller(providers={harness.name: harness.provider}, source=StoreQueue(store, complete_by_duration=True),
                     store=store, policies=lambda: {"batch": Policy(tenant="batch", spot=SpotPolicy(allowed=True))},
                     prices=FlatPrices(), clock=clock, cluster=harness.cluster)
    running = None
    for _ in range(10):
        ctl.tick()
        clock.advance(60)
        running = store.get_job("ft")
        if running is not None and running.node_ids:
            break
    assert running is not None and running.node_ids, "the job was never placed"
    (node_id,) = running.node_ids
    assert harness.provider.nodes()[node_id].group_id == harness.spot_group_id
    clock.advance(600)
    ctl.tick()
    harness.interrupt(node_id)
    report = ctl.tick()
    interruptions = [e for e in report.provider_events if e.kind is EventKind.INTERRUPTION]
    assert [e.node_id for e in interruptions] == [node_id]
    assert report.snapshot is not None and report.snapshot.notices[node_id] == interruptions[0].deadline
    assert [a.target for a in report.plan.of_kind(ActionKind.REQUEST_CHECKPOINT)] == ["ft"], report.plan.to_json()
    store.close()
