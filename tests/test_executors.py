"""One table says who executes each action kind, and every action goes through the journal and the fence."""

from __future__ import annotations

import pytest
from builders import T0, job
from test_reconcile import build

from burst.actuator import EXECUTORS, GC_PLAN_ID, Actuator, Executor, NotSent
from burst.lease import Deposed
from burst.model import JOB_ACTION_KINDS, Action, ActionKind, JobState, Plan
from burst.state import IntentStatus, Store
from providers.base import InsufficientCapacity
from providers.sim import ManualClock, SimProvider


def test_every_action_kind_has_exactly_one_executor() -> None:
    assert list(EXECUTORS) == list(ActionKind), "one entry per kind, in the enum's order"
    assert all(isinstance(e, Executor) for e in EXECUTORS.values())
    assert {k for k, e in EXECUTORS.items() if e is Executor.JOB_SOURCE} == JOB_ACTION_KINDS, \
        "the job source executes exactly the actions the model counts in GPUs"


def test_a_job_action_is_journaled_like_a_provider_action() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    ctl, _, queue = build(store, clock)
    queue.submit(job("small", gpus=2, duration_s=3600.0))
    report = ctl.tick()
    (place,) = [a for a in report.plan.actions if a.kind is ActionKind.PLACE_JOB]
    (intent,) = [i for i in store.intents() if i.action["kind"] == "place_job"]
    assert (intent.plan_id, intent.status, intent.action["target"]) == (report.plan.id, IntentStatus.CONFIRMED, "small")
    assert intent.key == ctl.actuator.idempotency_key(report.plan.id, place)
    assert [o.action for o in report.outcomes if o.ok] == [place]
    assert store.get_job("small").state is JobState.RUNNING  # type: ignore[union-attr]


def test_a_deposed_leader_applies_no_job_action() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    sim = SimProvider([], clock=clock, cluster="test")
    actuator = Actuator({"sim": sim}, store, cluster="test", clock=clock)

    def deposed() -> None:
        raise Deposed("held by daemon-b")

    actuator.fence = deposed
    applied: list[Action] = []
    late = Plan(id="late", at=T0, actions=(
        Action(kind=ActionKind.PLACE_JOB, target="j", count=1, node_ids=("n1",), reason="late", step="test"),))
    with pytest.raises(Deposed):
        actuator.execute(late, apply_job=applied.append)
    assert applied == [] and store.intents() == []
    with pytest.raises(ValueError, match="no job source"):
        Actuator({"sim": sim}, store, cluster="test", clock=clock).execute(late)


def test_a_plans_job_actions_are_journaled_together_and_a_failure_marks_the_rest_not_applied() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    actuator = Actuator({}, store, cluster="test", clock=clock)
    actions = tuple(Action(kind=ActionKind.PLACE_JOB, target=f"j{i}", count=1, node_ids=("n1",), reason="r",
                           step="test") for i in range(3))
    seen: list[IntentStatus] = []

    def apply(action: Action) -> None:
        seen.append({i.action["target"]: i.status for i in store.intents()}[action.target])
        if action.target == "j1":
            raise RuntimeError("queue refused j1")

    with pytest.raises(RuntimeError, match="refused"):
        actuator.execute(Plan(id="p", at=T0, actions=actions), apply_job=apply)
    assert seen == [IntentStatus.SENT, IntentStatus.SENT], "every job intent is sent before the first is applied"
    by_target = {i.action["target"]: i for i in store.intents()}
    assert [by_target[t].status for t in ("j0", "j1", "j2")] == [
        IntentStatus.CONFIRMED, IntentStatus.FAILED, IntentStatus.FAILED]
    assert "queue refused j1" in by_target["j1"].detail
    assert by_target["j2"].detail == "not applied: an earlier job action failed"


def test_a_leader_deposed_between_two_job_actions_applies_no_more_and_writes_nothing() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    actuator = Actuator({}, store, cluster="test", clock=clock)
    checks = iter([True, True, False])  # the batch's check, the first action's, then the lease is lost

    def fence() -> None:
        if not next(checks):
            raise Deposed("held by daemon-b")

    actuator.fence = fence
    actions = tuple(Action(kind=ActionKind.PLACE_JOB, target=f"j{i}", count=1, node_ids=("n1",), reason="r",
                           step="test") for i in range(3))
    applied: list[Action] = []
    with pytest.raises(Deposed):
        actuator.execute(Plan(id="p", at=T0, actions=actions), apply_job=applied.append)
    assert [a.target for a in applied] == ["j0"]
    assert [i.status for i in store.intents()] == [IntentStatus.SENT] * 3, "left for the new leader's recovery"


def test_a_sent_job_intent_is_not_resent_after_a_restart() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    actuator = Actuator({}, store, cluster="test", clock=clock)
    action = Action(kind=ActionKind.EVICT_JOB, target="j", count=1, reason="r", step="test")
    store.record_intent("k", "p", action.to_json(), T0, status=IntentStatus.SENT)
    assert actuator.recover() == []
    (intent,) = store.intents()
    assert intent.status is IntentStatus.FAILED and "the job's state" in intent.detail


def test_a_failed_launch_carries_its_typed_error_and_a_down_provider_gives_not_sent() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    ctl, sim, queue = build(store, clock)
    sim.fail_offering("cloud", InsufficientCapacity("no p4d in us-east-1a"))
    queue.submit(job("big", gpus=16, duration_s=3600.0))
    (failed,) = [o for o in ctl.tick().outcomes if not o.ok]
    assert isinstance(failed.error, InsufficientCapacity) and failed.detail.startswith("InsufficientCapacity: ")
    up = Action(kind=ActionKind.SCALE_UP, target="cloud", count=1, size=1, reason="r", step="test")
    (skipped,) = ctl.actuator.execute(Plan(id="p", at=T0, actions=(up,)), skip={"cloud": "provider sim is down"})
    assert isinstance(skipped.error, NotSent) and not skipped.ok


def test_garbage_collection_sends_through_the_journaled_path() -> None:
    clock = ManualClock(T0)
    store = Store(":memory:")
    calls: list[tuple[str, str]] = []
    ctl, sim, _ = build(store, clock, orphan_grace_s=60, fault=lambda where, a: calls.append((where, a.step)))
    ctl.tick()
    orphan = sim.launch_untracked("cloud")
    clock.advance(61)
    ctl.tick()
    clock.advance(61)
    assert ctl.tick().gc.orphans == [orphan]
    assert ("sent", "gc") in calls and ("called", "gc") in calls, "the fault hook sees GC like any provider action"
    (intent,) = [i for i in store.intents() if i.plan_id == GC_PLAN_ID]
    assert intent.status is IntentStatus.CONFIRMED and intent.key.startswith(f"test:{GC_PLAN_ID}:")
    assert intent.action["node_ids"] == [orphan]
