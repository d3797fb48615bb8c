"""The node lifecycle table: every allowed transition works, forbidden ones raise."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from builders import T0

from burst.model import (
    NODE_PATHS,
    NODE_TRANSITIONS,
    InvalidTransition,
    Node,
    NodeState,
    Transition,
    WarmState,
)

DESIGN_TABLE = {
    "requested": {"booting", "failed"},
    "booting": {"ready", "warm", "failed"},
    "warm": {"waking", "terminating"},
    "waking": {"ready", "failed"},
    "ready": {"draining", "interrupted"},
    "draining": {"warm", "terminating", "interrupted"},
    "interrupted": {"terminating"},
    "terminating": {"terminated"},
    "terminated": set(),
    "failed": {"terminating"},
}


def node_in(state: NodeState) -> Node:
    return Node(id="n", group_id="g", state=state, gpus=8, created_at=T0)


def test_table_matches_design() -> None:
    assert {s.value: {t.value for t in ts} for s, ts in NODE_TRANSITIONS.items()} == DESIGN_TABLE


@pytest.mark.parametrize(
    "src,dst", [(s, d) for s, ds in NODE_TRANSITIONS.items() for d in sorted(ds)], ids=lambda s: s.value
)
def test_every_allowed_transition(src: NodeState, dst: NodeState) -> None:
    moved = node_in(src).transition(dst, T0 + timedelta(seconds=5))
    assert moved.state is dst
    assert moved.history[-1].state is dst and moved.history[-1].at == T0 + timedelta(seconds=5)


FORBIDDEN = [(s, d) for s, d in itertools.product(NodeState, NodeState) if d not in NODE_TRANSITIONS[s]]


@pytest.mark.parametrize("src,dst", FORBIDDEN[::3], ids=lambda s: s.value)
def test_forbidden_transitions_raise(src: NodeState, dst: NodeState) -> None:
    with pytest.raises(InvalidTransition):
        node_in(src).transition(dst, T0)


def test_warm_carries_its_sub_state_and_stuck_detection() -> None:
    n = Node.requested("n", "g", 8, T0).transition(NodeState.BOOTING, T0)
    warm = n.transition(NodeState.WARM, T0, warm_state=WarmState.HIBERNATED)
    assert warm.warm_state is WarmState.HIBERNATED
    assert not n.is_stuck(T0 + timedelta(minutes=19))
    assert n.is_stuck(T0 + timedelta(minutes=21))
    ready = warm.transition(NodeState.WAKING, T0).transition(NodeState.READY, T0 + timedelta(minutes=1))
    assert ready.warm_state is None and ready.idle_since == T0 + timedelta(minutes=1)
    assert [h.state.value for h in ready.history] == ["requested", "booting", "warm", "waking", "ready"]


# ---------------------------------------------------------------- walk_to: what providers move nodes with

AT = T0 + timedelta(minutes=3)


@pytest.mark.parametrize("src,dst", list(itertools.product(NodeState, NodeState)), ids=lambda s: s.value)
def test_walk_to_takes_a_shortest_walk_of_allowed_steps_or_raises(src: NodeState, dst: NodeState) -> None:
    start = node_in(src)
    want = NodeState.WAKING if (src, dst) == (NodeState.WARM, NodeState.BOOTING) else dst
    if (src, want) not in NODE_PATHS:
        with pytest.raises(InvalidTransition, match=f"no walk from {src.value} to {want.value}"):
            start.walk_to(dst, AT)
        return
    moved = start.walk_to(dst, AT)
    steps = [t.state for t in moved.history]
    assert moved.state is want and steps == list(NODE_PATHS[(src, want)])
    assert all(b in NODE_TRANSITIONS[a] for a, b in itertools.pairwise([src, *steps])), "only table edges"
    assert all(t.at == AT and t.resync == "" for t in moved.history)


def test_walk_to_wakes_a_warm_node_listed_booting_and_keeps_a_warm_ones_reported_sub_state() -> None:
    warm = Node(id="n", group_id="g", state=NodeState.WARM, gpus=8, created_at=T0, warm_state=WarmState.STOPPED)
    assert warm.walk_to(NodeState.BOOTING, AT).state is NodeState.WAKING
    assert warm.walk_to(NodeState.WARM, AT, warm_state=WarmState.HIBERNATED).warm_state is WarmState.HIBERNATED
    assert warm.walk_to(NodeState.WARM, AT) is warm, "no sub-state reported: unchanged"


def test_a_state_no_walk_reaches_is_an_observed_resync_with_its_reason_not_an_invented_history() -> None:
    going = node_in(NodeState.READY).walk_to(NodeState.TERMINATING, T0)
    back = going.walk_to(NodeState.READY, AT, observed_by="aws")
    assert back.state is NodeState.READY and back.created_at == T0
    assert back.history[:-1] == going.history, "the history so far is kept"
    assert back.history[-1] == Transition(NodeState.READY, AT,
                                          resync="aws lists it ready after terminating, which no transition leads to")
    with pytest.raises(InvalidTransition):
        going.walk_to(NodeState.READY, AT)  # burst's own move, not a provider's report: refused
