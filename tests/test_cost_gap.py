"""The floor bound, the cost gap waterfall, delays and time to capacity after a requeue, on scripted runs."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from builders import T0

from burst.model import Job, Policy
from burst.settings import data_dir
from burst.sim.compare import compare
from burst.sim.engine import GAP_PARTS, Spend, cost_gap, reference_prices, simulate
from burst.sim.floor import floor
from burst.sim.oracle import oracle
from burst.sim.registry import default_names, strategy_run
from burst.sim.setup import SimSetup, default_setup, with_spot_scarcity
from burst.sim.traces import Trace, load_trace


def _setup(jobs: list[Job], onprem_nodes: int, *, spot: bool = True) -> SimSetup:
    """The default set-up with `onprem_nodes` 8-GPU on-prem nodes (spot allowed unless `spot` is False)."""
    stats = Trace(path=Path("scripted.csv"), format="csv", jobs=tuple(jobs)).stats()
    base = default_setup(stats)
    onprem, od, spot_group = base.groups
    setup = dataclasses.replace(
        base,
        groups=(dataclasses.replace(onprem, min_size=onprem_nodes, max_size=onprem_nodes), od, spot_group),
        initial={"onprem": onprem_nodes, "cloud-od": 0, "cloud-spot": 0},
    )
    return setup if spot else dataclasses.replace(setup, default_policy=Policy(tenant="_default"))


def _job(jid: str, gpus: int, at_h: float, hours: float, *, ft: bool = False) -> Job:
    return Job(id=jid, tenant="t", gpus=gpus, submitted_at=T0 + timedelta(hours=at_h), duration_s=hours * 3600.0,
               fault_tolerant=ft, checkpoint_interval_s=1800.0 if ft else None)


def test_the_floor_places_work_that_cannot_move_first_fit_and_pays_a_boot_per_cloud_node() -> None:
    """One 8-GPU on-prem node. A (6 GPUs, 0-4 h) takes it; B (6 GPUs, 0-1 h) opens a cloud node, released when
    B ends; D (6 GPUs, 2-3 h) opens another (a second boot). C (fault-tolerant, 4 GPUs, 0-1 h) is fluid: it
    fills A's 2 spare GPUs and B's node's 2, so it needs no spot at all."""
    jobs = [_job("a", 6, 0, 4), _job("b", 6, 0, 1), _job("c", 4, 0, 1, ft=True), _job("d", 6, 2, 1)]
    setup = _setup(jobs, 1)
    _, od, spot = setup.groups
    p_od, p_spot = setup.catalog.group_price(od), setup.catalog.group_price(spot)  # per 8-GPU node-hour
    end = T0 + timedelta(hours=6)
    bound = floor(setup, jobs, start=T0, end=end)
    steady = 6 * setup.catalog.group_price(setup.groups[0])
    # two cloud nodes, each paid its 300 s boot and the hour its job runs
    assert bound.cost_by_tier["elastic_on_demand"] == pytest.approx(2 * (3600 + 300) / 3600 * p_od)
    assert bound.cost_by_tier["elastic_spot"] == 0.0 and bound.cost_by_tier["steady"] == pytest.approx(steady)
    assert bound.spend is not None
    assert bound.spend.booting_usd == pytest.approx(2 * 300 / 3600 * p_od)
    assert bound.spend.idle_usd == pytest.approx(2 / 8 * p_od)  # D's node: 2 GPUs idle for its hour
    assert bound.spend.spot_work_on_demand_usd == pytest.approx(2 / 8 * (p_od - p_spot))  # C's 2 GPUs there
    assert bound.jobs_completed == 4 and bound.work_gpu_hours == pytest.approx(6 * 4 + 6 + 4 + 6)
    # the oracle is fluid: 0-1 h it needs 8 GPUs beyond on-prem (C's 4 on spot), 2-3 h 4 more on-demand
    fluid = oracle(setup, jobs, start=T0, end=end)
    assert fluid.cost_usd == pytest.approx(steady + 4 / 8 * p_spot + 8 / 8 * p_od)
    assert bound.cost_usd > fluid.cost_usd


def test_on_the_floor_fault_tolerant_overflow_runs_on_spot_and_wide_jobs_take_whole_nodes() -> None:
    """No on-prem. E (cannot move, 12 GPUs, 1 h) takes a whole node and 4 GPUs of a second; F (fault-tolerant,
    8 GPUs, 1 h) fills the second node's 4 spare GPUs and puts 4 on spot."""
    jobs = [_job("e", 12, 0, 1), _job("f", 8, 0, 1, ft=True)]
    setup = _setup(jobs, 0)
    _, od, spot = setup.groups
    bound = floor(setup, jobs, start=T0, end=T0 + timedelta(hours=2))
    assert bound.cost_by_tier["elastic_on_demand"] == pytest.approx(2 * 3900 / 3600 * setup.catalog.group_price(od))
    assert bound.cost_by_tier["elastic_spot"] == pytest.approx(4 / 8 * setup.catalog.group_price(spot))
    assert bound.spot_gpu_hours == pytest.approx(4.0)


