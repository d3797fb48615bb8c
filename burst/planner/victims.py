"""Victim selection: which running jobs to evict to free GPUs, losing the least work. Pure.

Shared by every path that takes GPUs back from running work (priority
preemption today). The
caller passes the candidates its policy allows (a lower priority, a tenant
over its share); this module decides among them:

1. order: `LEAST_LOST_WORK` (default) ranks a job by the GPU-seconds its
   eviction costs per GPU it frees where needed (the greedy rule for covering
   a need at least cost): GPUs x the work since its last checkpoint (an eviction
   requeues the job at once, so it resumes from that checkpoint; a job that
   cannot resume loses everything it did in this run). When the caller moves
   its victims through the checkpoint protocol (`checkpoint_budget_s`, see
   `burst.planner.evict`), a job that will checkpoint first costs only its
   checkpoint's duration, and one whose checkpoint is under way what is left
   of it, so the victims asked to checkpoint stay the cheapest on the next
   ticks until they are evicted. `MOST_RECENT` (Kueue's
   default: the most recently started first) and `RANDOM` (seeded) are there
   to be measured against it;
2. take candidates in that order until enough GPUs are free, skipping any
   that would push its tenant past the disruption budget (at most
   `max_disrupted_share` of the tenant's running GPUs evicted at once, but
   always one job: a budget smaller than a job would forbid every eviction);
3. minimise: drop, most costly first, every chosen victim the others already
   make unnecessary.

A job is evicted whole or not at all (a multi-GPU or multi-node job frees
all its GPUs and loses work on all of them). When the candidates cannot free
enough, nothing is chosen: no eviction is half a plan.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from burst import progress
from burst.model import Job, TenantName
from burst.planner.evict import move_cost_s

LEAST_LOST_WORK = "least-lost-work"
MOST_RECENT = "most-recent"
RANDOM = "random"
ORDERS = (LEAST_LOST_WORK, MOST_RECENT, RANDOM)
DEFAULT_DISRUPTED_SHARE = 0.1


@dataclass(frozen=True)
class Victim:
    """A job chosen for eviction: the GPU-seconds of work it costs, and why it was chosen."""

    job: Job
    cost_gpu_s: float
    reason: str


def eviction_cost_gpu_s(job: Job, now: datetime, *, checkpoint_budget_s: float | None = None) -> float:
    """GPU-seconds of work evicting `job` at `now` costs (see the module doc).

    `checkpoint_budget_s` None: the job is evicted at once and loses its unsaved work; else it is moved by
    `burst.planner.evict.checkpoint_then_evict` with that budget.
    """
    if checkpoint_budget_s is not None:
        return job.gpu_demand * move_cost_s(job, now, budget_s=checkpoint_budget_s)
    lost = progress.work_at(job, now) - progress.checkpointed_work(job, now)
    return job.gpu_demand * max(0.0, lost)


def select_victims(
    candidates: Sequence[Job],
    need_gpus: float,
    now: datetime,
    *,
    running_gpus: Mapping[TenantName, float],
    order: str = LEAST_LOST_WORK,
    max_disrupted_share: float = DEFAULT_DISRUPTED_SHARE,
    disrupted_gpus: Mapping[TenantName, float] | None = None,
    freed_gpus: Mapping[str, float] | None = None,
    seed: int = 0,
    purpose: str = "",
    checkpoint_budget_s: float | None = None,
) -> list[Victim]:
    """A low-cost set of `candidates` freeing at least `need_gpus` (greedy, then pruned), or [] when none does.

    `running_gpus` is each tenant's running GPUs (the disruption budget's
    base); `disrupted_gpus` what this plan already evicts per tenant;
    `freed_gpus` the GPUs evicting a job frees where they are needed (by job
    id; default its whole demand: a job spread over nodes frees only its share
    on any one of them). The budget always counts a victim's whole demand. `checkpoint_budget_s`: the
    victims are checkpointed first within that budget (see `eviction_cost_gpu_s`).
    """
    if order not in ORDERS:
        raise ValueError(f"unknown victim order {order!r}: expected one of {', '.join(ORDERS)}")
    if need_gpus <= 0:
        return []
    costs = {j.id: eviction_cost_gpu_s(j, now, checkpoint_budget_s=checkpoint_budget_s) for j in candidates}
    frees = {j.id: (freed_gpus or {}).get(j.id, j.gpu_demand) for j in candidates}
    ranked = _ranked(candidates, costs, frees, order, seed, now)
    spent: dict[TenantName, float] = defaultdict(float, disrupted_gpus or {})
    chosen: list[Job] = []
    freed = 0.0
    for job in ranked:
        if freed >= need_gpus:
            break
        budget = max_disrupted_share * running_gpus.get(job.tenant, 0.0)
        if spent[job.tenant] > 0 and spent[job.tenant] + job.gpu_demand > budget + 1e-9:
            continue
        spent[job.tenant] += job.gpu_demand
        chosen.append(job)
        freed += frees[job.id]
    if freed < need_gpus:
        return []
    for job in sorted(chosen, key=lambda j: (-costs[j.id], j.id)):  # minimisation pass
        if freed - frees[job.id] >= need_gpus:
            chosen.remove(job)
            freed -= frees[job.id]
    why = {LEAST_LOST_WORK: "least lost work first", MOST_RECENT: "most recently started first", RANDOM: "random order"}
    return [
        Victim(job, costs[job.id], f"frees {frees[job.id]:g} GPU(s){' for ' + purpose if purpose else ''}; "
               f"costs {costs[job.id] / 3600:.2f} GPU-h of work ({why[order]})")
        for job in chosen
    ]


def _ranked(
    candidates: Sequence[Job], costs: Mapping[str, float], frees: Mapping[str, float], order: str, seed: int,
    now: datetime,
) -> list[Job]:
    if order == LEAST_LOST_WORK:  # cheapest work lost per GPU freed first: the greedy rule for covering a need
        return sorted(candidates, key=lambda j: (costs[j.id] / max(frees[j.id], 1e-9), costs[j.id], j.id))
    if order == MOST_RECENT:
        return sorted(candidates, key=lambda j: (-(j.started_at or now).timestamp(), j.id))
    shuffled = sorted(candidates, key=lambda j: j.id)
    random.Random(seed).shuffle(shuffled)
    return shuffled


__all__ = ["LEAST_LOST_WORK", "MOST_RECENT", "ORDERS", "RANDOM", "Victim", "eviction_cost_gpu_s", "select_victims"]
