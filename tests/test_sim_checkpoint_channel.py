"""The checkpoint channel of simulated jobs: a request is acknowledged with its id after exactly the job's
checkpoint duration, and only the ack saves the work; a deadline, a lost node, an eviction or the job finishing
first times the request out and the job keeps its previous checkpoint. Unit level, through the reconcile loop,
and through the simulator."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from builders import T0, group, job, ready_node

from burst import progress
from burst.agent.channel import CheckpointAck, CheckpointRequest
from burst.model import (
    Action,
    ActionKind,
    CapacityType,
    DisruptionPolicy,
    JobState,
    Node,
    NodeState,
    Plan,
    SpotPolicy,
    default_policy,
)
from burst.reconcile import Controller, TickReport
from burst.settings import data_dir
from burst.sim.compare import compare
from burst.sim.engine import _Arrivals, _next_tick
from burst.sim.setup import default_setup
from burst.sim.strategies import StrategyRun
from burst.sim.traces import TraceStats, load_trace
from burst.state import Store
from burst.workloads.queue import MemoryQueue
from burst.workloads.sim_channel import CheckpointTimeout, SimCheckpointChannel, TimeoutCause
from providers.sim import ManualClock, SimProvider

SPOT = group("spot", capacity_type=CapacityType.SPOT)
S = timedelta(seconds=1)


def running(**kw: object):
    """50 minutes into its run on n-0 at T0, checkpointed every 30 minutes (1800 s saved, 1200 s not), 60 s to
    checkpoint."""
    kw.setdefault("duration_s", 7200.0)
    return job("j", gpus=8, state=JobState.RUNNING, nodes=("n-0",), started=T0 - timedelta(minutes=50),
               fault_tolerant=True, checkpoint_interval_s=1800.0, checkpoint_duration_s=60.0, **kw)


def wired(**kw: object) -> tuple[MemoryQueue, dict[str, Node], SimCheckpointChannel]:
    queue = MemoryQueue(ack_checkpoints=True)
    queue.submit(running(**kw))
    nodes = {"n-0": ready_node("n-0", SPOT)}
    return queue, nodes, SimCheckpointChannel(queue, nodes.get)


def ask(queue: MemoryQueue, channel: SimCheckpointChannel, now=T0, action_id: str = "p-0000007.2") -> None:
    """A plan's request_checkpoint for `j`, handed to the queue and then the channel as the reconcile loop does."""
    before = queue.jobs["j"]
    action = Action(kind=ActionKind.REQUEST_CHECKPOINT, target="j", reason="test", step="test", id=action_id,
                    node_ids=before.node_ids)
    queue.apply(action, now)
    channel.forward(action, before, now)


def lose(nodes: dict[str, Node], at: datetime) -> None:
    nodes["n-0"] = nodes["n-0"].transition(NodeState.INTERRUPTED, at).transition(NodeState.TERMINATING, at)


def test_a_request_is_acknowledged_with_its_id_exactly_its_checkpoint_duration_later() -> None:
    queue, nodes, channel = wired()
    ask(queue, channel)
    assert channel.requests == [CheckpointRequest(job_id="j", request_id="p-0000007.2", deadline=T0 + 120 * S)]
    asked = queue.jobs["j"]
    assert (asked.state, asked.last_checkpoint_at) == (JobState.CHECKPOINTING, None), "nothing saved by asking"
    assert channel.next_event_at() == T0 + 60 * S

    channel.sync(T0 + 59 * S)
    assert channel.acks == [] and queue.jobs["j"].state is JobState.CHECKPOINTING
    assert progress.checkpointed_work(queue.jobs["j"], T0 + 59 * S) == 1800.0

    channel.sync(T0 + 90 * S)  # the first tick after it completed
    assert channel.acks == [CheckpointAck(job_id="j", request_id="p-0000007.2", at=T0 + 60 * S)]
    assert channel.timeouts == [] and channel.next_event_at() is None
    acked = queue.jobs["j"]
    assert (acked.state, acked.last_checkpoint_at) == (JobState.RUNNING, T0), "taken at the request"
    assert progress.checkpointed_work(acked, T0 + 90 * S) == 3000.0, "the work done when it was taken"

    lose(nodes, T0 + 100 * S)
    _, events = queue.observe(T0 + 120 * S, nodes)
    ((back, lost),) = events.requeued
    assert (back.work_done_s, back.last_checkpoint_at, lost) == (3000.0, T0, 120.0)