def test_on_the_floor_a_gang_job_that_cannot_move_stays_within_one_tier() -> None:
    """One 8-GPU on-prem node, free. G (cannot move, 16 GPUs, 1 h) does not fit on-prem whole, so both its nodes
    are cloud nodes (no controller places one job across tiers); H (cannot move, 8 GPUs, 2 h) then takes the
    on-prem node (split, G would have held it and H opened a third cloud node)."""
    jobs = [_job("g", 16, 0, 1), _job("h", 8, 0.5, 2)]
    setup = _setup(jobs, 1)
    _, od, _ = setup.groups
    bound = floor(setup, jobs, start=T0, end=T0 + timedelta(hours=3))
    assert bound.cost_by_tier["elastic_on_demand"] == pytest.approx(2 * 3900 / 3600 * setup.catalog.group_price(od))
    assert bound.spend is not None
    assert bound.spend.onprem_other_gpu_s == pytest.approx(8 * 7200.0)  # H's two hours, none of G's


def test_the_waterfall_of_a_scripted_run_names_where_the_money_went() -> None:
    """A (8 GPUs, 1 h) fits on-prem; B (8 GPUs, 30 min, cannot go to spot) needs a cloud node.

    burst launches at 0 s; the node is ready at 300 s and its ready event wakes the tick that places B at 301 s
    (the 1 s batch window); B runs to 2101 s, its finish wakes a tick at 2102 s, the node idles to break-even
    (one 5 min boot latency) and is released at 2402 s, gone at 2432 s: 2432 s paid. The oracle pays B's 1800 s;
    the floor adds the one boot (300 s: structural). What burst pays beyond the floor is 332 s: 331 s of an idle
    node (the break-even, the 30 s termination, the second before B was placed), and the 2 s the ticks came after the
    events (tick lag: the node held by B 1 s past its finish, less the second B started late, which the
    on-prem shortfall takes back). Of the idle node's 331 s, the 300 s of the break-even are a ready node with
    no job on it at all (`empty_node_usd`). B waited 301 s, so its delay is 301 s; A's is 0."""
    jobs = [_job("a", 8, 0, 1), _job("b", 8, 0, 0.5)]
    setup = _setup(jobs, 1, spot=False)
    p_od = setup.catalog.group_price(setup.groups[1])
    trace = Trace(path=Path("scripted.csv"), format="csv", jobs=tuple(jobs))
    result = compare(trace, ["burst-no-forecast", "floor", "oracle"], setup=setup)
    burst, base, bound = (result.results[n] for n in ("burst-no-forecast", "floor", "oracle"))
    assert burst.cost_usd - bound.cost_usd == pytest.approx(632 / 3600 * p_od)
    gap = burst.cost_gap
    assert list(gap) == list(GAP_PARTS)
    assert gap["structural"] == pytest.approx(300 / 3600 * p_od)
    assert gap["idle"] == pytest.approx(331 / 3600 * p_od)
    assert burst.spend is not None and burst.spend.empty_node_usd == pytest.approx(300 / 3600 * p_od)
    assert gap["tick_lag"] == pytest.approx(2 / 3600 * p_od) and gap["onprem_shortfall"] == pytest.approx(-1 / 3600 * p_od)
    assert all(gap[p] == pytest.approx(0.0, abs=1e-9) for p in GAP_PARTS
               if p not in ("structural", "idle", "tick_lag", "onprem_shortfall"))
    assert base.cost_gap["structural"] == pytest.approx(base.cost_usd - bound.cost_usd)
    assert sum(base.cost_gap.values()) == pytest.approx(base.cost_usd - bound.cost_usd)
    assert all(v == 0.0 for v in bound.cost_gap.values())
    assert sorted(burst.waits_s) == [0.0, 301.0]
    assert burst.delay_mean_s == pytest.approx(150.5) and burst.delay_p95_s == pytest.approx(285.95)
    assert burst.work_gpu_hours == pytest.approx(12.0) and burst.jobs_completed == 2


