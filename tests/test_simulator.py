"""The simulator: exact results on a hand-computed trace, the oracle bound, determinism, CA timing, bad input."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from builders import T0, TablePrices, group, job, ready_node
from click.testing import CliRunner

from burst.catalog import Catalog
from burst.cli import main
from burst.model import ActionKind, Job, JobState, NodeState, Policy, Snapshot
from burst.planner import BASELINE_PIPELINE, PIPELINE, PlanIds, plan
from burst.settings import data_dir
from burst.sim.compare import compare
from burst.sim.engine import simulate
from burst.sim.karpenter import KarpenterDisruption, KarpenterProvisioning
from burst.sim.registry import default_names, offered_names, registered, start_order, strategy_run
from burst.sim.setup import default_setup
from burst.sim.strategies import ClusterAutoscalerScaleDown
from burst.sim.traces import Trace, TraceError, load_trace

ROOT = Path(__file__).parent.parent


def tiny_trace(tmp_path: Path) -> Path:
    """Two 8-GPU jobs at t=0: A runs 1 h (fits on-prem), B runs 30 min (needs a cloud node)."""
    path = tmp_path / "tiny.csv"
    path.write_text(
        "job_id,submit_time,duration_s,gpus,tenant\n"
        "a,2026-03-02T12:00:00Z,3600,8,t\n"
        "b,2026-03-02T12:00:00Z,1800,8,t\n"
    )
    return path


def test_tiny_trace_costs_waits_and_oracle_are_exact(tmp_path: Path) -> None:
    trace = load_trace(tiny_trace(tmp_path))
    stats = trace.stats()
    assert (stats.peak_gpus, stats.p50_gpus, stats.gpu_hours) == (16.0, 8.0, 12.0)
    setup = dataclasses.replace(default_setup(stats), default_policy=Policy(tenant="_default"))  # no spot
    onprem, od, _ = setup.groups
    p_on, p_od = setup.catalog.group_price(onprem), setup.catalog.group_price(od)
    result = compare(trace, ["burst", "oracle"], setup=setup)
    day_h = 24.0  # the run drains one day past the last submission
    burst, oracle = result.results["burst"], result.results["oracle"]
    # A starts at once on-prem; B waits for a cloud node: launched at t=0, ready after the 5 min boot, and
    # placed by the tick its ready event wakes once the 1 s batch window is quiet.
    assert sorted(burst.waits_s) == [0.0, 301.0]
    assert burst.wait_p50_s == 150.5 and burst.wait_p95_s == pytest.approx(285.95)
    assert burst.time_to_capacity_p95_s == 301.0 and burst.scale_ups == 1
    # B runs 301..2101 s; its finish wakes a tick at 2102 s, the node idles to break-even (one 5 min boot
    # latency), is released at the heartbeat that reaches it (2402 s) and gone 30 s later.
    assert burst.cost_by_tier["elastic_on_demand"] == pytest.approx(2432 / 3600 * p_od)
    assert burst.cost_by_tier["steady"] == pytest.approx(day_h * p_on)
    assert burst.cost_by_tier["elastic_spot"] == 0.0 and burst.cost_by_tier["hot_pool"] == 0.0
    assert burst.jobs_completed == 2 and burst.interruptions == 0 and burst.slo_violations == 0
    assert burst.gpu_hours_used == pytest.approx(12.0 + 2 * 8 / 3600)  # metered tick to tick: each finish seen 1 s on
    # the oracle: on-prem all day, B's 8 GPUs x 30 min at the on-demand GPU-hour price, no waits
    assert oracle.cost_by_tier["steady"] == pytest.approx(day_h * p_on)
    assert oracle.cost_by_tier["elastic_on_demand"] == pytest.approx(0.5 * p_od)
    assert oracle.wait_p95_s == 0.0
    assert oracle.cost_usd <= burst.cost_usd


def test_oracle_puts_spot_eligible_overflow_on_spot(tmp_path: Path) -> None:
    path = tmp_path / "ft.csv"
    path.write_text(
        "job_id,submit_time,duration_s,gpus,tenant,fault_tolerant,checkpoint_interval_s\n"
        "a,2026-03-02T12:00:00Z,7200,8,t,false,\n"
        "b,2026-03-02T12:00:00Z,3600,8,t,true,600\n"
    )
    trace = load_trace(path)
    setup = default_setup(trace.stats())
    _, _, spot = setup.groups
    result = compare(trace, ["oracle"], setup=setup).results["oracle"]
    assert result.cost_by_tier["elastic_spot"] == pytest.approx(setup.catalog.group_price(spot))
    assert result.cost_by_tier["elastic_on_demand"] == 0.0
    # b's 8 GPUs for an hour on spot, never interrupted; both jobs finish inside the run
    assert (result.spot_gpu_hours, result.goodput, result.jobs_completed) == (pytest.approx(8.0), 1.0, 2)


def test_same_seed_same_result_other_seed_other_interruptions() -> None:
    trace = load_trace(data_dir() / "traces" / "itp-cluster02.csv").window(days=2)
    one = compare(trace, ["burst", "reactive"], seed=3).to_json()
    two = compare(trace, ["burst", "reactive"], seed=3).to_json()
    for doc in (one, two):
        doc.pop("wall_s")
        for r in doc["strategies"].values():
            r.pop("wall_s")
            r.pop("forecast_fit_s")
    assert one == two
    assert one["strategies"]["burst"]["forecast_fits"] > 0 and one["strategies"]["reactive"]["forecast_fits"] == 0
    assert one["strategies"]["burst"]["jobs_started"] == one["trace"]["jobs"]
    # the seed draws the spot interruptions and which jobs are fault-tolerant: another one gives other losses
    other = compare(trace, ["reactive"], seed=4).results["reactive"]
    mine = one["strategies"]["reactive"]
    assert mine["interruptions"] > 0 and other.interruptions > 0
    assert (other.interruptions, round(other.lost_gpu_hours, 4)) != (mine["interruptions"], mine["lost_gpu_hours"])


def _ca_snapshot(at_minutes: float, *, used: int = 2) -> tuple[Snapshot, list[str]]:
    od = group("od")
    nodes = (ready_node("n1", od), ready_node("n2", od))
    jobs = (
        job("small", gpus=used, state=JobState.RUNNING, nodes=("n1",), started=T0 - timedelta(hours=1), duration_s=1e6),
        job("big", gpus=4, state=JobState.RUNNING, nodes=("n2",), started=T0 - timedelta(hours=1), duration_s=1e6),
    )
    return Snapshot(groups=(od,), nodes=nodes, jobs=jobs, targets={"od": 2}), ["n1", "n2"]


def _ca_plan(step: ClusterAutoscalerScaleDown, minutes: float, used: int = 2) -> list[tuple[str, tuple[str, ...]]]:
    snap, _ = _ca_snapshot(minutes, used=used)
    pipeline = (*[(n, s) for n, s in PIPELINE if n != "scale_down"], ("ca_scale_down", step))
    now = T0 + timedelta(minutes=minutes)
    result = plan(snap, [], {}, TablePrices({"od": 32.0}), now=now, ids=PlanIds("p"), pipeline=pipeline)
    return [(a.target, a.node_ids) for a in result.actions if a.kind is ActionKind.SCALE_DOWN]


def test_reactive_follows_cluster_autoscaler_timing() -> None:
    step = ClusterAutoscalerScaleDown()
    step.last_scale_up = T0 - timedelta(minutes=5)  # a scale-up 5 min before the scenario starts
    # n1 carries 2 of 8 GPUs (25% < 50%): unneeded from t=0; n2 carries 4 of 8 (50%): needed.
    assert _ca_plan(step, 0) == []
    assert step.unneeded_since == {"n1": T0}
    assert step.next_due(T0) == T0 + timedelta(minutes=5)  # scale-down-delay-after-add ends first
    assert _ca_plan(step, 9.9) == []  # unneeded for 9.9 min: not yet
    assert step.next_due(T0 + timedelta(minutes=9.9)) == T0 + timedelta(minutes=10)
    # at 10 min unneeded, n1 is removed: its 2-GPU job fits in n2's 4 free GPUs and is rescheduled
    assert _ca_plan(step, 10) == [("od", ("n1",))]


def test_reactive_waits_out_the_delay_after_a_scale_up() -> None:
    step = ClusterAutoscalerScaleDown()
    _ca_plan(step, 0)
    step.last_scale_up = T0 + timedelta(minutes=8)
    assert _ca_plan(step, 12) == []  # unneeded 12 min, but only 4 min since the scale-up
    assert _ca_plan(step, 18) == [("od", ("n1",))]


def test_reactive_keeps_a_node_whose_pods_fit_nowhere_else() -> None:
    step = ClusterAutoscalerScaleDown()
    _ca_plan(step, 0, used=3)
    # 3 GPUs on n1 (37.5%, unneeded) but n2 has 4 free: fits; with 5 on n1 it is needed (62.5%)
    assert _ca_plan(step, 10, used=3) == [("od", ("n1",))]
    other = ClusterAutoscalerScaleDown()
    _ca_plan(other, 0, used=5)
    assert _ca_plan(other, 20, used=5) == []


def test_reactive_end_to_end_scans_every_10_s_cold_boots_and_removes_the_node_10_min_after_idle() -> None:
    """One 8-GPU job, no on-prem capacity, spot not allowed: it needs a cold on-demand node.

    Scans run at 0, 10, 20 s ...; the job arrives at 13 s and is first seen by the 20 s scan, which
    scales up. The node boots 300 s (ready at 320 s, where the job starts: waited 307 s), the job
    runs 1800 s to 2120 s, and the idle node is unneeded from then on: removed by the 2720 s scan
    (10 min later) and gone after the sim provider's 30 s termination.
    """
    job_b = Job(id="t-b", tenant="t", gpus=8, submitted_at=T0 + timedelta(seconds=13), duration_s=1800.0)
    stats = Trace(path=Path("scripted.csv"), format="csv", jobs=(job_b,)).stats()
    base = default_setup(stats)
    onprem, od, spot = base.groups
    setup = dataclasses.replace(
        base,
        groups=(dataclasses.replace(onprem, min_size=0, max_size=0), od, spot),
        initial={"onprem": 0, "cloud-od": 0, "cloud-spot": 0},
        default_policy=Policy(tenant="_default"),  # no spot
    )
    run = strategy_run("reactive", setup, stats)
    r = simulate(run, [job_b], start=T0, end=T0 + timedelta(hours=2), keep_timeline=True)
    assert r.waits_s == [307.0] and r.time_to_capacity_p95_s == 307.0
    assert r.scale_ups == 1 and r.jobs_completed == 1 and r.interruptions == 0
    # every tick the run made (s after start) and the on-demand GPUs ready at it; 620 s is the
    # scale-down delay after the 20 s scale-up
    assert [((p.at - T0).total_seconds(), p.capacity_gpus.get("elastic_on_demand", 0.0)) for p in r.timeline] == [
        (0.0, 0.0), (20.0, 0.0), (320.0, 8.0), (620.0, 8.0), (2120.0, 8.0), (2720.0, 8.0), (2750.0, 0.0), (7200.0, 0.0),
    ]
    # paid from the launch at 20 s to the end of termination at 2750 s: 2730 s of one 8-GPU node
    assert r.gpu_hours_paid == pytest.approx(2730 / 3600 * 8)
    assert r.cost_by_tier["elastic_on_demand"] == pytest.approx(2730 / 3600 * setup.catalog.group_price(od))
    assert r.cost_by_tier["steady"] == 0.0 and r.cost_by_tier["elastic_spot"] == 0.0
    # what the report draws: GPUs still pending after each plan, what each plan did, the bill so far by line
    assert [p.pending_gpus for p in r.timeline] == [0, 8, 0, 0, 0, 0, 0, 0]
    assert [((p.at - T0).total_seconds(), p.marks) for p in r.timeline if p.marks] == [
        (20.0, {"scale_up": 1}), (2720.0, {"scale_down": 1}),
    ]
    od_usd_per_s = setup.catalog.group_price(od) / 3600
    assert [p.spent_usd["elastic_on_demand"] for p in r.timeline[:3]] == pytest.approx([0.0, 0.0, 300 * od_usd_per_s])
    assert r.timeline[-1].spent_usd == pytest.approx(r.cost_by_tier)


def test_baselines_run_the_frozen_planner_not_bursts() -> None:
    """reactive, reactive-hotpool and the static strategies run `BASELINE_PIPELINE`'s own step functions
    (reactive with the Cluster Autoscaler's scale-down in place of burst's), so changing burst's
    `PIPELINE` cannot move the figures burst is compared against."""
    stats = Trace(path=Path("scripted.csv"), format="csv", jobs=(job("t-a", gpus=8),)).stats()
    setup = default_setup(stats)
    frozen = {id(step) for _name, step in BASELINE_PIPELINE}
    own = {ClusterAutoscalerScaleDown.STEP, "ca_taint", "karpenter_taint", KarpenterDisruption.STEP}
    for name in ("reactive", "reactive-hotpool", "static-peak", "static-p50", "karpenter", "karpenter-do-not-disrupt"):
        steps = strategy_run(name, setup, stats).pipeline
        assert all(id(step) in frozen or n in own or (isinstance(step, KarpenterProvisioning) and id(step.place) in frozen)
                   for n, step in steps), name
    assert [n for n, _ in strategy_run("static-p50", setup, stats).pipeline] == [n for n, _ in BASELINE_PIPELINE]


def test_the_clock_jumps_to_each_arrival_and_never_to_an_idle_cooldown_nothing_acts_on() -> None:
    """Two 8-GPU jobs on a static on-prem tier of two nodes (no power saving, so nothing releases idle nodes).

    A is submitted at 0 s, the first tick's instant, and runs 1 h; B arrives at 100 s and is seen by the
    120 s tick (the 60 s loop), so it waits 20 s and runs until 1920 s. The ticks are the arrivals and the
    finishes alone: none 10 min after a node went idle, since no step acts on an idle on-prem node.
    """
    jobs = [
        Job(id="t-a", tenant="t", gpus=8, submitted_at=T0, duration_s=3600.0),
        Job(id="t-b", tenant="t", gpus=8, submitted_at=T0 + timedelta(seconds=100), duration_s=1800.0),
    ]
    stats = Trace(path=Path("scripted.csv"), format="csv", jobs=tuple(jobs)).stats()
    run = strategy_run("static-peak", default_setup(stats), stats)
    r = simulate(run, jobs, start=T0, end=T0 + timedelta(hours=2), keep_timeline=True)
    assert sorted(r.waits_s) == [0.0, 20.0] and r.jobs_completed == 2
    assert [(p.at - T0).total_seconds() for p in r.timeline] == [0.0, 120.0, 1920.0, 3600.0, 7200.0]


def test_a_trace_with_no_usable_rows_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,submit_time,duration_s,gpus\nx,not-a-time,10,1\ny,2026-03-02T00:00:00Z,-5,1\n")
    with pytest.raises(TraceError, match="bad.csv"):
        load_trace(bad)
    out = subprocess.run(
        [sys.executable, "-m", "burst.cli", "simulate", "--trace", str(bad)], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 1 and "bad.csv" in out.stderr and "Traceback" not in out.stderr
    assert "line 2" in out.stderr or "no usable rows" in out.stderr


def test_simulate_json_contract(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "burst.cli", "simulate", "--trace", str(tiny_trace(tmp_path)), "--json"],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) >= {"trace", "strategies", "wall_s"}
    assert {"jobs", "gpu_hours", "peak_gpus", "p50_gpus"} <= set(data["trace"])
    assert list(data["strategies"]) == list(default_names())
    keys = {"cost_usd", "cost_by_tier", "cost_by_tenant", "gpu_hours_used", "gpu_hours_paid", "onprem_utilization",
            "wait_p50_s", "wait_p95_s", "wait_p99_s", "slo_violations", "interruptions", "lost_gpu_hours",
            "time_to_capacity_p95_s", "checkpoint_violations", "spot_gpu_hours", "goodput", "delay_mean_s",
            "delay_p95_s", "jobs_completed", "work_gpu_hours", "cost_gap"}
    for name, r in data["strategies"].items():
        assert keys <= set(r), name
        assert set(r["cost_by_tier"]) == {"steady", "elastic_on_demand", "elastic_spot", "hot_pool"}
    s = data["strategies"]
    for name, r in s.items():  # the cost gap's parts sum to the cost above the oracle
        assert sum(r["cost_gap"].values()) == pytest.approx(r["cost_usd"] - s["oracle"]["cost_usd"], abs=0.05), name
    assert s["oracle"]["cost_usd"] <= s["floor"]["cost_usd"] <= s["burst"]["cost_usd"]
    assert s["static-peak"]["cost_by_tier"]["elastic_on_demand"] == 0.0
    assert s["static-p50"]["wait_p95_s"] > s["burst"]["wait_p95_s"]
    assert s["reactive-hotpool"]["cost_by_tier"]["hot_pool"] > 0.0


def test_simulate_runs_the_clairvoyant_reference_only_on_request(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "burst.cli", "simulate", "--trace", str(tiny_trace(tmp_path)), "--json",
         "--strategy", "burst-clairvoyant", "--strategy", "burst-no-forecast"],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)["strategies"]
    assert list(s) == ["burst-clairvoyant", "burst-no-forecast"]
    assert "burst-clairvoyant" not in default_names(), "the default run (every name of default_names) leaves it out"


def test_simulate_report_writes_one_page_with_its_plots_embedded(tmp_path: Path) -> None:
    report = tmp_path / "report"
    out = subprocess.run(
        [sys.executable, "-m", "burst.cli", "simulate", "--trace", str(tiny_trace(tmp_path)), "--strategy", "burst",
         "--strategy", "oracle", "--report", str(report)],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    page = (report / "index.html").read_text()
    assert [p.name for p in report.iterdir()] == ["index.html"]  # one page: its plots are embedded in it
    # tradeoff, cost-delay frontier, waterfall, gap by part, cost by line, cost rate, capacity, pending GPUs, wait CDF
    assert page.count('<img src="data:image/png;base64,') == 9
    assert "No strategy dominates burst" in page
    assert 'data-strategy="burst"' in page and 'data-strategy="oracle"' in page and "Assumptions" in page


def test_worker_processes_give_the_same_results(tmp_path: Path) -> None:
    trace = load_trace(tiny_trace(tmp_path))

    def figures(workers: int) -> dict[str, object]:
        doc = compare(trace, ["burst", "reactive", "static-p50", "oracle"], seed=1, workers=workers).to_json()
        return {n: {k: v for k, v in r.items() if k not in ("wall_s", "forecast_fit_s")} for n, r in doc["strategies"].items()}

    assert figures(2) == figures(1)
    assert list(figures(2)) == ["burst", "reactive", "static-p50", "oracle"]  # report order, not start order


def test_every_default_strategy_has_a_start_order_for_parallel_runs() -> None:
    ranks = {s.name: s.start_rank for s in registered()}
    assert sorted(ranks[n] for n in default_names()) == list(range(len(default_names())))
    assert start_order(default_names()) == ["reactive-hotpool", "static-p50", "reactive", "karpenter",
                                            "karpenter-do-not-disrupt", "karpenter-balanced", "karpenter-ml",
                                            "karpenter-balanced-ml", "burst",
                                            "burst-no-forecast", "static-peak", "floor", "oracle"]
    assert start_order(["oracle", "burst-clairvoyant", "burst-no-pool"]) == ["burst-clairvoyant", "burst-no-pool", "oracle"]


def test_the_simulate_command_offers_every_strategy() -> None:
    from burst.cli import simulate_cmd

    (option,) = [p for p in simulate_cmd.params if p.name == "strategies"]
    assert list(option.type.choices) == list(offered_names()) == [*default_names(), "burst-clairvoyant"]  # type: ignore[attr-defined]


def test_spot_interruptions_never_cost_more_than_a_checkpoint_interval() -> None:
    trace = load_trace(data_dir() / "traces" / "philly.csv").window(datetime(2017, 10, 2, tzinfo=UTC), days=0.5)
    setup = default_setup(trace.stats())
    stormy = dataclasses.replace(setup, spot_hazard_per_hour={"cloud-spot": 0.05})
    r = compare(trace, ["burst-no-forecast"], setup=stormy, seed=2).results["burst-no-forecast"]
    assert r.interruptions >= 3 and r.lost_gpu_hours > 0
    assert r.checkpoint_violations == 0
    assert r.spot_gpu_hours > 0 and 0 < r.goodput < 1


def test_a_set_up_without_checkpointing_marks_the_same_jobs_fault_tolerant_with_no_checkpoints() -> None:
    from burst.sim.setup import with_fault_tolerance

    trace = load_trace(data_dir() / "traces" / "itp-cluster02.csv").window(days=1)
    setup = default_setup(trace.stats())
    usual = with_fault_tolerance(trace.jobs, setup, seed=0)
    bare = with_fault_tolerance(trace.jobs, dataclasses.replace(setup, checkpointing=False), seed=0)
    assert [j.fault_tolerant for j in usual] == [j.fault_tolerant for j in bare] and any(j.fault_tolerant for j in bare)
    ft = [(u, b) for u, b in zip(usual, bare, strict=True) if u.fault_tolerant]
    assert all(u.checkpoint_interval_s == 1800.0 and 30 <= (u.checkpoint_duration_s or 0) <= 300 for u, _ in ft)
    assert all(b.checkpoint_interval_s is None and b.checkpoint_duration_s is None for _, b in ft)


def bad_row_trace(tmp_path: Path, bad: int = 1) -> Path:
    """The tiny trace with `bad` rows after it whose duration is negative (the first on line 4)."""
    rows = "".join(f"x{i},2026-03-02T12:00:00Z,-5,8,t\n" for i in range(bad))
    path = tmp_path / "tiny.csv"
    path.write_text(tiny_trace(tmp_path).read_text() + rows)
    return path


def test_simulate_lists_a_bad_row_on_stderr_in_json_mode(tmp_path: Path) -> None:
    path = bad_row_trace(tmp_path)
    result = CliRunner().invoke(main, ["simulate", "--trace", str(path), "--strategy", "oracle", "--json"])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [f"{path}:4: skipped: duration_s: must be > 0, got -5"]
    data = json.loads(result.stdout)  # stdout stays one JSON object
    assert data["trace"]["bad_rows"] == 1 and data["trace"]["jobs"] == 2


def test_simulate_lists_bad_rows_in_text_mode_up_to_20(tmp_path: Path) -> None:
    path = bad_row_trace(tmp_path, bad=23)
    result = CliRunner().invoke(main, ["simulate", "--trace", str(path), "--strategy", "oracle"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]  # the finished progress bar leaves a blank
    assert lines == [f"{path}:{n}: skipped: duration_s: must be > 0, got -5" for n in range(4, 24)] + [
        "... and 3 more bad rows"
    ]
    assert "skipped" not in result.stdout and "2 jobs" in result.stdout


CONFIG = """\
cluster: lab
node_groups:
  - id: rack
    provider: sim
    region: dc1
    tier: steady
    capacity_type: onprem
    instance_type: dgx-a100
    gpu_model: A100
    gpus_per_node: 8
    min_size: 3
    max_size: 3
    initial_size: 3
  - id: cloud
    provider: sim
    region: us-east-1
    tier: elastic
    capacity_type: on_demand
    instance_type: p4d.24xlarge
    gpu_model: A100
    gpus_per_node: 8
    max_size: 2
