"""Placement by marginal cost and the moves it makes: scripted plans, exact actions and reasons."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from builders import T0, TablePrices, group, job, ready_node

from burst.model import (
    ActionKind,
    Budget,
    CapacityType,
    DisruptionPolicy,
    Job,
    JobState,
    Plan,
    Policy,
    Snapshot,
    SpotPolicy,
    Tier,
)
from burst.planner import BASELINE_PIPELINE, PIPELINE, PlanIds, Step, plan
from burst.planner.runtime_estimate import DEFAULT_RUN_S, RuntimeEstimator
from burst.workloads.queue import apply_job_action

ONPREM = group("onprem", tier=Tier.STEADY, max_size=1, min_size=1)
OD = group("od")
SPOT = group("spot", capacity_type=CapacityType.SPOT)
PRICES = TablePrices({"onprem": 8.0, "od": 32.0, "spot": 8.0})
SPOT_OK = SpotPolicy(allowed=True)
POLICIES = {"a": Policy(tenant="a", spot=SPOT_OK)}
HISTORY = {"a": tuple([36000.0] * 10)}  # tenant a's jobs have run 10 h each


def ft_job(jid: str = "ft", gpus: int = 8, *, tenant: str = "a", hours_ago: float = 2.25, **kw: object) -> Job:
    """A fault-tolerant job running on the on-prem node (checkpoints every 30 min, a checkpoint takes 60 s)."""
    fields: dict[str, object] = {"fault_tolerant": True, "checkpoint_interval_s": 1800.0, "checkpoint_duration_s": 60.0}
    fields.update(kw)
    return job(jid, tenant=tenant, gpus=gpus, state=JobState.RUNNING, nodes=("onprem-1",),
               started=T0 - timedelta(hours=hours_ago), submitted=T0 - timedelta(hours=hours_ago), **fields)


def immovable(jid: str = "imm", gpus: int = 8, **kw: object) -> Job:
    """A pending job that cannot move (not fault-tolerant, so never on spot)."""
    return job(jid, tenant="a", gpus=gpus, submitted=T0, **kw)


def snapshot(jobs: list[Job], runtimes: dict[str, tuple[float, ...]] | None = None) -> Snapshot:
    return Snapshot(groups=(ONPREM, OD, SPOT), nodes=(ready_node("onprem-1", ONPREM),), jobs=tuple(jobs),
                    targets={"onprem": 1, "od": 0, "spot": 0}, runtimes=HISTORY if runtimes is None else runtimes)


def plan_of(snap: Snapshot, *, at: timedelta = timedelta(0), policies: dict[str, Policy] | None = None,
            pipeline: tuple[tuple[str, Step], ...] = PIPELINE) -> Plan:
    return plan(snap, [], policies or POLICIES, PRICES, now=T0 + at, ids=PlanIds("p"), pipeline=pipeline)


def kinds(p: Plan, target: str) -> list[ActionKind]:
    return [a.kind for a in p.actions if a.target == target]


def test_an_immovable_job_at_a_full_on_prem_tier_lands_there_while_a_fault_tolerant_job_moves_to_spot() -> None:
    ft, imm = ft_job(), immovable()
    # The frozen baseline launches on-demand for the immovable job and leaves the fault-tolerant one on-prem.
    base = plan_of(snapshot([ft, imm]), pipeline=BASELINE_PIPELINE)
    assert [(a.kind, a.target) for a in base.actions] == [(ActionKind.SCALE_UP, "od")]

    # burst: checkpoint the fault-tolerant job (its last periodic checkpoint was 15 min ago), launch nothing.
    first = plan_of(snapshot([ft, imm]))
    (ask,) = first.actions
    assert (ask.kind, ask.target, ask.step) == (ActionKind.REQUEST_CHECKPOINT, "ft", "make_room")
    # on-demand avoided: 8 GPUs x $4 x 10 h + a 5-min boot of a $32 node = $322.67; the job pays spot 8 x $1 x 7.75 h
    assert "expected saving $260.67" in ask.reason and "expected 10.0 h, from tenant a's run times" in ask.reason
    assert "move cost $" in ask.reason and "resuming on spot" in ask.reason
    (waits,) = [h for h in first.holds if h.subject == "job:imm"]
    assert waits.reason.startswith("waits for on-prem onprem-1, freed by moving ft (expected saving $260.67 > move cost $")

    # Once the checkpoint has landed, the job is evicted; then the immovable job takes on-prem and ft goes to spot.
    checkpointing = apply_job_action(ft, ask, T0)
    second = plan_of(snapshot([checkpointing, imm]), at=timedelta(seconds=90))
    (evict,) = second.actions
    assert (evict.kind, evict.target) == (ActionKind.EVICT_JOB, "ft")
    requeued = apply_job_action(checkpointing, evict, T0 + timedelta(seconds=90))
    third = plan_of(snapshot([requeued, imm]), at=timedelta(seconds=120))
    assert [(a.kind, a.target) for a in third.actions] == [(ActionKind.PLACE_JOB, "imm"), (ActionKind.SCALE_UP, "spot")]
    assert third.actions[0].node_ids == ("onprem-1",)
    assert requeued.work_done_s == 2.25 * 3600.0, "it resumes from the checkpoint asked for the move"


def test_a_move_asks_its_own_checkpoint_when_the_last_one_asked_landed_long_ago() -> None:
    """ft's last asked checkpoint landed 9 min ago (a move asked it, then was not made): evicting on it would lose
    the 10 min of work since its request, 8 GPUs' worth; the move asks a checkpoint of its own (60 s) instead."""
    asked = T0 - timedelta(minutes=10)  # after its last periodic checkpoint (2 h into the run, 15 min ago)
    ft, imm = ft_job(last_checkpoint_at=asked), immovable()
    first = plan_of(snapshot([ft, imm]))
    assert kinds(first, "ft") == [ActionKind.REQUEST_CHECKPOINT]
    # Once that checkpoint has landed, the next plan evicts on it.
    checkpointing = apply_job_action(ft, first.actions[0], T0)
    second = plan_of(snapshot([checkpointing, imm]), at=timedelta(seconds=90))
    assert kinds(second, "ft") == [ActionKind.EVICT_JOB]
    requeued = apply_job_action(checkpointing, second.actions[0], T0 + timedelta(seconds=90))
    assert requeued.work_done_s == 2.25 * 3600.0, "it resumes from the checkpoint asked for this move"