def test_each_waterfall_part_reads_its_own_spend() -> None:
    """cost_gap is pure: each part moves with its own line of the spend, and 'other' takes what is left."""
    prices = (3600.0, 360.0)  # USD per GPU-hour: 1 USD per on-demand GPU-second, 0.1 per spot one
    base = Spend(steady_usd=10.0, booting_usd=2.0, idle_usd=1.0, onprem_eligible_gpu_s=5.0, onprem_other_gpu_s=7.0,
                 kept_eligible_gpu_s=20.0, kept_other_gpu_s=30.0, work_eligible_gpu_s=20.0, work_other_gpu_s=30.0)
    run = Spend(steady_usd=10.0, booting_usd=5.0, idle_usd=4.0, hot_pool_usd=0.5, rerun_usd=3.0,
                spot_work_on_demand_usd=1.5, onprem_eligible_gpu_s=3.0, onprem_other_gpu_s=6.0,
                kept_eligible_gpu_s=21.0, kept_other_gpu_s=31.0, work_eligible_gpu_s=19.0, work_other_gpu_s=29.0)
    gap = cost_gap(150.0, run, oracle_usd=100.0, floor_usd=110.0, floor=base, prices=prices)
    assert gap == pytest.approx({
        "structural": 10.0, "steady_tier": 0.0, "booting": 3.0, "idle": 3.0, "hot_pool": 0.5, "rerun": 3.0,
        "on_demand_for_spot_work": 1.5,
        "onprem_shortfall": 0.1 * 2 + 1.0 * 1,  # 2 eligible GPU-s at spot, 1 other at on-demand
        "tick_lag": 0.1 * 2 + 1.0 * 2,  # held 2 s beyond the work of each kind
        "undelivered": -(0.1 * 1 + 1.0 * 1),  # 1 GPU-s of each kind the floor delivers and the run does not
        "other": 50.0 - (10 + 3 + 3 + 0.5 + 3 + 1.5 + 1.2 + 2.2 - 1.1),
    })
    assert cost_gap(100.0, None, oracle_usd=100.0, floor_usd=110.0, floor=base, prices=prices) == dict.fromkeys(GAP_PARTS, 0.0)


def test_on_a_real_window_the_parts_sum_to_the_gap_and_other_stays_under_a_tenth() -> None:
    trace = load_trace(data_dir() / "traces" / "itp-cluster02.csv").window(days=1)
    result = compare(trace, ["burst-no-forecast", "reactive", "floor", "oracle"])
    bound = result.results["oracle"].cost_usd
    for name in ("burst-no-forecast", "reactive"):
        r = result.results[name]
        assert sum(r.cost_gap.values()) == pytest.approx(r.cost_usd - bound), name
        assert r.cost_usd > result.results["floor"].cost_usd > bound
        assert abs(r.cost_gap["other"]) <= 0.1 * (r.cost_usd - bound), name


def test_a_requeued_job_counts_its_unplaced_demand_from_its_requeue() -> None:
    """One 8-GPU on-prem node. X (tenant lo, 8 GPUs, 4 h) takes it at 0 s; at 2 h Y (tenant hi, priority 10,
    on-prem only) preempts it. X goes back to the queue and burst launches a cloud node for it: that capacity
    answers demand that appeared at the eviction, so its time to capacity is the next tick plus a boot, not
    the 2 h since X's submission."""
    x = Job(id="x", tenant="lo", gpus=8, submitted_at=T0, duration_s=4 * 3600.0)
    y = Job(id="y", tenant="hi", gpus=8, submitted_at=T0 + timedelta(hours=2), duration_s=3600.0)
    setup = dataclasses.replace(_setup([x, y], 1, spot=False), policies={
        "hi": Policy(tenant="hi", priority=10, allowed_regions=("dc1",)),
        "lo": Policy(tenant="lo", preemptible_by=("hi",)),
    })
    stats = Trace(path=Path("scripted.csv"), format="csv", jobs=(x, y)).stats()
    r = simulate(strategy_run("burst-no-forecast", setup, stats), [x, y], start=T0, end=T0 + timedelta(hours=8))
    # the tick after the eviction comes one interval later (the clock used to jump past it to the run's end)
    assert r.evictions == 1 and r.scale_ups == 1 and r.jobs_completed == 2
    boot = setup.groups[1].boot_latency_s
    assert r.time_to_capacity_p95_s <= boot + setup.loop_interval_s