def test_a_deadline_before_the_checkpoint_completes_times_it_out_and_the_job_keeps_its_previous_checkpoint() -> None:
    earlier = T0 - timedelta(minutes=10)  # a checkpoint asked 2400 s into the run, complete since T0 - 9 min
    queue, nodes, channel = wired(last_checkpoint_at=earlier)
    request = channel.request("j", "r-1", T0 + 30 * S, T0)
    assert request == CheckpointRequest(job_id="j", request_id="r-1", deadline=T0 + 30 * S)
    assert channel.request("j", "r-2", T0 + 30 * S, T0 + 10 * S) is None, "one request in flight per job"
    assert channel.next_event_at() == T0 + 30 * S

    channel.sync(T0 + 120 * S)  # past both the deadline and when the checkpoint would have completed
    assert channel.acks == []
    assert channel.timeouts == [CheckpointTimeout(request, T0 + 30 * S, TimeoutCause.DEADLINE)]
    kept = queue.jobs["j"]
    assert (kept.state, kept.last_checkpoint_at) == (JobState.RUNNING, earlier)

    lose(nodes, T0 + 120 * S)
    _, events = queue.observe(T0 + 120 * S, nodes)
    ((back, lost),) = events.requeued
    assert (back.work_done_s, back.last_checkpoint_at, lost) == (2400.0, earlier, 720.0), \
        "resumes from the previous checkpoint; the 720 s since it are lost"


@pytest.mark.parametrize(("lost_after_s", "acked", "work_done_s", "lost_s"), [
    (20, False, 1800.0, 1320.0),  # lost during the checkpoint: back to the periodic one
    (60, True, 3000.0, 120.0),  # lost the moment it completed: saved
    (61, True, 3000.0, 120.0),
])
def test_a_node_lost_during_the_checkpoint_loses_the_work_since_the_last_completed_one(
        lost_after_s: int, acked: bool, work_done_s: float, lost_s: float) -> None:
    queue, nodes, channel = wired()
    ask(queue, channel)
    del nodes["n-0"]  # gone from the listing by the next tick: the channel dates the loss from the node's record
    record = {"n-0": ready_node("n-0", SPOT).transition(NodeState.INTERRUPTED, T0 + lost_after_s * S)}
    channel.node = record.get
    channel.sync(T0 + 120 * S)
    if acked:
        assert (channel.acks, channel.timeouts) == ([CheckpointAck(job_id="j", request_id="p-0000007.2",
                                                                   at=T0 + 60 * S)], [])
    else:
        assert channel.acks == []
        assert [(t.request.request_id, t.at, t.cause) for t in channel.timeouts] == [
            ("p-0000007.2", T0 + lost_after_s * S, TimeoutCause.NODE_LOST)]
    _, events = queue.observe(T0 + 120 * S, nodes)
    ((back, lost),) = events.requeued
    assert (back.work_done_s, lost) == (work_done_s, lost_s)


def test_an_eviction_or_the_job_finishing_first_ends_the_request_with_no_ack() -> None:
    queue, _, channel = wired()
    ask(queue, channel)
    evict = Action(kind=ActionKind.EVICT_JOB, target="j", reason="test", step="test", id="p-0000008.0")
    before = queue.jobs["j"]
    queue.apply(evict, T0 + 10 * S)
    channel.forward(evict, before, T0 + 10 * S)
    assert [(t.at, t.cause) for t in channel.timeouts] == [(T0 + 10 * S, TimeoutCause.STOPPED)]
    back = queue.jobs["j"]
    assert (back.state, back.work_done_s, back.last_checkpoint_at) == (JobState.PENDING, 1800.0, T0 - 20 * 60 * S), \
        "requeued from the last periodic checkpoint: the request saved nothing"

    queue, nodes, channel = wired(duration_s=3030.0)  # finishes 30 s after T0
    ask(queue, channel)
    channel.sync(T0 + 60 * S)
    assert channel.acks == []
    assert [(t.at, t.cause) for t in channel.timeouts] == [(T0 + 30 * S, TimeoutCause.FINISHED)]
    _, events = queue.observe(T0 + 60 * S, nodes)
    assert [(j.id, j.state, j.work_done_s) for j in events.completed] == [("j", JobState.SUCCEEDED, 3030.0)]