def test_no_move_when_the_saving_does_not_cover_the_move() -> None:
    """The immovable job declares a 1-minute run: the on-demand it would avoid is less than moving ft costs."""
    p = plan_of(snapshot([ft_job(), immovable(declared_duration_s=60.0)]))
    assert kinds(p, "ft") == [] and kinds(p, "od") == [ActionKind.SCALE_UP]
    (hold,) = [h for h in p.holds if h.subject == "job:imm"]
    assert "from declared duration" in hold.reason and "moving ft off onprem-1 would save $-" in hold.reason


def test_the_planner_never_reads_a_jobs_true_duration() -> None:
    """The immovable job really runs 1 minute (`duration_s`): read, that would forbid the move, as the declared
    minute above does. The planner sees only the tenant's 10-hour history, so it moves ft."""
    p = plan_of(snapshot([ft_job(), immovable(duration_s=60.0)]))
    assert kinds(p, "ft") == [ActionKind.REQUEST_CHECKPOINT] and kinds(p, "od") == []
    # and ft's own true duration (ending in a minute) does not change what it is expected to pay on spot
    q = plan_of(snapshot([ft_job(duration_s=2.25 * 3600.0 + 60.0), immovable()]))
    assert [a.reason for a in q.actions] == [a.reason for a in p.actions]


