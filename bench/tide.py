"""Benchmark: the daily tide, an inference service and batch work on one on-prem steady tier.

    python bench/tide.py            # 14 days: docs/benchmarks/tide.md
    python bench/tide.py --small    # 1 day (CI keeps the script from rotting); writes nothing

Batch: `itp-cluster02.csv`'s window (14 days from its first job) under the
simulator's default set-up and fault-tolerance draw (`burst.sim.setup`). The
service: nyc-taxi under the service replay's default mapping
(`burst.sim.service_setup`), scaled so that its history's median rate needs
`SERVICE_P50` replicas, over the 14 days of its window aligned with the batch
window by weekday and hour (a whole number of weeks apart). burst's service
planner replays the service alone; each replica it runs becomes a job of the
service's tenant, which outranks the batch tenants (`burst.sim.tide`), and
burst replays both on one on-prem tier sized at the P50 of their summed demand
(the batch jobs' demand from submission, the service's need at its target).
The split reference replays the batch alone on its share of those GPUs, in
proportion to the two P50s (rounded up to whole nodes, in the batch's favour).

Batch cost in the tide: the run's cost less the service's, where the service
pays the elastic capacity its replicas held, all its own elastic group was
billed, and its share of the on-prem tier (in proportion to the P50s, as in
the split); the batch groups' idle capacity and hot pools are all charged to
the batch. Batch cost in the split: the batch run's
elastic and hot-pool cost plus the same on-prem share.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from benchdoc import write_doc

from burst.model import Job, Policy, SpotPolicy
from burst.settings import data_dir
from burst.sim import registry
from burst.sim.engine import StrategyResult, simulate
from burst.sim.service_engine import metrics, replay, slo_minutes_missed, unserved
from burst.sim.service_forecasts import forecast_track
from burst.sim.service_setup import ServiceSetup, default_service
from burst.sim.service_strategies import Context, initial_replicas, service_strategy
from burst.sim.service_traces import TICK_S, RateSeries, load_rate_series
from burst.sim.setup import GPUS_PER_NODE, SimSetup, default_setup, with_fault_tolerance
from burst.sim.tide import (
    RecordedTargets,
    aligned_start,
    replica_jobs,
    replica_lifetimes,
    serving_from_starts,
)
from burst.sim.traces import Trace, concurrency, load_trace

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "tide.md"
BATCH = "itp-cluster02.csv"
SERIES = "nyc-taxi"
SERVICE_P50 = 28
SERVICE_TENANT = "inference"
DAYS = 14.0
SERVICE_EARLIEST = datetime(2014, 10, 20, tzinfo=UTC)
"""The nyc-taxi window starts here (earlier data is history for the forecasts)."""
SERVICE_LATEST_END = datetime(2015, 1, 5, tzinfo=UTC)
UTILISATION_TARGET = 0.70
SERVICE_REGION, SERVICE_INSTANCE_TYPE, SERVICE_GROUP = "us-central1", "a2-highgpu-1g", "cloud-service"
BATCH_REGION = "us-east-1"
BATCH_LOOP = timedelta(minutes=1)
"""The batch replay's loop interval: replicas serving at the service window's start are submitted this much
before their model load, so they serve from its first tick in every replay."""


@dataclass(frozen=True)
class ServiceRun:
    """The service replayed alone: its mapping, its window on the batch clock, its replica jobs and figures."""

    setup: ServiceSetup
    shift: timedelta
    jobs: list[Job]
    unserved_share: float
    slo_share: float
    cost_usd: float


def service_window(series: RateSeries, batch_start: datetime, days: float,
                   lead: timedelta) -> tuple[RateSeries, timedelta]:
    """The series' window of `days` aligned with `batch_start` by weekday and hour, from the first step boundary
    `lead` or more after it (so replicas serving at its start can be started on the batch clock), and the shift
    (whole weeks) that puts it on the batch clock."""
    aligned = aligned_start(batch_start, SERVICE_EARLIEST, SERVICE_LATEST_END - timedelta(days=days + 1))
    first = math.ceil((aligned + lead - series.origin).total_seconds() / series.step_s - 1e-9)
    steps = math.ceil(days * 86400 / series.step_s)
    window = dataclasses.replace(series, start=first, end=first + steps)
    return window, batch_start - aligned


def run_service(batch_start: datetime, days: float) -> ServiceRun:
    """burst's service planner on the aligned nyc-taxi window, alone; its replicas as jobs on the batch clock."""
    loaded = load_rate_series(data_dir() / "services" / f"{SERIES}.csv")
    load = timedelta(seconds=default_service(loaded).service.replica_start_s)
    series, shift = service_window(loaded, batch_start, days, load + BATCH_LOOP)
    setup = default_service(series, p50_replicas=SERVICE_P50)
    recorder = RecordedTargets(service_strategy("burst").build(setup, Context(forecast_track(series, setup.service))))
    initial = initial_replicas(setup)
    run = replay(setup, recorder, initial=initial)
    alone = metrics(setup, run)
    lifetimes = replica_lifetimes(initial, recorder.decisions, series.window_start, series.window_end,
                                  initial_since=series.window_start - load - BATCH_LOOP)
    jobs = replica_jobs(lifetimes, tenant=SERVICE_TENANT, service=SERIES, gpus=setup.service.gpus_per_replica,
                        gpu_model=setup.service.gpu_model, shift=shift)
    return ServiceRun(setup, shift, jobs, alone.unserved_request_share, alone.slo_minutes_missed_share, alone.cost_usd)


