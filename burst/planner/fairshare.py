"""The order pending jobs are considered in: tenant priority first, then weighted fair share.

Tenants are served by their policy's priority, highest first. Among tenants of
equal priority the next job comes from the tenant with the least GPUs held
(running, plus what this plan has already given it) per unit of
`fair_share_weight`, so contended capacity splits in the ratio of the weights.
Within a tenant, jobs go by their own priority (the tenant's when they have
none), then submit time, then id. A job's own priority orders its tenant's
jobs only: a tenant cannot move ahead of another by setting it, since the
order between tenants comes from their policies alone.
"""

from __future__ import annotations

import heapq
import operator
from collections import defaultdict
from collections.abc import Iterator

from burst.model import Job, TenantName
from burst.planner.context import PlanContext, TenantUsage

_BY_SUBMISSION = operator.attrgetter("submitted_at", "id")


def job_priority(job: Job, ctx: PlanContext) -> int:
    """A job's priority among its tenant's jobs: its own, else its tenant's."""
    return job.priority if job.priority is not None else ctx.policy(job.tenant).priority


def fair_order(ctx: PlanContext) -> Iterator[Job]:
    """Yield pending jobs in service order; shares are read live, so placements made so far count."""
    queues: dict[TenantName, list[Job]] = defaultdict(list)
    for job in ctx.pending_jobs():
        queues[job.tenant].append(job)
    # Per tenant, read once: its default priority, its weight and its usage (updated in place by placement).
    default_of: dict[TenantName, int] = {}
    weight_of: dict[TenantName, float] = {}
    usage_of: dict[TenantName, TenantUsage] = {}
    for tenant, jobs in queues.items():
        policy = ctx.policy(tenant)
        default = default_of[tenant] = policy.priority
        weight_of[tenant] = max(policy.fair_share_weight, 1e-9)
        usage_of[tenant] = ctx.usage_of(tenant)
        if any(j.priority is not None for j in jobs):
            jobs.sort(key=lambda j: (-(j.priority if j.priority is not None else default), j.submitted_at, j.id))
        else:  # every job at the tenant's priority: the same order, by a key read in C
            jobs.sort(key=_BY_SUBMISSION)
        jobs.reverse()  # pop() from the end gives the head

    def entry(tenant: TenantName) -> tuple[int, float, TenantName]:
        usage = usage_of[tenant]  # the tenant's policy priority, never its head job's own
        return (-default_of[tenant], (usage.steady_gpus + usage.elastic_gpus) / weight_of[tenant], tenant)

    heap = [entry(t) for t in queues]
    heapq.heapify(heap)
    while len(heap) > 1:
        _, _, tenant = heapq.heappop(heap)
        job = queues[tenant].pop()
        yield job
        if queues[tenant]:
            heapq.heappush(heap, entry(tenant))
    if heap:  # one tenant left: the rest of its queue in its own order
        yield from reversed(queues[heap[0][2]])