def test_jobs_that_cannot_move_or_must_not_be_disrupted_never_move() -> None:
    cases = {
        "not fault-tolerant: never moved": ft_job(fault_tolerant=False),
        "marked do_not_disrupt: never moved": ft_job(do_not_disrupt=True),
        "tenant a's policy says do_not_disrupt: never moved": ft_job(),
    }
    for why, ft in cases.items():
        policies = POLICIES
        if why.startswith("tenant"):
            policies = {"a": dataclasses.replace(POLICIES["a"], disruption=DisruptionPolicy(do_not_disrupt=True))}
        p = plan_of(snapshot([ft, immovable()]), policies=policies)
        assert kinds(p, "ft") == [] and kinds(p, "od") == [ActionKind.SCALE_UP], why
        assert f"not moved to make room on-prem: {why}" in [h.reason for h in p.holds if h.subject == "job:ft"], why


def test_the_disruption_budget_caps_moves() -> None:
    """Eight 1-GPU fault-tolerant jobs of tenant b fill the node. b's budget (10% of its 8 running GPUs, always
    one job) lets one move at a time: not enough for the 8-GPU job, so nothing moves; a budget of all its GPUs
    moves all eight."""
    small = [ft_job(f"b{i}", 1, tenant="b") for i in range(8)]
    policies = {**POLICIES, "b": Policy(tenant="b", spot=SPOT_OK)}
    p = plan_of(snapshot([*small, immovable()]), policies=policies)
    assert [a for a in p.actions if a.target.startswith("b")] == []
    assert [h.reason for h in p.holds if h.subject == "job:b1"] == [
        "not moved to make room on-prem: tenant b's disruption budget is spent: 1 GPU(s) moving of 1 allowed "
        "(10% of 8 running)"]
    generous = {**policies, "b": Policy(tenant="b", spot=SPOT_OK, disruption=DisruptionPolicy(max_share=1.0))}
    q = plan_of(snapshot([*small, immovable()]), policies=generous)
    assert sorted(a.target for a in q.actions if a.kind is ActionKind.REQUEST_CHECKPOINT) == [f"b{i}" for i in range(8)]


def test_no_room_is_made_for_a_job_its_budget_or_quota_keeps_off_on_prem() -> None:
    """Tenant b's 8-GPU job cannot move and on-prem is full of a's fault-tolerant job; moving ft would save
    $260.67 as in the first test. But b's budget of $5/h pays for neither 8 on-prem GPUs ($8/h) nor an on-demand
    node ($32/h): b would not be placed in the room made, so nothing moves and the hold names the budget. With
    quota.steady_gpus 0 instead, b may not take on-prem GPUs: it launches on demand at once, and ft stays."""
    b_job = job("imm", tenant="b", gpus=8, submitted=T0, declared_duration_s=10 * 3600.0)
    broke = {**POLICIES, "b": Policy(tenant="b", budget=Budget(usd_per_hour=5.0))}
    p = plan_of(snapshot([ft_job(), b_job]), policies=broke)
    assert p.actions == ()
    (hold,) = [h for h in p.holds if h.subject == "tenant:b"]
    assert hold.reason == (
        "1 pending job(s) (8 GPUs) not planned: placing on onprem refused: tenant b would spend $8.00/h > "
        "budget.usd_per_hour $5.00; launch of 1 x od-type in od ($32.00/h) refused: tenant b would spend $32.00/h > "
        "budget.usd_per_hour $5.00")
    no_quota = {**POLICIES, "b": Policy(tenant="b", steady_quota_gpus=0)}
    q = plan_of(snapshot([ft_job(), b_job]), policies=no_quota)
    assert [(a.kind, a.target, a.count) for a in q.actions] == [(ActionKind.SCALE_UP, "od", 1)]
    # with neither limit, the room is made (the first test's move)
    free = {**POLICIES, "b": Policy(tenant="b")}
    assert kinds(plan_of(snapshot([ft_job(), b_job]), policies=free), "ft") == [ActionKind.REQUEST_CHECKPOINT]


def test_a_job_resumed_from_a_move_is_not_moved_again_within_the_minimum_interval() -> None:
    resumed = dataclasses.replace(ft_job(hours_ago=0.5), work_done_s=3600.0)  # restarted 30 min ago
    p = plan_of(snapshot([resumed, immovable()]))
    assert kinds(p, "ft") == []
    assert ("not moved to make room on-prem: resumed 1800 s ago, under the 3600 s minimum between two moves of one job"
            in [h.reason for h in p.holds if h.subject == "job:ft"])


