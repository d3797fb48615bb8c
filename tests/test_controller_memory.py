"""The reconcile loop's cross-tick memory lives in the store: a restart resumes with it.

Two identical worlds run the same script: a launch fails for capacity (a
cooldown starts), a spot node gets an interruption notice that the daemon reads
between ticks (taking it off the cloud's queue). One controller keeps running;
the other is dropped without a word and a new one opens the same state file.
The next tick of both must see the same notice and cooldowns and make the same
plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path

import pytest
from builders import T0, group, job

from burst.memory import ControllerMemory, Cooldown
from burst.model import ActionKind, CapacityType, EventKind, Policy, ProviderEvent, SpotPolicy, default_policy
from burst.planner.notice import STEP as NOTICE_STEP
from burst.reconcile import Controller, LoopSettings, TickReport
from burst.state import Store
from burst.workloads.queue import StoreQueue
from providers.sim import ManualClock, SimProvider

BOOT_S = 120.0
OD = dataclasses.replace(group("od", max_size=4), boot_latency_s=BOOT_S)
SPOT = dataclasses.replace(group("spot", capacity_type=CapacityType.SPOT, max_size=4), boot_latency_s=BOOT_S)
POLICIES: Mapping[str, Policy] = {"t": dataclasses.replace(default_policy("t"), spot=SpotPolicy(allowed=True))}
NOTICE_S = 600.0


class Prices:
    def group_price(self, g: object) -> float:
        return {"od": 32.0, "spot": 8.0}[g.id]  # type: ignore[attr-defined]

    def standby_price(self, g: object) -> float:
        return 1.0


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], Path | str]:
    """Each named store's location, on one backend per run: SQLite files, or databases on a real PostgreSQL server."""
    if request.param == "sqlite":
        return lambda name: tmp_path / f"{name}.db"
    server = request.getfixturevalue("pg_server")
    made: dict[str, str] = {}

    def database(name: str) -> str:
        if name not in made:
            made[name] = server.fresh_database()
        return made[name]

    return database


def controller(store: Store, sim: SimProvider, clock: ManualClock, policies: object = None) -> Controller:
    return Controller(providers={"sim": sim}, source=StoreQueue(store, complete_by_duration=True), store=store,
                      policies=policies or (lambda: POLICIES), prices=Prices(), clock=clock, cluster="test",
                      settings=LoopSettings(interruption_cooldown_s=900.0))


def until_the_notice(where: Callable[[str], Path | str], name: str, checkpoint_s: float | None = None,
                     run_s: float = 60.0) -> tuple[Controller, Store, SimProvider, ManualClock, str]:
    """Run to a spot node serving a job, with an interruption notice read between ticks (and od out of stock).

    `checkpoint_s`: the job's measured checkpoint, `run_s` how long it runs before the notice; with enough
    work unsaved, a checkpoint that fits the notice keeps the job (and its node) there while it checkpoints,
    where without one the job is evicted at once and its emptied node released."""
    clock = ManualClock(T0)
    sim = SimProvider([OD, SPOT], clock=clock, cluster="test", capacity={"od": 0})
    store = Store.open(where(name))
    ctl = controller(store, sim, clock)
    StoreQueue(store).submit(job("ft", tenant="t", gpus=8, duration_s=7200.0, fault_tolerant=True,
                                 checkpoint_interval_s=600.0, checkpoint_duration_s=checkpoint_s))
    StoreQueue(store).submit(job("rigid", tenant="t", gpus=8, duration_s=7200.0))
    first = ctl.tick()
    assert {a.target for a in first.plan.actions if a.kind is ActionKind.SCALE_UP} == {"od", "spot"}
    assert "od" in ctl.unavailable(clock()), "od's launch failed for capacity: a cooldown"
    clock.advance(BOOT_S + 1)
    ctl.tick()
    (node,) = [n for n in sim.nodes().values() if n.group_id == "spot"]
    assert store.get_job("ft").node_ids == (node.id,)  # type: ignore[union-attr]
    clock.advance(run_s)
    sim.inject_interruption(node.id, notice_s=NOTICE_S)
    (event,) = ctl.drain_events()  # read between ticks: the cloud's queue no longer has it
    assert event.kind is EventKind.INTERRUPTION and sim.poll_events() == []
    clock.advance(5)
    return ctl, store, sim, clock, node.id


