"""The daily tide: an inference service and batch work sharing one on-prem steady tier in one replay.

A service's replicas enter the batch replay as jobs of the service's tenant
(`replica_jobs`): one job per replica, 1 replica = `gpus_per_replica` GPUs,
not fault-tolerant (a replica that stops drops requests, it never resumes),
submitted when burst's service planner (`plan_service`, replayed alone on the
series) starts the replica and running until the planner lets it go. The
tenant outranks the batch tenants, so burst's own pipeline gives the tide its
rules and nothing is special-cased for it:

- replicas are placed first (fair order, highest tenant priority first), on
  the steady tier when it has room;
- when it has none, placement moves fault-tolerant batch off it by
  checkpoint-then-evict (`burst.planner.make_room`), and work that cannot move
  is never stopped for a replica: the replica bursts to the elastic tier;
- batch refills the GPUs a replica releases when the rate falls.

`serving_from_starts` turns the replay's replica start times back into ready
replicas per service tick (a replica serves once its model has loaded), so
the service's figures are computed as in the service replay
(`burst.sim.service_engine.metrics`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from burst.model import Job
from burst.sim.service_engine import Controller, Observation, Target
from burst.sim.service_traces import TICK_S


@dataclass
class RecordedTargets:
    """A service controller whose targets are kept: (instant, replicas to run) per decision."""

    inner: Controller
    decisions: list[tuple[datetime, int]] = field(default_factory=list)

    @property
    def idle_ttl_s(self) -> float:
        return self.inner.idle_ttl_s

    def decide(self, obs: Observation) -> Target | None:
        """The inner controller's target, recorded."""
        target = self.inner.decide(obs)
        if target is not None:
            self.decisions.append((obs.at, target.replicas))
        return target


def replica_lifetimes(initial: int, decisions: Sequence[tuple[datetime, int]], start: datetime,
                      end: datetime, *, initial_since: datetime | None = None) -> list[tuple[datetime, datetime]]:
    """Decide each replica's [start, stop) from a replica count that starts at `initial` at `start` and moves to
    each decision's count at its instant: a rise starts replicas, a fall stops the latest started first (the
    service replay's scale-in rule), and what still runs at `end` stops there. The `initial` replicas serve at
    `start`, so they start at `initial_since` (default `start`): a model load before it."""
    running: list[datetime] = [initial_since or start] * initial
    out: list[tuple[datetime, datetime]] = []
    for at, count in decisions:
        if at >= end:
            break
        while len(running) < count:
            running.append(at)
        while len(running) > count:
            out.append((running.pop(), at))
    out += [(began, end) for began in running]
    return sorted(t for t in out if t[1] > t[0])


def replica_jobs(lifetimes: Sequence[tuple[datetime, datetime]], *, tenant: str, service: str, gpus: int,
                 gpu_model: str, shift: timedelta = timedelta(0)) -> list[Job]:
    """One job per replica lifetime (shifted by `shift` onto the batch window's clock): submitted when the
    replica starts, lasting its lifetime, not fault-tolerant."""
    return [Job(id=f"{service}-replica-{k:06d}", tenant=tenant, gpus=gpus, gpu_model=gpu_model,
                submitted_at=began + shift, duration_s=(stop - began).total_seconds())
            for k, (began, stop) in enumerate(lifetimes)]


def serving_from_starts(jobs: Sequence[Job], waits_s: Sequence[float], *, load_s: float, start: datetime,
                        ticks: int) -> np.ndarray:
    """Decide how many replicas serve at each service tick from `start`: a replica job that started (its wait
    `waits_s`, in the replay's job order) serves from its start plus the model load `load_s` until its start
    plus its duration; one that never started serves never."""
    delta = np.zeros(ticks + 1, dtype=int)
    for job, wait in zip(jobs, waits_s, strict=True):
        began = (job.submitted_at - start).total_seconds() + wait
        ready = began + load_s
        stop = began + (job.duration_s or 0.0)
        first, last = math.ceil(ready / TICK_S - 1e-9), math.ceil(stop / TICK_S - 1e-9)
        first, last = max(0, first), min(ticks, last)
        if first < last:
            delta[first] += 1
            delta[last] -= 1
    return np.cumsum(delta)[:ticks]


def aligned_start(batch_start: datetime, earliest: datetime, latest: datetime) -> datetime:
    """Decide where a service window starts so that it aligns with `batch_start` by weekday and hour: the
    instant a whole number of weeks before or after it that is in [earliest, latest] (the first such)."""
    week = timedelta(days=7)
    weeks = math.ceil((earliest - batch_start) / week)
    at = batch_start + weeks * week
    if at > latest:
        raise ValueError(f"no instant aligned with {batch_start:%a %H:%M} in [{earliest}, {latest}]")
    return at


__all__ = ["RecordedTargets", "aligned_start", "replica_jobs", "replica_lifetimes", "serving_from_starts"]