def test_expected_run_comes_from_declared_duration_then_history_then_age() -> None:
    now = T0 + timedelta(hours=3)
    started = job("r", state=JobState.RUNNING, nodes=("n",), started=T0, duration_s=5.0)
    estimator = RuntimeEstimator({"a": (3600.0, 4 * 3600.0, 5 * 3600.0, 6 * 3600.0, 7 * 3600.0, 8 * 3600.0)})
    assert estimator.remaining_s(dataclasses.replace(started, declared_duration_s=4 * 3600.0), now) == (
        3600.0, "declared duration")
    # five past runs outlived its 3 h: they averaged 6 h, so 3 h more
    assert estimator.remaining_s(started, now) == (3 * 3600.0, "tenant a's run times past 10800 s")
    # at 7 h only one did: its age stands in
    late = T0 + timedelta(hours=7)
    assert estimator.remaining_s(started, late) == (7 * 3600.0, "no history: its age, at least the default")
    assert RuntimeEstimator({}).remaining_s(job("p"), T0) == (DEFAULT_RUN_S, "no history: its age, at least the default")


def test_work_that_cannot_move_packs_onto_on_prem_nodes_already_pinned_so_others_stay_clearable_whole() -> None:
    """onprem-1 runs a 4-GPU job that cannot move (4 free); onprem-2 runs a 6-GPU fault-tolerant job (2 free).
    A 2-GPU job that cannot move goes to onprem-1, not to onprem-2's exact fit, so onprem-2 can still be
    cleared whole for the 8-GPU job that cannot move behind it: ft moves to spot and nothing is launched
    on-demand. Best fit alone would pin onprem-2 too and launch on-demand for the wide job."""
    two = group("onprem", tier=Tier.STEADY, max_size=2, min_size=2)
    nodes = (ready_node("onprem-1", two), ready_node("onprem-2", two))
    fixed = job("fixed", gpus=4, state=JobState.RUNNING, nodes=("onprem-1",), started=T0 - timedelta(hours=1))
    ft = dataclasses.replace(ft_job(gpus=6), node_ids=("onprem-2",))
    small = immovable("small", gpus=2)
    wide = dataclasses.replace(immovable("wide", gpus=8), submitted_at=T0 + timedelta(seconds=1))
    snap = Snapshot(groups=(two, OD, SPOT), nodes=nodes, jobs=(fixed, ft, small, wide),
                    targets={"onprem": 2, "od": 0, "spot": 0}, runtimes=HISTORY)
    p = plan_of(snap, at=timedelta(seconds=2))
    (place,) = [a for a in p.actions if a.target == "small"]
    assert (place.kind, place.node_ids) == (ActionKind.PLACE_JOB, ("onprem-1",))
    assert kinds(p, "ft") == [ActionKind.REQUEST_CHECKPOINT] and kinds(p, "od") == []
    (waits,) = [h for h in p.holds if h.subject == "job:wide"]
    assert waits.reason.startswith("waits for on-prem onprem-2, freed by moving ft")


def test_paid_for_gpus_go_first_to_the_job_a_spot_reclaim_would_cost_work() -> None:
    """Four free on-prem GPUs, two pending 4-GPU fault-tolerant jobs: `quick` (submitted first) checkpoints in
    60 s, within a two-minute reclaim notice, so on spot a reclaim costs it a restart; `slow` takes 200 s and
    would lose up to a checkpoint interval. `slow` gets the on-prem GPUs and `quick` goes to spot; fair order
    alone gives them to `quick`."""
    fixed = job("fixed", gpus=4, state=JobState.RUNNING, nodes=("onprem-1",), started=T0 - timedelta(hours=1))
    ft = {"fault_tolerant": True, "checkpoint_interval_s": 1800.0}
    quick = job("quick", gpus=4, submitted=T0 - timedelta(seconds=2), checkpoint_duration_s=60.0, **ft)
    slow = job("slow", gpus=4, submitted=T0 - timedelta(seconds=1), checkpoint_duration_s=200.0, **ft)
    p = plan_of(snapshot([fixed, quick, slow]))
    (place,) = [a for a in p.actions if a.kind is ActionKind.PLACE_JOB]
    assert (place.target, place.node_ids) == ("slow", ("onprem-1",))
    (launch,) = [a for a in p.actions if a.kind is ActionKind.SCALE_UP]
    assert (launch.target, launch.count) == ("spot", 1)


