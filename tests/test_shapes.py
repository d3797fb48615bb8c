"""Two node shapes of one GPU model: the launch each job's marginal cost picks, the multi-shape set-up, the floor."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from builders import T0, TablePrices, group, job

from burst.model import ActionKind, CapacityType, Job, Plan, Policy, Snapshot
from burst.planner import PlanIds, plan
from burst.planner.context import GroupCapacity
from burst.planner.shapes import by_marginal_cost, fitting_shapes, launch_cost
from burst.sim.engine import reference_prices
from burst.sim.floor import floor
from burst.sim.setup import NAMED_SETUPS, SimSetup, default_setup, only_shape
from burst.sim.traces import Trace, TraceStats

SMALL = group("small", gpus=1, max_size=16)
BIG = group("big", gpus=8, max_size=2)


def _launches(snap: Snapshot, prices: TablePrices) -> list[tuple[str, int | None]]:
    p: Plan = plan(snap, [], {}, prices, now=T0, ids=PlanIds("p1"))
    return [(a.target, a.count) for a in p.actions if a.kind is ActionKind.SCALE_UP]


def test_a_one_gpu_job_launches_the_one_gpu_node_though_the_wide_one_is_a_little_cheaper_per_gpu() -> None:
    """As in the catalog's GCP A100 rows: $2.99/GPU-h on the 8-GPU node, $3.00 on the 1-GPU one. One GPU on a new
    node costs $3.00/h on the small shape and $23.92/h on the big one (seven GPUs idle)."""
    prices = TablePrices({"small": 3.0, "big": 23.92})
    snap = Snapshot(groups=(SMALL, BIG), nodes=(), jobs=(job("j1", gpus=1),), targets={"small": 0, "big": 0})
    assert _launches(snap, prices) == [("small", 1)]
    (up,) = [a for a in plan(snap, [], {}, prices, now=T0, ids=PlanIds("p1")).actions if a.kind is ActionKind.SCALE_UP]
    assert "small is the cheapest launch for its jobs among the A100 node sizes (1-GPU nodes at $3.00/node-h" in up.reason


def test_an_eight_gpu_job_takes_one_wide_node_not_eight_small_ones() -> None:
    """Here the small shape is a little cheaper per GPU ($2.99 against $3.00) and eight of them would cost less
    ($23.92/h against $24.00/h), but an 8-GPU job fits on one node of the wide shape only."""
    prices = TablePrices({"small": 2.99, "big": 24.0})
    snap = Snapshot(groups=(SMALL, BIG), nodes=(), jobs=(job("j1", gpus=8),), targets={"small": 0, "big": 0})
    assert _launches(snap, prices) == [("big", 1)]


def test_a_job_wider_than_every_node_takes_whole_nodes_of_the_widest_shape() -> None:
    prices = TablePrices({"small": 2.99, "big": 24.0})
    snap = Snapshot(groups=(SMALL, BIG), nodes=(), jobs=(job("j1", gpus=16),), targets={"small": 0, "big": 0})
    assert _launches(snap, prices) == [("big", 2)]


def _cap(gid: str, gpus: int, usd_per_node: float, *, model: str = "A100",
         capacity: CapacityType = CapacityType.ON_DEMAND) -> GroupCapacity:
    return GroupCapacity(group=group(gid, gpus=gpus, gpu_model=model, capacity_type=capacity),
                         price_per_node=usd_per_node, target=0)


def test_launch_order_by_marginal_cost_within_a_model_of_two_shapes() -> None:
    """Spot and on-demand of each shape, at one price per GPU per capacity type: a 1-GPU job's launch costs
    $1.80 (1g spot), $3.67 (1g on-demand), $14.43 (8g spot), $29.39 (8g on-demand); a 2-GPU job fits the 8g
    shape only."""
    caps = [_cap("8g-spot", 8, 14.43, capacity=CapacityType.SPOT), _cap("1g-spot", 1, 1.80375, capacity=CapacityType.SPOT),
            _cap("8g-od", 8, 29.39), _cap("1g-od", 1, 3.67375)]
    assert [launch_cost(1, c) for c in caps] == pytest.approx([14.43, 1.80375, 29.39, 3.67375])
    assert [c.group.id for c in by_marginal_cost(1, caps)] == ["1g-spot", "1g-od", "8g-spot", "8g-od"]
    assert [c.group.id for c in by_marginal_cost(2, caps)] == ["8g-spot", "8g-od"]
    assert [c.group.id for c in fitting_shapes(1, caps)] == ["8g-spot", "1g-spot", "8g-od", "1g-od"]


def test_one_shape_per_model_keeps_the_price_per_gpu_order() -> None:
    """An 8-GPU A100 group at $3.00/GPU-h and a 4-GPU H100 group at $3.50: a new node for a 1-GPU job costs less on
    the H100 ($14 against $24), yet each model has one shape, so the order stays the one by price per GPU."""
    caps = [_cap("a100", 8, 24.0), _cap("h100", 4, 14.0, model="H100")]
    assert by_marginal_cost(1, caps) is caps
    assert fitting_shapes(6, caps) is caps


def _stats() -> TraceStats:
    return TraceStats(jobs=1, gpu_hours=8.0, peak_gpus=20.0, p50_gpus=8.0, start=None, end=None)


def test_the_multi_shape_setup_offers_both_gcp_a100_shapes_beside_the_steady_tier() -> None:
    base = default_setup(_stats())
    multi = NAMED_SETUPS["multi-shape"](base)
    got = {g.id: (g.instance_type, g.region, g.gpus_per_node, g.capacity_type, g.max_size) for g in multi.groups}
    assert got == {
        "onprem": ("dgx-a100", "dc1", 8, CapacityType.ONPREM, 1),
        "cloud-1g-od": ("a2-highgpu-1g", "us-central1", 1, CapacityType.ON_DEMAND, 24),
        "cloud-1g-spot": ("a2-highgpu-1g", "us-central1", 1, CapacityType.SPOT, 24),
        "cloud-8g-od": ("a2-highgpu-8g", "us-central1", 8, CapacityType.ON_DEMAND, 3),
        "cloud-8g-spot": ("a2-highgpu-8g", "us-central1", 8, CapacityType.SPOT, 3),
    }
    row_1g, row_8g = multi.catalog.row("gcp", "a2-highgpu-1g", "us-central1"), multi.catalog.row(
        "gcp", "a2-highgpu-8g", "us-central1")
    by_id = {g.id: g for g in multi.groups}
    assert multi.catalog.group_price(by_id["cloud-1g-spot"]) == row_1g.spot_usd_per_hour
    assert multi.catalog.group_price(by_id["cloud-8g-od"]) == row_8g.on_demand_usd_per_hour
    assert multi.initial == {"onprem": 1, "cloud-1g-od": 0, "cloud-1g-spot": 0, "cloud-8g-od": 0, "cloud-8g-spot": 0}
    assert set(multi.spot_hazard_per_hour) == {"cloud-1g-spot", "cloud-8g-spot"}
    restricted = only_shape(multi, 8)
    assert [g.id for g in restricted.groups] == ["onprem", "cloud-8g-od", "cloud-8g-spot"]
    assert set(restricted.initial) == {"onprem", "cloud-8g-od", "cloud-8g-spot"}


def _no_onprem_multi_shape(jobs: list[Job]) -> SimSetup:
    stats = Trace(path=Path("scripted.csv"), format="csv", jobs=tuple(jobs)).stats()
    multi = NAMED_SETUPS["multi-shape"](default_setup(stats))
    groups = tuple(g for g in multi.groups if g.id != "onprem")
    setup = dataclasses.replace(multi, groups=groups, initial={g.id: 0 for g in groups},
                                default_policy=Policy(tenant="_default"))
    return setup


def test_the_floor_opens_the_cheapest_shape_each_job_fits() -> None:
    """No on-prem tier, work that cannot move: a 1-GPU job for an hour opens a 1-GPU node (its hour and its 300 s
    boot on one GPU), a 4-GPU job for an hour an 8-GPU node (one node must hold it: eight GPUs for the hour and
    the boot). Both are priced at the reference on-demand GPU-hour."""
    one = Job(id="one", tenant="t", gpus=1, submitted_at=T0, duration_s=3600.0)
    four = Job(id="four", tenant="t", gpus=4, submitted_at=T0 + timedelta(hours=2), duration_s=3600.0)
    setup = _no_onprem_multi_shape([one, four])
    p_od, _ = reference_prices(setup)
    bound = floor(setup, [one, four], start=T0, end=T0 + timedelta(hours=4))
    assert bound.cost_by_tier["elastic_on_demand"] == pytest.approx((1 + 8) * (3600 + 300) / 3600 * p_od)
    assert bound.scale_ups == 2
