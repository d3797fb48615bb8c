"""The node lifecycle table: every allowed transition works, forbidden ones raise."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from builders import T0

from burst.model import NODE_TRANSITIONS, InvalidTransition, Node, NodeState, WarmState

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
