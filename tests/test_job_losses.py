"""The job-loss ledger through the reconcile loop, on a real SQLite file: a spot job's interruption, a
requested checkpoint and the eviction after it, each one row with GPU-seconds worked out by hand."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

from builders import T0, TablePrices, group, job

from burst.losses import job_losses
from burst.model import Action, ActionKind, CapacityType, JobState, Plan, Policy, SpotPolicy
from burst.reconcile import Controller
from burst.state import JobLoss, LossTotals, Store
from burst.workloads.base import JobEvents
from burst.workloads.queue import StoreQueue
from providers.sim import ManualClock, SimProvider

SPOT = group("spot", capacity_type=CapacityType.SPOT)
OD = group("od")
PRICES = TablePrices({"spot": 8.0, "od": 24.0})


class LoopPrices:
    def group_price(self, g: object) -> float:
        return PRICES.per_node[g.id]  # type: ignore[attr-defined]

    def standby_price(self, g: object) -> float:
        return 0.0


def controller(path: Path, policies: dict[str, Policy]) -> tuple[Controller, SimProvider, ManualClock, Store]:
    clock = ManualClock(T0)
    sim = SimProvider([dataclasses.replace(g, boot_latency_s=300.0) for g in (SPOT, OD)], clock=clock, cluster="test")
    store = Store.open(path)
    ctl = Controller(providers={"sim": sim}, source=StoreQueue(store, complete_by_duration=True), store=store,
                     policies=lambda: policies, prices=LoopPrices(), clock=clock, cluster="test")
    return ctl, sim, clock, store


def test_an_interrupted_spot_job_leaves_one_interruption_row_with_the_work_since_its_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "burst.db"
    ctl, sim, clock, store = controller(path, {"a": Policy(tenant="a", spot=SpotPolicy(allowed=True))})
    store.add_job(job("ft", gpus=8, duration_s=7200.0, fault_tolerant=True, checkpoint_interval_s=600.0), at=T0)
    assert [(a.kind, a.target) for a in ctl.tick().plan.actions] == [(ActionKind.SCALE_UP, "spot")]
    clock.advance(300)
    (place,) = ctl.tick().plan.of_kind(ActionKind.PLACE_JOB)
    (node_id,) = place.node_ids
    clock.advance(1500)  # 1500 s run: checkpoints at 600 and 1200 s, 300 s unsaved
    sim.inject_interruption(node_id, notice_s=0)
    report = ctl.tick()
    assert [(j.id, lost) for j, lost in report.job_events.requeued] == [("ft", 300.0)]
    store.close()
    with Store.open(path) as reopened:  # the rows were committed with the tick
        assert reopened.job_losses() == [
            JobLoss(T0 + timedelta(seconds=1800), "ft", "a", "interruption", 8.0, lost_gpu_s=2400.0,
                    group_id="spot", node_ids=(node_id,)),
        ]
        assert reopened.loss_totals() == {"a": LossTotals(interruptions=1, lost_gpu_hours=2400.0 / 3600)}
        job_after = reopened.get_job("ft")
        assert job_after is not None and job_after.work_done_s == 1200.0


def test_a_requested_checkpoint_and_the_eviction_after_it_are_recorded(tmp_path: Path) -> None:
    path = tmp_path / "burst.db"
    policies = {"a": Policy(tenant="a", spot=SpotPolicy(allowed=True))}
    ctl, _sim, clock, store = controller(path, policies)
    store.add_job(job("j", gpus=8, deadline=T0 + timedelta(seconds=4500), fault_tolerant=True,
                      checkpoint_interval_s=1800.0, checkpoint_duration_s=60.0, duration_s=3600.0,
                      declared_duration_s=3600.0), at=T0)

    def step(seconds: float) -> Plan:
        clock.advance(seconds)
        return ctl.tick().plan

    step(0)
    (place,) = step(300).actions  # on spot from T0+300
    policies["a"] = Policy(tenant="a", spot=SpotPolicy(allowed=True, deadline_margin_s=2000.0))
    (ask,) = step(600).actions
    assert ask.kind is ActionKind.REQUEST_CHECKPOINT
    assert step(30).actions == ()  # the checkpoint runs: no second row
    (evict,) = step(30).actions
    assert evict.kind is ActionKind.EVICT_JOB  # saved as of T0+900; the 60 s since are lost
    spot_node = place.node_ids
    assert store.job_losses(tenant="a", job_id="j") == [
        JobLoss(T0 + timedelta(seconds=900), "j", "a", "checkpoint", 8.0, checkpoint_gpu_s=480.0,
                group_id="spot", node_ids=spot_node),
        JobLoss(T0 + timedelta(seconds=960), "j", "a", "eviction", 8.0, lost_gpu_s=480.0,
                group_id="spot", node_ids=spot_node),
    ]
    assert store.loss_totals() == {"a": LossTotals(evictions=1, checkpoints=1, lost_gpu_hours=480.0 / 3600,
                                                   checkpoint_gpu_hours=480.0 / 3600)}
    assert store.loss_totals(since=T0 + timedelta(seconds=901)) == {"a": LossTotals(evictions=1,
                                                                                     lost_gpu_hours=480.0 / 3600)}
    assert store.loss_totals(tenant="b") == {}
    back = store.get_job("j")
    assert back is not None and (back.state, back.work_done_s) == (JobState.PENDING, 600.0)
    store.close()


def test_a_checkpoint_request_for_a_job_not_running_is_no_row() -> None:
    pending = job("p", gpus=4, fault_tolerant=True, checkpoint_duration_s=60.0)
    ask = Action(kind=ActionKind.REQUEST_CHECKPOINT, target="p", reason="test", step="test")
    assert job_losses(JobEvents(), Plan(id="p1", at=T0, actions=(ask,)), [pending], lambda n: None, T0) == []
