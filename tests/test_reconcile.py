"""Reconcile-tier tests: the real Controller over the sim provider and a manual clock, ticked step by step."""

from __future__ import annotations

import dataclasses
import logging
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from builders import T0, group, job

from burst.actuator import Actuator
from burst.model import (
    NODE_STATE_TIMEOUT_S,
    ActionKind,
    CapacityType,
    JobState,
    Node,
    NodeState,
    SpotPolicy,
    Tier,
    default_policy,
    month_start,
)
from burst.reconcile import Controller, LoopSettings, demand_points, run_loop, with_idle_since
from burst.state import Store
from burst.workloads.queue import MemoryQueue, StoreQueue
from providers.base import ProviderError
from providers.sim import ManualClock, SimProvider

ONPREM = group("onprem", tier=Tier.STEADY, max_size=1, min_size=1, region="dc1")
CLOUD = group("cloud", max_size=4, cooldown_s=600)
BOOT_S = 300.0


class Prices:
    """Real catalog prices would need real instance types; these groups use fixed per-node prices."""

    def group_price(self, g: object) -> float:
        return {"onprem": 8.0, "cloud": 20.0}[g.id]  # type: ignore[attr-defined]

    def standby_price(self, g: object) -> float:
        return 1.0


def build(
    store: Store,
    clock: ManualClock,
    *,
    sim: SimProvider | None = None,
    list_delay_s: float = 0.0,
    queue: MemoryQueue | StoreQueue | None = None,
    **actuator_kw: object,
) -> tuple[Controller, SimProvider, MemoryQueue | StoreQueue]:
    onprem = dataclasses.replace(ONPREM, boot_latency_s=BOOT_S)
    cloud = dataclasses.replace(CLOUD, boot_latency_s=BOOT_S)
    sim = sim or SimProvider(
        [onprem, cloud], clock=clock, cluster="test", initial={"onprem": 1}, list_delay_s=list_delay_s
    )
    queue = queue if queue is not None else StoreQueue(store, complete_by_duration=True)
    actuator = Actuator({"sim": sim}, store, cluster="test", clock=clock, **actuator_kw)  # type: ignore[arg-type]
    controller = Controller(
        providers={"sim": sim},
        source=queue,
        store=store,
        policies=lambda: {},
        prices=Prices(),
        clock=clock,
        cluster="test",
        actuator=actuator,
    )
    return controller, sim, queue


def serving(sim: SimProvider, gid: str) -> int:
    live = (NodeState.REQUESTED, NodeState.BOOTING, NodeState.WAKING, NodeState.READY)
    return sum(1 for n in sim.all_nodes(gid) if n.state in live)


def test_burst_scales_cloud_up_then_back_down_after_the_cooldown() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    ctl, sim, queue = build(store, clock)
    for i in range(3):
        queue.submit(job(f"j{i}", gpus=8, duration_s=1800.0))
    first = ctl.tick()
    kinds = [(a.kind, a.target) for a in first.plan.actions]
    assert (ActionKind.PLACE_JOB, "j0") in kinds  # on-prem first
    ups = [a for a in first.plan.actions if a.kind is ActionKind.SCALE_UP]
    assert [(a.target, a.size) for a in ups] == [("cloud", 2)]
    assert sim.group_state("cloud").target == 2
    clock.advance(60)
    assert not [a for a in ctl.tick().plan.actions if a.kind is ActionKind.SCALE_UP]  # booting counts
    clock.advance(BOOT_S)
    placed = [a.target for a in ctl.tick().plan.actions if a.kind is ActionKind.PLACE_JOB]
    assert sorted(placed) == ["j1", "j2"]
    downs = []
    for _ in range(90):
        clock.advance(60)
        downs += [a for a in ctl.tick().plan.actions if a.kind is ActionKind.SCALE_DOWN]
    assert [(a.target, a.size) for a in downs] == [("cloud", 0)]
    done = store.jobs(states=[JobState.SUCCEEDED])
    assert sorted(j.id for j in done) == ["j0", "j1", "j2"]
    assert serving(sim, "cloud") == 0