def summed_p50(batch: list[Job], service: ServiceRun, start: datetime, days: float) -> float:
    """P50 of the batch jobs' demand (each from submission for its duration) plus the service's need at its
    target per tick, time-weighted over the window (demand past its end is cut there)."""
    fine = service.setup.series.fine_counts()
    need = service.setup.need(fine.sum(axis=1) / TICK_S).astype(float)
    t0 = (service.setup.series.window_start + service.shift - start).total_seconds()
    ticks = t0 + TICK_S * np.arange(len(need))
    starts = np.concatenate([[(j.submitted_at - start).total_seconds() for j in batch], ticks])
    ends = np.concatenate([[(j.submitted_at - start).total_seconds() + (j.duration_s or 0.0) for j in batch],
                           ticks + TICK_S])
    demand = np.concatenate([[j.gpu_demand for j in batch], need])
    horizon = days * 86400.0
    keep = starts < horizon
    return concurrency(starts[keep], np.minimum(ends[keep], horizon), demand[keep])[1]


def with_onprem(setup: SimSetup, nodes: int, service_nodes: int = 0) -> SimSetup:
    """`setup` with its on-prem group at `nodes` nodes and, for the service's replicas past the on-prem tier, an
    elastic group of up to `service_nodes` single-A100 nodes as the service replay maps a replica (GCP
    a2-highgpu-1g in us-central1, on demand; none when 0): the service's tenant may use that region's elastic
    groups only, the batch tenants only the set-up's own (us-east-1)."""
    groups = [dataclasses.replace(g, min_size=nodes, max_size=nodes) if g.id == "onprem" else g
              for g in setup.groups]
    if service_nodes:
        od = next(g for g in setup.groups if g.id == "cloud-od")
        shape = dataclasses.replace(od.shape, gpus_per_node=1)
        groups.append(dataclasses.replace(od, id=SERVICE_GROUP, region=SERVICE_REGION, shape=shape,
                                          instance_type=SERVICE_INSTANCE_TYPE, max_size=service_nodes))
    initial = {**setup.initial, "onprem": nodes, **({SERVICE_GROUP: 0} if service_nodes else {})}
    batch_policy = dataclasses.replace(setup.policy("_default"), allowed_regions=(BATCH_REGION,))
    service_policy = Policy(tenant=SERVICE_TENANT, priority=1, queue_wait_slo_s=60.0, spot=SpotPolicy(allowed=False),
                            allowed_regions=(SERVICE_REGION,))
    return dataclasses.replace(setup, groups=tuple(groups), initial=initial, default_policy=batch_policy,
                               policies={**setup.policies, SERVICE_TENANT: service_policy})


