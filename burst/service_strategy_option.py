"""The ``burst simulate --service-strategy`` option's choices, read from the service strategies when click needs
them (parsing, ``--help``), so the CLI starts without loading the simulator."""

from __future__ import annotations

import click


class ServiceStrategyChoice(click.Choice[str]):
    """Decides which names ``--service-strategy`` accepts: `burst.sim.service_strategies.SERVICE_STRATEGIES`."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        """Every service strategy, in the table's order."""
        from burst.sim.service_strategies import SERVICE_STRATEGIES

        return tuple(SERVICE_STRATEGIES)

    @choices.setter
    def choices(self, _value: object) -> None:
        """Ignored: the choices are the table's."""


__all__ = ["ServiceStrategyChoice"]
