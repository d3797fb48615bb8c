"""Node shapes: which shapes of a GPU model a job fits, and which one a launch for it should take.

A GPU model may be offered in several node sizes (GCP's `a2-highgpu-1g` and
`a2-highgpu-8g`, both A100 at one price per GPU). Price per GPU-hour ranks
groups of one size; across sizes of one model it hides what a launch costs: a
1-GPU job that needs a new node pays for one GPU-hour on a 1-GPU node and for
eight on an 8-GPU one, the seven it leaves idle included. So:

- a job fits a shape when one node holds it; a job wider than every node of
  its model fits the widest shape only (it takes whole nodes of it). A job is
  never spread over nodes of a smaller shape while a larger one of the same
  capacity type would hold it on one node (`fitting_shapes`);
- among the groups of one model of several shapes, a launch goes first to the
  group whose launch costs least for the job: the nodes it needs times the
  node's price (`by_marginal_cost`).

Groups of a model with one shape keep their place in the order they came in
(steady first, then price per GPU-hour): there the two orders agree.
"""

from __future__ import annotations

from collections import defaultdict

from burst.model import Tier
from burst.planner.context import GroupCapacity


def _shapes_by_model(candidates: list[GroupCapacity]) -> dict[str, set[int]]:
    """The node sizes (GPUs per node) of each GPU model's elastic groups among `candidates`."""
    sizes: dict[str, set[int]] = defaultdict(set)
    for cap in candidates:
        if cap.group.tier is Tier.ELASTIC:
            sizes[cap.group.shape.gpu_model].add(cap.gpn)
    return sizes


def fitting_shapes(gpus: int, candidates: list[GroupCapacity]) -> list[GroupCapacity]:
    """`candidates` without the elastic groups whose shape a job of `gpus` GPUs does not fit (see the module doc):
    for a model of several shapes, those whose node is smaller than the job while a group of the same model and
    capacity type holds it on one node (or, for a job wider than every such node, those that are not the widest).
    Order is kept; a list with one shape per model comes back as it is.

    Shapes are compared within a capacity type: a job whose tenant may not take spot (or not more of it) still
    runs on smaller on-demand nodes when only a spot group is wide enough."""
    sizes = _shapes_by_model(candidates)
    if all(len(s) < 2 for s in sizes.values()):
        return candidates
    widest: dict[tuple[str, str], int] = {}
    for cap in candidates:
        if cap.group.tier is Tier.ELASTIC:
            kind = (cap.group.shape.gpu_model, cap.group.capacity_type.value)
            widest[kind] = max(widest.get(kind, 0), cap.gpn)

    def fits(cap: GroupCapacity) -> bool:
        if cap.group.tier is not Tier.ELASTIC:
            return True
        return gpus <= cap.gpn or cap.gpn == widest[(cap.group.shape.gpu_model, cap.group.capacity_type.value)]

    return [c for c in candidates if fits(c)]


def launch_cost(gpus: int, cap: GroupCapacity) -> float:
    """USD per hour a launch in `cap` for a job of `gpus` GPUs adds: the nodes it needs times the node's price."""
    return -(-gpus // cap.gpn) * cap.price_per_node


def by_marginal_cost(gpus: int, candidates: list[GroupCapacity]) -> list[GroupCapacity]:
    """The order a launch for a job of `gpus` GPUs tries `candidates` in: as given, except that the places the
    elastic groups of a model of several shapes hold go to those groups by `launch_cost` (then price per GPU-hour,
    then their given order), and groups of a shape the job does not fit are left out (`fitting_shapes`).

    With one shape per model this is `candidates` unchanged, so a launch picks what it picked by price per GPU."""
    fitting = fitting_shapes(gpus, candidates)
    if fitting is candidates:
        return candidates
    sizes = _shapes_by_model(fitting)
    out = list(fitting)
    for model, of_model in sizes.items():
        if len(of_model) < 2:
            continue
        places = [i for i, c in enumerate(out) if c.group.tier is Tier.ELASTIC and c.group.shape.gpu_model == model]
        ranked = sorted(places, key=lambda i: (launch_cost(gpus, out[i]), out[i].gpu_price, i))
        groups = [out[i] for i in ranked]
        for place, cap in zip(places, groups, strict=True):
            out[place] = cap
    return out


__all__ = ["by_marginal_cost", "fitting_shapes", "launch_cost"]
