"""What a planner step declares and returns: the hand-offs it writes and reads, and what it decided.

A step is a function of the plan's `PlanContext`. It declares, with
`declare`, the hand-offs (`burst.planner.context.HANDOFFS`) it writes for
later steps and those it reads from earlier ones; no step reads another's
actions. `run_step` runs one and returns a `StepResult`: the actions and
holds it decided, and the hand-offs it wrote, which must be among those it
declared. `handoff_table` renders the declarations of a pipeline as the table
in `burst.planner`'s docstring.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from burst.model import Action, Hold
from burst.planner.context import HANDOFFS, PlanContext

Step = Callable[[PlanContext], None]
S = TypeVar("S")
_SPEC_ATTR = "handoffs"
_EVERY_STEP = frozenset(h.name for h in HANDOFFS if h.every_step)


@dataclass(frozen=True)
class StepSpec:
    """The hand-offs a step writes for later steps and reads from earlier ones (names from `HANDOFFS`)."""

    writes: frozenset[str] = frozenset()
    reads: frozenset[str] = frozenset()


@dataclass(frozen=True)
class StepResult:
    """What one step of one plan decided (actions, holds) and the hand-offs it wrote for later steps."""

    step: str
    actions: tuple[Action, ...]
    holds: tuple[Hold, ...]
    handed_on: frozenset[str]


class UndeclaredHandOff(RuntimeError):
    """A step wrote a hand-off it does not declare."""


def declare(*, writes: Iterable[str] = (), reads: Iterable[str] = ()) -> Callable[[S], S]:
    """Mark a step (a function, a method, or a class of callable steps) with the hand-offs it writes and reads."""
    spec = StepSpec(frozenset(writes), frozenset(reads))
    unknown = (spec.writes | spec.reads) - {h.name for h in HANDOFFS}
    if unknown:
        raise ValueError(f"unknown hand-off(s): {', '.join(sorted(unknown))}")

    def mark(step: S) -> S:
        setattr(step, _SPEC_ATTR, spec)
        return step

    return mark


def spec_of(step: Step) -> StepSpec | None:
    """The step's declaration (None for a step that declares nothing: it may write no hand-off)."""
    target: object = step.func if isinstance(step, functools.partial) else step
    found = getattr(target, _SPEC_ATTR, None)
    return found if isinstance(found, StepSpec) else None


def run_step(ctx: PlanContext, name: str, step: Step) -> StepResult:
    """Run one step on `ctx`: what it decided and handed on; raises `UndeclaredHandOff` for a hand-off it wrote
    without declaring it."""
    actions_before, holds_before = len(ctx.actions), len(ctx.holds)
    ctx.written.clear()
    step(ctx)
    handed_on = frozenset(ctx.written)
    spec = spec_of(step) or StepSpec()
    undeclared = handed_on - spec.writes - _EVERY_STEP
    if undeclared:
        raise UndeclaredHandOff(f"step {name} wrote {', '.join(sorted(undeclared))} without declaring it")
    return StepResult(name, tuple(ctx.actions[actions_before:]), tuple(ctx.holds[holds_before:]), handed_on)


def run_pipeline(ctx: PlanContext, pipeline: Sequence[tuple[str, Step]]) -> tuple[StepResult, ...]:
    """Run the steps in order on `ctx`: each one's result."""
    return tuple(run_step(ctx, name, step) for name, step in pipeline)


def handoff_table(pipeline: Sequence[tuple[str, Step]]) -> str:
    """The hand-offs between the steps of `pipeline`, as a Markdown table generated from their declarations."""
    specs = [(name, spec_of(step) or StepSpec()) for name, step in pipeline]
    rows = ["| written by | what | read by |", "| --- | --- | --- |"]
    for handoff in HANDOFFS:
        readers = [name for name, spec in specs if handoff.name in spec.reads]
        writers = ["every step (`add_action`)"] if handoff.every_step else [
            name for name, spec in specs if handoff.name in spec.writes]
        if writers and readers:
            rows.append(f"| {', '.join(writers)} | `{handoff.name}`: {handoff.what} | {', '.join(readers)} |")
    return "\n".join(rows)


__all__ = ["Step", "StepResult", "StepSpec", "UndeclaredHandOff", "declare", "handoff_table", "run_pipeline",
           "run_step", "spec_of"]