class Prices:
    def group_price(self, g: object) -> float:
        return {"od": 32.0, "spot": 8.0}[g.id]  # type: ignore[attr-defined]

    def standby_price(self, g: object) -> float:
        return 1.0


def noticed_loop() -> tuple[Controller, SimProvider, MemoryQueue, SimCheckpointChannel, ManualClock, str, str]:
    """A fault-tolerant job 50 minutes into its run on a spot node that has just had a 120 s reclaim notice, the
    checkpoint asked over the channel: (controller, sim, queue, channel, clock, node id, request id)."""
    clock = ManualClock(T0)
    groups = [dataclasses.replace(g, boot_latency_s=300.0)
              for g in (group("od", max_size=4), group("spot", capacity_type=CapacityType.SPOT, max_size=4))]
    sim = SimProvider(groups, clock=clock, cluster="test")
    queue = MemoryQueue(ack_checkpoints=True)
    channel = SimCheckpointChannel(queue, sim.node)
    policy = dataclasses.replace(default_policy("t"), spot=SpotPolicy(allowed=True))
    ctl = Controller(providers={"sim": sim}, source=queue, store=Store(":memory:"), policies=lambda: {"t": policy},
                     prices=Prices(), clock=clock, cluster="test", agents=channel)
    queue.submit(job("ft", tenant="t", gpus=8, duration_s=7200.0, fault_tolerant=True, checkpoint_interval_s=1800.0,
                     checkpoint_duration_s=60.0))
    ctl.tick()
    clock.advance(300)
    (place,) = ctl.tick().plan.of_kind(ActionKind.PLACE_JOB)
    (node,) = place.node_ids
    clock.advance(3000)
    sim.inject_interruption(node, notice_s=120.0)
    (request,) = ctl.tick().plan.of_kind(ActionKind.REQUEST_CHECKPOINT)
    assert [(r.job_id, r.request_id) for r in channel.requests] == [("ft", request.id)]
    assert queue.jobs["ft"].state is JobState.CHECKPOINTING
    return ctl, sim, queue, channel, clock, node, request.id


def test_through_the_loop_the_job_is_evicted_once_the_ack_lands_and_resumes_from_that_checkpoint() -> None:
    ctl, _, queue, channel, clock, _, request_id = noticed_loop()
    asked = clock()
    clock.advance(30)
    report = ctl.tick()
    assert report.plan.of_kind(ActionKind.REQUEST_CHECKPOINT) == [] and report.plan.of_kind(ActionKind.EVICT_JOB) == []
    clock.advance(30)
    report = ctl.tick()
    assert channel.acks == [CheckpointAck(job_id="ft", request_id=request_id, at=asked + 60 * S)]
    assert [a.target for a in report.plan.of_kind(ActionKind.EVICT_JOB)] == ["ft"]
    assert [(j.id, lost) for j, lost in report.job_events.requeued] == [("ft", 60.0)]
    assert (queue.jobs["ft"].state, queue.jobs["ft"].work_done_s) == (JobState.PENDING, 3000.0)