def test_a_job_whose_checkpoint_fits_a_reclaim_notice_is_the_cheaper_one_to_move_to_spot() -> None:
    """Two 4-GPU fault-tolerant jobs fill on-prem, both checkpointed 20 s ago (moving either costs 20 s of work
    and a restart); a 4-GPU job that cannot move arrives; spot is reclaimed 0.1 times a node-hour. `saves`
    checkpoints in 100 s, within a notice: on spot a reclaim costs it a restart. `loses` takes 200 s: each
    reclaim costs it half an interval. Moving `saves` costs less; counting half an interval per reclaim for
    both makes them tie, and `loses` would go first by id."""
    loses = ft_job("loses", 4, hours_ago=2.0 + 20 / 3600, checkpoint_duration_s=200.0)
    saves = ft_job("saves", 4, hours_ago=2.0 + 20 / 3600, checkpoint_duration_s=100.0)
    snap = dataclasses.replace(snapshot([loses, saves, immovable(gpus=4)]), interruption_rates={"spot": 0.1})
    p = plan_of(snap)
    assert kinds(p, "saves") == [ActionKind.EVICT_JOB] and kinds(p, "loses") == []
    assert "expected interruption(s)" in next(a.reason for a in p.actions if a.target == "saves")


# ---------------------------------------------------------------- consolidation

OD_A, OD_B = ready_node("od-a", OD), ready_node("od-b", OD)


def cloud_snapshot(jobs: list[Job], *, idle_since_a: timedelta | None = None) -> Snapshot:
    """On-prem full of an immovable job; on-demand node od-a runs `jobs`, od-b runs a 4-GPU immovable job."""
    onprem_job = job("fixed", gpus=8, state=JobState.RUNNING, nodes=("onprem-1",), started=T0 - timedelta(hours=1))
    b_job = job("b-job", gpus=4, state=JobState.RUNNING, nodes=("od-b",), started=T0 - timedelta(hours=1))
    a = OD_A if idle_since_a is None else dataclasses.replace(OD_A, idle_since=T0 + idle_since_a)
    nodes = (ready_node("onprem-1", ONPREM), a, OD_B)
    return Snapshot(groups=(ONPREM, OD, SPOT), nodes=nodes, jobs=(onprem_job, b_job, *jobs),
                    targets={"onprem": 1, "od": 2, "spot": 0}, runtimes=HISTORY)


def on_a(jid: str = "ft", gpus: int = 4, **kw: object) -> Job:
    fields: dict[str, object] = {"fault_tolerant": True, "checkpoint_interval_s": 1800.0, "checkpoint_duration_s": 60.0}
    fields.update(kw)
    return job(jid, gpus=gpus, state=JobState.RUNNING, nodes=("od-a",), started=T0 - timedelta(hours=2.25), **fields)


