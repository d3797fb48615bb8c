"""One replay of a trace under several strategies: what `burst simulate` and the benchmarks run."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from burst.model import Job
from burst.sim import registry
from burst.sim.engine import StrategyResult, cost_gap, reference_prices, simulate
from burst.sim.floor import floor
from burst.sim.oracle import oracle, run_end
from burst.sim.setup import SimSetup, default_setup, with_fault_tolerance
from burst.sim.traces import Trace, TraceError, TraceStats

Progress = Callable[[str, float], None]
"""Called with (strategy, fraction of its simulated span done)."""


@dataclass
class Comparison:
    """The trace's demand figures and every strategy's result."""

    trace: Trace
    setup: SimSetup
    start: datetime
    end: datetime
    results: dict[str, StrategyResult]
    wall_s: float

    def to_json(self) -> dict[str, Any]:
        """The `burst simulate --json` object (keys in `burst.sim.engine`'s docstring)."""
        stats = self.trace.stats()
        return {
            "trace": {
                "path": str(self.trace.path),
                "format": self.trace.format,
                "jobs": stats.jobs,
                "gpu_hours": round(stats.gpu_hours, 4),
                "peak_gpus": stats.peak_gpus,
                "p50_gpus": stats.p50_gpus,
                "tenants": list(self.trace.tenants),
                "bad_rows": len(self.trace.bad_rows),
                "start": self.start.isoformat(),
                "end": self.end.isoformat(),
            },
            "assumptions": list(self.setup.assumptions),
            "strategies": {name: r.to_json() for name, r in self.results.items()},
            "wall_s": round(self.wall_s, 3),
        }


def compare(
    trace: Trace,
    strategies: Sequence[str],
    *,
    setup: SimSetup | None = None,
    seed: int = 0,
    days: float | None = None,
    on_progress: Progress | None = None,
    keep_timeline: bool = False,
    workers: int = 1,
    fixed_pool_nodes: int = 0,
) -> Comparison:
    """Replay `trace` (already windowed) under each strategy on `setup` (default: sized from the trace).

    With `workers` > 1 the strategies run in that many processes at once (each
    is independent and seeded, so the results are the same); progress is then
    reported per finished strategy.
    """
    registry.check(strategies)
    if not trace.jobs:
        raise TraceError(f"{trace.path}: no jobs in the chosen window")
    wall0 = time.perf_counter()
    stats = trace.stats()
    setup = setup or default_setup(stats)
    start = trace.jobs[0].submitted_at
    end = run_end(trace.jobs, start, days)
    jobs = with_fault_tolerance(trace.jobs, setup, seed)
    span = max(1.0, (end - start).total_seconds())
    results: dict[str, StrategyResult] = {}
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {
                name: pool.submit(_simulate_one, registry.get(name), setup, stats, jobs, start, end, seed, keep_timeline,
                                  trace.prior, fixed_pool_nodes)
                for name in registry.start_order(strategies)
            }
            for name in strategies:
                results[name] = futures[name].result()
                if on_progress:
                    on_progress(name, 1.0)
        _add_cost_gaps(results, setup, jobs, start, end)
        return Comparison(trace, setup, start, end, results, time.perf_counter() - wall0)
    for name in strategies:
        strategy = registry.get(name)
        if strategy.bound is not None:
            results[name] = strategy.bound(setup, jobs, start=start, end=end)
            if on_progress:
                on_progress(name, 1.0)
            continue

        def tick(now: datetime, name: str = name) -> None:
            if on_progress:
                on_progress(name, min(1.0, (now - start).total_seconds() / span))

        run = strategy.simulated(setup, stats, fixed_pool_nodes=fixed_pool_nodes)
        results[name] = simulate(run, jobs, start=start, end=end, seed=seed, on_progress=tick,
                                 keep_timeline=keep_timeline, prior=trace.prior)
    _add_cost_gaps(results, setup, jobs, start, end)
    return Comparison(trace, setup, start, end, results, time.perf_counter() - wall0)


def _add_cost_gaps(
    results: dict[str, StrategyResult], setup: SimSetup, jobs: Sequence[Job], start: datetime, end: datetime
) -> None:
    """Give every result its cost gap over the oracle (`burst.sim.engine.cost_gap`), against this run's bounds."""
    bound = results.get("oracle") or oracle(setup, jobs, start=start, end=end)
    base = results.get("floor") or floor(setup, jobs, start=start, end=end)
    assert base.spend is not None
    prices = reference_prices(setup)
    for result in results.values():
        result.cost_gap = cost_gap(result.cost_usd, result.spend, oracle_usd=bound.cost_usd, floor_usd=base.cost_usd,
                                   floor=base.spend, prices=prices)


def _simulate_one(
    strategy: registry.Strategy,
    setup: SimSetup,
    stats: TraceStats,
    jobs: Sequence[Job],
    start: datetime,
    end: datetime,
    seed: int,
    keep_timeline: bool,
    prior: Sequence[Job],
    fixed_pool_nodes: int,
) -> StrategyResult:
    """One strategy's result (run in a worker process, which is handed the strategy itself: a strategy registered
    at run time need not be registered there)."""
    if strategy.bound is not None:
        return strategy.bound(setup, jobs, start=start, end=end)
    return simulate(strategy.simulated(setup, stats, fixed_pool_nodes=fixed_pool_nodes), jobs, start=start, end=end,
                    seed=seed, keep_timeline=keep_timeline, prior=prior)


def ratio(a: float, b: float) -> float:
    """a / b, or NaN when b is 0 (printed as n/a)."""
    return a / b if b else math.nan


__all__ = ["Comparison", "compare", "ratio"]
