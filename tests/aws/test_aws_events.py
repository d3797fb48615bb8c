"""EventBridge events on SQS into typed ProviderEvents: duplicates and malformed messages are dropped with a logged
reason, and, through the real Controller, an untracked instance tagged with the cluster is garbage-collected (that
an interruption reaches the eviction path is the contract suite's, for every backend with an interruption source)."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest
from aws_env import client, launch_untracked, new_event_id, send_event

from burst.actuator import Actuator
from burst.model import CapacityType, EventKind, NodeGroup, NodeState, Policy, SpotPolicy
from burst.reconcile import Controller
from burst.state import Store
from burst.workloads.queue import StoreQueue
from providers.aws import AwsProvider
from providers.aws.events import INTERRUPTION, REBALANCE, STATE_CHANGE, event_body

from .conftest import CLUSTER, PRICES, Aws


class Prices:
    def group_price(self, g: NodeGroup) -> float:
        return PRICES[(g.instance_type, g.capacity_type)]

    def standby_price(self, g: NodeGroup) -> float:
        return 0.0


def queued(aws: Aws) -> int:
    attrs = client("sqs", aws.url).get_queue_attributes(
        QueueUrl=aws.queue_url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])
    return sum(int(v) for v in attrs["Attributes"].values())


def one_spot_node(aws: Aws) -> tuple[AwsProvider, str]:
    p = aws.provider()
    p.set_target("spot-a100", 1, key="spot-1")
    p.refresh()
    (node,) = [n for n in p.nodes().values() if n.group_id == "spot-a100"]
    return p, node.id


def test_interruption_rebalance_and_state_change_become_typed_events(aws: Aws) -> None:
    p, iid = one_spot_node(aws)
    at = aws.clock()
    send_event(aws.url, aws.queue_url, event_body(INTERRUPTION, iid, at, event_id=new_event_id()))
    send_event(aws.url, aws.queue_url, event_body(REBALANCE, iid, at, event_id=new_event_id()))
    send_event(aws.url, aws.queue_url, event_body(STATE_CHANGE, iid, at, event_id=new_event_id(), state="terminated"))
    send_event(aws.url, aws.queue_url, event_body(STATE_CHANGE, iid, at, event_id=new_event_id(), state="running"))
    events = p.poll_events()
    kinds = sorted(e.kind.value for e in events)
    assert kinds == sorted([EventKind.INTERRUPTION.value, EventKind.REBALANCE.value, EventKind.NODE_LOST.value])
    interruption = next(e for e in events if e.kind is EventKind.INTERRUPTION)
    assert (interruption.group_id, interruption.node_id) == ("spot-a100", iid)
    assert interruption.at == at and interruption.deadline == at + timedelta(minutes=2)
    assert queued(aws) == 4  # not deleted until the events were returned and the next poll comes
    assert p.poll_events() == []
    assert queued(aws) == 0


def test_duplicates_and_malformed_messages_are_dropped_with_a_reason(aws: Aws, caplog: pytest.LogCaptureFixture) -> None:
    p, iid = one_spot_node(aws)
    body = event_body(INTERRUPTION, iid, aws.clock(), event_id="dup-1")
    send_event(aws.url, aws.queue_url, body)
    send_event(aws.url, aws.queue_url, body)  # SQS delivers at least once; EventBridge may send twice
    send_event(aws.url, aws.queue_url, "{not json")
    send_event(aws.url, aws.queue_url, '{"detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2"}')
    send_event(aws.url, aws.queue_url, event_body(INTERRUPTION, "i-0fffffffffffffff0", aws.clock(), event_id="x"))
    with caplog.at_level(logging.INFO, logger="burst.providers.aws"):
        events = p.poll_events()
        assert [e.node_id for e in events] == [iid]
        assert p.poll_events() == []
    reasons = [getattr(r, "why", "") for r in caplog.records]
    assert any(r.startswith("not JSON") for r in reasons) and "no event id" in reasons
    assert any(r.getMessage() == "ignoring duplicate event" for r in caplog.records)
    assert any(r.getMessage() == "ignoring event for an instance no managed group owns" for r in caplog.records)
    assert queued(aws) == 0
    send_event(aws.url, aws.queue_url, body)  # a late redelivery of an event already returned
    assert p.poll_events() == [] and p.poll_events() == []


def controller(aws: Aws, store: Store, provider: AwsProvider, orphan_grace_s: float = 600.0) -> Controller:
    actuator = Actuator({"aws": provider}, store, cluster=CLUSTER, clock=aws.clock, orphan_grace_s=orphan_grace_s)
    return Controller(
        providers={"aws": provider},
        source=StoreQueue(store, complete_by_duration=True),
        store=store,
        policies=lambda: {"batch": Policy(tenant="batch", spot=SpotPolicy(allowed=True))},
        prices=Prices(),
        clock=aws.clock,
        cluster=CLUSTER,
        actuator=actuator,
    )


@pytest.mark.slow
def test_an_untracked_tagged_instance_is_garbage_collected(aws: Aws, tmp_path: Path) -> None:
    store = Store.open(tmp_path / "burst.db")
    provider = aws.provider()
    ctl = controller(aws, store, provider, orphan_grace_s=120.0)
    orphan = launch_untracked(aws.url, CLUSTER)
    first = ctl.tick()
    assert first.gc.orphans == [] and orphan in provider.nodes()  # inside its grace period
    aws.clock.advance(150)
    second = ctl.tick()
    assert second.gc.orphans == [orphan]
    state = client("ec2", aws.url).describe_instances(InstanceIds=[orphan])["Reservations"][0]["Instances"][0]["State"]
    assert state["Name"] in ("shutting-down", "terminated")
    provider.refresh()
    assert orphan not in provider.nodes() or provider.nodes()[orphan].state is NodeState.TERMINATING
    assert all(g.capacity_type in (CapacityType.ON_DEMAND, CapacityType.SPOT) for g in provider.node_groups())
    store.close()
