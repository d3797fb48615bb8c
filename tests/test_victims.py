"""Victim selection (exact victims for scripted cases) and the priority preemption step that uses it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from builders import T0, TablePrices, group, job, ready_node

from burst.model import ActionKind, JobState, Plan, Policy, Snapshot, Tier
from burst.planner import PlanIds, plan
from burst.planner.victims import MOST_RECENT, RANDOM, eviction_cost_gpu_s, select_victims
from burst.workloads.queue import apply_job_action


def running(jid: str, gpus: int, minutes_ago: float, *, tenant: str = "t", nodes=("n1",), **kw):
    return job(jid, tenant=tenant, gpus=gpus, state=JobState.RUNNING, nodes=nodes,
               started=T0 - timedelta(minutes=minutes_ago), **kw)


A = running("a", 4, 120)  # cannot resume: evicting it loses its two hours on 4 GPUs
B = running("b", 2, 45, fault_tolerant=True, checkpoint_interval_s=1800.0)  # checkpointed at 30 min: loses 15
C = running("c", 2, 50, fault_tolerant=True, checkpoint_interval_s=1800.0)  # loses 20 min
LOTS = {"t": 1000.0}


def ids(victims) -> list[str]:
    return [v.job.id for v in victims]


def test_least_lost_work_first_prefers_two_fresh_checkpoints_to_one_long_run() -> None:
    assert eviction_cost_gpu_s(A, T0) == 4 * 7200
    assert eviction_cost_gpu_s(B, T0) == 2 * 900
    assert eviction_cost_gpu_s(C, T0) == 2 * 1200
    victims = select_victims([A, B, C], 4, T0, running_gpus=LOTS, purpose="a 4-GPU job")
    assert ids(victims) == ["b", "c"]
    assert victims[0].reason == "frees 2 GPU(s) for a 4-GPU job; costs 0.50 GPU-h of work (least lost work first)"


def test_a_job_frees_only_its_share_where_the_gpus_are_needed() -> None:
    gang = running("g", 8, 10, nodes=("n1", "n2"))  # 4 GPUs on each node
    assert select_victims([gang], 8, T0, running_gpus=LOTS, freed_gpus={"g": 4}) == []
    assert ids(select_victims([gang, B], 6, T0, running_gpus=LOTS, freed_gpus={"g": 4, "b": 2})) == ["b", "g"]


def test_the_minimisation_pass_drops_victims_the_others_make_unnecessary() -> None:
    small = running("d", 2, 5)  # 2 x 300 GPU-s: cheapest per GPU, so taken first, but 2 GPUs are not enough
    big = running("e", 4, 6)  # 4 x 360 GPU-s: taken next, and enough alone
    spare = running("f", 4, 30)  # 4 x 1800 GPU-s: never needed
    victims = select_victims([spare, big, small], 4, T0, running_gpus=LOTS)
    assert [(v.job.id, v.cost_gpu_s) for v in victims] == [("e", 4 * 360)], "d was picked first, then made unneeded"


def test_a_multi_node_job_is_evicted_whole_or_not_at_all() -> None:
    gang = running("g", 16, 10, nodes=("n1", "n2"))
    (victim,) = select_victims([gang], 4, T0, running_gpus=LOTS)
    assert victim.job.node_ids == ("n1", "n2") and victim.cost_gpu_s == 16 * 600
    assert select_victims([running("h", 2, 1)], 4, T0, running_gpus=LOTS) == [], "not enough: nothing chosen"


def test_the_disruption_budget_caps_each_tenant_and_nothing_is_half_chosen() -> None:
    one, two = running("x1", 4, 5), running("x2", 4, 6)
    assert select_victims([one, two], 8, T0, running_gpus={"t": 40.0}) == []  # 10% of 40 = 4 GPUs: one job only
    assert ids(select_victims([one, two], 4, T0, running_gpus={"t": 40.0})) == ["x1"]
    assert ids(select_victims([one, two], 8, T0, running_gpus={"t": 40.0}, max_disrupted_share=0.25)) == ["x1", "x2"]
    assert ids(select_victims([one], 4, T0, running_gpus={"t": 4.0})) == ["x1"], "a budget below one job allows one"
    assert select_victims([one], 4, T0, running_gpus={"t": 40.0}, disrupted_gpus={"t": 4.0}) == []


def test_other_orders_for_comparison() -> None:
    assert ids(select_victims([A, B, C], 2, T0, running_gpus=LOTS, order=MOST_RECENT)) == ["b"]
    first = ids(select_victims([A, B, C], 2, T0, running_gpus=LOTS, order=RANDOM, seed=1))
    assert first == ids(select_victims([A, B, C], 2, T0, running_gpus=LOTS, order=RANDOM, seed=1))
    with pytest.raises(ValueError, match="unknown victim order"):
        select_victims([A], 1, T0, running_gpus=LOTS, order="oldest")


ONPREM = group("onprem", tier=Tier.STEADY, gpus=8, min_size=1, max_size=1)
PRICES = TablePrices({"onprem": 8.0})
PROD = Policy(tenant="prod", priority=100)
BATCH = Policy(tenant="batch", priority=0, preemptible_by=("prod",))


def preempt_plan(jobs, policies) -> Plan:
    snap = Snapshot(groups=(ONPREM,), nodes=(ready_node("onprem-0", ONPREM),), jobs=tuple(jobs), targets={"onprem": 1})
    return plan(snap, [], policies, PRICES, now=T0, ids=PlanIds("p"))


def test_a_higher_priority_job_preempts_the_cheapest_allowed_victims() -> None:
    old = running("old", 4, 120, tenant="batch", nodes=("onprem-0",))
    fresh = running("fresh", 4, 10, tenant="batch", nodes=("onprem-0",))
    p = preempt_plan([old, fresh, job("urgent", tenant="prod", gpus=4)], {"prod": PROD, "batch": BATCH})
    (evict,) = p.actions
    assert (evict.kind, evict.target, evict.step) == (ActionKind.EVICT_JOB, "fresh", "preempt")
    assert "preempted by priority: frees 4 GPU(s) for tenant prod's job urgent (priority 100)" in evict.reason
    assert any(h.subject == "job:urgent" and "freed by preempting fresh" in h.reason for h in p.holds)


def test_a_jobs_own_priority_never_preempts_another_tenant() -> None:
    # prod may preempt batch only by its policy's priority: a prod job's priority 10**9 does not make an
    # equal-priority tenant's job yield, and a batch job's own high priority does not shield it from prod.
    victim = running("v", 8, 10, tenant="batch", nodes=("onprem-0",), priority=10**9)
    shielded = preempt_plan([victim, job("urgent", tenant="prod", gpus=8)], {"prod": PROD, "batch": BATCH})
    assert [a.target for a in shielded.actions] == ["v"]
    peers = {"prod": Policy(tenant="prod", priority=0), "batch": Policy(tenant="batch", priority=0, preemptible_by=("prod",))}
    equal = running("w", 8, 10, tenant="batch", nodes=("onprem-0",))
    pushy = job("pushy", tenant="prod", gpus=8, priority=10**9)
    assert preempt_plan([equal, pushy], peers).actions == (), "batch is not over its share: nothing yields"


def test_gpus_promised_to_one_preemptor_are_not_promised_again() -> None:
    big = group("big", tier=Tier.STEADY, gpus=16, min_size=1, max_size=1)
    jobs = [running(f"v{i}", 4, 10 + i, tenant="batch", nodes=("big-0",)) for i in range(2)]
    jobs += [job("u1", tenant="prod", gpus=12), job("u2", tenant="prod", gpus=12, submitted=T0 + timedelta(seconds=1))]
    snap = Snapshot(groups=(big,), nodes=(ready_node("big-0", big),), jobs=tuple(jobs), targets={"big": 1})
    p = plan(snap, [], {"prod": PROD, "batch": Policy(tenant="batch", preemptible_by=("prod",))},
             TablePrices({"big": 16.0}), now=T0, ids=PlanIds("p"))
    assert [a.target for a in p.actions] == ["v0"], "8 free + 4 freed serve u1; u2 would need the same GPUs"


def test_a_victim_spread_over_nodes_frees_only_its_share_on_the_contended_node() -> None:
    two = group("two", tier=Tier.STEADY, gpus=8, min_size=2, max_size=2)
    gang = running("gang", 8, 10, tenant="batch", nodes=("two-0", "two-1"))  # 4 GPUs on each node
    others = [running(f"keep{i}", 4, 10, tenant="ops", nodes=(f"two-{i}",)) for i in range(2)]  # not preemptible
    snap = Snapshot(groups=(two,), nodes=(ready_node("two-0", two), ready_node("two-1", two)),
                    jobs=(gang, *others, job("urgent", tenant="prod", gpus=8)), targets={"two": 2})
    p = plan(snap, [], {"prod": PROD, "batch": BATCH}, TablePrices({"two": 8.0}), now=T0, ids=PlanIds("p"))
    assert p.actions == (), "evicting the gang frees 4 GPUs on either node: not the 8 a node must give"


def test_preemption_needs_preemptible_by_and_a_lower_priority() -> None:
    victim = running("v", 8, 10, tenant="batch", nodes=("onprem-0",))
    pending = job("urgent", tenant="prod", gpus=4)
    closed = Policy(tenant="batch", priority=0)
    assert preempt_plan([victim, pending], {"prod": PROD, "batch": closed}).actions == ()
    peer = Policy(tenant="batch", priority=100, preemptible_by=("prod",))
    assert preempt_plan([victim, pending], {"prod": PROD, "batch": peer}).actions == ()
    quota_bound = Policy(tenant="prod", priority=100, steady_quota_gpus=2)
    assert preempt_plan([victim, pending], {"prod": quota_bound, "batch": BATCH}).actions == (), \
        "a job refused for its own quota does not preempt"


def preempt_plan_at(jobs, now) -> Plan:
    snap = Snapshot(groups=(ONPREM,), nodes=(ready_node("onprem-0", ONPREM),), jobs=tuple(jobs), targets={"onprem": 1})
    return plan(snap, [], {"prod": PROD, "batch": BATCH}, PRICES, now=now, ids=PlanIds("p"))


def test_a_victim_whose_checkpoint_fits_checkpoints_first_and_is_evicted_once_it_lands() -> None:
    saver = running("saver", 4, 10, tenant="batch", nodes=("onprem-0",), fault_tolerant=True, checkpoint_duration_s=60.0)
    plain = running("plain", 4, 100 / 60, tenant="batch", nodes=("onprem-0",))  # 100 s of work, cannot resume
    urgent = job("urgent", tenant="prod", gpus=4)
    assert eviction_cost_gpu_s(saver, T0, checkpoint_budget_s=120.0) == 4 * 60, "its checkpoint, not its 600 s"
    first = preempt_plan_at([saver, plain, urgent], T0)
    (ask,) = first.actions
    assert (ask.kind, ask.target, ask.step) == (ActionKind.REQUEST_CHECKPOINT, "saver", "preempt")
    assert ask.reason.startswith("preempted by priority: frees 4 GPU(s) for tenant prod's job urgent (priority 100)")
    assert ask.reason.endswith("checkpoint (60 s) before yielding its GPUs (600 s of work unsaved)")
    assert any(h.subject == "job:urgent" and h.reason.endswith("preempting saver once their checkpoints land")
               for h in first.holds)

    asked = apply_job_action(saver, ask, T0)
    during = preempt_plan_at([asked, plain, urgent], T0 + timedelta(seconds=30))
    assert during.actions == (), "the victim asked stays the cheapest (30 s of checkpoint left) and is waited for"
    assert any(h.subject == "job:saver" and "its checkpoint is under way (30 of 60 s)" in h.reason for h in during.holds)

    after = preempt_plan_at([asked, plain, urgent], T0 + timedelta(seconds=70))
    (evict,) = after.actions
    assert (evict.kind, evict.target) == (ActionKind.EVICT_JOB, "saver")
    assert evict.reason.endswith("yielding its GPUs (70 s of work unsaved; requeued from its last checkpoint)")
    back = apply_job_action(asked, evict, T0 + timedelta(seconds=70))
    assert back.state is JobState.PENDING and back.work_done_s == 600.0, "resumes from the checkpoint asked at T0"


def test_a_victim_whose_checkpoint_exceeds_the_budget_is_evicted_at_once() -> None:
    slow = running("slow", 4, 10, tenant="batch", nodes=("onprem-0",), fault_tolerant=True, checkpoint_duration_s=300.0)
    p = preempt_plan_at([slow, running("busy", 4, 10, tenant="ops", nodes=("onprem-0",)),
                         job("urgent", tenant="prod", gpus=4)], T0)
    (evict,) = p.actions
    assert (evict.kind, evict.target) == (ActionKind.EVICT_JOB, "slow")
    assert "(its 300 s checkpoint exceeds the 120 s budget; 600 s of work unsaved; requeued" in evict.reason
    assert any(h.subject == "job:urgent" and h.reason.endswith("freed by preempting slow") for h in p.holds)


def share_plan(jobs, policies) -> Plan:
    return preempt_plan(jobs, {"a": Policy(tenant="a", preemptible_by=("b",)), "b": Policy(tenant="b"), **policies})


def test_a_tenant_over_its_share_yields_to_an_equal_priority_tenant_below_it() -> None:
    a1 = running("a1", 4, 10, tenant="a", nodes=("onprem-0",))
    a2 = running("a2", 4, 20, tenant="a", nodes=("onprem-0",))
    p = share_plan([a1, a2, job("b1", tenant="b", gpus=4)], {})
    (evict,) = p.actions
    assert (evict.kind, evict.target, evict.step) == (ActionKind.EVICT_JOB, "a1", "preempt")
    assert evict.reason.startswith(
        "preempted for fair share: tenant a holds 8 GPU(s) at weight 1, tenant b 4 with its job at weight 1: "
        "frees 4 GPU(s) for tenant b's job b1 (priority 0); costs 0.67 GPU-h of work (least lost work first)")
    assert any(h.subject == "job:b1" and h.reason.endswith("freed by preempting a1") for h in p.holds)


def test_equal_priority_preemption_stops_where_the_shares_would_cross() -> None:
    a1 = running("a1", 4, 10, tenant="a", nodes=("onprem-0",))
    b0 = running("b0", 4, 10, tenant="b", nodes=("onprem-0",))
    assert share_plan([a1, b0, job("b1", tenant="b", gpus=4)], {}).actions == (), "4 each: b would pass a"
    a2 = running("a2", 4, 20, tenant="a", nodes=("onprem-0",))
    heavy = {"a": Policy(tenant="a", preemptible_by=("b",), fair_share_weight=3.0)}
    assert share_plan([a1, a2, job("b1", tenant="b", gpus=4)], heavy).actions == (), \
        "8 GPUs at weight 3 is under b's 4 at weight 1"
    closed = {"a": Policy(tenant="a")}
    assert share_plan([a1, a2, job("b1", tenant="b", gpus=4)], closed).actions == (), "a does not list b"
    whole = running("whole", 8, 10, tenant="a", nodes=("onprem-0",))
    assert share_plan([whole, job("b1", tenant="b", gpus=4)], {}).actions == (), \
        "evicting a's 8-GPU job would leave a 0 against b's 4"


def test_victims_of_one_tenant_are_refused_together_when_they_would_take_it_below_the_preemptor() -> None:
    def plan_with_b_holding(b_elsewhere: int) -> Plan:
        ra = group("ra", tier=Tier.STEADY, gpus=36, min_size=1, max_size=1)
        rb = group("rb", tier=Tier.STEADY, gpus=b_elsewhere, min_size=1, max_size=1)
        jobs = [running("x1", 2, 5, tenant="a", nodes=("onprem-0",)), running("x2", 2, 6, tenant="a", nodes=("onprem-0",)),
                running("y", 4, 10, tenant="b", nodes=("onprem-0",)), running("big", 36, 10, tenant="a", nodes=("ra-0",)),
                running("rest", b_elsewhere, 10, tenant="b", nodes=("rb-0",)), job("b1", tenant="b", gpus=4)]
        snap = Snapshot(groups=(ONPREM, ra, rb), nodes=(ready_node("onprem-0", ONPREM), ready_node("ra-0", ra),
                                                        ready_node("rb-0", rb)),
                        jobs=tuple(jobs), targets={"onprem": 1, "ra": 1, "rb": 1})
        policies = {"a": Policy(tenant="a", preemptible_by=("b",)), "b": Policy(tenant="b")}
        return plan(snap, [], policies, TablePrices({"onprem": 8.0, "ra": 36.0, "rb": 30.0}), now=T0, ids=PlanIds("p"))

    # a holds 40 GPUs, so its disruption budget allows both 2-GPU jobs; b holds 4 + what it runs elsewhere
    assert [a.target for a in plan_with_b_holding(28).actions] == ["x1", "x2"], "a keeps 36, b gets 36: allowed"
    assert plan_with_b_holding(30).actions == (), "either alone keeps a at 38 against b's 38; both would leave a 36"
