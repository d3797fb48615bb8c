"""Synthetic job arrivals that realise a forecast demand path.

How a path becomes jobs (`synthetic_jobs`):

- the *mix* is the history's jobs as templates (tenant, GPUs or GPU share,
  GPU model, duration, and whether the job is fault-tolerant and how it
  checkpoints), taken as they are: the projection keeps the trace's empirical
  size and duration mix, its tenant shares and the share of each tenant's
  work that may move to spot;
- each forecast step [t, t + step) owes ``demand(t) * step`` GPU-seconds of
  new work: by Little's law, work arriving at D GPU-seconds per second keeps D
  GPUs busy once the arrivals have run for a typical duration;
- templates are drawn at random (seeded `random.Random`) and placed at a
  uniform instant inside the step until the step's GPU-seconds are paid; the
  overshoot of the last job is carried to the next steps;
- the first job is not placed at the path's first instant but once the path
  has owed a delay drawn from the mix's equilibrium (a template drawn in
  proportion to its GPU-seconds, times a uniform fraction): the jobs are then
  a stationary renewal process in work, whose expected GPU-seconds equal the
  path's integral exactly. Starting the count at zero instead adds, on
  average, E[w^2] / (2 E[w]) GPU-seconds (w a template's work) to every path:
  with a heavy-tailed mix (one job of thousands of GPU-hours among many
  small ones) that is the size of a quiet week's whole demand.

Jobs come out PENDING, fault-tolerant where their template was (a job the
history recorded as checkpointing keeps its interval, so the spot policy
judges it as it judged the original); the simulator's `with_fault_tolerance`
marks the policy's `fault_tolerant_fraction` of the others, as it does for a
trace. Everything is a pure function of its arguments.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from burst.model import Job


@dataclass(frozen=True)
class JobTemplate:
    """One job shape of the mix: who submits it, how many GPUs, for how long."""

    tenant: str
    gpus: int
    duration_s: float
    gpu_share: float | None = None
    gpu_model: str | None = None
    fault_tolerant: bool = False
    checkpoint_interval_s: float | None = None
    checkpoint_duration_s: float | None = None

    @property
    def gpu_seconds(self) -> float:
        return (float(self.gpus) if self.gpus else float(self.gpu_share or 0.0)) * self.duration_s


def job_mix(jobs: Iterable[Job]) -> tuple[JobTemplate, ...]:
    """The templates of `jobs` with a known duration, in (submission, id) order, each keeping its job's fault
    tolerance and checkpointing (what decides whether the spot policy lets it move)."""
    ordered = sorted((j for j in jobs if j.duration_s and j.duration_s > 0), key=lambda j: (j.submitted_at, j.id))
    return tuple(JobTemplate(j.tenant, j.gpus, float(j.duration_s or 0.0), j.gpu_share, j.gpu_model,
                             j.fault_tolerant, j.checkpoint_interval_s, j.checkpoint_duration_s) for j in ordered)


def equilibrium_delay(mix: Sequence[JobTemplate], rng: random.Random) -> float:
    """The GPU-seconds a path owes before its first job (module doc): a template drawn in proportion to its work,
    times a uniform fraction of that work."""
    weights = [t.gpu_seconds for t in mix]
    (template,) = rng.choices(mix, weights=weights)
    return rng.random() * template.gpu_seconds


def usable_mix(mix: Sequence[JobTemplate]) -> list[JobTemplate]:
    """The templates of `mix` that carry work; ValueError when none does (no path can be drawn from it)."""
    usable = [t for t in mix if t.gpu_seconds > 0]
    if not usable:
        raise ValueError("the job mix is empty: the history has no job with a duration")
    return usable


def synthetic_jobs(
    start: datetime,
    step_s: float,
    demand_gpus: Sequence[float],
    mix: Sequence[JobTemplate],
    *,
    seed: int = 0,
    prefix: str = "proj",
) -> list[Job]:
    """Jobs arriving over ``len(demand_gpus)`` steps from `start` that realise the demand path (module doc)."""
    mix = usable_mix(mix)
    rng = random.Random(f"{seed}:{prefix}")
    owed = -equilibrium_delay(mix, rng)
    out: list[Job] = []
    for k, gpus in enumerate(demand_gpus):
        owed += max(0.0, gpus) * step_s
        at0 = start + timedelta(seconds=k * step_s)
        while owed > 0:
            t = mix[rng.randrange(len(mix))]
            at = at0 + timedelta(seconds=rng.random() * step_s)
            out.append(
                Job(id=f"{t.tenant}-{prefix}-{len(out)}", tenant=t.tenant, gpus=t.gpus, gpu_share=t.gpu_share,
                    gpu_model=t.gpu_model, submitted_at=at, duration_s=t.duration_s, fault_tolerant=t.fault_tolerant,
                    checkpoint_interval_s=t.checkpoint_interval_s, checkpoint_duration_s=t.checkpoint_duration_s)
            )
            owed -= t.gpu_seconds
    out.sort(key=lambda j: (j.submitted_at, j.id))
    return out


__all__ = ["JobTemplate", "equilibrium_delay", "job_mix", "synthetic_jobs", "usable_mix"]
