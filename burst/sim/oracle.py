"""The `oracle` bound: what the trace costs if every job starts at submission with zero boot latency.

Derivation. Let D(t) be the GPUs demanded at t with every job running from its
submission for its duration, S the steady tier's GPUs (paid all the time at
the on-prem rate p_s per GPU-hour over the run [start, end)), and p_spot <=
p_od the cheapest cloud prices per GPU-hour for the jobs' GPU model. Any
strategy that starts every job at submission must hold D(t) GPUs at every t;
at most S of them are on-prem, so at least max(0, D(t) - S) are in the cloud,
and a cloud GPU-hour costs at least p_spot for spot-eligible work and p_od for
the rest. The oracle puts the overflow on the cloud GPU-second by GPU-second,
fault-tolerant (spot-eligible) jobs last onto the steady tier, so they are the
ones that overflow first; with no interruptions, no boot, no idle and no
whole-node rounding:

    cost = S · p_s · T + ∫ [ min(E(t), X(t)) · p_spot + (X(t) - min(E(t), X(t))) · p_od ] dt

where X(t) = max(0, D(t) - S) and E(t) is the spot-eligible part of D(t).
No strategy that starts every job on submission can pay less; strategies that
let jobs queue can, and pay in wait, which is why the report puts cost beside
wait.

Every job counts whole: a job still running at the run's end T runs on, and
past T the GPUs work holds are paid per GPU, the steady tier's at its own price
per GPU (min(D(t), S) · p_s / GPU), the overflow as above, as a simulated run
is charged the remainder of what still runs at its end
(`burst.sim.engine.remainders`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from burst.model import Job, Policy, Tier
from burst.planner.placement import spot_eligible
from burst.sim.engine import StrategyResult, reference_prices
from burst.sim.setup import SimSetup

UNKNOWN_GPU_MODEL = "A100"


def oracle(setup: SimSetup, jobs: Sequence[Job], *, start: datetime, end: datetime) -> StrategyResult:
    """The bound above for `jobs` submitted in [start, end), billed over [start, end)."""
    steady_groups = [g for g in setup.groups if g.tier is Tier.STEADY]
    steady_gpus = setup.steady_gpus()
    steady_rate = (
        sum(setup.catalog.group_price(g) * setup.initial.get(g.id, 0) for g in steady_groups) if steady_groups else 0.0
    )
    steady_per_gpu_h = steady_rate / steady_gpus if steady_gpus else 0.0
    p_od, p_spot = reference_prices(setup)
    span_s = (end - start).total_seconds()
    policies: dict[str, Policy] = {}
    events: list[tuple[float, float, float]] = []  # (t, d_demand, d_eligible)
    used_gpu_s = 0.0
    completed = 0
    kept = [j for j in jobs if start <= j.submitted_at < end]
    for job in kept:
        t0 = (job.submitted_at - start).total_seconds()
        t1 = t0 + (job.duration_s or 0.0)
        if t1 <= t0:
            continue
        completed += 1
        policy = policies.setdefault(job.tenant, setup.policy(job.tenant))
        eligible = job.gpu_demand if spot_eligible(job, policy) else 0.0
        events.append((t0, job.gpu_demand, eligible))
        events.append((t1, -job.gpu_demand, -eligible))
        used_gpu_s += job.gpu_demand * (t1 - t0)
    events.sort(key=lambda e: e[0])
    cloud_usd = {"elastic_on_demand": 0.0, "elastic_spot": 0.0}
    cloud_gpu_s = spot_gpu_s = steady_tail_s = 0.0
    demand = eligible_now = 0.0
    last = 0.0
    i = 0
    while i < len(events):
        t = events[i][0]
        for a, b in ((last, min(t, span_s)), (max(last, span_s), t)):  # within the run, then past its end
            dt = b - a
            if dt <= 0:
                continue
            overflow = max(0.0, demand - steady_gpus)
            on_spot = min(max(0.0, eligible_now), overflow)
            cloud_usd["elastic_spot"] += on_spot * dt / 3600.0 * p_spot
            cloud_usd["elastic_on_demand"] += (overflow - on_spot) * dt / 3600.0 * p_od
            cloud_gpu_s += overflow * dt
            spot_gpu_s += on_spot * dt
            if a >= span_s:
                steady_tail_s += (demand - overflow) * dt
        while i < len(events) and events[i][0] == t:
            demand += events[i][1]
            eligible_now += events[i][2]
            i += 1
        last = t
    steady_usd = steady_rate * span_s / 3600.0 + steady_per_gpu_h * steady_tail_s / 3600.0
    by_tier = {"steady": steady_usd, **cloud_usd, "hot_pool": 0.0}
    steady_used_s = used_gpu_s - cloud_gpu_s - steady_tail_s  # within the run, as its utilisation
    return bound_result(
        "oracle",
        by_tier,
        used_gpu_s=used_gpu_s,
        paid_gpu_s=steady_gpus * span_s + steady_tail_s + cloud_gpu_s,
        steady_used_s=steady_used_s,
        steady_gpus=steady_gpus,
        span_s=span_s,
        jobs=len(kept),
        completed=completed,
        spot_gpu_s=spot_gpu_s,
    )


def bound_result(
    name: str,
    by_tier: dict[str, float],
    *,
    used_gpu_s: float,
    paid_gpu_s: float,
    steady_used_s: float,
    steady_gpus: float,
    span_s: float,
    jobs: int,
    completed: int,
    spot_gpu_s: float,
    **extra: Any,
) -> StrategyResult:
    """A bound's figures as a strategy's: every job served at submission, nothing waits, is interrupted or lost,
    and every spot GPU-hour paid is useful."""
    return StrategyResult(
        name=name,
        cost_usd=sum(by_tier.values()),
        cost_by_tier=by_tier,
        cost_by_tenant={},
        gpu_hours_used=used_gpu_s / 3600.0,
        gpu_hours_paid=paid_gpu_s / 3600.0,
        onprem_utilization=steady_used_s / (steady_gpus * span_s) if steady_gpus and span_s else 0.0,
        wait_p50_s=0.0,
        wait_p95_s=0.0,
        wait_p99_s=0.0,
        slo_violations=0,
        interruptions=0,
        lost_gpu_hours=0.0,
        time_to_capacity_p95_s=0.0,
        jobs=jobs,
        jobs_started=jobs,
        jobs_completed=completed,
        simulated_hours=span_s / 3600.0,
        spot_gpu_hours=spot_gpu_s / 3600.0,
        goodput=1.0 if spot_gpu_s else 0.0,
        work_gpu_hours=used_gpu_s / 3600.0,
        **extra,
    )

DRAIN = timedelta(days=1)
"""How long a replay runs past its window, so work submitted late can finish."""


def run_end(jobs: Sequence[Job], start: datetime, days: float | None) -> datetime:
    """Where a replay of `jobs` from `start` ends: the window's end (default: the last submission) plus
    `DRAIN`. Every strategy and the oracle are billed over the same span [start, run_end)."""
    last_submit = max((j.submitted_at for j in jobs), default=start)
    window_end = start + timedelta(days=days) if days is not None else last_submit
    return window_end + DRAIN


__all__ = ["DRAIN", "bound_result", "oracle", "run_end"]
