"""Leader election: two daemons on one state store (a SQLite file, or a PostgreSQL database on a real server the
tests start) and one cloud; only the leader acts, failover within the lease, a deposed leader's writes refused."""

from __future__ import annotations

import dataclasses
import shutil
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from builders import T0, group, job

from burst.actuator import Actuator
from burst.lease import Deposed, StoreLease
from burst.model import Action, ActionKind, Plan, Tier
from burst.reconcile import Controller, TickReport
from burst.runtime import Runtime, build_runtime, load_run_config, quickstart_config_path
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


def daemon(path: Path | str, name: str, sim: SimProvider, clock: ManualClock) -> tuple[Controller, Store]:
    store = Store.open(path)
    lease = StoreLease(path, name, duration_s=LEASE_S)
    actuator = Actuator({"sim": sim}, store, cluster="ha", clock=clock)
    ctl = Controller(providers={"sim": sim}, source=StoreQueue(store, complete_by_duration=True), store=store,
                     policies=lambda: {}, prices=Prices(), clock=clock, cluster="ha", actuator=actuator, lease=lease)
    return ctl, store


@pytest.fixture
def cluster(state_location: Path | str):
    """Two daemons sharing one store (each backend in turn) and one simulated cloud."""
    clock = ManualClock(T0)
    sim = SimProvider([ONPREM, CLOUD], clock=clock, cluster="ha", initial={"onprem": 1})
    path = state_location
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
    assert sim.group_state("cloud").target == 2  # one scale-up, by the leader only
    for _ in range(5):
        clock.advance(10)
        assert not a.tick().standby
        assert b.tick().standby
    assert sim.group_state("cloud").target == 2


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
    before = sim.group_state("cloud").target
    late = Plan(id="late", at=clock.now, actions=(
        Action(kind=ActionKind.SCALE_UP, target="cloud", count=3, size=before + 3, reason="late", step="test"),
    ))
    with pytest.raises(Deposed):
        a.actuator.execute(late)
    assert sim.group_state("cloud").target == before and len(store.unconfirmed_intents()) == intents_before
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


def leader_config(tmp_path: Path, holder: str) -> Path:
    """The quickstart with leader election on, as daemon `holder`, with a lease longer than its 1m ticks."""
    if not (tmp_path / "qs").exists():
        shutil.copytree(quickstart_config_path().parent, tmp_path / "qs")
    path = tmp_path / "qs" / f"{holder}.yaml"
    path.write_text((tmp_path / "qs" / "burst.yaml").read_text() + f"leader: {{enabled: true, holder: {holder}, lease: 5m}}\n")
    return path


def test_a_daemon_stopped_cleanly_releases_the_lease_and_a_second_one_leads_at_once(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    first = build_runtime(load_run_config(leader_config(tmp_path, "daemon-a")), state_path=state)
    second: Runtime | None = None
    try:
        first.run(until=first.now() + timedelta(minutes=3), realtime=False)
        second = build_runtime(load_run_config(leader_config(tmp_path, "daemon-b")), state_path=state)
        assert second.sim_clock is not None
        second.sim_clock.advance((first.now() - second.now()).total_seconds())  # both at daemon-a's next tick
        assert second.controller.tick().standby  # daemon-a leads: a plain end of run() keeps the lease

        def sigterm(_: TickReport) -> None:
            first.stop.set()  # what the SIGTERM handler does, mid-run

        first.run(until=first.now() + timedelta(hours=1), on_tick=sigterm, realtime=False)
        report = second.controller.tick()  # the same instant: no lease wait
        assert not report.standby and report.at == first.now()
        lease = second.controller.lease
        assert lease is not None and lease.current() is not None
        assert (lease.current().holder, lease.current().epoch) == ("daemon-b", 2)  # type: ignore[union-attr]
        assert first.controller.tick().standby  # and daemon-a, were it to tick again, stands by
    finally:
        first.close()
        if second is not None:
            second.close()


def test_sigterm_to_burst_run_releases_the_lease(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    config = leader_config(tmp_path, "daemon-a")
    daemon = subprocess.Popen([sys.executable, "-m", "burst.cli", "run", "--config", str(config), "--state", str(state),
                               "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lease = None
        deadline = time.monotonic() + 60
        while lease is None or lease.current() is None:  # until daemon-a has taken the lease
            assert daemon.poll() is None, daemon.communicate()
            assert time.monotonic() < deadline, "burst run never took the lease"
            if lease is None and state.exists():
                lease = StoreLease(state, "daemon-b", duration_s=LEASE_S)
            time.sleep(0.05)
        held = lease.current()
        assert held is not None and held.holder == "daemon-a"
        assert lease.acquire(held.expires_at - timedelta(seconds=1)) is None  # held: daemon-b would wait
        daemon.send_signal(signal.SIGTERM)
        out, err = daemon.communicate(timeout=60)
        assert daemon.returncode == 0, err
        released = lease.current()
        assert released is not None and released.holder == "daemon-a" and released.expires_at < held.expires_at
        assert lease.acquire(held.expires_at - timedelta(seconds=LEASE_S)) == held.epoch + 1  # at once
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.communicate()
        if lease is not None:
            lease.close()


class RecordingAgents:
    """An agent link that records what the loop asked of it (node agents or Kubernetes pods stand behind one)."""

    def __init__(self) -> None:
        self.synced: list[object] = []

    def node_gpus(self) -> dict[str, object]:
        return {}

    def sync(self, now: object) -> None:
        self.synced.append(now)

    def forward(self, action: object, before: object, now: object) -> None:
        raise AssertionError("nothing is forwarded in this test")


def test_a_leader_that_stalls_past_its_lease_mid_tick_syncs_no_agent_work(tmp_path: Path) -> None:
    # The clock reads T0 when the lease is renewed, then the lease's end: as if the tick stalled between the two.
    times = iter([T0, T0 + timedelta(seconds=LEASE_S)])
    clock = ManualClock(T0)
    sim = SimProvider([ONPREM], clock=clock, cluster="ha", initial={"onprem": 1})
    store = Store.open(tmp_path / "state.db")
    agents = RecordingAgents()
    ctl = Controller(providers={"sim": sim}, source=StoreQueue(store), store=store, policies=lambda: {},
                     prices=Prices(), clock=lambda: next(times), cluster="ha",
                     actuator=Actuator({"sim": sim}, store, cluster="ha", clock=clock),
                     lease=StoreLease(tmp_path / "state.db", "daemon-a", duration_s=LEASE_S), agents=agents)
    with pytest.raises(Deposed, match="expired"):
        ctl.tick()
    assert agents.synced == []  # checkpoint waits and evictions belong to the next leader now
    store.close()
