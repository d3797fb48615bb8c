"""The planner's step contract: declared hand-offs, the generated table, typed step results, shared helpers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from builders import T0, TablePrices, group, job, ready_node

import burst.planner
from burst.model import Action, ActionKind, JobState, Policy, Snapshot, Tier
from burst.planner import BASELINE_PIPELINE, PIPELINE
from burst.planner.context import HANDOFFS, PlanContext, Refusal, build_context
from burst.planner.contract import (
    StepSpec,
    UndeclaredHandOff,
    declare,
    handoff_table,
    run_pipeline,
    run_step,
    spec_of,
)

ONPREM = group("onprem", tier=Tier.STEADY, gpus=8, min_size=1, max_size=1)
OD = group("od", gpus=8)
PRICES = TablePrices({"onprem": 8.0, "od": 24.0})


def _docstring_table() -> str:
    doc = burst.planner.__doc__ or ""
    return "\n".join(line for line in doc.splitlines() if line.startswith("|"))


def test_the_handoff_table_matches_the_steps() -> None:
    assert _docstring_table() == handoff_table(PIPELINE)
    # the table is made from the declarations: a step that stops declaring a read drops out of its row
    without = tuple((n, declare(writes=("unserved",))(lambda ctx: None)) if n == "preempt" else (n, s)
                    for n, s in PIPELINE)
    assert "| place+scale_up | `unserved`" not in handoff_table(without)


@pytest.mark.parametrize("pipeline", [PIPELINE, BASELINE_PIPELINE], ids=["burst", "baseline"])
def test_every_step_declares_and_reads_only_what_an_earlier_step_or_itself_writes(pipeline) -> None:
    every_step = {h.name for h in HANDOFFS if h.every_step}
    written: set[str] = set(every_step)
    for name, step in pipeline:
        spec = spec_of(step)
        assert spec is not None, f"{name} declares no hand-offs"
        written |= spec.writes
        assert spec.reads <= written, f"{name} reads {sorted(spec.reads - written)} that no step before it writes"


def test_a_step_writing_a_handoff_it_did_not_declare_is_refused() -> None:
    ctx = build_context(Snapshot(groups=(OD,), nodes=(), jobs=(job("j"),), targets={}), (), {}, PRICES, T0)

    @declare(writes=("spot_barred",))
    def sneaky(c: PlanContext) -> None:
        c.refuse(c.pending_jobs()[0], Refusal.QUOTA)

    with pytest.raises(UndeclaredHandOff, match="sneaky_step wrote unserved"):
        run_step(ctx, "sneaky_step", sneaky)
    with pytest.raises(UndeclaredHandOff, match="plain wrote spot_barred"):
        run_step(ctx, "plain", lambda c: c.bar_from_spot("j", "why"))  # no declaration: may write nothing
    # acting is every step's: no declaration needed
    act = Action(kind=ActionKind.SCALE_DOWN, target="od", count=1, step="x", reason="r")
    result = run_step(ctx, "acts", lambda c: c.add_action(act))
    assert result.actions == (act,) and result.handed_on == frozenset() and "od" in ctx.acted_on


def test_step_results_say_what_each_step_decided_and_handed_on() -> None:
    # a job past its max runtime is reclaimed; its 8 freed GPUs take the pending job; the second pending job
    # launches one on-demand node
    node = ready_node("onprem-0", ONPREM)
    old = job("old", gpus=8, state=JobState.RUNNING, nodes=("onprem-0",), started=T0 - timedelta(hours=25))
    snap = Snapshot(groups=(ONPREM, OD), nodes=(node,), targets={"onprem": 1, "od": 0},
                    jobs=(old, job("new", gpus=8), job("more", gpus=8, submitted=T0 + timedelta(seconds=1))))
    ctx = build_context(snap, (), {"a": Policy(tenant="a", max_job_runtime_s=24 * 3600)}, PRICES, T0)
    results = {r.step: r for r in run_pipeline(ctx, PIPELINE)}
    reclaim, place = results["reclaim"], results["place+scale_up"]
    assert [(a.kind, a.target) for a in reclaim.actions] == [(ActionKind.RECLAIM_JOB, "old")]
    assert reclaim.handed_on == {"released"} and ctx.released == {"old": 8}
    assert [(a.kind, a.target, a.node_ids) for a in place.actions] == [
        (ActionKind.PLACE_JOB, "new", ("onprem-0",)), (ActionKind.SCALE_UP, "od", ())]
    assert place.handed_on == {"placements", "busy_nodes", "scale_ups"}
    assert ctx.placements == {"new": ("onprem-0",)} and ctx.scale_ups == {"od": 2}  # its index among the plan's actions
    assert results["scale_down"].handed_on == frozenset()


def test_release_job_gives_back_its_gpus_on_each_node_and_its_usage() -> None:
    # 6 GPUs over two 8-GPU nodes: 3 on each; on-prem at $8/node-h is $1/GPU-h
    two = group("onprem", tier=Tier.STEADY, gpus=8, min_size=2, max_size=2)
    wide = job("wide", gpus=6, state=JobState.RUNNING, nodes=("n0", "n1"), started=T0 - timedelta(hours=1))
    snap = Snapshot(groups=(two,), nodes=(ready_node("n0", two), ready_node("n1", two)), jobs=(wide,),
                    targets={"onprem": 2})
    ctx = build_context(snap, (), {}, PRICES, T0)
    cap = ctx.groups["onprem"]
    assert cap.free_of == {"n0": 5, "n1": 5} and ctx.usage["a"].steady_gpus == 6.0
    ctx.release_job(wide)
    assert cap.free_of == {"n0": 8, "n1": 8}
    assert ctx.usage["a"].steady_gpus == 0.0 and ctx.usage["a"].usd_per_hour == pytest.approx(0.0)
    assert ctx.released == {"wide": 6} and ctx.written == {"released"}


def test_a_later_launch_folds_into_the_scale_up_of_its_group() -> None:
    ctx = build_context(Snapshot(groups=(OD,), nodes=(), jobs=(), targets={}), (), {}, PRICES, T0)
    first = Action(kind=ActionKind.SCALE_UP, target="od", count=1, size=1, step="scale_up", reason="a")
    ctx.add_scale_up(first)
    earlier = ctx.scale_up_of("od")
    assert earlier is first
    ctx.replace_scale_up(Action(kind=ActionKind.SCALE_UP, target="od", count=3, size=3, step="scale_up", reason="a; b"))
    assert [(a.count, a.reason) for a in ctx.actions] == [(3, "a; b")]
    assert [a.count for a in ctx.withdraw_scale_ups()] == [3]
    assert ctx.actions == [] and ctx.scale_up_of("od") is None


def test_a_wrapped_step_declares_what_it_wraps_and_a_partial_its_function() -> None:
    from burst.planner.placement import place_and_scale_up
    from burst.planner.preempt import preemption_step
    from burst.sim.karpenter import KarpenterProvisioning

    inner = spec_of(place_and_scale_up)
    assert inner is not None
    wrapped = spec_of(KarpenterProvisioning(place_and_scale_up))
    assert wrapped == StepSpec(inner.writes | {"scale_ups"}, inner.reads | {"scale_ups"})
    assert spec_of(preemption_step("random")) == spec_of(dict(PIPELINE)["preempt"])
