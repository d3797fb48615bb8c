"""Capacity-optimized spot spread: among spot offerings about as cheap as the cheapest, the least interrupted first.

Placement tries a job's groups in price order. For a job that may go to spot,
this reorders its spot groups (each an offering: one instance type in one
zone) before each stage of placement looks at them:

1. the spot groups priced within `spot.price_tolerance` (default 10%) of the
   cheapest spot group the job may use count as equally cheap: they take the
   cheapest one's place in the price order;
2. among them, an offering that would hold more than `spot.max_offering_share`
   (default half) of the tenant's spot GPUs once the job is placed there goes
   after those that would not (so a tenant's spot GPUs spread over offerings
   while there are alternatives; when every offering would be over the share,
   as for a tenant's first spot job, none is put back);
3. then the lowest interruption rate (`Snapshot.interruption_rates`, learnt,
   else the group's band prior; see `burst.planner.spot_rates`), then price,
   then id.

Groups outside the tolerance and groups that are not spot keep their order.
Each near-cheapest group's rate is noted (`PlanContext.spread_notes`) for the
reason of the placement or launch that uses it.
The spread is a preference, never a refusal: a job that fits only an
offering past its share still goes there.
"""

from __future__ import annotations

from burst.model import CapacityType, Job, Policy, Tier
from burst.planner.context import GroupCapacity, PlanContext
from burst.planner.spot_rates import interruption_rate


def _near_cheapest(policy: Policy, candidates: list[GroupCapacity]) -> tuple[list[GroupCapacity], float, set[str]]:
    """The spot candidates, the cheapest spot GPU-hour price, and the spot groups within the policy's tolerance of it."""
    spot = [c for c in candidates if c.group.capacity_type is CapacityType.SPOT]
    if len(spot) < 2:
        return spot, 0.0, set()
    cheapest = min(c.gpu_price for c in spot)
    limit = cheapest * (1.0 + policy.spot.price_tolerance) + 1e-9
    return spot, cheapest, {c.group.id for c in spot if c.gpu_price <= limit}


def spreads(policy: Policy, candidates: list[GroupCapacity]) -> bool:
    """Whether `spread_spot` may reorder `candidates` for this policy at all: two or more near-cheapest spot groups.

    It depends only on the list and the policy, so placement asks once per candidate list.
    """
    return len(_near_cheapest(policy, candidates)[2]) >= 2


def spread_spot(ctx: PlanContext, job: Job, policy: Policy, candidates: list[GroupCapacity]) -> list[GroupCapacity]:
    """`candidates` (in placement's price order) with the near-cheapest spot groups reordered (see the module doc)."""
    spot, cheapest, near = _near_cheapest(policy, candidates)
    if len(near) < 2:
        return candidates
    usage = ctx.usage_of(job.tenant)
    after = usage.spot_gpus + job.gpu_demand
    share = policy.spot.max_offering_share
    learnt = ctx.snapshot.interruption_rates

    for cap in spot:
        if cap.group.id in near:
            ctx.note_spread(cap.group.id, (
                f"; spot spread: {len(near)} offerings within {policy.spot.price_tolerance:.0%} of the cheapest "
                f"(${cheapest:.2f}/GPU-h), this one interrupted at {interruption_rate(cap.group, learnt):.2g}/node-h"
            ))

    def key(cap: GroupCapacity) -> tuple[bool, float, bool, float, float, str]:
        steady_last = cap.group.tier is not Tier.STEADY
        if cap.group.id not in near:
            return steady_last, cap.gpu_price, False, 0.0, cap.gpu_price, cap.group.id
        held = usage.spot_by_group.get(cap.group.id, 0.0) + job.gpu_demand
        over = held > share * after + 1e-9
        return steady_last, cheapest, over, interruption_rate(cap.group, learnt), cap.gpu_price, cap.group.id

    return sorted(candidates, key=key)



__all__ = ["spread_spot", "spreads"]
