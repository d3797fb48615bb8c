"""Preemptions and stockouts on the local Compute API: a Spot preemption (compute.instances.preempted zone
operation) is a typed event with a 30 s deadline (that it reaches the eviction path is the contract suite's), and,
through the real Controller, a zone stockout (ZONE_RESOURCE_POOL_EXHAUSTED) sends the planner to another zone."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest
from builders import job
from gcp_env import ZONES

from burst.actuator import Actuator
from burst.model import ActionKind, EventKind, NodeGroup, NodeState, Policy, SpotPolicy
from burst.reconcile import Controller
from burst.state import Store
from burst.workloads.queue import StoreQueue
from providers.base import InsufficientCapacity
from providers.gcp import GcpProvider
from providers.gcp.events import PREEMPTED, PREEMPTION_NOTICE_S, parse_time

from .conftest import CLUSTER, PRICES, Gcp


class Prices:
    def __init__(self, extra: dict[str, float] | None = None) -> None:
        self.extra = extra or {}

    def group_price(self, g: NodeGroup) -> float:
        return PRICES[(g.instance_type, g.capacity_type)] + self.extra.get(g.id, 0.0)

    def standby_price(self, g: NodeGroup) -> float:
        return 0.0


def one_spot_vm(gcp: Gcp) -> tuple[GcpProvider, str]:
    p = gcp.provider()
    p.set_target("spot-a100", 1, key="spot-1")
    gcp.clock.advance(60)
    p.refresh()
    (node,) = [n for n in p.nodes().values() if n.group_id == "spot-a100"]
    assert node.state is NodeState.READY
    return p, node.id


def test_a_preemption_operation_is_an_interruption_with_a_30_s_deadline(gcp: Gcp) -> None:
    p, vm = one_spot_vm(gcp)
    assert p.poll_events() == []
    gcp.clock.advance(5)
    op = gcp.server.preempt(vm)
    assert op["operationType"] == PREEMPTED and op["insertTime"].endswith("-08:00")  # Pacific, as the API answers
    (event,) = p.poll_events()
    assert (event.kind, event.group_id, event.node_id) == (EventKind.INTERRUPTION, "spot-a100", vm)
    assert event.at == parse_time(op["insertTime"]) == gcp.clock()
    assert event.deadline == event.at + timedelta(seconds=30) and PREEMPTION_NOTICE_S == 30.0
    p.refresh()  # the VM shows STOPPING: the same preemption, not a second event
    assert p.poll_events() == []
    assert p.nodes()[vm].state is NodeState.READY  # it serves out its notice
    gcp.clock.advance(30)
    p.refresh()
    assert p.poll_events() == [] and p.nodes()[vm].state is NodeState.INTERRUPTED


def test_a_preempted_vm_seen_without_its_operation_is_still_an_interruption(gcp: Gcp) -> None:
    p, vm = one_spot_vm(gcp)
    gcp.server.preempt(vm)
    gcp.server.operations.clear()  # the operation aged out of the list (or the poll missed it)
    p.refresh()
    (event,) = p.poll_events()
    assert (event.kind, event.node_id, event.deadline) == (
        EventKind.INTERRUPTION, vm, gcp.clock() + timedelta(seconds=30))
    assert p.poll_events() == []


def test_malformed_and_foreign_operations_are_dropped_with_a_reason(gcp: Gcp, caplog: pytest.LogCaptureFixture) -> None:
    p, vm = one_spot_vm(gcp)
    s = gcp.server
    s._operation(ZONES[0], PREEMPTED, "https://www.googleapis.com/compute/v1/projects/x/zones/z/disks/d", status="DONE")
    s._operation(ZONES[0], PREEMPTED, s.vms[(ZONES[0], vm)].url(s.project).replace(vm, "someone-elses"),
                           status="DONE")
    with caplog.at_level(logging.INFO, logger="burst.providers.gcp"):
        assert p.poll_events() == []
    assert any("is not a VM" in getattr(r, "why", "") for r in caplog.records)
    assert any(r.getMessage() == "ignoring preemption of a VM no managed group owns" for r in caplog.records)


def controller(gcp: Gcp, store: Store, provider: GcpProvider, prices: Prices | None = None) -> Controller:
    actuator = Actuator({"gcp": provider}, store, cluster=CLUSTER, clock=gcp.clock)
    return Controller(
        providers={"gcp": provider},
        source=StoreQueue(store, complete_by_duration=True),
        store=store,
        policies=lambda: {"batch": Policy(tenant="batch", spot=SpotPolicy(allowed=True)),
                          "research": Policy(tenant="research")},
        prices=prices or Prices(),
        clock=gcp.clock,
        cluster=CLUSTER,
        actuator=actuator,
    )


def test_a_zone_stockout_sends_the_planner_to_another_zone(gcp: Gcp, tmp_path: Path) -> None:
    s = gcp.server
    s.add_mig(ZONES[1], "od-a100-b", "od-a100-t")  # the same template in zone b
    s.faults.stockout_zones = {ZONES[0]}
    provider = gcp.provider()
    store = Store.open(tmp_path / "burst.db")
    store.add_job(job("j", tenant="research", gpus=8, submitted=gcp.clock(), duration_s=3600.0), at=gcp.clock())
    ctl = controller(gcp, store, provider, Prices({"od-a100-b": 0.01}))  # zone a is the first choice
    first = ctl.tick()
    (failed,) = [o for o in first.outcomes if not o.ok]
    assert failed.action.target == "od-a100" and failed.detail.startswith("InsufficientCapacity")
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in failed.detail
    assert [(o.zone, o.available) for o in provider.offerings("od-a100")] == [(ZONES[0], False)]
    with pytest.raises(InsufficientCapacity, match="cooling down"):  # no resize is sent while it cools down
        provider.set_target("od-a100", 1, key="again")
    gcp.clock.advance(60)
    second = ctl.tick()
    ups = second.plan.of_kind(ActionKind.SCALE_UP)
    assert [(a.target, a.size) for a in ups] == [("od-a100-b", 1)], second.plan.to_json()
    assert provider.group_state("od-a100-b").target == 1 and provider.group_state("od-a100").target == 0
    assert s.migs[(ZONES[0], "od-a100")]["targetSize"] == 0
    store.close()


def test_a_stockout_during_creation_is_a_launch_failure_and_cools_the_zone(gcp: Gcp) -> None:
    gcp.server.faults.stockout_creation_zones = {ZONES[0]}
    p = gcp.provider()
    p.set_target("od-a100", 1, key="up")  # accepted: the MIG keeps trying to create the VM
    p.refresh()
    (event,) = p.poll_events()
    assert event.kind is EventKind.LAUNCH_FAILED and event.group_id == "od-a100"
    assert event.detail.startswith("ZONE_RESOURCE_POOL_EXHAUSTED")
    assert [o.available for o in p.offerings("od-a100")] == [False]
    (node,) = [n for n in p.nodes().values() if n.group_id == "od-a100"]
    assert node.state is NodeState.BOOTING  # counted toward the target until burst scales it in
    p.refresh()
    assert p.poll_events() == []  # once per VM and error