def test_a_half_empty_on_demand_nodes_job_moves_and_the_node_is_released() -> None:
    ft = on_a()
    assert kinds(plan_of(cloud_snapshot([ft]), pipeline=BASELINE_PIPELINE), "ft") == [], "the baseline never moves it"
    first = plan_of(cloud_snapshot([ft]))
    (ask,) = [a for a in first.actions if a.target == "ft"]
    assert (ask.kind, ask.step) == (ActionKind.REQUEST_CHECKPOINT, "consolidate")
    assert ask.reason.startswith("consolidating od-a (od, $32.00/h): expected saving $32.00 over 1.0 h > move cost $")
    assert "resuming on od-b" in ask.reason
    checkpointing = apply_job_action(ft, ask, T0)
    second = plan_of(cloud_snapshot([checkpointing]), at=timedelta(seconds=90))
    (evict,) = [a for a in second.actions if a.target == "ft"]
    assert evict.kind is ActionKind.EVICT_JOB
    # od-a, emptied on purpose, is released by the plan that evicts its last job, not kept idle to break-even
    (down,) = [a for a in second.actions if a.kind is ActionKind.SCALE_DOWN]
    assert (down.target, down.node_ids) == ("od", ("od-a",))
    assert down.reason.startswith("1 node(s) emptied by this plan's moves or reclaim notices released now")
    requeued = apply_job_action(checkpointing, evict, T0 + timedelta(seconds=90))
    third = plan_of(cloud_snapshot([requeued], idle_since_a=timedelta(seconds=90)), at=timedelta(seconds=120))
    (place,) = [a for a in third.actions if a.target == "ft"]
    assert (place.kind, place.node_ids) == (ActionKind.PLACE_JOB, ("od-b",)), "on the node already running work"


def test_consolidation_never_moves_jobs_that_cannot_move_or_must_not_be_disrupted() -> None:
    for ft, why in ((on_a(fault_tolerant=False), "ft: not fault-tolerant: never moved"),
                    (on_a(do_not_disrupt=True), "ft: marked do_not_disrupt: never moved")):
        p = plan_of(cloud_snapshot([ft]))
        assert kinds(p, "ft") == []
        assert f"not consolidated: {why}" in [h.reason for h in p.holds if h.subject == "node:od-a"]


def test_consolidation_moves_work_from_on_demand_to_a_cheaper_spot_node() -> None:
    """A full on-demand node of fault-tolerant work, nowhere free: replaced by a spot node when that pays."""
    ft = on_a(gpus=8)
    # od-b has 4 free GPUs, too few for 8; on-prem is full
    p = plan_of(cloud_snapshot([ft]))
    (ask,) = [a for a in p.actions if a.target == "ft"]
    assert ask.step == "consolidate" and "resuming on a new spot node" in ask.reason
    # $32 over the hour, less 8 GPUs x $1 x 1 h on spot = $24
    assert "expected saving $24.00 over 1.0 h" in ask.reason


def test_an_immovable_job_takes_an_on_demand_nodes_gpus_from_fault_tolerant_work_rather_than_a_new_node() -> None:
    """On-prem is full; on-demand od-a runs a 4-GPU immovable job and a 4-GPU fault-tolerant one. A 4-GPU
    immovable job arrives: rather than launch a second on-demand node beside them, the fault-tolerant job moves
    to spot and the immovable one waits for its GPUs. Never a job marked do_not_disrupt."""
    def snap(ft: Job) -> Snapshot:
        onprem_job = job("fixed", gpus=8, state=JobState.RUNNING, nodes=("onprem-1",), started=T0 - timedelta(hours=1))
        pinned = job("a-fixed", gpus=4, state=JobState.RUNNING, nodes=("od-a",), started=T0 - timedelta(hours=1))
        return Snapshot(groups=(ONPREM, OD, SPOT), nodes=(ready_node("onprem-1", ONPREM), OD_A),
                        jobs=(onprem_job, pinned, ft, immovable(gpus=4)), targets={"onprem": 1, "od": 1, "spot": 0},
                        runtimes=HISTORY)

    base = plan_of(snap(on_a()), pipeline=BASELINE_PIPELINE)
    assert [(a.kind, a.target) for a in base.actions] == [(ActionKind.SCALE_UP, "od")]
    p = plan_of(snap(on_a()))
    (ask,) = [a for a in p.actions if a.target == "ft"]
    assert (ask.kind, ask.step) == (ActionKind.REQUEST_CHECKPOINT, "make_room")
    assert ask.reason.startswith("moved off on-demand node(s) of od od-a for imm, which cannot move: expected saving $")
    assert "resuming on spot" in ask.reason
    assert kinds(p, "od") == [], "no on-demand node launched"
    (waits,) = [h for h in p.holds if h.subject == "job:imm"]
    assert waits.reason.startswith("waits for on-demand nodes od-a, freed by moving ft")
    kept = plan_of(snap(on_a(do_not_disrupt=True)))
    assert kinds(kept, "ft") == [] and kinds(kept, "od") == [ActionKind.SCALE_UP]


