"""The ``burst simulate --strategy`` option: its choices and help read the simulator's strategy registry.

Both are read when click needs them (parsing, ``--help``), not when the CLI is imported: the CLI starts without
loading the simulator, and a strategy registered after import (a module of its own) is offered like the others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


class StrategyChoice(click.Choice[str]):
    """Decides which names ``--strategy`` accepts: those `burst.sim.registry.offered_names` gives at the time."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        """The registered strategies the CLI offers: the default ones, then those run on request."""
        from burst.sim.registry import offered_names

        return offered_names()

    @choices.setter
    def choices(self, _value: object) -> None:
        """Ignored: the choices are the registry's."""


def strategy_help() -> str:
    """The option's help: which strategies a run that names none leaves out, each with its description."""
    from burst.sim.registry import on_request

    left_out = "; ".join(f"{s.name}, {s.description}" for s in on_request())
    return f"Strategy to simulate (repeatable; default: all{f' but {left_out}' if left_out else ''})."


class StrategyOption(click.Option):
    """An option whose help text is `strategy_help`'s, read when the help is shown."""

    @property
    def help(self) -> str:
        """The help text, from the registry."""
        return strategy_help()

    @help.setter
    def help(self, _value: object) -> None:
        """Ignored: the help is the registry's."""


def strategy_option() -> Callable[[F], F]:
    """The repeatable ``--strategy`` option, stored as ``strategies`` (an empty tuple: run the default set)."""
    return click.option("--strategy", "strategies", multiple=True, cls=StrategyOption, type=StrategyChoice())


__all__ = ["StrategyChoice", "StrategyOption", "strategy_help", "strategy_option"]