def test_through_the_loop_an_interruption_during_the_checkpoint_loses_the_work_since_the_last_completed_one() -> None:
    ctl, sim, queue, channel, clock, node, request_id = noticed_loop()
    asked = clock()
    clock.advance(20)
    sim.inject_interruption(node, notice_s=0.0)  # reclaimed early, 20 s into the 60 s checkpoint
    clock.advance(40)
    report = ctl.tick()
    assert channel.acks == []
    assert [(t.request.request_id, t.at, t.cause) for t in channel.timeouts] == [
        (request_id, asked + 20 * S, TimeoutCause.NODE_LOST)]
    assert [(j.id, lost) for j, lost in report.job_events.requeued] == [("ft", 1260.0)], \
        "3060 s of work at this tick, 1800 s saved by the last periodic checkpoint"
    assert (queue.jobs["ft"].state, queue.jobs["ft"].work_done_s) == (JobState.PENDING, 1800.0)


def test_the_simulated_clock_jumps_to_the_ack_as_to_any_other_change() -> None:
    queue, _, channel = wired()  # j finishes at T0 + 70 min unless something else happens first
    ask(queue, channel)
    report = TickReport(at=T0, plan=Plan(id="p", at=T0, actions=()))
    stats = TraceStats(jobs=1, gpu_hours=8.0, peak_gpus=8.0, p50_gpus=8.0, start=None, end=None)
    no_timers = StrategyRun("t", default_setup(stats), ())
    idle = SimProvider([], clock=ManualClock(T0), cluster="t")
    assert _next_tick(no_timers, report, queue, idle, _Arrivals([]), T0, channel=channel) == T0 + 60 * S
    assert _next_tick(no_timers, report, queue, idle, _Arrivals([]), T0) == T0 + 70 * 60 * S


def test_the_simulated_clock_ticks_at_the_next_interval_after_a_plan_requeues_a_job() -> None:
    """An eviction requeues a job: it is pending again and the next tick (the loop's next interval) places it,
    instead of waiting for the next arrival or finish."""
    queue, _, _ = wired()  # j finishes at T0 + 70 min
    stats = TraceStats(jobs=1, gpu_hours=8.0, peak_gpus=8.0, p50_gpus=8.0, start=None, end=None)
    no_timers = StrategyRun("t", default_setup(stats), ())
    idle = SimProvider([], clock=ManualClock(T0), cluster="t")
    quiet = TickReport(at=T0, plan=Plan(id="p", at=T0, actions=()))
    assert _next_tick(no_timers, quiet, queue, idle, _Arrivals([]), T0) == T0 + 70 * 60 * S
    evict = Action(kind=ActionKind.EVICT_JOB, target="other", reason="test", step="make_room")
    moved = TickReport(at=T0, plan=Plan(id="p", at=T0, actions=(evict,)))
    assert _next_tick(no_timers, moved, queue, idle, _Arrivals([]), T0) == T0 + 60 * S, "the loop's next interval"


def test_the_simulator_asks_for_checkpoints_over_the_channel_and_loses_no_more_than_an_interval() -> None:
    trace = load_trace(data_dir() / "traces" / "philly.csv").window(datetime(2017, 10, 2, tzinfo=UTC), days=0.5)
    base = default_setup(trace.stats())
    # do_not_disrupt: no move to save money asks a checkpoint, so the channel carries the notices' alone
    assert base.default_policy is not None
    calm = dataclasses.replace(base.default_policy, disruption=DisruptionPolicy(do_not_disrupt=True))
    stormy = dataclasses.replace(base, spot_hazard_per_hour={"cloud-spot": 0.05}, default_policy=calm)
    runs = compare(trace, ["burst-no-forecast", "burst-periodic-only"], setup=stormy, seed=3).results
    with_notice, periodic = runs["burst-no-forecast"], runs["burst-periodic-only"]
    assert with_notice.checkpoint_acks >= 3 and with_notice.checkpoint_timeouts <= 1, \
        "checkpoints asked on a notice complete before the node goes (a job that finishes its work first never acks)"
    assert {k: with_notice.to_json()[k] for k in ("checkpoint_acks", "checkpoint_timeouts")} == {
        "checkpoint_acks": with_notice.checkpoint_acks, "checkpoint_timeouts": with_notice.checkpoint_timeouts}
    assert (periodic.checkpoint_acks, periodic.checkpoint_timeouts) == (0, 0), "nothing asked: nothing on the channel"
    assert with_notice.checkpoint_violations == periodic.checkpoint_violations == 0