def test_stale_listing_never_launches_twice() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    ctl, sim, queue = build(store, clock, list_delay_s=2 * BOOT_S)
    for i in range(4):
        queue.submit(job(f"j{i}", gpus=8, duration_s=7200.0))
    for _ in range(20):
        ctl.tick()
        clock.advance(60)
    created = sim.all_nodes("cloud")
    assert len(created) == 3  # three jobs beyond the on-prem node, one launch each
    assert max(c.args[1] for c in sim.calls if c.method == "set_target") == 3  # type: ignore[index]
    assert store.job_counts().get(JobState.RUNNING) == 4


def test_orphan_is_collected_after_its_grace_and_not_before() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    ctl, sim, _ = build(store, clock, orphan_grace_s=600)
    ctl.tick()
    orphan = sim.launch_untracked("cloud")
    clock.advance(60)
    report = ctl.tick()
    assert report.gc.orphans == []
    assert sim.node(orphan).state is NodeState.READY  # type: ignore[union-attr]
    assert all(orphan not in a.node_ids for a in report.plan.actions)  # never planned on
    clock.advance(600)
    report = ctl.tick()
    assert report.gc.orphans == [orphan]
    assert sim.node(orphan).state in (NodeState.TERMINATING, NodeState.TERMINATED)  # type: ignore[union-attr]
    # burst's own nodes are never collected
    assert sim.node("onprem-00001").state is NodeState.READY  # type: ignore[union-attr]


def test_node_stuck_booting_is_replaced_and_its_job_runs_on_the_replacement() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    ctl, sim, queue = build(store, clock)
    queue.submit(job("big", gpus=8, duration_s=7200.0))
    queue.submit(job("waits", gpus=8, duration_s=600.0))
    sim.stall_boots("cloud", 1)
    ctl.tick()
    stuck = sim.all_nodes("cloud")[0].id
    stuck_seen = []
    for _ in range(30):  # stuck past booting's 1,200 s, then the replacement boots
        clock.advance(60)
        report = ctl.tick()
        stuck_seen += report.gc.stuck
    assert stuck_seen == [stuck]
    assert sim.node(stuck).state in (NodeState.TERMINATING, NodeState.TERMINATED)  # type: ignore[union-attr]
    replacement = [n for n in sim.all_nodes("cloud") if n.id != stuck]
    assert len(replacement) == 1 and replacement[0].state is NodeState.READY
    waits = store.get_job("waits")
    assert waits is not None and waits.state in (JobState.RUNNING, JobState.SUCCEEDED)
    assert waits.node_ids == (replacement[0].id,)


def test_gc_limits_are_the_lifecycle_tables_state_timeouts() -> None:
    """Deliberate change: a node is stuck after NODE_STATE_TIMEOUT_S of its state (requested 600 s, booting
    1,200 s), no longer after a flat 900 s."""
    clock = ManualClock(T0)
    store = Store(":memory:")
    sim = SimProvider([CLOUD], clock=clock, cluster="test")
    actuator = Actuator({"sim": sim}, store, cluster="test", clock=clock)
    requested = Node.requested("r", "cloud", 8, T0)
    booting = requested.transition(NodeState.BOOTING, T0)
    booting = dataclasses.replace(booting, id="b")
    store.put_nodes([requested, booting], at=T0)
    assert (NODE_STATE_TIMEOUT_S[NodeState.REQUESTED], NODE_STATE_TIMEOUT_S[NodeState.BOOTING]) == (600.0, 1200.0)
    clock.advance(1000)
    assert actuator.collect_garbage({"r": requested, "b": booting}, {"cloud": 2}).stuck == ["r"]
    clock.advance(199)
    assert actuator.collect_garbage({"b": booting}, {"cloud": 1}).stuck == []
    clock.advance(2)
    assert actuator.collect_garbage({"b": booting}, {"cloud": 1}).stuck == ["b"]


