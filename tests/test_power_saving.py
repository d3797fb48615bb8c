"""On-prem power saving through the real loop and the sim provider: idle nodes powered off at the suspend rate
down to the always-on minimum, woken (at the resume rate) for pending work before any cloud launch."""

from __future__ import annotations

import dataclasses

from builders import T0, group, job

from burst.actuator import Actuator
from burst.model import ActionKind, JobState, NodeState, PowerSaving, Tier, WarmState
from burst.reconcile import Controller
from burst.state import Store
from burst.workloads.queue import StoreQueue
from providers.sim import ManualClock, SimProvider

WAKE_S = 120.0


class Prices:
    def group_price(self, g: object) -> float:
        return 1.0 if getattr(g, "tier", None) is Tier.STEADY else 30.0

    def standby_price(self, g: object) -> float:
        return 0.5


def build(saving: PowerSaving):
    rack = dataclasses.replace(group("rack", tier=Tier.STEADY, min_size=1, max_size=4), boot_latency_s=600.0,
                               warm_wake_latency_s={WarmState.POWERED_OFF: WAKE_S}).with_power_saving(saving)
    cloud = dataclasses.replace(group("cloud", max_size=4), boot_latency_s=300.0)
    clock = ManualClock(T0)
    sim = SimProvider([rack, cloud], clock=clock, cluster="p", initial={"rack": 4})
    store = Store(":memory:")
    ctl = Controller(providers={"sim": sim}, source=StoreQueue(store, complete_by_duration=True), store=store,
                     policies=lambda: {}, prices=Prices(), clock=clock, cluster="p",
                     actuator=Actuator({"sim": sim}, store, cluster="p", clock=clock))
    return ctl, sim, store, clock


def states(sim: SimProvider, gid: str) -> dict[NodeState, int]:
    out: dict[NodeState, int] = {}
    for n in sim.nodes().values():
        if n.group_id == gid:
            out[n.state] = out.get(n.state, 0) + 1
    return out


def run(ctl: Controller, clock: ManualClock, minutes: int) -> list:
    reports = []
    for _ in range(minutes):
        reports.append(ctl.tick())
        clock.advance(60)
    return reports


def test_idle_nodes_power_off_at_the_suspend_rate_down_to_the_always_on_minimum() -> None:
    ctl, sim, _, clock = build(PowerSaving(suspend_after_s=600.0, suspend_rate=1))
    reports = run(ctl, clock, 20)
    offs = [(i, a) for i, r in enumerate(reports) for a in r.plan.of_kind(ActionKind.SCALE_DOWN)]
    assert offs and all(a.target == "rack" and a.count == 1 for _, a in offs)  # one a minute
    assert "power off 1 on-prem node(s) idle for at least the 10 min suspend time" in offs[0][1].reason
    assert offs[0][0] >= 10  # not before the suspend time
    assert states(sim, "rack") == {NodeState.READY: 1, NodeState.WARM: 3}
    assert all(n.warm_state is WarmState.POWERED_OFF for n in sim.nodes().values() if n.state is NodeState.WARM)
    assert sim.group_state("rack").target == 1 and states(sim, "cloud") == {}


def test_pending_work_wakes_powered_off_nodes_before_any_cloud_launch() -> None:
    ctl, sim, store, clock = build(PowerSaving(suspend_after_s=600.0))
    run(ctl, clock, 15)
    assert states(sim, "rack") == {NodeState.READY: 1, NodeState.WARM: 3}
    store.add_job(job("big", gpus=16, duration_s=3600.0, submitted=clock.now), at=clock.now)
    first = ctl.tick()
    (wake,) = first.plan.of_kind(ActionKind.SCALE_UP)
    assert wake.target == "rack" and wake.count == 2 and "wake 2 powered-off on-prem node(s)" in wake.reason
    clock.advance(60)
    run(ctl, clock, 3)  # the wake latency is 2 min
    placed = store.get_job("big")
    assert placed is not None and placed.state is JobState.RUNNING
    assert all(n.startswith("rack") for n in placed.node_ids)
    assert states(sim, "cloud") == {}  # the cloud was never needed


def test_the_resume_rate_limits_wakes_and_the_rest_bursts() -> None:
    ctl, sim, store, clock = build(PowerSaving(suspend_after_s=600.0, resume_rate=1))
    run(ctl, clock, 15)
    for i in range(3):
        store.add_job(job(f"j{i}", gpus=8, duration_s=3600.0, submitted=clock.now), at=clock.now)
    report = ctl.tick()
    ups = {a.target: a.count for a in report.plan.of_kind(ActionKind.SCALE_UP)}
    placed = report.plan.of_kind(ActionKind.PLACE_JOB)
    assert len(placed) == 1 and placed[0].node_ids[0].startswith("rack")  # the always-on node takes one
    assert ups == {"rack": 1, "cloud": 1}  # one wake a minute; the third job goes to the cloud at once