# ---------------------------------------------------------------- in the daemon

def test_the_daemon_moves_a_job_off_on_prem_through_the_reconcile_loop_and_embedded_queue() -> None:
    """The real Controller over the sim provider and the embedded (store) queue: a fault-tolerant job holds the
    on-prem node; a job that cannot move arrives; the daemon checkpoints, evicts and requeues the first (the
    executors priority preemption uses), places the second on-prem and launches spot for the first."""
    from burst.reconcile import Controller
    from burst.state import Store
    from burst.workloads.queue import StoreQueue
    from providers.sim import ManualClock, SimProvider

    clock = ManualClock(T0)
    boot = 300.0
    groups = [dataclasses.replace(g, boot_latency_s=boot) for g in (ONPREM, OD, SPOT)]
    sim = SimProvider(groups, clock=clock, cluster="test", initial={"onprem": 1})
    store = Store(":memory:")
    queue = StoreQueue(store, complete_by_duration=True)
    ctl = Controller(providers={"sim": sim}, source=queue, store=store, policies=lambda: POLICIES, prices=PRICES,
                     clock=clock, cluster="test")
    queue.submit(job("ft", gpus=8, duration_s=36000.0, fault_tolerant=True, checkpoint_interval_s=1800.0,
                     checkpoint_duration_s=60.0))
    ctl.tick()
    assert store.get_job("ft").state is JobState.RUNNING  # type: ignore[union-attr]
    clock.advance(45 * 60)
    queue.submit(job("imm", gpus=8, duration_s=36000.0, submitted=clock()))
    asked = ctl.tick()
    assert [(a.kind, a.target, a.step) for a in asked.plan.actions] == [
        (ActionKind.REQUEST_CHECKPOINT, "ft", "make_room")]
    assert "expected saving $" in asked.plan.actions[0].reason
    clock.advance(90)
    evicted = ctl.tick()
    assert [(a.kind, a.target) for a in evicted.plan.actions] == [(ActionKind.EVICT_JOB, "ft")]
    ft = store.get_job("ft")
    assert ft is not None and ft.state is JobState.PENDING and ft.work_done_s == 45 * 60.0, "resumes from the checkpoint"
    clock.advance(10)
    placed = ctl.tick()
    assert [(a.kind, a.target) for a in placed.plan.actions] == [(ActionKind.PLACE_JOB, "imm"),
                                                                 (ActionKind.SCALE_UP, "spot")]
    imm = store.get_job("imm")
    assert imm is not None and imm.state is JobState.RUNNING and imm.node_ids == placed.plan.actions[0].node_ids
    assert sim.nodes()[imm.node_ids[0]].group_id == "onprem"
    clock.advance(boot + 10)
    ctl.tick()
    ft = store.get_job("ft")
    assert ft is not None and ft.state is JobState.RUNNING and ft.node_ids[0].startswith("spot")


def test_deadlines_are_judged_on_declared_durations_never_the_true_one() -> None:
    """A fault-tolerant job due in 40 min that really takes an hour (`duration_s`): the frozen baseline, reading
    that field, bars it from spot; burst, which knows only a declared duration, does so only when one is declared."""
    tight = job("d", gpus=8, fault_tolerant=True, checkpoint_interval_s=1800.0, checkpoint_duration_s=60.0,
                duration_s=3600.0, deadline=T0 + timedelta(minutes=40))
    snap = Snapshot(groups=(OD, SPOT), nodes=(), jobs=(tight,), targets={"od": 0, "spot": 0})
    assert kinds(plan_of(snap, pipeline=BASELINE_PIPELINE), "od") == [ActionKind.SCALE_UP]
    assert kinds(plan_of(snap), "spot") == [ActionKind.SCALE_UP]
    declared = dataclasses.replace(snap, jobs=(dataclasses.replace(tight, declared_duration_s=3600.0),))
    assert kinds(plan_of(declared), "od") == [ActionKind.SCALE_UP]
