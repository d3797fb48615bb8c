"""Which groups a job may run on, and which groups count as supply for a GPU model.

Shared by every step that places, prices or moves a job (placement, making
room, consolidation, preemption, deadlines, hot pools) and by the scale-in and
pre-scaling steps, so no step imports another for these rules.
"""

from __future__ import annotations

from burst.model import ANY_MODEL, CapacityType, Job, NodeGroup, Policy, Tier
from burst.planner.context import GroupCapacity, PlanContext
from burst.planner.shapes import fitting_shapes


def spot_eligible(job: Job, policy: Policy) -> bool:
    """Whether a job may go to spot at all: a spot replica (its service's spot share put it there), or
    fault-tolerant, its tenant allowing spot, checkpointing often enough."""
    if job.spot_replica:
        return True
    if not (job.fault_tolerant and policy.spot.allowed):
        return False
    required = policy.spot.required_checkpoint_interval_s
    if required is None:
        return True
    return job.checkpoint_interval_s is not None and job.checkpoint_interval_s <= required


def spot_allowed(ctx: PlanContext, job: Job, policy: Policy) -> bool:
    """Whether this plan may put the job on spot: eligible, and not barred by the deadline step (`spot_barred`)."""
    return spot_eligible(job, policy) and job.id not in ctx.spot_barred


def candidate_groups(ctx: PlanContext, job: Job, policy: Policy) -> list[GroupCapacity]:
    """Groups the job may run on, steady first, then elastic by price per GPU-hour (then id); of a GPU model offered
    in several node sizes, only the shapes the job fits (`burst.planner.shapes.fitting_shapes`)."""
    eligible_spot = spot_allowed(ctx, job, policy)
    out = []
    for cap in ctx.groups.values():
        group = cap.group
        if job.gpu_model is not None and group.shape.gpu_model != job.gpu_model:
            continue
        if not policy.allows_group(group):
            continue
        if group.capacity_type is CapacityType.SPOT and not eligible_spot:
            continue
        out.append(cap)
    out.sort(key=lambda c: (c.group.tier is not Tier.STEADY, c.gpu_price, c.group.id))
    return fitting_shapes(job.gpus or 1, out)


def serves(group: NodeGroup, gpu_model: str) -> bool:
    """Whether `group`'s GPUs count as supply for demand of `gpu_model`."""
    return gpu_model == ANY_MODEL or group.shape.gpu_model == gpu_model


__all__ = ["candidate_groups", "serves", "spot_allowed", "spot_eligible"]