def replay_burst(trace: Trace, setup: SimSetup, jobs: list[Job], start: datetime, end: datetime) -> StrategyResult:
    """burst on `setup` over `jobs`, keeping its cost ledger (the batch trace's earlier jobs as forecast history)."""
    run = registry.get("burst").simulated(setup, trace.stats())
    return simulate(run, jobs, start=start, end=end, prior=trace.prior, keep_ledger=True)


def service_figures(result: StrategyResult, jobs: list[Job], service: ServiceRun, start: datetime,
                    end: datetime) -> tuple[float, float]:
    """The service's unserved request share and SLO minutes missed in a replay of `jobs` (the replica jobs
    serving once started and loaded, `serving_from_starts`)."""
    ids = {j.id for j in service.jobs}
    ordered = sorted((j for j in jobs if start <= j.submitted_at < end),
                     key=lambda j: (j.submitted_at, j.id))  # the replay's job order (`StrategyResult.waits_s`)
    index = [i for i, j in enumerate(ordered) if j.id in ids]
    fine = service.setup.series.fine_counts()
    serving = serving_from_starts([ordered[i] for i in index], [result.waits_s[i] for i in index],
                                  load_s=service.setup.service.replica_start_s,
                                  start=service.setup.series.window_start + service.shift, ticks=len(fine))
    cap = service.setup.capacity_rps
    missed, minutes = slo_minutes_missed(fine, serving, cap, service.setup.service.target_utilisation)
    return float(unserved(fine, serving, cap).sum() / fine.sum()), missed / minutes if minutes else 0.0


@dataclass(frozen=True)
class Tide:
    """The figures the targets read."""

    onprem_nodes: int
    batch_nodes_split: int
    service_nodes_split: int
    batch_p50: float
    summed_p50: float
    utilisation: float
    utilisation_split: float
    unserved_tide: float
    unserved_split: float
    slo_tide: float
    slo_split: float
    batch_cost_tide: float
    batch_cost_split: float
    service_cost_tide: float
    service_cost_split: float
    service: ServiceRun
    immovable_stopped: int
    replicas_onprem_share: float
    evictions: int


def measure(days: float) -> Tide:
    """Replay the tide and the split reference (module doc) and compute the figures."""
    trace = load_trace(data_dir() / "traces" / BATCH).window(None, days=days)
    base = default_setup(trace.stats())
    batch = with_fault_tolerance(trace.jobs, base, 0)
    start = batch[0].submitted_at
    end = start + timedelta(days=days)
    service = run_service(start, days)
    p50 = summed_p50(batch, service, start, days)
    batch_p50 = trace.stats().p50_gpus
    nodes = max(1, math.ceil(p50 / GPUS_PER_NODE))
    share = batch_p50 / (batch_p50 + SERVICE_P50)
    batch_nodes, service_nodes = max(1, math.ceil(nodes * share)), max(1, math.ceil(nodes * (1 - share)))
    extra = _peak(service.jobs)
    both = [*batch, *service.jobs]
    tide = replay_burst(trace, with_onprem(base, nodes, extra), both, start, end)
    batch_split = replay_burst(trace, with_onprem(base, batch_nodes), batch, start, end)
    service_split = replay_burst(trace, with_onprem(base, service_nodes, extra), service.jobs, start, end)
    steady = tide.cost_by_tier["steady"]
    service_cost = service_elastic(tide) + steady * (1 - share)
    split_cost = service_split.cost_usd - service_split.cost_by_tier["steady"] + steady * (1 - share)
    unserved_tide, slo_tide = service_figures(tide, both, service, start, end)
    unserved_split, slo_split = service_figures(service_split, service.jobs, service, start, end)
    return Tide(nodes, batch_nodes, service_nodes, batch_p50, p50, tide.onprem_utilization,
                batch_split.onprem_utilization, unserved_tide, unserved_split, slo_tide, slo_split,
                tide.cost_usd - service_cost,
                batch_split.cost_usd - batch_split.cost_by_tier["steady"] + steady * share,
                service_cost, split_cost, service, tide.immovable_stopped, _onprem_share(tide), tide.evictions)


