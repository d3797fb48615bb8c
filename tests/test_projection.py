"""Cost projections: arrivals, on-prem cost math, budget breach, what-ifs, and the spot discount on a tiny set-up."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from burst.catalog import Catalog, OnPremCost, parse_spot_history
from burst.model import (
    Budget,
    CapacityType,
    Forecast,
    GpuShape,
    Job,
    Node,
    NodeGroup,
    NodeState,
    Policy,
    Snapshot,
    SpotPolicy,
    Tier,
    Transition,
)
from burst.planner import PlanIds, plan
from burst.projection.arrivals import JobTemplate, synthetic_jobs
from burst.projection.budget import breach_at
from burst.projection.capacity import HOURS_PER_MONTH, break_even, capacity_advice
from burst.projection.project import demand_jobs, path_jobs, project
from burst.projection.whatif import WhatIf, WhatIfError, apply_what_if, load_what_if, run_for
from burst.sim.engine import simulate
from burst.sim.setup import SimSetup
from burst.sim.traces import TraceStats

T0 = datetime(2026, 3, 2, tzinfo=UTC)
CATALOG = Catalog.load()
OD = 21.957642  # p4d.24xlarge us-east-1, per node-hour
SPOT = 2.4655
NO_STATS = TraceStats(jobs=0, gpu_hours=0.0, peak_gpus=8.0, p50_gpus=8.0, start=None, end=None)


def _cloud(gid: str, capacity: CapacityType, region: str = "us-east-1") -> NodeGroup:
    return NodeGroup(id=gid, provider="sim", region=region, tier=Tier.ELASTIC, capacity_type=capacity,
                     shape=GpuShape("A100", 8, 40.0), instance_type="p4d.24xlarge", min_size=0, max_size=4,
                     boot_latency_s=300.0)


def tiny_setup(**policies: Policy) -> SimSetup:
    """One on-demand and one spot p4d group, no steady tier, no spot interruptions."""
    return SimSetup(
        cluster="t", groups=(_cloud("od", CapacityType.ON_DEMAND), _cloud("spot", CapacityType.SPOT)),
        initial={"od": 0, "spot": 0}, spot_hazard_per_hour={"spot": 0.0}, policies=dict(policies), catalog=CATALOG,
        default_policy=Policy(tenant="_default"),
    )


def constant_forecast(gpus: float, hours: int, start: datetime = T0) -> Forecast:
    stamps = tuple(start + timedelta(hours=k) for k in range(hours))
    return Forecast(tenant="all", gpu_model="any", timestamps=stamps,
                    quantiles={q: (gpus,) * hours for q in (0.5, 0.9, 0.99)}, model="scripted")


# ------------------------------------------------------------------ arrivals


def test_arrivals_pay_the_paths_gpu_seconds_with_the_mix_and_carry_the_overshoot() -> None:
    mix = [JobTemplate("a", 4, 3600.0)]
    jobs = synthetic_jobs(T0, 3600.0, [8.0, 8.0, 2.0, 2.0], mix, seed=1)
    # 20 GPU-hours owed, 4 per job: five jobs, whatever the first job's delay; none before the path owes its work.
    assert len(jobs) == 5
    assert all(j.gpus == 4 and j.duration_s == 3600.0 and j.tenant == "a" for j in jobs)
    assert all(T0 <= j.submitted_at < T0 + timedelta(hours=4) for j in jobs)
    assert synthetic_jobs(T0, 3600.0, [8.0, 8.0, 2.0, 2.0], mix, seed=1) == jobs  # seeded


def test_a_paths_jobs_reproduce_its_gpu_hours_on_average_with_a_heavy_tailed_mix() -> None:
    # 99 one-GPU-hour jobs and one of 100 GPU-hours; the path owes 4 GPUs for a day (96 GPU-hours). Starting the
    # count at the path's first instant would add E[w^2] / (2 E[w]) = 101 / 3.98 = 25 GPU-hours to every path.
    mix = [JobTemplate("a", 1, 3600.0)] * 99 + [JobTemplate("a", 4, 25 * 3600.0)]
    path = [4.0] * 24
    drawn = [sum(j.gpus * (j.duration_s or 0.0) for j in synthetic_jobs(T0, 3600.0, path, mix, seed=s)) / 3600.0
             for s in range(1000)]
    mean = sum(drawn) / len(drawn)
    assert mean == pytest.approx(96.0, rel=0.05)


def test_every_path_draws_the_same_jobs_so_a_higher_path_owes_each_tenant_more() -> None:
    setup = tiny_setup(batch=Policy(tenant="batch", spot=SpotPolicy(allowed=True, fault_tolerant_fraction=0.5)))
    stamps = tuple(T0 + timedelta(hours=k) for k in range(12))
    forecast = Forecast(tenant="all", gpu_model="any", timestamps=stamps, model="scripted",
                        quantiles={0.5: (8.0,) * 12, 0.9: (20.0,) * 12, 0.99: (30.0,) * 12})
    mix = [JobTemplate("batch", 8, 3600.0), JobTemplate("prod", 2, 1800.0), JobTemplate("research", 4, 7200.0)]
    p50 = path_jobs(forecast, 0.5, T0, 12 * 3600.0, mix, setup, seed=3)
    p90 = path_jobs(forecast, 0.9, T0, 12 * 3600.0, mix, setup, seed=3)

    def shape(j: Job) -> tuple[object, ...]:
        return (j.id, j.tenant, j.gpus, j.duration_s, j.fault_tolerant)

    by_id = {j.id: j for j in p90}
    assert all(j.id in by_id and shape(by_id[j.id]) == shape(j) for j in p50), "P50's jobs are P90's first ones"
    for tenant in ("batch", "prod", "research"):
        owed = [sum(j.gpus * j.duration_s for j in jobs if j.tenant == tenant) for jobs in (p50, p90)]
        assert owed[1] >= owed[0] > 0, tenant


def test_arrivals_refuse_an_empty_mix() -> None:
    with pytest.raises(ValueError, match="mix is empty"):
        synthetic_jobs(T0, 3600.0, [1.0], [])


# ------------------------------------------------------------------ on-prem cost math


def test_break_even_of_owned_gpus_from_the_on_prem_cost_model() -> None:
    onprem = OnPremCost()  # capex 25000, power 0.7 kW x PUE 1.4 x 0.12 $/kWh, ops 0.25 $/GPU-h
    # 16 GPUs over the steady tier for the whole (2-step, 1 h each) horizon, 8 GPUs bought, cloud at 3 $/GPU-h.
    advice = break_even([16.0, 16.0], 3600.0, 32, 8, onprem, 3.0, above_share=1.0)
    running = 8 * (0.7 * 1.4 * 0.12 + 0.25) * 730.0  # 8 x 0.3676 x 730 = 2146.784
    avoided = 8 * 730.0 * 3.0  # the 8 GPUs are busy all month
    assert advice.onprem_running_usd_month == pytest.approx(running)
    assert advice.onprem_running_usd_month == pytest.approx(2146.784)
    assert advice.cloud_avoided_usd_month == pytest.approx(avoided)
    assert advice.capex_usd == 200000.0
    assert advice.payback_months == pytest.approx(200000.0 / (avoided - running))  # 13.01 months
    # Cloud cheaper than running the GPUs: never pays back.
    assert break_even([16.0], 3600.0, 32, 8, onprem, 0.3).payback_months is None
    assert OnPremCost().usd_per_gpu_hour == pytest.approx(25000 / 35040 + 0.7 * 1.4 * 0.12 + 0.25)


def test_capacity_advice_adds_the_median_p50_above_the_steady_tier_in_whole_nodes() -> None:
    onprem = OnPremCost()
    owned = {"A100": 32}
    # P50 of 30, 36, 42, 52 GPUs (above 32 GPUs 3 steps of 4): own their median, 39, so add 7 -> one 8-GPU node.
    advice = capacity_advice(constant_path([30.0, 36.0, 42.0, 52.0]), owned, onprem, 3.0, start=T0,
                             end=T0 + timedelta(hours=3), step_s=3600.0)
    assert advice is not None and advice.steady_tier is not None
    assert advice.steady_tier.recommended_gpus == 39 and advice.above_share == 0.75 and advice.add_gpus == 8
    assert (advice.steady_tier.window_start, advice.steady_tier.window_end) == (T0, T0 + timedelta(hours=3))
    absorbed_h = 0 + 4 + 8 + 8  # min(8, excess) per 1 h step
    assert advice.cloud_avoided_usd_month == pytest.approx(absorbed_h * HOURS_PER_MONTH / 4 * 3.0)
    # Above the steady tier for one step in four: the median, 30, is below it; nothing to buy.
    quiet = capacity_advice(constant_path([30.0, 30.0, 30.0, 52.0]), owned, onprem, 3.0, start=T0,
                            end=T0 + timedelta(hours=3), step_s=3600.0)
    assert quiet is not None and quiet.add_gpus == 0 and quiet.steady_tier is not None
    assert quiet.steady_tier.recommended_gpus == 30
    # Only the window's steps count: the last two alone have a median of 41 -> add 9 -> two nodes.
    late = capacity_advice(constant_path([30.0, 36.0, 30.0, 52.0]), owned, onprem, 3.0,
                           start=T0 + timedelta(hours=2), end=T0 + timedelta(hours=3), step_s=3600.0)
    assert late is not None and late.add_gpus == 16 and late.above_share == 0.5


def constant_path(p50: list[float], start: datetime = T0) -> Forecast:
    """A scripted hourly forecast whose every quantile is `p50`, on any GPU model."""
    stamps = tuple(start + timedelta(hours=k) for k in range(len(p50)))
    return Forecast(tenant="all", gpu_model="any", timestamps=stamps, model="scripted",
                    quantiles={q: tuple(p50) for q in (0.1, 0.5, 0.9, 0.99)})


def test_plan_and_cost_advise_the_same_steady_tier_on_the_same_forecast_and_owned_gpus() -> None:
    # 4 on-prem nodes of 8 A100s; P50 demand of 30, 31, 40 and 41 GPUs over the 4 h both windows cover. Its median is
    # 35.5: both own 36 GPUs, and cost adds 4 of them as one 8-GPU node. (The lower median of the demand above the
    # steady tier, 0, added nothing.)
    onprem = NodeGroup(id="onprem", provider="sim", region="dc1", tier=Tier.STEADY, capacity_type=CapacityType.ONPREM,
                       shape=GpuShape("A100", 8, 40.0), instance_type="dgx-a100", min_size=4, max_size=4)
    groups = (onprem, _cloud("od", CapacityType.ON_DEMAND), _cloud("spot", CapacityType.SPOT))
    forecast = constant_path([30.0, 31.0, 40.0, 41.0])
    nodes = tuple(Node(id=f"onprem-{i}", group_id="onprem", state=NodeState.READY, gpus=8, created_at=T0,
                       history=(Transition(NodeState.READY, T0),)) for i in range(4))
    snapshot = Snapshot(groups=groups, nodes=nodes, jobs=(), targets={"onprem": 4, "od": 0, "spot": 0})
    (planned,) = plan(snapshot, [forecast], {}, CATALOG, now=T0, ids=PlanIds("p")).advice
    setup = SimSetup(cluster="t", groups=groups, initial={"onprem": 4, "od": 0, "spot": 0},
                     spot_hazard_per_hour={"spot": 0.0}, policies={}, catalog=CATALOG,
                     default_policy=Policy(tenant="_default"))
    projected = project(setup, NO_STATS, forecast, [JobTemplate("prod", 8, 3600.0)], start=T0, horizon_s=4 * 3600.0,
                        strategy="burst-no-forecast", paths=2)
    capacity = projected.to_json()["capacity"]
    assert planned.recommended_gpus == 36 and planned.steady_gpus == 32
    assert capacity["steady_tier"] == planned.to_json(), "the same figures over the same window"
    assert capacity["add_gpus"] == 8 and capacity["steady_gpus"] == 32


# ------------------------------------------------------------------ budgets


def test_breach_instant_interpolates_inside_the_interval_that_passes_the_budget() -> None:
    points = [(T0 + timedelta(hours=h), 10.0) for h in range(1, 11)]  # 10 $ an hour
    assert breach_at(points, 35.0, start=T0) == T0 + timedelta(hours=3.5)
    assert breach_at(points, 35.0, start=T0, month_to_date_usd=20.0) == T0 + timedelta(hours=1.5)
    assert breach_at(points, 1000.0, start=T0) is None
    assert breach_at(points, None, start=T0) is None
    assert breach_at(points, 35.0, start=T0, month_to_date_usd=40.0) == T0  # already over
    # From 20:00 on 31 March: 60 $ spent in March plus 10 $ by 21:00, passing 75 $ half-way to 22:00 ...
    end_of_month = datetime(2026, 3, 31, 20, tzinfo=UTC)
    late = [(end_of_month + timedelta(hours=h), 10.0) for h in range(1, 11)]
    assert breach_at(late, 75.0, start=end_of_month, month_to_date_usd=60.0) == end_of_month + timedelta(hours=1.5)
    # ... but from zero, March ends at 30 $ and April's first 7 h (70 $) start again from zero: no breach.
    assert breach_at(late, 75.0, start=end_of_month, month_to_date_usd=0.0) is None


def test_budget_breach_on_a_scripted_forecast_is_when_the_spend_rate_uses_up_the_budget() -> None:
    # prod runs one 8-GPU on-demand node from its first job on; 400 $ spent this month, budget 500 $.
    setup = tiny_setup(prod=Policy(tenant="prod", budget=Budget(usd_per_month=500.0)))
    stamps = tuple(T0 + timedelta(hours=k) for k in range(8))
    burst_then_quiet = (64.0,) + (0.0,) * 7  # owes one job's 64 GPU-hours in its first hour
    forecast = Forecast(tenant="all", gpu_model="any", timestamps=stamps, model="scripted",
                        quantiles={q: burst_then_quiet for q in (0.5, 0.9, 0.99)})
    mix = [JobTemplate("prod", 8, 8 * 3600.0)]  # one job pays the whole path, submitted in its first hour
    result = project(setup, NO_STATS, forecast, mix, start=T0, horizon_s=8 * 3600.0, strategy="burst-no-forecast",
                     month_to_date={"prod": 400.0})
    i = result.baseline.median_index  # its path's one job, drawn as the projection drew it
    (job,) = demand_jobs(result.paths[i], 3600.0, T0, mix, setup, 0, prefix=f"proj{i}")
    replay = simulate(run_for("burst-no-forecast", setup, NO_STATS), [job], start=T0, end=T0 + timedelta(hours=8),
                      keep_ledger=True)  # the median run again, keeping its ledger rows (a projection keeps sums)
    assert replay.cost_by_tenant == result.baseline.median_run.cost_by_tenant
    started = replay.ledger[0].at  # the first tick that charges it (its node has booted)
    assert job.submitted_at < started <= job.submitted_at + timedelta(seconds=300 + 2 * 60)
    passed = result.baseline.exceeds_at["prod"]
    assert passed is not None and passed.budget == "usd_per_month"
    breach = passed.at
    expected = started + timedelta(hours=100.0 / OD)  # 100 $ left at 21.96 $/h: 4.55 h
    assert abs((breach - expected).total_seconds()) <= 60.0  # within one loop interval (the ledger's sampling)
    body = result.to_json()
    assert body["by_tenant"]["prod"]["budget_usd_month"] == 500.0
    assert body["by_tenant"]["prod"]["exceeds_budget_at"] == breach.isoformat()
    assert set(body) == {"horizon_h", "total_usd", "by_tenant", "by_tier", "paths", "what_if", "spot_from_history",
                         "capacity", "history", "services"}
    assert body["capacity"] is None, "no steady tier, no capacity advice"


# ------------------------------------------------------------------ what-ifs


def test_disabling_spot_raises_cost_by_the_spot_discount_on_the_batch_share() -> None:
    batch = Policy(tenant="batch", spot=SpotPolicy(allowed=True, fault_tolerant_fraction=1.0))
    setup = tiny_setup(batch=batch, prod=Policy(tenant="prod"))
    # 16 GPUs of demand for 6 h, drawn (seeded) from a batch and a prod template; batch may use spot.
    forecast = constant_forecast(16.0, 6)
    mix = [JobTemplate("batch", 8, 6 * 3600.0), JobTemplate("prod", 8, 6 * 3600.0)]
    result = project(setup, NO_STATS, forecast, mix, start=T0, horizon_s=6 * 3600.0, strategy="burst-no-forecast",
                     what_ifs=[WhatIf("no-spot", spot=False)], paths=20)
    only_batch = 0
    for base, no_spot in zip(result.baseline.runs, result.what_if["no-spot"].runs, strict=True):  # path by path
        spot_node_h = base.cost_by_tier["elastic_spot"] / SPOT
        if set(base.cost_by_tenant) != {"batch"}:
            continue  # prod's work cannot move: compare the draws where all of it may
        only_batch += 1
        assert spot_node_h > 0 and base.spot_gpu_hours == pytest.approx(8 * spot_node_h)
        assert no_spot.cost_by_tier["elastic_spot"] == 0.0
        # The same jobs on the same schedule: the batch node-hours move from spot to on-demand prices.
        assert no_spot.cost_usd - base.cost_usd == pytest.approx(spot_node_h * (OD - SPOT), rel=1e-9)
        assert no_spot.cost_by_tier["elastic_on_demand"] == pytest.approx(
            base.cost_by_tier["elastic_on_demand"] + spot_node_h * OD, rel=1e-9)
    assert only_batch >= 2
    no_spot_json = result.to_json()["what_if"]["no-spot"]["total_usd"]
    assert no_spot_json["p50"] == pytest.approx(result.what_if["no-spot"].cost(0.5), abs=1e-3)
    assert no_spot_json["p50"] > result.to_json()["total_usd"]["p50"]


SPOT_HISTORY = """provider,instance_type,region,zone,timestamp,usd_per_hour,source
aws,p4d.24xlarge,us-east-1,us-east-1a,2026-01-01T00:00:00Z,1.5,ec2
aws,p4d.24xlarge,us-east-1,us-east-1a,2026-02-10T00:00:00Z,3.0,ec2
aws,p4d.24xlarge,us-east-1,us-east-1b,2026-02-20T00:00:00Z,2.0,ec2
aws,p4d.24xlarge,us-east-1,us-east-1b,2026-03-02T03:00:00Z,0.5,ec2
"""


def test_spot_is_priced_at_the_last_30_days_median_of_the_history() -> None:
    # 30 days before T0 = Jan 31: 1.5 to Feb 10 (10 d), zone a's 3.0 to Feb 20 (10 d), then zone b's cheaper 2.0
    # (10 d). 1.5 covers 10 d of 30, 1.5 and 2.0 cover 20 d >= 15 d: the median is 2.0. The 0.5 from 03:00 on is
    # inside the horizon and is not used (the price is held flat).
    batch = Policy(tenant="batch", spot=SpotPolicy(allowed=True, fault_tolerant_fraction=1.0))
    flat = tiny_setup(batch=batch, prod=Policy(tenant="prod"))
    dated = dataclasses.replace(flat, catalog=CATALOG.with_spot_history(parse_spot_history(SPOT_HISTORY, "h.csv")))
    forecast = constant_forecast(16.0, 6)
    mix = [JobTemplate("batch", 8, 6 * 3600.0), JobTemplate("prod", 8, 6 * 3600.0)]
    run = {name: project(s, NO_STATS, forecast, mix, start=T0, horizon_s=6 * 3600.0, strategy="burst-no-forecast",
                         paths=20) for name, s in (("flat", flat), ("dated", dated))}
    spot_paths = 0
    for base, hist in zip(run["flat"].baseline.runs, run["dated"].baseline.runs, strict=True):  # the same paths' jobs
        spot_node_h = base.cost_by_tier["elastic_spot"] / SPOT
        spot_paths += spot_node_h > 0
        assert hist.spot_gpu_hours == pytest.approx(8 * spot_node_h)  # the same schedule
        assert hist.cost_by_tier["elastic_spot"] == pytest.approx(spot_node_h * 2.0, rel=1e-9)
        assert hist.cost_by_tier["elastic_on_demand"] == pytest.approx(base.cost_by_tier["elastic_on_demand"], rel=1e-9)
    assert spot_paths >= 2
    assert run["dated"].to_json()["spot_from_history"] == {"aws/p4d.24xlarge/us-east-1": 2.0}
    assert run["flat"].to_json()["spot_from_history"] == {}
    assert any(a.startswith("spot prices: the time-weighted median") and "aws/p4d.24xlarge/us-east-1 2 $/h" in a
               for a in run["dated"].assumptions)


def _write(tmp_path: Path, text: str, name: str = "w.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_what_if_file_loads_every_key(tmp_path: Path) -> None:
    w = load_what_if(_write(tmp_path, "name: big\nspot: false\nhot_pool_nodes: 2\nsteady_gpus_delta: +16\nregion: us-west-2\n"))
    assert (w.name, w.spot, w.hot_pool_nodes, w.steady_gpus_delta, w.region) == ("big", False, 2, 16, "us-west-2")
    assert load_what_if(_write(tmp_path, "spot: false\n", "no-spot.yaml")).name == "no-spot"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("spot: false\nhot_pool: 3\n", r"w\.yaml:2: unknown key 'hot_pool' \(expected one of name, spot, hot_pool_nodes"),
        ("spot: no-thanks\n", r"w\.yaml:1: spot must be true or false"),
        ("name: x\nhot_pool_nodes: -1\n", r"w\.yaml:2: hot_pool_nodes must be a whole number >= 0"),
        ("steady_gpus_delta: 1.5\n", r"w\.yaml:1: steady_gpus_delta must be a whole number"),
        ("", r"w\.yaml:1: empty what-if"),
        ("- spot\n", r"w\.yaml:1: a what-if is a mapping"),
        ("name: only-a-name\n", r"give at least one of"),
        ("spot: [\n", r"w\.yaml"),
    ],
)
def test_bad_what_if_file_gives_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(WhatIfError, match=message):
        load_what_if(_write(tmp_path, text))


def test_what_if_the_set_up_cannot_take_fails_whole_and_leaves_the_set_up_alone() -> None:
    setup = tiny_setup()
    with pytest.raises(WhatIfError, match="no price for sim instance type 'p4d.24xlarge' in mars-1"):
        apply_what_if(setup, WhatIf("mars", region="mars-1", spot=False))
    with pytest.raises(WhatIfError, match="steady_gpus_delta needs a steady"):
        apply_what_if(setup, WhatIf("more", steady_gpus_delta=16))
    assert [g.region for g in setup.groups] == ["us-east-1", "us-east-1"]
    moved = apply_what_if(setup, WhatIf("west", region="us-west-2"))
    assert [g.region for g in moved.groups] == ["us-west-2", "us-west-2"]
    assert CATALOG.group_price(moved.groups[1]) == 7.9992  # p4d spot in us-west-2


def test_spot_true_opens_spot_to_every_tenant_and_says_when_it_changes_nothing() -> None:
    closed = tiny_setup(batch=Policy(tenant="batch"), prod=Policy(tenant="prod"))
    opened = apply_what_if(closed, WhatIf("spot", spot=True))
    assert all(opened.policy(t).spot.allowed for t in ("batch", "prod", "anyone-else"))
    assert not closed.policy("batch").spot.allowed, "the baseline is left alone"
    with pytest.raises(WhatIfError, match="spot: true changes nothing"):
        apply_what_if(opened, WhatIf("again", spot=True))
    no_spot_group = dataclasses.replace(closed, groups=closed.groups[:1], initial={"od": 0})
    with pytest.raises(WhatIfError, match="spot: true needs a spot group"):
        apply_what_if(no_spot_group, WhatIf("spot", spot=True))


def test_steady_delta_adds_whole_nodes() -> None:
    steady = NodeGroup(id="onprem", provider="sim", region="dc1", tier=Tier.STEADY, capacity_type=CapacityType.ONPREM,
                       shape=GpuShape("A100", 8, 40.0), instance_type="dgx-a100", min_size=2, max_size=2)
    setup = SimSetup(cluster="t", groups=(steady,), initial={"onprem": 2}, spot_hazard_per_hour={}, policies={},
                     catalog=CATALOG)
    grown = apply_what_if(setup, WhatIf("more", steady_gpus_delta=12))  # 12 GPUs: 2 whole nodes
    assert grown.initial["onprem"] == 4 and grown.steady_gpus() == 32
    assert (grown.groups[0].min_size, grown.groups[0].max_size) == (4, 4)
    shrunk = apply_what_if(setup, WhatIf("less", steady_gpus_delta=-8))
    assert shrunk.steady_gpus() == 8
