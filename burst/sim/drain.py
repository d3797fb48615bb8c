"""Graceful termination for the baselines' drains: SIGTERM, then `terminationGracePeriodSeconds`.

When a baseline autoscaler deletes a node (the Cluster Autoscaler's scale-down,
Karpenter's consolidation or interruption handling), Kubernetes evicts its
pods: each gets SIGTERM and `terminationGracePeriodSeconds` (default 30 s,
`GRACE_PERIOD_S`) before it is killed. A fault-tolerant job whose checkpoint
fits the grace period checkpoints on SIGTERM and resumes from there; any
other job resumes from its last checkpoint (or from the start).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from burst.model import Job
from burst.planner.context import PlanContext
from burst.planner.evict import Move, checkpoint_then_evict

GRACE_PERIOD_S = 30.0
"""Kubernetes' default `terminationGracePeriodSeconds`."""


def sigterm_drain(ctx: PlanContext, jobs: Sequence[Job], step: str, why: str,
                  grace_s: float | Callable[[Job], float] = GRACE_PERIOD_S, *, evict_others: bool = False) -> bool:
    """Send SIGTERM to `jobs` (their node is going): whether the node may go now.

    A fault-tolerant job whose checkpoint fits its grace period (`grace_s`, or `grace_s(job)` where pods set
    their own) checkpoints (asked once, waited for) and is then evicted; the node waits for it. Every other job
    is left to die with its node, resuming from its last checkpoint, or with `evict_others` (a drain ahead of a
    node that goes later by itself, as a spot reclaim) is evicted at once, requeued from its last checkpoint.
    """
    done = True
    for job in jobs:
        grace = grace_s(job) if callable(grace_s) else grace_s
        takes = job.checkpoint_duration_s
        if not (job.fault_tolerant and takes is not None and takes <= grace):
            if evict_others:
                checkpoint_then_evict(ctx, job, f"{why}: SIGTERM", step, then="the node is drained", budget_s=0.0)
            continue
        move = checkpoint_then_evict(ctx, job, f"{why}: SIGTERM with a {grace:g} s grace period", step,
                                     then="the node is deleted", budget_s=grace)
        if move is not Move.EVICTED:
            done = False
    return done


__all__ = ["GRACE_PERIOD_S", "sigterm_drain"]
