"""The simulator's strategies by name: each registered once, with what it is and how it runs.

A strategy is a `Strategy`: its name, a one-line description, whether a comparison that names no strategy runs
it (`Availability`), where parallel runs start it, and either the function that builds its simulated form
(`build`, a `burst.sim.strategies.Build`) or the bound it is computed as (`bound`: `oracle`, `floor`).
`burst simulate --strategy` offers, and runs by default, what this table says; `burst.sim.compare` accepts every
registered name; benchmarks keep the subsets they measure and check them here.

Adding a strategy is one module and one `register` call: a built-in strategy's builder goes in its own module
(or `burst.sim.strategies`) and its registration below, with the others. A module outside burst registers itself
when imported, and whatever runs in that process (a script, a test driving the CLI) then offers and runs it::

    from burst.planner import PIPELINE
    from burst.sim.registry import Availability, Strategy, StrategyRequest, StrategyRun, register

    def build(request: StrategyRequest) -> StrategyRun:
        return StrategyRun(request.name, request.setup, PIPELINE)

    register(Strategy("mine", "burst's planner, polling", build=build, availability=Availability.ON_REQUEST))

This module imports the strategies' modules and none of them imports it, so registering here adds no cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Protocol

from burst.model import Job
from burst.sim import strategies as builtin
from burst.sim.engine import StrategyResult
from burst.sim.floor import floor
from burst.sim.oracle import oracle
from burst.sim.setup import SimSetup
from burst.sim.strategies import Build, StrategyRequest, StrategyRun
from burst.sim.traces import TraceStats


class Availability(Enum):
    """When a strategy runs: by default, only when named (and offered by the CLI), or only when code names it."""

    DEFAULT = "default"
    """Run by every comparison that names no strategy; offered by `burst simulate --strategy`."""
    ON_REQUEST = "on_request"
    """Offered by `burst simulate --strategy` but run only when named (a reference such as `burst-clairvoyant`)."""
    BY_NAME = "by_name"
    """Built when a benchmark or cost what-if names it; `burst simulate` does not offer it."""


class Bound(Protocol):
    """A strategy computed from the trace rather than simulated (`burst.sim.oracle`, `burst.sim.floor`)."""

    def __call__(self, setup: SimSetup, jobs: Sequence[Job], *, start: datetime, end: datetime) -> StrategyResult: ...


@dataclass(frozen=True)
class Strategy:
    """One simulator strategy: its name, what it is in one line, when it runs, and how it is built or computed.

    `start_rank` orders parallel runs: lower starts sooner. The replays that usually take longest (10 s scans,
    deep queues) get the lowest ranks so a pool of workers finishes together; an unranked strategy (-1) starts
    before every ranked one.
    """

    name: str
    description: str
    build: Build | None = None
    bound: Bound | None = None
    availability: Availability = Availability.DEFAULT
    start_rank: int = -1

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.strip() or any(c.isspace() for c in self.name):
            raise ValueError(f"strategy name {self.name!r}: one word, no spaces")
        if not self.description.strip() or "\n" in self.description:
            raise ValueError(f"strategy {self.name}: the description is one non-empty line")
        if (self.build is None) == (self.bound is None):
            raise ValueError(f"strategy {self.name}: give exactly one of build (simulated) or bound (computed)")

    def simulated(self, setup: SimSetup, stats: TraceStats, *, fixed_pool_nodes: int = 0) -> StrategyRun:
        """This strategy's simulated form on `setup` for a trace with `stats`; a bound is a ValueError."""
        if self.build is None:
            raise ValueError(f"strategy {self.name!r} is a bound computed from the trace, not simulated")
        return self.build(StrategyRequest(self.name, setup, stats, fixed_pool_nodes))


_REGISTRY: dict[str, Strategy] = {}


def register(strategy: Strategy) -> Strategy:
    """Add `strategy` to the table, after those already there (the order reports and the CLI list them in).

    A name registered twice is an error: a second module cannot silently replace a strategy.
    """
    if strategy.name in _REGISTRY:
        raise ValueError(f"strategy {strategy.name!r} is already registered")
    _REGISTRY[strategy.name] = strategy
    return strategy


def unregister(name: str) -> None:
    """Remove the strategy `name` (tests that register their own take them out again); unknown names are an error."""
    if name not in _REGISTRY:
        raise ValueError(f"strategy {name!r} is not registered")
    del _REGISTRY[name]


def registered() -> tuple[Strategy, ...]:
    """Every registered strategy, in registration order."""
    return tuple(_REGISTRY.values())


def get(name: str) -> Strategy:
    """The strategy registered as `name`; an unknown name is a ValueError listing every registered one."""
    found = _REGISTRY.get(name)
    if found is None:
        raise ValueError(f"unknown strategy {name!r}: expected one of {', '.join(_REGISTRY)}")
    return found