def same_plan(report: TickReport) -> list[tuple[str, str, str]]:
    return [(a.kind.value, a.target, a.reason) for a in report.plan.actions]


def test_a_cooldown_and_a_drained_notice_survive_a_restart(where: Callable[[str], Path | str]) -> None:
    running, _, _, clock_a, node_a = until_the_notice(where, "running")
    kept = running.tick()
    dropped, old_store, sim, clock, node = until_the_notice(where, "restarted")
    # The daemon dies here; a new one opens the same state file (the old one is never closed: a crash).
    store = Store.open(where("restarted"))
    after = controller(store, sim, clock).tick()
    assert after.snapshot is not None and kept.snapshot is not None
    assert after.snapshot.notices == {node: T0 + timedelta(seconds=BOOT_S + 1 + 60 + NOTICE_S)}
    assert after.snapshot.unavailable.keys() == {"od", "spot"}
    assert "a launch failed" in after.snapshot.unavailable["od"]
    assert "a spot interruption" in after.snapshot.unavailable["spot"]
    assert [(a.kind, a.target) for a in after.plan.actions if a.step == NOTICE_STEP] == [
        (ActionKind.EVICT_JOB, "ft")], "the notice is acted on after the restart: the job moves off the node"
    assert after.snapshot.unavailable == kept.snapshot.unavailable
    assert (node_a, after.snapshot.notices[node]) == (node, kept.snapshot.notices[node_a])
    assert same_plan(after) == same_plan(kept), "the restarted loop plans as the one that kept running"
    old_store.close()
    store.close()
    dropped.store.close()
    running.store.close()


def test_events_read_by_a_tick_that_died_are_applied_by_the_next(where: Callable[[str], Path | str]) -> None:
    ctl, store, sim, clock, node = until_the_notice(where, "died", checkpoint_s=60.0, run_s=300.0)
    ctl.tick()  # applies the drained notice: a checkpoint is asked; the node stays until it lands
    clock.advance(5)
    sim.inject_rebalance(node)

    def broken() -> Mapping[str, Policy]:
        raise RuntimeError("policies unreadable")

    with pytest.raises(RuntimeError):
        controller(store, sim, clock, policies=broken).tick()  # polled the rebalance, then died before recording
    assert sim.poll_events() == []
    again = Store.open(where("died"))
    report = controller(again, sim, clock).tick()
    assert report.snapshot is not None and node in report.snapshot.rebalances
    assert [e.kind for e in report.provider_events] == [EventKind.REBALANCE]
    assert ControllerMemory.load(again).events == {}, "a recorded tick forgets the events it applied"
    again.close()
    store.close()


def test_the_memory_round_trips_through_the_store(where: Callable[[str], Path | str]) -> None:
    store = Store.open(where("m"))
    memory = ControllerMemory.load(store)
    memory.start_cooldown("od", T0 + timedelta(minutes=10), "a launch failed at 12:00: InsufficientCapacity")
    memory.start_cooldown("od", T0 + timedelta(minutes=5), "shorter: ignored")
    memory.note_events([ProviderEvent(EventKind.INTERRUPTION, T0, "spot", "n1", deadline=T0 + timedelta(minutes=2)),
                        ProviderEvent(EventKind.REBALANCE, T0, "spot", "n2")], {"n1", "n2"}, T0)
    memory.targets.update({"od": 2})
    memory.demand_at = T0
    memory.record_runtime(dataclasses.replace(job("done", tenant="t"), work_done_s=1234.0))
    memory.save(store)
    back = ControllerMemory.load(store)
    assert back.cooldowns == {"od": Cooldown(T0 + timedelta(minutes=10), "a launch failed at 12:00: InsufficientCapacity")}
    assert (back.notices, back.rebalances) == ({"n1": T0 + timedelta(minutes=2)}, {"n2": T0})
    assert (back.targets, back.demand_at) == ({"od": 2}, T0)
    assert back.runtimes.runtimes() == {"t": (1234.0,)}
    store.close()
