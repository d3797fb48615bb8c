"""A projection's simulations: every (option, demand path) pair run in worker processes, and what is kept of each.

The pairs are independent, so they run in a process pool. What every pair
shares (the set-up, the jobs the in-run forecaster takes its history from,
the job mix, the demand paths) goes to each worker once, when it starts
(`Batch`); a pair is then two small values, the option's name and the
path's index. The worker draws the path's jobs itself (`demand_jobs`, seeded
per path: the same jobs whichever worker draws them), simulates, and sends
back the run's result without its cost ledger rows (a month of ten busy
tenants is about a million rows a run, half a GB in memory: fifty of them do
not fit in most machines) but with what the projection reads from them
(`RunSpend`): the USD per cost line in each day of the horizon (`per_bin`)
and when each tenant's spend first passes its hourly or monthly budget (`breaches`). Pairs
are submitted largest path first (by its GPU-hours), so the runs left when
the pool drains are short ones. None of this changes a result: each pair's
run is a pure function of the batch, the name and the index.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from burst.catalog import COST_LINES
from burst.model import Budget, Job
from burst.projection.arrivals import JobTemplate, synthetic_jobs
from burst.projection.budget import Breach, breaches
from burst.projection.whatif import WhatIf, run_for
from burst.sim.engine import StrategyResult, simulate
from burst.sim.setup import SimSetup, with_fault_tolerance
from burst.sim.strategies import StrategyRun
from burst.sim.traces import TraceStats
from burst.state import CostEntry

Done = Callable[[str, int], None]
"""Called with (option, index of the path whose run just finished)."""


@dataclass(frozen=True)
class RunSpend:
    """What a projection keeps of one run's cost ledger."""

    bins: dict[str, tuple[float, ...]]  # USD per cost line in each bin of the horizon (`per_bin`)
    exceeds_at: dict[str, Breach | None]  # per tenant with a budget: when its spend first passes one (`breaches`)


@dataclass(frozen=True)
class Batch:
    """Everything the runs of one projection share; each run is (option name, path index) of it."""

    strategy: str
    setup: SimSetup
    stats: TraceStats
    options: Mapping[str, WhatIf | None]  # the baseline (None) and each what-if, by name
    demand: tuple[tuple[float, ...], ...]  # the sampled demand paths, GPUs per step
    step_s: float
    start: datetime
    horizon_s: float
    mix: tuple[JobTemplate, ...]
    seed: int
    prior: tuple[Job, ...]  # jobs before `start`: the in-run forecaster's history
    month_to_date: Mapping[str, float] = field(default_factory=dict)
    replicas: tuple[tuple[Job, ...], ...] = ()  # per path, the services' replica jobs (`burst.projection.services`)

    @property
    def end(self) -> datetime:
        return self.start + timedelta(seconds=self.horizon_s)

    def budgets(self) -> dict[str, Budget]:
        """The budgets (hourly and monthly) of every tenant a run can charge (the mix's) and every tenant with a
        policy."""
        tenants = {t.tenant for t in self.mix} | set(self.setup.policies)
        return {t: self.setup.policy(t).budget for t in sorted(tenants)}


def demand_jobs(path: Sequence[float], step_s: float, start: datetime, mix: Sequence[JobTemplate], setup: SimSetup,
                seed: int, *, prefix: str = "proj") -> list[Job]:
    """The synthetic jobs of one demand path from `start`, fault tolerance marked by `setup`.

    The draw is seeded by (`seed`, `prefix`) and job ids carry `prefix`:
    paths drawn under one prefix share one stream, so the n-th job of a
    higher path is the n-th of a lower one (same tenant, size, duration and
    fault tolerance) and a path above another at every step owes at least its
    jobs, tenant by tenant; under different prefixes they are independent
    draws of which jobs realise the demand and which of them may move.
    """
    jobs = synthetic_jobs(start, step_s, list(path), mix, seed=seed, prefix=prefix)
    return with_fault_tolerance(jobs, setup, seed)