def check(names: Iterable[str]) -> None:
    """Raise a ValueError naming the first of `names` that is not registered (a benchmark's subset, a request)."""
    for name in names:
        get(name)


def default_names() -> tuple[str, ...]:
    """What a comparison that names no strategy runs, in report order."""
    return tuple(s.name for s in _REGISTRY.values() if s.availability is Availability.DEFAULT)


def on_request() -> tuple[Strategy, ...]:
    """The strategies `burst simulate` offers but runs only when named."""
    return tuple(s for s in _REGISTRY.values() if s.availability is Availability.ON_REQUEST)


def offered_names() -> tuple[str, ...]:
    """The names `burst simulate --strategy` accepts: the default ones, then those run on request."""
    return (*default_names(), *(s.name for s in on_request()))


def start_order(names: Iterable[str]) -> list[str]:
    """`names` in the order parallel runs start them (by `Strategy.start_rank`, ties in the given order)."""
    return sorted(names, key=lambda n: get(n).start_rank)


def strategy_run(name: str, setup: SimSetup, stats: TraceStats, *, fixed_pool_nodes: int = 0) -> StrategyRun:
    """The simulated form of strategy `name` on `setup` for a trace with `stats` (`Strategy.simulated`)."""
    return get(name).simulated(setup, stats, fixed_pool_nodes=fixed_pool_nodes)


# burst's own strategies, in report order (the module docstring of `burst.sim.strategies` defines each)
register(Strategy("burst", "the full planner with demand forecasts, event-driven", build=builtin.build_burst,
                  start_rank=8))
register(Strategy("burst-no-forecast", "the full planner without forecasts", build=builtin.build_burst_no_forecast,
                  start_rank=9))
register(Strategy("reactive", "Cluster Autoscaler rules (10 s scans, nodes unneeded for 10 min removed)",
                  build=builtin.build_reactive, start_rank=2))
register(Strategy("reactive-hotpool", "reactive with a fixed warm pool of 10% of peak demand",
                  build=builtin.build_reactive_hotpool, start_rank=0))
register(Strategy("karpenter", "Karpenter v1 with its documented defaults", build=builtin.build_karpenter,
                  start_rank=3))
register(Strategy("karpenter-do-not-disrupt", "karpenter with every job annotated do-not-disrupt",
                  build=builtin.build_karpenter_do_not_disrupt, start_rank=4))
register(Strategy("karpenter-balanced", "karpenter with consolidationPolicy Balanced",
                  build=builtin.build_karpenter_balanced, start_rank=5))
register(Strategy("karpenter-ml", "karpenter as advised for ML: do-not-disrupt on jobs that cannot checkpoint, "
                  "grace >= checkpoint time", build=builtin.build_karpenter_ml, start_rank=6))
register(Strategy("karpenter-balanced-ml", "karpenter-balanced configured as karpenter-ml",
                  build=builtin.build_karpenter_balanced_ml, start_rank=7))
register(Strategy("static-peak", "the steady tier sized to peak demand, no cloud", build=builtin.build_static_peak,
                  start_rank=10))
register(Strategy("static-p50", "the steady tier sized to the P50 of demand, no cloud",
                  build=builtin.build_static_p50, start_rank=1))
register(Strategy("floor", "the oracle with whole nodes, one boot per cloud node and first-fit placement",
                  bound=floor, start_rank=11))
register(Strategy("oracle", "every job runs from its submission with no boot latency: the bound", bound=oracle,
                  start_rank=12))
register(Strategy("burst-no-pool", "burst with no hot pool at all", build=builtin.build_burst_no_pool,
                  availability=Availability.BY_NAME))
register(Strategy("burst-fixed-pool", "burst with a fixed pool of fixed_pool_nodes stopped on-demand nodes",
                  build=builtin.build_burst_fixed_pool, availability=Availability.BY_NAME))
register(Strategy("burst-periodic-only", "burst-no-forecast without checkpoint on notice",
                  build=builtin.build_burst_periodic_only, availability=Availability.BY_NAME))
register(Strategy("burst-victims-most-recent", "burst-no-forecast preempting the most recently started first",
                  build=builtin.build_burst_victims_most_recent, availability=Availability.BY_NAME))
register(Strategy("burst-victims-random", "burst-no-forecast preempting in seeded random order",
                  build=builtin.build_burst_victims_random, availability=Availability.BY_NAME))
register(Strategy("burst-clairvoyant", "a reference run on request: burst planning with the trace's true future "
                  "demand in place of forecasts", build=builtin.build_burst_clairvoyant,
                  availability=Availability.ON_REQUEST))

__all__ = [
    "Availability",
    "Bound",
    "Build",
    "Strategy",
    "StrategyRequest",
    "StrategyRun",
    "check",
    "default_names",
    "get",
    "offered_names",
    "on_request",
    "register",
    "registered",
    "start_order",
    "strategy_run",
    "unregister",
]
