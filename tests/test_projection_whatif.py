"""What-ifs move what they should: each changes the set-up the projection's runs simulate, checked on small cases
whose moved figure is worked out by hand, with the lines it should leave alone unmoved; and spot work is projected
from the history's fault-tolerant jobs."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest

from burst.catalog import DEFAULT_ONPREM
from burst.model import CapacityType, GpuShape, Job, NodeGroup, Policy, SpotPolicy, Tier
from burst.projection.arrivals import JobTemplate, job_mix, synthetic_jobs
from burst.projection.demand import fit_forecast, floored
from burst.projection.project import project
from burst.projection.runs import demand_jobs
from burst.projection.whatif import WhatIf, WhatIfError, apply_what_if, describe, load_what_if, run_for
from burst.sim.engine import StrategyResult, simulate
from burst.sim.setup import SimSetup
from forecasting.models import DemandSeries
from tests.test_projection import CATALOG, NO_STATS, OD, SPOT, T0, constant_forecast, tiny_setup

HOURS = 10
STRATEGY = "burst-no-forecast"
ONPREM_GPU_H = DEFAULT_ONPREM.usd_per_gpu_hour  # 25000 / 35040 + 0.7 * 1.4 * 0.12 + 0.25 = 1.08107...
STANDBY = CATALOG.standby_price(tiny_setup().groups[0])  # a stopped p4d's 200 GB gp3 root volume: 200 * 0.08 / 730


def _batch_job(job_id: str = "b1", hours: float = 4.0) -> Job:
    return Job(id=job_id, tenant="batch", gpus=8, submitted_at=T0, duration_s=hours * 3600.0, fault_tolerant=True,
               checkpoint_interval_s=600.0, checkpoint_duration_s=30.0)


def _prod_job(job_id: str = "p1", hours: float = 4.0) -> Job:
    return Job(id=job_id, tenant="prod", gpus=8, submitted_at=T0, duration_s=hours * 3600.0)


def _policies() -> dict[str, Policy]:
    """Batch may use spot (its jobs are marked fault-tolerant themselves: no fraction is drawn); prod may not."""
    return {"batch": Policy(tenant="batch", spot=SpotPolicy(allowed=True)), "prod": Policy(tenant="prod")}


def _run(setup: SimSetup, jobs: list[Job], what_if: WhatIf | None = None) -> StrategyResult:
    """The run a projection makes of `jobs` on `setup` under `what_if` (`run_for`, as `burst.projection.runs`)."""
    return simulate(run_for(STRATEGY, setup, NO_STATS, what_if), jobs, start=T0, end=T0 + timedelta(hours=HOURS),
                    seed=0)


def _lines(result: StrategyResult) -> dict[str, float]:
    return {line: result.cost_by_tier.get(line, 0.0) for line in ("steady", "elastic_on_demand", "elastic_spot", "hot_pool")}


def _with_steady(nodes: int) -> SimSetup:
    """`tiny_setup` with an on-prem group of `nodes` 8-GPU nodes in front of its on-demand and spot groups."""
    steady = NodeGroup(id="onprem", provider="sim", region="dc1", tier=Tier.STEADY, capacity_type=CapacityType.ONPREM,
                       shape=GpuShape("A100", 8, 40.0), instance_type="dgx-a100", min_size=nodes, max_size=nodes)
    base = tiny_setup(**_policies())
    return dataclasses.replace(base, groups=(steady, *base.groups), initial={**base.initial, "onprem": nodes})


# ------------------------------------------------------------------ spot: false


def test_no_spot_moves_the_spot_work_to_on_demand_prices_and_nothing_else() -> None:
    setup = tiny_setup(**_policies())
    jobs = [_batch_job(), _prod_job()]
    base = _run(setup, jobs)
    no_spot = _run(setup, jobs, WhatIf("no-spot", spot=False))
    # Baseline: the batch job on one spot node, prod's on one on-demand node, both 4 h of work after the same 5 min
    # boot and released alike: the same node-hours, a little over the 4 h of work.
    od_node_h = base.cost_by_tier["elastic_on_demand"] / OD
    spot_node_h = base.cost_by_tier["elastic_spot"] / SPOT
    assert spot_node_h == pytest.approx(od_node_h, rel=1e-9)
    assert 4.0 < spot_node_h < 4.5
    # No spot: the batch node-hours are bought on demand: the spot line's 2.4655 $/h becomes 21.957642 $/h.
    assert no_spot.cost_by_tier["elastic_spot"] == 0.0
    assert no_spot.cost_by_tier["elastic_on_demand"] == pytest.approx((od_node_h + spot_node_h) * OD, rel=1e-9)
    assert no_spot.cost_usd - base.cost_usd == pytest.approx(spot_node_h * (OD - SPOT), rel=1e-9)
    assert no_spot.cost_by_tenant["prod"] == pytest.approx(base.cost_by_tenant["prod"], rel=1e-9)
    assert (no_spot.cost_by_tier["steady"], no_spot.cost_by_tier["hot_pool"]) == (0.0, 0.0)


# ------------------------------------------------------------------ steady_gpus_delta


def test_steady_delta_moves_the_steady_line_and_the_overflow() -> None:
    jobs = [_prod_job("p1"), _prod_job("p2")]  # 16 GPUs for 4 h; prod may not use spot
    setup = _with_steady(1)
    base = _run(setup, jobs)
    grown = _run(setup, jobs, WhatIf("more", steady_gpus_delta=8))
    # Baseline: 1 owned node, paid all 10 h: 8 GPUs x 1.0811 $/GPU-h x 10 h = 86.49; the second job overflows to one
    # on-demand node.
    assert base.cost_by_tier["steady"] == pytest.approx(1 * 8 * ONPREM_GPU_H * HOURS, rel=1e-9)
    assert 4.0 * OD < base.cost_by_tier["elastic_on_demand"] < 4.5 * OD
    # +8 GPUs = one more node: 2 x 8 x 1.0811 x 10 = 172.97, and both jobs fit on-prem: no overflow.
    assert grown.cost_by_tier["steady"] == pytest.approx(2 * 8 * ONPREM_GPU_H * HOURS, rel=1e-9)
    assert grown.cost_by_tier["elastic_on_demand"] == 0.0
    assert (grown.cost_by_tier["elastic_spot"], grown.cost_by_tier["hot_pool"]) == (0.0, 0.0)
    shrunk = _run(_with_steady(2), jobs, WhatIf("less", steady_gpus_delta=-8))  # back to one node: the baseline
    assert _lines(shrunk) == pytest.approx(_lines(base), rel=1e-9)


# ------------------------------------------------------------------ hot_pool_nodes


def test_hot_pool_nodes_moves_the_pool_line_by_the_stopped_nodes_storage() -> None:
    setup = tiny_setup(**_policies())
    jobs = [_batch_job(), _prod_job()]
    base = _run(setup, jobs)
    pooled = _run(setup, jobs, WhatIf("pool", hot_pool_nodes=2))
    assert base.cost_by_tier["hot_pool"] == 0.0 and base.warm_nodes_avg == 0.0
    # The pool's two nodes boot at T0 (5 min, billed as running on-demand nodes: the on-demand line gains
    # 2 x 5/60 h x 21.957642 $/h = 3.66) and are then held stopped to the end, billing their 200 GB root volume
    # only: 200 x 0.08 $/GB-month / 730 h = 0.0219 $/h each, 2 x (10 h - 5 min) x 0.0219 = 0.4347.
    assert STANDBY == pytest.approx(200 * 0.08 / 730, rel=1e-9)
    boot_h = 5 / 60
    assert pooled.cost_by_tier["hot_pool"] == pytest.approx(2 * (HOURS - boot_h) * STANDBY, rel=1e-9)
    assert pooled.cost_by_tier["elastic_on_demand"] == pytest.approx(
        base.cost_by_tier["elastic_on_demand"] + 2 * boot_h * OD, rel=1e-9)
    assert pooled.cost_by_tier["elastic_spot"] == pytest.approx(base.cost_by_tier["elastic_spot"], rel=1e-9)
    assert pooled.cost_by_tier["steady"] == 0.0
    none = _run(setup, jobs, WhatIf("none", hot_pool_nodes=0))
    assert none.cost_by_tier["hot_pool"] == 0.0


# ------------------------------------------------------------------ prices


def test_a_groups_price_moves_the_line_that_group_bills_and_only_that() -> None:
    setup = tiny_setup(**_policies())
    jobs = [_batch_job(), _prod_job()]
    base = _run(setup, jobs)
    cheap = _run(setup, jobs, WhatIf("cheap-spot", group_prices={"spot": 1.0}))
    spot_node_h = base.cost_by_tier["elastic_spot"] / SPOT
    # The spot node's hours at 1.00 $/h instead of 2.4655: the spot line only.
    assert cheap.cost_by_tier["elastic_spot"] == pytest.approx(spot_node_h * 1.0, rel=1e-9)
    assert cheap.cost_by_tier["elastic_on_demand"] == pytest.approx(base.cost_by_tier["elastic_on_demand"], rel=1e-9)
    assert cheap.cost_by_tenant["batch"] == pytest.approx(base.cost_by_tenant["batch"] / SPOT, rel=1e-9)
    assert cheap.cost_by_tenant["prod"] == pytest.approx(base.cost_by_tenant["prod"], rel=1e-9)


def test_an_instance_types_price_moves_the_tier_it_prices() -> None:
    setup = tiny_setup(**_policies())
    jobs = [_batch_job(), _prod_job()]
    base = _run(setup, jobs)
    od_node_h = base.cost_by_tier["elastic_on_demand"] / OD
    cheaper = _run(setup, jobs, WhatIf("od-10", type_prices={"p4d.24xlarge": {"on_demand": 10.0}}))
    # On-demand p4d at 10 $/h: prod's node-hours at 10 instead of 21.957642; spot keeps its 2.4655.
    assert cheaper.cost_by_tier["elastic_on_demand"] == pytest.approx(od_node_h * 10.0, rel=1e-9)
    assert cheaper.cost_by_tier["elastic_spot"] == pytest.approx(base.cost_by_tier["elastic_spot"], rel=1e-9)
    both = _run(setup, jobs, WhatIf("both", type_prices={"p4d.24xlarge": {"on_demand": 10.0, "spot": 4.0}}))
    assert both.cost_by_tier["elastic_spot"] == pytest.approx(base.cost_by_tier["elastic_spot"] / SPOT * 4.0, rel=1e-9)


def test_prices_load_from_the_file_and_refuse_what_they_cannot_price(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text("prices:\n  spot: 1.5\n  p4d.24xlarge: {on_demand: 20}\n")
    w = load_what_if(path)
    assert (w.group_prices, w.type_prices) == ({"spot": 1.5}, {"p4d.24xlarge": {"on_demand": 20.0}})
    assert describe(w) == "spot at $1.5/node-hour; p4d.24xlarge at $20/h on-demand"
    for text, message in (("prices:\n  spot: 0\n", r"prices\.yaml:1: prices: spot must be a price"),
                          ("prices:\n  p4d.24xlarge: {reserved: 3}\n", r"takes on_demand and/or spot, got reserved"),
                          ("prices: 3\n", r"prices must map node group ids or instance types")):
        path.write_text(text)
        with pytest.raises(WhatIfError, match=message):
            load_what_if(path)
    setup = _with_steady(1)
    with pytest.raises(WhatIfError, match="'gpu-x' is not a node group of the set-up"):
        apply_what_if(setup, WhatIf("x", group_prices={"gpu-x": 1.0}))
    with pytest.raises(WhatIfError, match="onprem is on-prem"):
        apply_what_if(setup, WhatIf("x", group_prices={"onprem": 1.0}))
    with pytest.raises(WhatIfError, match="'z9.huge' is neither"):
        apply_what_if(setup, WhatIf("x", type_prices={"z9.huge": {"spot": 1.0}}))
    twin = dataclasses.replace(setup.groups[1], id="od2")
    shared = dataclasses.replace(setup, groups=(*setup.groups, twin), initial={**setup.initial, "od2": 0})
    with pytest.raises(WhatIfError, match="od is priced from the same offering .* as od2: price 'p4d.24xlarge' instead"):
        apply_what_if(shared, WhatIf("x", group_prices={"od": 1.0}))
    assert setup.catalog.group_price(setup.groups[2]) == SPOT, "the baseline's catalog is left alone"


# ------------------------------------------------------------------ spot work from the history


def test_the_mix_keeps_the_historys_fault_tolerance_so_its_jobs_may_move_to_spot() -> None:
    history = [_batch_job("b1", 2.0), _prod_job("p1", 2.0)]
    mix = job_mix(history)
    assert [(t.tenant, t.fault_tolerant, t.checkpoint_interval_s, t.checkpoint_duration_s) for t in mix] == [
        ("batch", True, 600.0, 30.0), ("prod", False, None, None)]
    jobs = synthetic_jobs(T0, 3600.0, [16.0] * 4, mix, seed=1)
    assert {j.tenant: (j.fault_tolerant, j.checkpoint_interval_s) for j in jobs} == {
        "batch": (True, 600.0), "prod": (False, None)}


def test_a_projection_prices_the_spot_work_the_policies_allow_and_no_spot_moves_it() -> None:
    # Batch's history jobs checkpoint every 10 min; its policy allows spot and draws no fault-tolerant share (as the
    # quickstart's): its projected jobs go on spot, and without spot they go on demand at the same node-hours.
    history = [_batch_job("b1", 2.0), _prod_job("p1", 2.0)]
    setup, mix = tiny_setup(**_policies()), job_mix(history)
    result = project(setup, NO_STATS, constant_forecast(16.0, 6), mix, start=T0, horizon_s=6 * 3600.0,
                     strategy=STRATEGY, what_ifs=[WhatIf("no-spot", spot=False)], paths=20)
    with_batch = 0
    for i, (base, no_spot) in enumerate(zip(result.baseline.runs, result.what_if["no-spot"].runs, strict=True)):
        spot_node_h = base.cost_by_tier["elastic_spot"] / SPOT
        drawn = {j.tenant for j in demand_jobs(result.paths[i], 3600.0, T0, mix, setup, 0, prefix=f"proj{i}")}
        with_batch += "batch" in drawn
        assert (spot_node_h > 0) == ("batch" in drawn), "a path's batch work goes on spot, and only batch's"
        assert no_spot.cost_by_tier["elastic_spot"] == 0.0
        if drawn == {"batch"}:  # batch alone: every node-hour it bought on spot moves to on-demand
            assert no_spot.cost_by_tier["elastic_on_demand"] == pytest.approx(
                base.cost_by_tier["elastic_on_demand"] + spot_node_h * OD, rel=1e-9)
    assert with_batch >= 15
    assert result.baseline.line_cost("elastic_spot", 0.1) > 0
    assert result.what_if["no-spot"].line_cost("elastic_spot", 0.9) == 0.0
    assert result.what_if["no-spot"].cost(0.5) > result.baseline.cost(0.5)


# ------------------------------------------------------------------ a tenant's P10


QUICKSTART_HOURS = (8.9, 17.5, 99.9, 133.8, 88.7, 57.2, 54.8, 45.4, 43.0, 52.2, 28.8)  # its 11 h of pooled demand


def _short_series() -> DemandSeries:
    stamps = tuple(T0 - timedelta(hours=len(QUICKSTART_HOURS) - k) for k in range(len(QUICKSTART_HOURS)))
    return DemandSeries("all", "any", stamps, QUICKSTART_HOURS, 3600.0)


def test_under_a_day_of_history_no_step_is_forecast_below_the_historys_lowest_hour() -> None:
    forecast, dependence = fit_forecast(_short_series(), 24 * 3600.0)
    # The fallback holds the last hour (28.8) with a band of the hourly changes: their 10th percentile is -32.86,
    # so its P10 is max(0, 28.8 - 32.86) = 0 at every step; floored at the lowest hour, 8.9.
    assert forecast.quantiles[0.1] == (8.9,) * 24
    assert forecast.quantiles[0.5] == (28.8,) * 24
    assert dependence.level == 1.0, "no past forecasts: every step moves together"
    assert "floored at the history's lowest demand (8.9 GPUs)" in forecast.model
    assert floored(forecast, 0.0) is forecast, "a floor no quantile is under changes nothing"


def test_a_tenant_with_work_in_every_hour_of_the_history_has_a_p10_above_zero() -> None:
    # Every step moves together, so a path sits at one quantile level all day. Unfloored, a path under the P10 level
    # owes nothing all day: at seed 8, 3 of the 20 (P10 of 20 runs: 0.9 of the way from the 2nd lowest to the 3rd),
    # so every tenant's P10 is $0. Floored at 8.9 GPUs, the P10 level owes 8.9 GPUs an hour and no path is empty.
    forecast, dependence = fit_forecast(_short_series(), 24 * 3600.0)
    bare = dataclasses.replace(forecast, quantiles={**forecast.quantiles, 0.1: (0.0,) * 24})
    mix = [JobTemplate("batch", 8, 3600.0), JobTemplate("prod", 1, 7200.0), JobTemplate("research", 4, 3600.0)]
    kwargs = {"start": T0, "horizon_s": 24 * 3600.0, "strategy": STRATEGY, "paths": 20, "seed": 8,
              "dependence": dependence}
    setup = tiny_setup(**_policies())
    before = project(setup, NO_STATS, bare, mix, **kwargs)  # type: ignore[arg-type]
    after = project(setup, NO_STATS, forecast, mix, **kwargs)  # type: ignore[arg-type]
    assert sum(1 for p in before.paths if not any(p)) == 3
    assert [before.baseline.tenant_cost(t, 0.1) for t in ("batch", "prod", "research")] == [0.0, 0.0, 0.0]
    assert all(any(p) for p in after.paths)
    assert all(after.baseline.tenant_cost(t, 0.1) > 0.0 for t in ("batch", "prod", "research"))