def per_bin(ledger: Sequence[CostEntry], start: datetime, horizon_s: float) -> tuple[list[datetime], dict[str, list[float]]]:
    """The ledger's USD per cost line in each day (each hour, under 2 days) of the horizon from `start`.

    A ledger row is written at a tick and bills the time since the tick before
    it (the previous distinct `at`, or `start` for the first). The simulator
    skips quiet ticks, so one row can span days: its USD is spread over the
    bins that span covers, in proportion to the time in each, rather than
    landing whole in the bin of the tick that wrote it.
    """
    step = bin_s(horizon_s)
    starts = bin_starts(start, horizon_s)
    n = len(starts)
    out: dict[str, list[float]] = defaultdict(lambda: [0.0] * n)
    ticks = sorted({row.at for row in ledger})
    since = dict(zip(ticks, [start, *ticks], strict=False))  # each tick's previous one (none in an empty ledger)
    for row in ledger:
        hi = (row.at - start).total_seconds()
        lo = min(hi, max(0.0, (since[row.at] - start).total_seconds()))
        bins = out[row.line]
        if hi <= lo:
            bins[min(n - 1, max(0, int(hi // step)))] += row.usd
            continue
        for k in range(max(0, int(lo // step)), min(n - 1, int(hi // step)) + 1):
            left, right = max(lo, k * step), hi if k == n - 1 else min(hi, (k + 1) * step)
            if right > left:
                bins[k] += row.usd * (right - left) / (hi - lo)
    return starts, {line: out[line] for line in COST_LINES}


def bin_s(horizon_s: float) -> float:
    """The width of `per_bin`'s bins: a day, or an hour for a horizon under 2 days."""
    return 86400.0 if horizon_s >= 2 * 86400 else 3600.0


def bin_starts(start: datetime, horizon_s: float) -> list[datetime]:
    """Where each of `per_bin`'s bins starts (the last one may run past the horizon's end)."""
    step = bin_s(horizon_s)
    return [start + timedelta(seconds=step * k) for k in range(max(1, int(-(-horizon_s // step))))]


def spend_of(ledger: Sequence[CostEntry], batch: Batch) -> RunSpend:
    """What the projection keeps of a run's `ledger` (module doc)."""
    _, bins = per_bin(ledger, batch.start, batch.horizon_s)
    exceeds = breaches(ledger, batch.budgets(), start=batch.start, month_to_date=batch.month_to_date)
    return RunSpend({line: tuple(v) for line, v in bins.items()}, exceeds)


class Runner:
    """Runs pairs of one batch, building each option's strategy run once and keeping the last path's jobs for the
    next option on it (pairs come path by path; a month's path is tens of thousands of jobs, so no more)."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self._jobs: tuple[int, list[Job]] | None = None
        self._runs: dict[str, StrategyRun] = {}

    def jobs(self, index: int) -> list[Job]:
        """The synthetic jobs of demand path `index` (`demand_jobs`), then its services' replica jobs."""
        if self._jobs is None or self._jobs[0] != index:
            b = self.batch
            jobs = demand_jobs(b.demand[index], b.step_s, b.start, b.mix, b.setup, b.seed, prefix=f"proj{index}")
            self._jobs = index, [*jobs, *(b.replicas[index] if b.replicas else ())]
        return self._jobs[1]

    def __call__(self, name: str, index: int) -> tuple[StrategyResult, RunSpend]:
        """The run of option `name` on demand path `index`, its ledger rows replaced by what is kept of them."""
        b = self.batch
        run = self._runs.get(name)
        if run is None:
            run = self._runs[name] = run_for(b.strategy, b.setup, b.stats, b.options[name])
        result = simulate(run, self.jobs(index), start=b.start, end=b.end, seed=b.seed, prior=b.prior, keep_ledger=True)
        return replace(result, ledger=[]), spend_of(result.ledger, b)


_RUNNER: Runner | None = None  # a worker process's runner, set when the pool starts it


def _start_worker(batch: Batch) -> None:
    global _RUNNER
    _RUNNER = Runner(batch)


def _in_worker(name: str, index: int) -> tuple[StrategyResult, RunSpend]:
    assert _RUNNER is not None, "a worker runs pairs only after _start_worker"
    return _RUNNER(name, index)


def run_all(batch: Batch, *, workers: int = 1, done: Done | None = None) -> dict[tuple[str, int], tuple[StrategyResult, RunSpend]]:
    """Every option's run on every demand path, by (option, path index); `workers` > 1 runs them in that many
    processes. The results do not depend on `workers` or on the order the runs finish in."""
    largest_first = sorted(range(len(batch.demand)), key=lambda i: -sum(batch.demand[i]))
    pairs = [(name, i) for i in largest_first for name in batch.options]
    results: dict[tuple[str, int], tuple[StrategyResult, RunSpend]] = {}
    if workers > 1 and len(pairs) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(pairs)), initializer=_start_worker,
                                 initargs=(batch,)) as pool:
            futures = {pool.submit(_in_worker, name, i): (name, i) for name, i in pairs}
            for future in as_completed(futures):
                key = futures[future]
                results[key] = future.result()
                if done is not None:
                    done(*key)
    else:
        runner = Runner(batch)
        for key in pairs:
            results[key] = runner(*key)
            if done is not None:
                done(*key)
    return results


__all__ = ["Batch", "RunSpend", "Runner", "bin_s", "bin_starts", "demand_jobs", "per_bin", "run_all", "spend_of"]
