"""Leader election: two daemons on one state file and one cloud; only the leader acts, failover within the lease."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from builders import T0, group, job

from burst.actuator import Actuator
from burst.lease import Deposed, SqliteLease
from burst.model import Action, ActionKind, Plan, Tier
from burst.reconcile import Controller
from burst.state import Store
from burst.workloads.queue import StoreQueue
from providers.sim import ManualClock, SimProvider

ONPREM = dataclasses.replace(group("onprem", tier=Tier.STEADY, max_size=1, min_size=1), boot_latency_s=60.0)
CLOUD = dataclasses.replace(group("cloud", max_size=6), boot_latency_s=60.0)
LEASE_S = 30.0


class Prices:
    def group_price(self, g: object) -> float:
        return 10.0

    def standby_price(self, g: object) -> float:
        return 0.0


def daemon(path: Path, name: str, sim: SimProvider, clock: ManualClock) -> tuple[Controller, Store]:
    store = Store.open(path)
    lease = SqliteLease(path, name, duration_s=LEASE_S)
    actuator = Actuator({"sim": sim}, store, cluster="ha", clock=clock)
    ctl = Controller(providers={"sim": sim}, source=StoreQueue(store, complete_by_duration=True), store=store,
                     policies=lambda: {}, prices=Prices(), clock=clock, cluster="ha", actuator=actuator, lease=lease)
    return ctl, store


@pytest.fixture
def cluster(tmp_path: Path):
    clock = ManualClock(T0)
    sim = SimProvider([ONPREM, CLOUD], clock=clock, cluster="ha", initial={"onprem": 1})
    path = tmp_path / "state.db"
    a, store_a = daemon(path, "daemon-a", sim, clock)
    b, store_b = daemon(path, "daemon-b", sim, clock)
    yield a, b, sim, clock, store_a
    store_a.close()
    store_b.close()


def test_only_the_leader_acts_and_the_standby_says_who_leads(cluster) -> None:
    a, b, sim, clock, store = cluster
    store.add_job(job("big", gpus=16, duration_s=3600.0), at=T0)
    first = a.tick()
    second = b.tick()
    assert not first.standby and first.plan.of_kind(ActionKind.SCALE_UP)
    assert second.standby and second.plan.actions == ()
    assert "standby: daemon-a (epoch 1" in second.plan.holds[0].reason
    assert sim.target("cloud") == 2  # one scale-up, by the leader only
    for _ in range(5):
        clock.advance(10)
        assert not a.tick().standby
        assert b.tick().standby
    assert sim.target("cloud") == 2


def test_standby_takes_over_within_the_lease_after_the_leader_stops(cluster) -> None:
    a, b, sim, clock, store = cluster
    a.tick()
    assert b.tick().standby
    # daemon-a is killed: it renews no more. daemon-b keeps ticking every 5 s.
    waited = 0.0
    while b.tick().standby:
        clock.advance(5)
        waited += 5
        assert waited <= LEASE_S + 5, "failover took longer than the lease"
    assert waited <= LEASE_S
    assert b.lease is not None and b.lease.current().holder == "daemon-b"  # type: ignore[union-attr]
    assert b.lease.current().epoch == 2  # type: ignore[union-attr]


def test_a_deposed_leaders_late_writes_are_rejected(cluster) -> None:
    a, b, sim, clock, store = cluster
    store.add_job(job("big", gpus=16, duration_s=3600.0), at=T0)
    a.tick()
    assert a.lease is not None
    epoch_a = a.lease.current().epoch  # type: ignore[union-attr]
    clock.advance(LEASE_S + 1)  # daemon-a stalls past its lease (a long GC pause, a frozen VM)
    assert not b.tick().standby  # daemon-b takes over
    intents_before = len(store.unconfirmed_intents())
    with pytest.raises(Deposed, match="held by daemon-b"):
        a.lease.check(epoch_a, clock.now)
    # daemon-a wakes up mid-tick with its old fence in place: its actuator refuses to write or call.
    assert a.actuator.fence is not None
    with pytest.raises(Deposed):
        a.actuator.fence()
    before = sim.target("cloud")
    late = Plan(id="late", at=clock.now, actions=(
        Action(kind=ActionKind.SCALE_UP, target="cloud", count=3, size=before + 3, reason="late", step="test"),
    ))
    with pytest.raises(Deposed):
        a.actuator.execute(late)
    assert sim.target("cloud") == before and len(store.unconfirmed_intents()) == intents_before
    assert all(i.plan_id != "late" for i in store.unconfirmed_intents())
    # and on its next tick it finds it is the standby now.
    assert a.tick().standby


def test_a_clean_stop_releases_the_lease_so_the_standby_leads_at_once(cluster) -> None:
    a, b, sim, clock, store = cluster
    a.tick()
    assert b.tick().standby
    a.lease.release()  # type: ignore[union-attr]
    report = b.tick()
    assert not report.standby
    clock.advance(timedelta(seconds=1).total_seconds())
    assert a.tick().standby
