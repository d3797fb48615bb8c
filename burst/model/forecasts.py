"""Demand as burst observes it and forecasts it: GPU demand series, request-rate forecasts, special events."""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime

from burst.model.base import TenantName

QUANTILES = (0.1, 0.5, 0.9, 0.99)
"""The quantiles every forecast gives, ascending."""

@dataclass(frozen=True)
class SpecialEvent:
    """A known day (or run of days) of unusual demand: a holiday, a conference deadline, a launch."""

    name: str
    start: date
    days: int = 1


ANY_MODEL = "any"
"""The GPU model of demand that names none (jobs that run on any GPU)."""

ALL_TENANTS: TenantName = "*"
"""The tenant of a pooled forecast: one series per GPU model for every tenant together."""


@dataclass(frozen=True)
class Forecast:
    """Forecast GPU demand for one series (tenant, GPU model) at future steps."""

    tenant: TenantName
    gpu_model: str
    timestamps: tuple[datetime, ...]  # ascending
    quantiles: Mapping[float, tuple[float, ...]]  # 0.1/0.5/0.9/0.99 -> one value per timestamp
    model: str = "none"
    history_s: float = math.inf  # how much history it was fitted on (forecasting sets it)
    backtest_p90_pinball: float | None = None  # the serving model's P90 pinball loss (GPUs) in the backtest that chose it
    # the serving model's P50 rises over the next step's actual changes, against none, in that backtest: below 1 its
    # rises foresee demand (forecasting.select.rise_skill); None where no backtest chose the model
    backtest_rise_skill: float | None = None

    def __post_init__(self) -> None:
        stamps = self.timestamps
        if any(later < earlier for earlier, later in zip(stamps, stamps[1:], strict=False)):
            raise ValueError(f"forecast {self.tenant}/{self.gpu_model}: timestamps must ascend")
        for q, path in self.quantiles.items():
            if len(path) != len(stamps):
                raise ValueError(f"forecast {self.tenant}/{self.gpu_model}: quantile {q} has {len(path)} values "
                                 f"for {len(stamps)} timestamps")

    def at(self, q: float, when: datetime) -> float:
        """The `q` quantile at the last step at or before `when` (0 before the first step)."""
        i = bisect.bisect_right(self.timestamps, when)
        return self.quantiles[q][i - 1] if i else 0.0

    def now_value(self, q: float, now: datetime) -> float:
        """The `q` quantile now: at the last step at or before `now`, else at the first step (0 with no steps)."""
        if not self.timestamps:
            return 0.0
        return self.at(q, now) if self.timestamps[0] <= now else self.quantiles[q][0]

    def max_over(self, q: float, start: datetime, end: datetime) -> float:
        """The largest `q` quantile over [start, end] (with no step inside it, the value at `start`, see `now_value`)."""
        first, last = self.steps_within(start, end)
        return max(self.quantiles[q][first:last], default=self.now_value(q, start))

    def steps_within(self, start: datetime, end: datetime | None = None) -> tuple[int, int]:
        """The slice [first, last) of the steps inside [start, end] (to the last step without `end`)."""
        last = len(self.timestamps) if end is None else bisect.bisect_right(self.timestamps, end)
        return bisect.bisect_left(self.timestamps, start, 0, last), last


@dataclass(frozen=True)
class RateForecast:
    """Request-rate forecast quantiles (requests/s) for one service at future instants.

    `quantiles` maps a quantile (e.g. 0.1, 0.5, 0.9, 0.99) to one value per
    instant of `at` (ascending). A value holds from its instant to the next
    one, as a series value spreads over its step. `events_included` says the
    forecaster already put the service's declared event multipliers into the
    values, so the planner does not apply them a second time.
    """

    at: tuple[datetime, ...]
    quantiles: Mapping[float, tuple[float, ...]]
    events_included: bool = False

    def __post_init__(self) -> None:
        if any(later <= earlier for earlier, later in zip(self.at, self.at[1:], strict=False)):
            raise ValueError("rate forecast: instants must strictly ascend")
        if not self.quantiles:
            raise ValueError("rate forecast: no quantile given")
        for q, path in self.quantiles.items():
            if not 0 < q < 1:
                raise ValueError(f"rate forecast: quantile {q} is not in (0, 1)")
            if len(path) != len(self.at):
                raise ValueError(f"rate forecast: quantile {q} has {len(path)} values for {len(self.at)} instants")

    def value_at(self, q: float, when: datetime) -> float:
        """The `q` quantile in force at `when`: the value of the last instant at or before it, else the first
        instant's (the forecast's nearest word on a time before it starts); 0 with no instants."""
        if not self.at:
            return 0.0
        i = bisect.bisect_right(self.at, when)
        return self.quantiles[q][i - 1 if i else 0]


# ---------------------------------------------------------------- actions


@dataclass(frozen=True)
class DemandPoint:
    """GPUs demanded (running + pending) by one tenant for one GPU model at one instant."""

    at: datetime
    tenant: TenantName
    gpu_model: str
    running_gpus: float
    pending_gpus: float

    @property
    def demand_gpus(self) -> float:
        return self.running_gpus + self.pending_gpus