def test_under_spot_scarcity_a_spot_offering_holds_only_its_share_and_every_strategy_runs() -> None:
    """Spot scarcity caps the spot group at a quarter of its max size (here 1 node of 4): the second spot node
    cannot launch, so the fault-tolerant work that wanted it falls back to on-demand; the static strategies,
    which have no spot group, run too."""
    jobs = [_job(f"ft{i}", 8, 0, 2, ft=True) for i in range(2)] + [_job(f"x{i}", 8, 0, 2) for i in range(2)]
    setup = with_spot_scarcity(_setup(jobs, 0))
    assert setup.capacity == {"cloud-spot": 1}
    trace = Trace(path=Path("scripted.csv"), format="csv", jobs=tuple(jobs))
    result = compare(trace, list(default_names()), setup=setup)
    reactive = result.results["reactive"]
    assert reactive.spot_gpu_hours <= 8 * (result.end - result.start).total_seconds() / 3600.0
    assert reactive.cost_by_tier["elastic_on_demand"] > 0 and reactive.jobs_completed == 4
    assert set(result.results) == set(default_names())


def test_once_nothing_is_queued_a_running_jobs_remainder_is_charged_at_its_nodes_price() -> None:
    """No on-prem, no spot. A (8 GPUs, cannot move, 10 h) in a run that ends at 2 h. burst launches an on-demand
    node at 0 s, places A at 301 s (ready at 300 s, the 1 s batch window): the provider bills the node's 7,200 s
    and A has done 6,899 s by the end. Its remainder (29,101 s on 8 GPUs) is charged at the node's price per GPU:
    36,301 node-seconds in all, 80 GPU-hours delivered, one job completed. The floor and the oracle count A whole
    (the floor pays the boot and 10 h, the oracle 10 h), so nothing is undelivered. With B (8 GPUs) submitted a
    minute before the end, B is still queued then (its node boots for 5 min): the run keeps its window and
    charges nothing past it."""
    a = _job("a", 8, 0, 10)
    setup = _setup([a], 0, spot=False)
    p_od = setup.catalog.group_price(setup.groups[1])  # one 8-GPU node-hour
    end = T0 + timedelta(hours=2)
    stats = Trace(path=Path("scripted.csv"), format="csv", jobs=(a,)).stats()
    r = simulate(strategy_run("burst-no-forecast", setup, stats), [a], start=T0, end=end)
    assert r.queued_at_end == 0
    assert r.cost_usd == pytest.approx(36_301 / 3600 * p_od)
    assert r.remainder_usd == pytest.approx(29_101 / 3600 * p_od) and r.remainder_gpu_hours == pytest.approx(8 * 29_101 / 3600)
    assert r.cost_by_tier["elastic_on_demand"] == pytest.approx(r.cost_usd)
    assert r.work_gpu_hours == pytest.approx(80.0) and r.jobs_completed == 1
    base, bound = floor(setup, [a], start=T0, end=end), oracle(setup, [a], start=T0, end=end)
    assert base.cost_usd == pytest.approx(36_300 / 3600 * p_od) and bound.cost_usd == pytest.approx(10 * p_od)
    assert base.work_gpu_hours == bound.work_gpu_hours == pytest.approx(80.0) and base.jobs_completed == 1
    assert base.spend is not None and r.spend is not None
    gap = cost_gap(r.cost_usd, r.spend, oracle_usd=bound.cost_usd, floor_usd=base.cost_usd, floor=base.spend,
                   prices=reference_prices(setup))
    assert gap["undelivered"] == pytest.approx(0.0, abs=1e-9)
    assert sum(gap.values()) == pytest.approx(r.cost_usd - bound.cost_usd)

    b = _job("b", 8, 2 - 1 / 60, 1)
    queued = simulate(strategy_run("burst-no-forecast", setup, stats), [a, b], start=T0, end=end)
    assert queued.queued_at_end == 1 and queued.remainder_usd == 0.0 and queued.jobs_completed == 0
    assert queued.work_gpu_hours == pytest.approx(8 * 6_899 / 3600)


def test_work_lost_to_spot_reclaims_is_metered_apart() -> None:
    """No on-prem; spot nodes reclaimed 20 times an hour on average. A fault-tolerant job (8 GPUs, 3 h) runs on
    spot, so every run it loses ends on a node the cloud reclaimed after a notice: all of its lost work is
    reclaim loss."""
    a = _job("a", 8, 0, 3, ft=True)
    base = _setup([a], 0)
    setup = dataclasses.replace(base, spot_hazard_per_hour={"cloud-spot": 20.0})
    stats = Trace(path=Path("scripted.csv"), format="csv", jobs=(a,)).stats()
    r = simulate(strategy_run("burst-no-forecast", setup, stats), [a], start=T0, end=T0 + timedelta(hours=12))
    assert r.interruptions > 0 and r.lost_gpu_hours > 0
    assert r.reclaim_lost_gpu_hours == pytest.approx(r.lost_gpu_hours)
    assert r.to_json()["reclaim_lost_gpu_hours"] == round(r.reclaim_lost_gpu_hours, 4)