def service_elastic(result: StrategyResult) -> float:
    """What the service's replicas cost off the steady tier: the elastic capacity they held, and everything its own
    elastic group was billed (booting and idle nodes included)."""
    return sum(e.usd for e in result.ledger
               if e.line != "steady" and (e.tenant == SERVICE_TENANT or e.group_id == SERVICE_GROUP))


def _peak(jobs: list[Job]) -> int:
    """Most replica jobs wanted at once."""
    events = sorted([(j.submitted_at, 1) for j in jobs]
                    + [(j.submitted_at + timedelta(seconds=j.duration_s or 0.0), -1) for j in jobs])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


def _onprem_share(result: StrategyResult) -> float:
    """The share of the service's GPU-hours the ledger charged to the steady tier."""
    rows = [e for e in result.ledger if e.tenant == SERVICE_TENANT]
    total = sum(e.gpu_hours for e in rows)
    return sum(e.gpu_hours for e in rows if e.line == "steady") / total if total else 0.0


def report(t: Tide, days: float, wall_s: float) -> list[str]:
    """The figures and the targets, as Markdown lines."""
    checks = [
        ("on-prem GPU utilisation >= 70%", t.utilisation >= UTILISATION_TARGET,
         f"{t.utilisation:.1%} (batch alone on its share: {t.utilisation_split:.1%})"),
        ("the service's unserved share no worse than alone", t.unserved_tide <= t.unserved_split + 1e-12,
         f"{t.unserved_tide:.4%} vs {t.unserved_split:.4%} alone on its share (SLO minutes missed "
         f"{t.slo_tide:.2%} vs {t.slo_split:.2%})"),
        ("batch cost no higher than with the on-prem GPUs split", t.batch_cost_tide <= t.batch_cost_split + 1e-6,
         f"${t.batch_cost_tide:,.0f} vs ${t.batch_cost_split:,.0f} (x{t.batch_cost_tide / t.batch_cost_split:.3f})"),
        ("0 jobs that cannot move stopped", t.immovable_stopped == 0, f"{t.immovable_stopped}"),
    ]
    return [
        f"{days:g} days. On-prem tier: {t.onprem_nodes} nodes x {GPUS_PER_NODE} GPUs, the P50 of the summed demand "
        f"({t.summed_p50:g} GPUs; the batch's own P50 is {t.batch_p50:g}, the service's {SERVICE_P50} replicas). "
        f"Split reference: the batch alone on {t.batch_nodes_split} nodes, the service alone on "
        f"{t.service_nodes_split}. The service ran {len(t.service.jobs):,} replica jobs; "
        f"{t.replicas_onprem_share:.0%} of its GPU-hours were on-prem in the tide; {t.evictions:,} evictions in all. "
        f"The service's cost (its elastic capacity and its on-prem share): ${t.service_cost_tide:,.0f} in the tide, "
        f"${t.service_cost_split:,.0f} alone on its share. Replayed alone on the cloud by the service replay: "
        f"unserved {t.service.unserved_share:.4%}, SLO minutes missed {t.service.slo_share:.2%}, "
        f"${t.service.cost_usd:,.0f}.", "",
        "| target | holds | figure |", "|---|---|---|",
        *[f"| {name} | {'**holds**' if ok else '**does not hold**'} | {words} |" for name, ok, words in checks],
        "", f"Whole run: {wall_s / 60:.1f} min.", ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="one day; writes nothing")
    args = parser.parse_args()
    days = 1.0 if args.small else DAYS
    t0 = time.perf_counter()
    lines = report(measure(days), days, time.perf_counter() - t0)
    print("\n".join(lines))
    if not args.small:
        write_doc(DOC, "tide.py", "The daily tide: a service and batch on one on-prem tier",
                  (__doc__ or "").split("\n\n", 2)[2].replace("\n", " "), lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