"""


def test_simulate_with_a_config_uses_its_groups(tmp_path: Path) -> None:
    config = tmp_path / "burst.yaml"
    config.write_text(CONFIG)
    trace = tiny_trace(tmp_path)
    result = CliRunner().invoke(main, ["simulate", "--trace", str(trace), "--config", str(config),
                                       "--strategy", "burst", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["assumptions"] == ["set-up from the config of cluster 'lab'"]
    r = data["strategies"]["burst"]
    # 3 on-prem nodes (the trace alone would size 1) hold both 8-GPU jobs at once: no cloud, no wait,
    # 3 x 8 GPUs paid for the whole day the run lasts; GPU-hours held are metered tick to tick, and the tick a
    # finish wakes runs 1 s after it (the batch window)
    used = 12.0 + 2 * 8 / 3600
    assert r["gpu_hours_paid"] == 576.0 and r["gpu_hours_used"] == round(used, 4)
    assert r["onprem_utilization"] == round(used / 576, 6)
    assert r["wait_p95_s"] == 0.0 and r["scale_ups"] == 0 and r["time_to_capacity_p95_s"] == 0.0
    node_hour = 8 * Catalog.load().onprem.usd_per_gpu_hour
    assert r["cost_by_tier"] == pytest.approx(
        {"steady": 24 * 3 * node_hour, "elastic_on_demand": 0.0, "elastic_spot": 0.0, "hot_pool": 0.0}, abs=1e-4
    )


def test_simulate_marks_a_strategy_that_did_not_finish_its_work_and_says_the_drain_day(tmp_path: Path) -> None:
    """static-p50's two on-prem nodes cannot run ten 10-hour 8-GPU jobs by a day after the last submission: jobs
    are still queued at its end, so its run keeps its window (no remainder is charged) and it is marked."""
    rows = ["job_id,submit_time,duration_s,gpus,tenant", "bg,2026-03-02T00:00:00Z,82800,8,t"]
    rows += [f"b{i},2026-03-02T00:00:00Z,36000,8,t" for i in range(10)]
    rows += [f"s{h},2026-03-02T{h:02d}:00:00Z,600,1,t" for h in range(1, 20)]
    path = tmp_path / "short.csv"
    path.write_text("\n".join(rows) + "\n")
    out = CliRunner().invoke(main, ["simulate", "--trace", str(path), "--strategy", "static-p50", "--strategy", "oracle"])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("┃ strategy"))
    end = next(i for i, line in enumerate(lines) if line.startswith("└"))  # the first table: the results
    columns = [c.strip() for c in lines[header].split("┃")[1:-1]]
    table = {cells[0]: dict(zip(columns, cells, strict=True)) for line in lines[header:end] if line.startswith("│")
             for cells in [[c.strip() for c in line.split("│")[1:-1]]]}
    assert table["oracle"]["jobs done"] == "30/30"
    done, total = map(int, table["static-p50 !"]["jobs done"].split("/"))
    assert done < total == 30 and table["static-p50 !"]["vs oracle"].endswith("x !")
    assert "! static-p50: completed fewer jobs than the 30 jobs the oracle did" in out.stdout
    assert "the trace's submissions plus one drain day" in out.stdout


def test_simulate_replays_a_named_set_up_and_refuses_one_with_a_config(tmp_path: Path) -> None:
    """A day's 8-GPU job and six 8-GPU jobs for an hour: on-prem holds the first, the oracle puts the others'
    fault-tolerant share on spot. --setup second-price moves the cloud groups to us-west-2, where spot costs more:
    the oracle's spot line rises over main's; --setup spot-scarcity says so in the assumptions; --setup with --config is refused."""
    from burst.sim.setup import NAMED_SETUPS
    from burst.simulate_cli import simulate_cmd

    setup_option = next(p for p in simulate_cmd.params if p.name == "setup_name")
    assert list(getattr(setup_option.type, "choices", ())) == list(NAMED_SETUPS)
    trace = tmp_path / "ft.csv"
    trace.write_text("job_id,submit_time,duration_s,gpus,tenant\nbg,2026-03-02T00:00:00Z,86400,8,t\n"
                     + "".join(f"j{i},2026-03-02T12:00:00Z,3600,8,t\n" for i in range(6)))
    runs = {}
    for name in NAMED_SETUPS:
        out = CliRunner().invoke(main, ["simulate", "--trace", str(trace), "--setup", name, "--strategy", "oracle",
                                        "--json"])
        assert out.exit_code == 0, out.output
        runs[name] = json.loads(out.stdout)
    assert any("us-west-2" in a for a in runs["second-price"]["assumptions"])
    assert any(a.startswith("spot scarcity") for a in runs["spot-scarcity"]["assumptions"])
    spot = {n: r["strategies"]["oracle"]["cost_by_tier"]["elastic_spot"] for n, r in runs.items()}
    assert spot["second-price"] > spot["main"] > 0
    config = tmp_path / "burst.yaml"
    config.write_text(CONFIG)
    refused = CliRunner().invoke(main, ["simulate", "--trace", str(trace), "--setup", "main", "--config", str(config)])
    assert refused.exit_code == 2 and "mutually exclusive" in refused.output


def _ttc_ticks(states_at: list[tuple[float, dict[str, NodeState]]]) -> list[float]:
    """Time to capacity the meter records for one spot scale-up (size 2, at t=0, for a job pending since t=0)
    over ticks at the given seconds, each listing the spot group's nodes and their states."""
    from burst.model import Action, Node, Plan
    from burst.reconcile import TickReport
    from burst.sim.meter import Meter as _Meter

    pending = Job(id="p", tenant="t", gpus=8, submitted_at=T0, duration_s=3600.0)
    stats = Trace(path=Path("scripted.csv"), format="csv", jobs=(pending,)).stats()
    setup = default_setup(stats)
    meter = _Meter(strategy_run("burst", setup, stats), keep_timeline=False)
    spot = "cloud-spot"
    for i, (seconds, states) in enumerate(states_at):
        at = T0 + timedelta(seconds=seconds)
        nodes = tuple(Node(id=n, group_id=spot, state=s, gpus=8, created_at=T0) for n, s in states.items())
        ups = (Action(kind=ActionKind.SCALE_UP, target=spot, reason="r", step="scale_up", count=1, size=2),) if i == 0 else ()
        snap = Snapshot(groups=setup.groups, nodes=nodes, jobs=(pending,), targets={spot: 2})
        meter.observe(TickReport(at=at, plan=Plan(id=f"p{i}", at=at, actions=ups), snapshot=snap))
    return meter.ttc


def test_time_to_capacity_ends_when_the_nodes_asked_for_are_ready_not_a_replacement_for_a_reclaimed_one() -> None:
    """A spot scale-up from 1 to 2 nodes at t=0; the group's older node s1 is reclaimed at 120 s and the group
    replaces it (s3). The node launched for the job (s2) is ready at 300 s: that is the capacity asked for,
    not s3 at 420 s. A node that fails before it was ready earns no credit: then the scale-up waits on its
    replacement."""
    S = NodeState
    reclaimed = [(0, {"s1": S.READY, "s2": S.BOOTING}), (120, {"s2": S.BOOTING, "s3": S.BOOTING}),
                 (300, {"s2": S.READY, "s3": S.BOOTING}), (420, {"s2": S.READY, "s3": S.READY})]
    assert _ttc_ticks(reclaimed) == [300.0]
    failed = [(0, {"s1": S.READY, "s2": S.BOOTING}), (120, {"s1": S.READY, "s2": S.FAILED, "s3": S.BOOTING}),
              (300, {"s1": S.READY, "s3": S.BOOTING}), (420, {"s1": S.READY, "s3": S.READY})]
    assert _ttc_ticks(failed) == [420.0]
