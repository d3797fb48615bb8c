"""Leader failover between two controllers over a coordination.k8s.io Lease, on a fake clock: only the leader
acts, the standby takes over within the lease, the deposed leader's late writes are fenced off, a lost race
(409 Conflict) means standby, and a clean stop hands over at once."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from apiserver import ApiServer
from builders import T0, group
from conftest import Prices, gpu_pod, namespace

from burst.actuator import Actuator
from burst.lease import Deposed
from burst.model import Action, ActionKind, Plan
from burst.reconcile import Controller
from burst.state import Store
from burst.workloads.kubernetes import KubernetesJobSource, KubernetesLink
from providers.kubernetes.cluster import KubeCluster, connect
from providers.kubernetes.drain import Drainer
from providers.kubernetes.lease import KubernetesLease
from providers.sim import ManualClock, SimProvider

CLOUD = dataclasses.replace(group("cloud", max_size=6), boot_latency_s=60.0)
LEASE_S = 30.0


def controller(server: ApiServer, name: str, sim: SimProvider, clock: ManualClock, path: Path) -> Controller:
    api = connect(host=server.url)
    cluster = KubeCluster(api)
    drainer = Drainer(cluster)
    source = KubernetesJobSource(cluster, drainer)
    store = Store.open(path)
    lease = KubernetesLease(api, name, namespace="burst-system", duration_s=LEASE_S)
    return Controller(providers={"sim": sim}, source=source, store=store, policies=lambda: {}, prices=Prices(),
                      clock=clock, cluster="ha", actuator=Actuator({"sim": sim}, store, cluster="ha", clock=clock),
                      lease=lease, agents=KubernetesLink(source, drainer))


@pytest.fixture
def pair(server: ApiServer, tmp_path: Path):
    clock = ManualClock(T0)
    sim = SimProvider([CLOUD], clock=clock, cluster="ha")
    server.put("namespaces", namespace("ml"))
    server.put("pods", gpu_pod("big", gpus=16))
    a = controller(server, "replica-a", sim, clock, tmp_path / "a.db")
    b = controller(server, "replica-b", sim, clock, tmp_path / "b.db")
    yield a, b, sim, clock
    a.store.close()
    b.store.close()


def lease_of(c: Controller) -> KubernetesLease:
    assert isinstance(c.lease, KubernetesLease)
    return c.lease


def test_only_the_leader_acts(pair, server: ApiServer) -> None:
    a, b, sim, clock = pair
    first, second = a.tick(), b.tick()
    assert not first.standby and [x.size for x in first.plan.of_kind(ActionKind.SCALE_UP)] == [2]
    assert second.standby and "standby: replica-a (epoch 0" in second.plan.holds[0].reason
    lease = server.get("leases", "burst-controller", "burst-system")
    assert lease["spec"]["holderIdentity"] == "replica-a" and lease["spec"]["leaseDurationSeconds"] == 30
    for _ in range(5):
        clock.advance(10)
        assert not a.tick().standby and b.tick().standby
    assert sim.group_state("cloud").target == 2
    assert server.get("leases", "burst-controller", "burst-system")["spec"]["renewTime"] == "2026-03-02T12:00:50.000000Z"


def test_failover_within_the_lease_and_the_deposed_leaders_writes_are_fenced(pair, server: ApiServer) -> None:
    a, b, sim, clock = pair
    a.tick()
    assert b.tick().standby
    waited = 0.0
    while b.tick().standby:  # replica-a stops renewing (killed, or stalled)
        clock.advance(5)
        waited += 5
        assert waited <= LEASE_S + 5, "failover took longer than the lease"
    assert waited <= LEASE_S
    spec = server.get("leases", "burst-controller", "burst-system")["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("replica-b", 1)
    with pytest.raises(Deposed, match="held by replica-b"):
        lease_of(a).check(0, clock())
    assert a.actuator.fence is not None
    before = sim.group_state("cloud").target
    late = Plan(id="late", at=clock(), actions=(
        Action(kind=ActionKind.SCALE_UP, target="cloud", count=3, size=before + 3, reason="late", step="test"),))
    with pytest.raises(Deposed):
        a.actuator.execute(late)  # replica-a wakes mid-tick with its old fence: no provider call
    assert sim.group_state("cloud").target == before
    assert a.tick().standby


def test_a_lost_race_for_the_lease_is_a_409_and_means_standby(pair, server: ApiServer) -> None:
    a, b, sim, clock = pair
    assert lease_of(a).acquire(clock()) == 0
    clock.advance(LEASE_S + 1)  # replica-a's lease has expired; both replicas try to take it
    server.before_answer[("get", "leases")] = lambda: lease_of(b).acquire(clock())  # b writes between a's read and write
    assert lease_of(a).acquire(clock()) is None
    assert lease_of(a).conflicts == 1
    assert lease_of(b).current().holder == "replica-b" and lease_of(b).current().epoch == 1
    assert ("update", "coordination.k8s.io", "leases") in server.calls
    with pytest.raises(Deposed):
        lease_of(a).check(0, clock())
    lease_of(b).check(1, clock())


def test_a_clean_stop_hands_over_at_once(pair) -> None:
    a, b, sim, clock = pair
    a.tick()
    assert b.tick().standby
    lease_of(a).release()
    report = b.tick()
    assert not report.standby and lease_of(b).current().epoch == 1
    clock.advance(1)
    assert a.tick().standby


def test_a_leader_that_misses_its_renew_deadline_stops_acting_before_the_lease_is_free(server: ApiServer) -> None:
    api = connect(host=server.url)
    a = KubernetesLease(api, "replica-a", duration_s=30.0)
    b = KubernetesLease(api, "replica-b", duration_s=30.0)
    assert a.renew_deadline_s == 20.0
    epoch = a.acquire(T0)
    assert epoch is not None
    a.check(epoch, T0 + timedelta(seconds=19))  # renewed 19 s ago: still leading
    with pytest.raises(Deposed, match="did not renew its lease of epoch 0 within its 20 s renew deadline"):
        a.check(epoch, T0 + timedelta(seconds=20))
    assert b.acquire(T0 + timedelta(seconds=20)) is None  # the lease itself is still a's until T0 + 30 s
    assert b.acquire(T0 + timedelta(seconds=30)) == epoch + 1
    with pytest.raises(ValueError, match="renew_deadline_s"):
        KubernetesLease(api, "replica-c", duration_s=30.0, renew_deadline_s=31.0)
