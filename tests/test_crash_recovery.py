"""Crash test: the actuator dies between "sent" and "recorded" at every step of a scripted run, and restarts.

The script: four 8-GPU jobs arrive on a one-node on-prem group, so the cloud
group scales up; later they finish and it scales back down. The sim lists new
nodes only after twice their boot time (a stale listing). For every provider
call of the clean run the test crashes once at "sent" (before the call) and
once at "called" (after the call, before the outcome is recorded), reopens
the store, recovers and runs the rest of the script. At every tick: the cloud
never has more serving nodes than the last size burst asked for, no node is
ever launched beyond the clean run's count, and every job is in exactly one
state, finishing exactly once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from builders import T0, group, job

from burst.actuator import Actuator, InjectedCrash
from burst.model import Action, JobState, NodeState, Tier
from burst.reconcile import Controller
from burst.state import Store
from burst.workloads.queue import StoreQueue
from providers.sim import ManualClock, SimProvider

BOOT_S = 300.0
ONPREM = dataclasses.replace(group("onprem", tier=Tier.STEADY, max_size=1, min_size=1), boot_latency_s=BOOT_S)
CLOUD = dataclasses.replace(group("cloud", max_size=6, cooldown_s=300), boot_latency_s=BOOT_S)
JOBS = [job(f"j{i}", gpus=8, duration_s=1800.0 + 300 * i) for i in range(4)]
TICKS = 70
STEP_S = 60.0
SERVING = (NodeState.REQUESTED, NodeState.BOOTING, NodeState.WAKING, NodeState.READY)


class Prices:
    def group_price(self, g: object) -> float:
        return 10.0

    def standby_price(self, g: object) -> float:
        return 0.0


def controller(store: Store, sim: SimProvider, clock: ManualClock, fault: Callable[[str, Action], None] | None) -> Controller:
    actuator = Actuator({"sim": sim}, store, cluster="crash", clock=clock, fault=fault)
    return Controller(
        providers={"sim": sim},
        source=StoreQueue(store, complete_by_duration=True),
        store=store,
        policies=lambda: {},
        prices=Prices(),
        clock=clock,
        cluster="crash",
        actuator=actuator,
    )


class Crasher:
    """Counts provider-call steps; raises InjectedCrash at step `at` (once)."""

    def __init__(self, at: int | None) -> None:
        self.at = at
        self.steps: list[tuple[str, str]] = []
        self.fired = False

    def __call__(self, where: str, action: Action) -> None:
        self.steps.append((where, action.kind.value))
        if not self.fired and self.at is not None and len(self.steps) - 1 == self.at:
            self.fired = True
            raise InjectedCrash(f"killed at step {self.at} ({where} {action.kind.value})")


def run_script(tmp: Path, crash_at: int | None) -> tuple[SimProvider, Store, Crasher, list[int]]:
    clock = ManualClock(T0)
    sim = SimProvider([ONPREM, CLOUD], clock=clock, cluster="crash", initial={"onprem": 1}, list_delay_s=2 * BOOT_S)
    path = tmp / f"crash-{crash_at}.db"
    store = Store.open(path)
    for j in JOBS:
        store.add_job(j, at=T0)
    crasher = Crasher(crash_at)
    ctl = controller(store, sim, clock, crasher)
    asked: list[int] = []
    for _ in range(TICKS):
        try:
            ctl.tick()
        except InjectedCrash:
            store.close()  # the process died; a new one opens the same file
            store = Store.open(path)
            ctl = controller(store, sim, clock, crasher)
            ctl.start()
            ctl.tick()
        asked.append(sim.group_state("cloud").target)
        check_invariants(sim, store)
        clock.advance(STEP_S)
    return sim, store, crasher, asked


def check_invariants(sim: SimProvider, store: Store) -> None:
    serving = [n for n in sim.all_nodes("cloud") if n.state in SERVING]
    assert len(serving) <= sim.group_state("cloud").target, "more capacity than planned"
    counts = store.job_counts()
    assert sum(counts.values()) == len(JOBS), "a job was lost or duplicated"
    holders: dict[str, int] = {}
    for j in store.jobs(states=[JobState.RUNNING]):
        for node_id in j.node_ids:
            holders[node_id] = holders.get(node_id, 0) + j.gpus
    assert all(g <= 8 for g in holders.values()), "a node is double-booked"


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[SimProvider, Store, Crasher, list[int]]:
    return run_script(tmp_path_factory.mktemp("clean"), None)


def test_clean_run_scales_up_and_down(clean: tuple[SimProvider, Store, Crasher, list[int]]) -> None:
    sim, store, crasher, asked = clean
    assert max(asked) == 3 and asked[-1] == 0
    assert len(sim.all_nodes("cloud")) == 3
    assert store.job_counts()[JobState.SUCCEEDED] == len(JOBS)
    assert len(crasher.steps) >= 4  # sent+called for at least one scale-up and one scale-down


def test_crash_at_every_step_never_doubles_capacity_or_loses_a_job(
    clean: tuple[SimProvider, Store, Crasher, list[int]], tmp_path: Path
) -> None:
    _, _, clean_crasher, clean_asked = clean
    steps = len(clean_crasher.steps)
    for at in range(steps):
        sim, store, crasher, asked = run_script(tmp_path, at)
        assert crasher.fired, f"step {at} was never reached"
        assert len(sim.all_nodes("cloud")) == 3, f"crash at step {at}: {crasher.steps[at]} launched extra nodes"
        assert max(asked) == max(clean_asked), f"crash at step {at}: asked for more than the clean run"
        assert store.job_counts()[JobState.SUCCEEDED] == len(JOBS), f"crash at step {at}: jobs did not all finish"
        assert store.unconfirmed_intents() == [], f"crash at step {at}: an intent was left unsettled"
        assert asked[-1] == 0
        store.close()