def test_running_job_requeued_when_its_node_is_interrupted() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    ctl, sim, queue = build(store, clock)
    queue.submit(job("ft", gpus=8, duration_s=7200.0, fault_tolerant=True, checkpoint_interval_s=600.0))
    ctl.tick()
    clock.advance(1500)
    sim.inject_interruption("onprem-00001", notice_s=0)
    report = ctl.tick()
    assert [(j.id, lost) for j, lost in report.job_events.requeued] == [("ft", 300.0)]
    back = store.get_job("ft")
    assert back is not None and back.work_done_s == 1200.0


def test_a_tick_that_raises_is_logged_and_the_next_tick_runs(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    ctl, sim, queue = build(store, clock)
    queue.submit(job("j", gpus=8, duration_s=600.0))
    real_observe = queue.observe
    failures: list[str] = []

    def flaky_observe(now, nodes):  # the store's queue times out once
        if not failures:
            failures.append("queue")
            raise TimeoutError("listing timed out")
        return real_observe(now, nodes)

    queue.observe = flaky_observe  # type: ignore[method-assign]
    stop = threading.Event()
    ticks = []

    def wait(seconds: float) -> None:
        clock.advance(seconds)

    with caplog.at_level(logging.ERROR, logger="burst.reconcile"):
        stats = run_loop(
            ctl, interval_s=60, wait=wait, stop=stop, until=T0 + timedelta(minutes=5), on_tick=ticks.append
        )
    assert stats.errors == 1 and stats.ticks == 5 and len(ticks) == 4
    assert "tick failed" in caplog.text and "listing timed out" in caplog.text
    assert store.get_job("j").state is JobState.RUNNING  # type: ignore[union-attr]


def test_stop_event_ends_the_loop_after_the_current_tick() -> None:
    clock = ManualClock(T0)
    ctl, _, _ = build(Store(":memory:"), clock)
    stop = threading.Event()
    seen = []

    def on_tick(report: object) -> None:
        seen.append(report)
        stop.set()  # as the SIGTERM handler does, mid-run

    stats = run_loop(ctl, interval_s=60, wait=clock.advance, stop=stop, on_tick=on_tick)
    assert stats.ticks == 1 and len(seen) == 1


@pytest.mark.parametrize("callback", ["on_tick", "on_timing"])
def test_a_callback_that_raises_is_logged_and_the_next_tick_runs(
    callback: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    ctl, _, queue = build(store, clock)
    queue.submit(job("j", gpus=8, duration_s=600.0))
    seen: list[object] = []

    def listener(*args: object) -> None:
        seen.append(args[0])
        if len(seen) == 1:
            raise RuntimeError("listener broke")

    with caplog.at_level(logging.ERROR, logger="burst.reconcile"):
        stats = run_loop(ctl, interval_s=60, wait=clock.advance, stop=threading.Event(),
                         until=T0 + timedelta(minutes=5), **{callback: listener})  # type: ignore[arg-type]
    assert stats.ticks == 5 and stats.errors == 1 and len(seen) == 5
    assert all(report is not None for report in seen)  # the ticks themselves never failed
    assert "tick failed" in caplog.text and "listener broke" in caplog.text
    assert store.get_job("j").state is JobState.RUNNING  # type: ignore[union-attr]


def test_on_timing_sees_a_failed_tick_even_when_it_raises_itself(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(T0)
    ctl, _, queue = build(Store(":memory:"), clock)
    real_observe = queue.observe
    calls: list[str] = []

    def flaky_observe(now, nodes):  # type: ignore[no-untyped-def]
        if not calls:
            calls.append("observe")
            raise TimeoutError("listing timed out")
        return real_observe(now, nodes)

    def on_timing(report: object, seconds: float) -> None:
        calls.append("failed" if report is None else "ok")
        if report is None:
            raise RuntimeError("metrics broke")

    queue.observe = flaky_observe  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="burst.reconcile"):
        stats = run_loop(ctl, interval_s=60, wait=clock.advance, stop=threading.Event(),
                         until=T0 + timedelta(minutes=3), on_timing=on_timing)
    assert calls == ["observe", "failed", "ok", "ok"] and stats.ticks == 3 and stats.errors == 1
    assert "listing timed out" in caplog.text and "metrics broke" in caplog.text


def test_loop_jitter_draws_each_wait_in_interval_to_interval_plus_jitter() -> None:
    def waits(seed: int, jitter: float) -> list[float]:
        clock = ManualClock(T0)
        ctl, _, _ = build(Store(":memory:"), clock)
        out: list[float] = []

        def wait(seconds: float) -> None:  # the simulated clock moves; nothing sleeps
            out.append(seconds)
            clock.advance(seconds)

        stats = run_loop(ctl, interval_s=60, jitter_s=lambda: jitter, wait=wait, stop=threading.Event(),
                         until=T0 + timedelta(hours=1), seed=seed)
        assert stats.errors == 0 and len(out) == stats.ticks
        return out

    drawn = waits(seed=11, jitter=15.0)
    assert len(drawn) >= 40 and all(60.0 <= w <= 75.0 for w in drawn)
    assert len(set(drawn)) == len(drawn)  # every wait differs
    assert max(drawn) - min(drawn) > 10.0  # and they spread over the range, not bunched at one end
    assert waits(seed=11, jitter=15.0) == drawn  # a seed makes the pacing repeatable
    assert waits(seed=12, jitter=15.0) != drawn
    assert set(waits(seed=11, jitter=0.0)) == {60.0}  # the default: no jitter at all


def test_state_survives_a_restart_and_plan_ids_continue(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    path = tmp_path / "burst.db"
    store = Store.open(path)
    ctl, sim, queue = build(store, clock)
    queue.submit(job("a", gpus=8, duration_s=3600.0))
    queue.submit(job("b", gpus=8, duration_s=3600.0))
    first = ctl.tick()
    store.close()
    clock.advance(BOOT_S + 60)
    store = Store.open(path)
    ctl2, _, _ = build(store, clock, sim=sim)
    second = ctl2.tick()
    assert int(second.plan.id.rsplit("-", 1)[1]) == int(first.plan.id.rsplit("-", 1)[1]) + 1
    assert not [a for a in second.plan.actions if a.kind is ActionKind.SCALE_UP]
    assert store.get_job("b").state is JobState.RUNNING  # type: ignore[union-attr]
    assert len(sim.all_nodes("cloud")) == 1


def test_preview_writes_nothing() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    ctl, sim, queue = build(store, clock)
    queue.submit(job("a", gpus=8, duration_s=3600.0))
    queue.submit(job("b", gpus=8, duration_s=3600.0))
    plan = ctl.preview()
    assert {a.kind for a in plan.actions} == {ActionKind.PLACE_JOB, ActionKind.SCALE_UP}
    assert sim.calls == [] and store.intents() == [] and store.decisions() == []
    assert store.job_counts()[JobState.PENDING] == 2 and sum(store.job_counts().values()) == 2


def test_decisions_demand_and_costs_are_recorded() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    ctl, _, queue = build(store, clock)
    queue.submit(job("a", tenant="t1", gpus=4, duration_s=7200.0))
    queue.submit(job("b", tenant="t2", gpus=8, duration_s=7200.0))
    report = ctl.tick()
    clock.advance(3600)
    ctl.tick()
    rows = store.decisions(plan_id=report.plan.id)
    assert {r.kind for r in rows} >= {"place_job", "scale_up"}
    assert all(r.reason for r in rows)
    points = store.demand_history()
    first = {(p.tenant, p.running_gpus, p.pending_gpus) for p in points if p.at == T0}
    assert first == {("t1", 0.0, 4.0), ("t2", 0.0, 8.0)}
    # one hour: t1 holds 4 of the on-prem node's 8 GPUs at $8/node-h, the rest is overhead
    spend = store.spend_by_tenant(since=T0)
    assert spend["t1"] == pytest.approx(4.0)
    by_line = store.cost_by_line(since=T0)
    assert by_line["steady"] == pytest.approx(8.0)


def test_a_job_that_ends_between_ticks_pays_until_it_ends() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    ctl, _, queue = build(store, clock)
    queue.submit(job("a", tenant="t1", gpus=4, duration_s=1800.0))
    ctl.tick()  # placed on the on-prem node at T0
    clock.advance(60)
    ctl.tick()  # running
    clock.advance(3600)
    ctl.tick()  # it ended 30 minutes into this hour: its tenant pays those, the node's other half hour is overhead
    spend = store.spend_by_tenant(since=T0)
    # 4 of the node's 8 GPUs at $8/node-h: 60 s + 1,740 s held = half an hour, $2
    assert spend["t1"] == pytest.approx(4.0 * 1800.0 / 3600.0)
    assert store.cost_by_line(since=T0)["steady"] == pytest.approx(8.0 * 3660.0 / 3600.0)  # the node, as before


def test_spot_policy_is_honoured_through_the_loop() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    spot = group("spot", capacity_type=CapacityType.SPOT, max_size=2)
    sim = SimProvider([dataclasses.replace(spot, boot_latency_s=60.0)], clock=clock, cluster="test")
    queue = MemoryQueue()
    ctl = Controller(
        providers={"sim": sim},
        source=queue,
        store=store,
        policies=lambda: {"nospot": dataclasses.replace(default_policy("nospot"), spot=SpotPolicy(allowed=False))},
        prices=type("P", (), {"group_price": lambda s, g: 5.0, "standby_price": lambda s, g: 0.0})(),
        clock=clock,
        cluster="test",
    )
    queue.submit(job("x", tenant="nospot", gpus=8, fault_tolerant=True, checkpoint_interval_s=60.0))
    report = ctl.tick()
    assert not [a for a in report.plan.actions if a.kind is ActionKind.SCALE_UP]
    assert any("spot" in h.reason for h in report.plan.holds)


def test_with_idle_since_keeps_the_first_idle_instant_and_clears_on_work() -> None:
    from builders import ready_node

    g = CLOUD
    a = ready_node("a", g, idle_since=T0 - timedelta(minutes=30))
    b = dataclasses.replace(ready_node("b", g), idle_since=None)
    running = job("r", state=JobState.RUNNING, nodes=("a",), started=T0)
    out = {n.id: n for n in with_idle_since([a, b], [running], T0)}
    assert out["a"].idle_since is None
    assert out["b"].idle_since == T0
    again = {n.id: n for n in with_idle_since([out["b"]], [], T0 + timedelta(minutes=5))}
    assert again["b"].idle_since == T0


def test_demand_points_and_month_start() -> None:
    jobs = [
        job("p", tenant="a", gpus=2),
        job("r", tenant="a", gpus=4, state=JobState.RUNNING, nodes=("n",), started=T0),
        job("s", tenant="b", gpus=1, gpu_model="H100"),
    ]
    pts = {(p.tenant, p.gpu_model): (p.running_gpus, p.pending_gpus) for p in demand_points(jobs, T0)}
    assert pts == {("a", "any"): (4.0, 2.0), ("b", "H100"): (0.0, 1.0)}
    assert month_start(T0).isoformat() == "2026-03-01T00:00:00+00:00"


SPOT = group("spot", capacity_type=CapacityType.SPOT, max_size=4)


class SpotPrices:
    def group_price(self, g: object) -> float:
        return {"od": 32.0, "spot": 8.0}[g.id]  # type: ignore[attr-defined]

    def standby_price(self, g: object) -> float:
        return 1.0


def spot_controller(clock: ManualClock, interruption_cooldown_s: float = 0.0,
                    **sim_kw: object) -> tuple[Controller, SimProvider, MemoryQueue]:
    od = dataclasses.replace(group("od", max_size=4), boot_latency_s=BOOT_S)
    spot = dataclasses.replace(SPOT, boot_latency_s=BOOT_S)
    sim = SimProvider([od, spot], clock=clock, cluster="test", **sim_kw)  # type: ignore[arg-type]
    queue = MemoryQueue()
    ft = dataclasses.replace(default_policy("t"), spot=SpotPolicy(allowed=True))
    ctl = Controller(providers={"sim": sim}, source=queue, store=Store(":memory:"), policies=lambda: {"t": ft},
                     prices=SpotPrices(), clock=clock, cluster="test",
                     settings=LoopSettings(interruption_cooldown_s=interruption_cooldown_s))
    return ctl, sim, queue


def test_a_spot_group_out_of_capacity_cools_down_and_the_job_falls_back_to_on_demand() -> None:
    clock = ManualClock(T0)
    ctl, sim, queue = spot_controller(clock, capacity={"spot": 0})
    queue.submit(job("ft", tenant="t", gpus=8, duration_s=3600.0, fault_tolerant=True, checkpoint_interval_s=600.0))
    first = ctl.tick()
    (up,) = [a for a in first.plan.actions if a.kind is ActionKind.SCALE_UP]
    assert up.target == "spot" and not first.outcomes[0].ok
    assert "spot" in ctl.unavailable(clock()) and "a launch failed" in ctl.unavailable(clock())["spot"]
    clock.advance(60)
    second = ctl.tick()
    assert [(a.kind, a.target) for a in second.plan.actions] == [(ActionKind.SCALE_UP, "od")]
    clock.advance(BOOT_S)
    third = ctl.tick()
    assert [a.target for a in third.plan.actions if a.kind is ActionKind.PLACE_JOB] == ["ft"]
    clock.advance(600)
    assert "spot" not in ctl.unavailable(clock()), "the cooldown ends"


def test_a_spot_interruption_sends_new_launches_elsewhere_for_a_while() -> None:
    clock = ManualClock(T0)
    ctl, sim, queue = spot_controller(clock, interruption_cooldown_s=300.0, spot_hazard_per_hour={"spot": 3600.0}, seed=1)
    queue.submit(job("a", tenant="t", gpus=8, duration_s=7200.0, fault_tolerant=True, checkpoint_interval_s=600.0))
    ctl.tick()
    for _ in range(12):  # boot, run, and be interrupted within minutes at this hazard
        clock.advance(60)
        report = ctl.tick()
        if any(e.kind.value == "interruption" for e in report.provider_events):
            break
    else:
        raise AssertionError("no interruption")
    assert "a spot interruption" in ctl.unavailable(clock())["spot"]
    queue.submit(job("b", tenant="t", gpus=8, duration_s=600.0, fault_tolerant=True, checkpoint_interval_s=600.0,
                     submitted=clock()))
    clock.advance(1)
    ups = [a.target for a in ctl.tick().plan.actions if a.kind is ActionKind.SCALE_UP]
    assert ups and "spot" not in ups


def test_boots_that_keep_failing_send_the_job_to_on_demand() -> None:
    clock = ManualClock(T0)
    ctl, sim, queue = spot_controller(clock)
    sim.fail_boots("spot", 100)
    queue.submit(job("ft", tenant="t", gpus=8, duration_s=3600.0, fault_tolerant=True, checkpoint_interval_s=600.0))
    placed_on = None
    for _ in range(20):
        report = ctl.tick()
        placed = [a for a in report.plan.actions if a.kind is ActionKind.PLACE_JOB]
        if placed:
            placed_on = placed[0].node_ids[0]
            break
        clock.advance(60)
    assert placed_on is not None and placed_on.startswith("od-"), "the failing spot group does not hold the job"


def test_a_transient_error_is_retried_without_a_cooldown() -> None:
    clock = ManualClock(T0)
    ctl, sim, queue = spot_controller(clock)
    sim.inject_error("set_target", ProviderError("throttled"), group_id="spot")
    queue.submit(job("ft", tenant="t", gpus=8, duration_s=3600.0, fault_tolerant=True, checkpoint_interval_s=600.0))
    first = ctl.tick()
    assert not first.outcomes[0].ok and ctl.unavailable(clock()) == {}
    clock.advance(60)
    assert [a.target for a in ctl.tick().plan.actions if a.kind is ActionKind.SCALE_UP] == ["spot"]


def test_nothing_new_lands_on_a_noticed_node_and_old_notices_are_forgotten() -> None:
    clock = ManualClock(T0)
    ctl, sim, queue = spot_controller(clock)
    queue.submit(job("a", tenant="t", gpus=4, duration_s=36000.0, fault_tolerant=True, checkpoint_interval_s=600.0))
    ctl.tick()
    clock.advance(BOOT_S)
    ctl.tick()  # "a" runs on the spot node, 4 GPUs free beside it
    (node,) = [n for n in sim.nodes().values() if n.group_id == "spot"]
    sim.inject_interruption(node.id, notice_s=120.0)
    queue.submit(job("b", tenant="t", gpus=4, duration_s=600.0, fault_tolerant=True, checkpoint_interval_s=600.0,
                     submitted=clock()))
    clock.advance(1)
    report = ctl.tick()
    assert report.snapshot is not None and node.id in report.snapshot.notices
    assert not [a for a in report.plan.actions if a.kind is ActionKind.PLACE_JOB and node.id in a.node_ids]
    clock.advance(3600)
    later = ctl.tick()
    assert later.snapshot is not None and node.id not in later.snapshot.notices


def test_a_provider_outage_leaves_on_prem_scheduling_and_cloud_actions_resume_after() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    rack = SimProvider([dataclasses.replace(ONPREM, provider="rack", boot_latency_s=BOOT_S)], clock=clock,
                       cluster="test", initial={"onprem": 1}, name="rack")
    cloud = SimProvider([dataclasses.replace(CLOUD, boot_latency_s=BOOT_S)], clock=clock, cluster="test")
    queue = StoreQueue(store, complete_by_duration=True)
    providers = {"rack": rack, "sim": cloud}
    ctl = Controller(providers=providers, source=queue, store=store, policies=lambda: {}, prices=Prices(),
                     clock=clock, cluster="test", actuator=Actuator(providers, store, cluster="test", clock=clock))
    queue.submit(job("rack-early", gpus=8, duration_s=600.0))
    ctl.tick()  # the rack takes the first job
    queue.submit(job("cloud-early", gpus=8, duration_s=7200.0))
    for _ in range(15):  # the rack runs the first job to its end; a cloud node comes up for the second
        ctl.tick()
        clock.advance(60)
    assert store.get_job("rack-early").state is JobState.SUCCEEDED  # type: ignore[union-attr]
    assert store.get_job("cloud-early").state is JobState.RUNNING  # type: ignore[union-attr]
    cloud_nodes = sorted(cloud.nodes())
    cloud.inject_error("refresh", ProviderError("endpoint unreachable"), times=-1)  # the cloud API is down
    queue.submit(job("onprem-job", gpus=8, duration_s=600.0, submitted=clock.now))
    queue.submit(job("needs-cloud", gpus=8, duration_s=600.0, submitted=clock.now))
    report = ctl.tick()
    assert "sim" in ctl.down and "endpoint unreachable" in ctl.down["sim"]
    placed = {a.target: a.node_ids for a in report.plan.of_kind(ActionKind.PLACE_JOB)}
    assert list(placed.values()) == [("onprem-00001",)]  # on-prem keeps scheduling: one of the two gets the rack
    assert not report.plan.of_kind(ActionKind.SCALE_UP) and "provider sim is unreachable" in report.snapshot.unavailable["cloud"]
    assert store.get_job("cloud-early").state is JobState.RUNNING  # type: ignore[union-attr]
    assert sorted(n.id for n in store.live_nodes_by_id().values() if n.group_id == "cloud") == cloud_nodes
    for _ in range(3):
        clock.advance(60)
        assert not ctl.tick().plan.of_kind(ActionKind.SCALE_UP)
    cloud.clear_errors()  # the cloud comes back
    clock.advance(60)
    report = ctl.tick()
    assert ctl.down == {}
    (up,) = report.plan.of_kind(ActionKind.SCALE_UP)
    assert up.target == "cloud" and all(o.ok for o in report.outcomes)
