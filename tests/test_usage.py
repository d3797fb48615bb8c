"""`burst usage`: metering a scripted cost ledger in a real SQLite store, and `burst cost --json` end to end."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from burst.cli import main
from burst.model import SteadyAdvice
from burst.projection.usage import USAGE_JSON_SCHEMA
from burst.state import CostEntry, JobLoss, Store

T0 = datetime(2026, 3, 2, tzinfo=UTC)

CONFIG = """cluster: meter
policies_dir: policies
node_groups:
  - {id: onprem, provider: sim, region: dc1, tier: steady, capacity_type: onprem, instance_type: dgx-a100,
     gpu_model: A100, gpus_per_node: 8, min_size: 1, max_size: 1, initial_size: 1}
  - {id: od, provider: sim, region: us-east-1, tier: elastic, capacity_type: on_demand, instance_type: p4d.24xlarge,
     gpu_model: A100, gpus_per_node: 8, max_size: 4}
  - {id: h100, provider: sim, region: us-east-1, tier: elastic, capacity_type: spot, instance_type: p5.48xlarge,
     gpu_model: H100, gpus_per_node: 8, max_size: 2}
  - {id: od-run, provider: sim, region: us-east-1, tier: elastic, capacity_type: on_demand, instance_type: p4d.24xlarge,
     gpu_model: A100, gpus_per_node: 8, max_size: 2, warm_pool: {state: running}}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "policies").mkdir()
    path = tmp_path / "burst.yaml"
    path.write_text(CONFIG)
    return path


def test_usage_json_gives_exact_gpu_hours_by_tier_and_model_per_tenant(config: Path, tmp_path: Path) -> None:
    state = tmp_path / "burst.db"
    store = Store.open(state)
    standby = 200 * 0.08 / 730  # a stopped p4d node-hour: its 200 GB gp3 boot volume in us-east-1
    onprem_standby = (25000.0 / (4 * 8760) + 0.25) * 8  # a powered-off 8-GPU node-hour: capex and ops, no power
    store.record_costs([
        CostEntry(T0, "steady", 10.0, 8.0, "a", "onprem"),
        CostEntry(T0 + timedelta(hours=1), "elastic_on_demand", 20.0, 3.5, "a", "od"),
        CostEntry(T0 + timedelta(hours=1), "elastic_spot", 5.0, 2.25, "a", "h100"),
        CostEntry(T0 + timedelta(hours=2), "elastic_spot", 7.0, 4.0, "b", "h100"),
        CostEntry(T0 + timedelta(hours=2), "steady", 3.0, 0.0, None, "onprem"),  # idle overhead
        CostEntry(T0 + timedelta(hours=2), "hot_pool", 3 * standby, 0.0, None, "od"),  # 3 stopped node-hours
        CostEntry(T0 + timedelta(hours=2), "hot_pool", 2 * 21.957642, 0.0, None, "od-run"),  # 2 running: full price
        CostEntry(T0 + timedelta(hours=2), "hot_pool", onprem_standby, 0.0, None, "onprem"),  # 1 on-prem node-hour
        CostEntry(T0 + timedelta(hours=2), "hot_pool", 4.0, 0.0, None, "gone"),  # a group no longer configured
        CostEntry(T0 - timedelta(hours=1), "steady", 99.0, 99.0, "a", "onprem"),  # before --since
    ])
    store.close()
    runner = CliRunner()
    out = runner.invoke(main, ["usage", "--config", str(config), "--state", str(state), "--since", T0.isoformat(), "--json"])
    assert out.exit_code == 0, out.output
    body = json.loads(out.output)
    no_losses = {"lost_gpu_hours": 0.0, "interruptions": 0, "evictions": 0, "checkpoint_gpu_hours": 0.0}
    assert body["tenants"] == {
        "a": {"gpu_hours": 13.75, "usd": 35.0, "by_tier": {"elastic_on_demand": 3.5, "elastic_spot": 2.25, "steady": 8.0},
              "by_gpu_model": {"A100": 11.5, "H100": 2.25}, "cross_zone_gb": None, "egress_gb": None, **no_losses},
        "b": {"gpu_hours": 4.0, "usd": 7.0, "by_tier": {"elastic_spot": 4.0}, "by_gpu_model": {"H100": 4.0},
              "cross_zone_gb": None, "egress_gb": None, **no_losses},
    }
    assert body["network"] == {"cross_zone_gb": None, "egress_gb": None}  # no provider reports traffic
    warm = body["warm_pool"]
    assert warm["node_hours"] == pytest.approx(6.0)  # 3 stopped + 2 running + 1 on-prem
    assert warm["gpu_hours"] == pytest.approx(48.0)  # 6 node-hours x 8 GPUs
    assert warm["stopped_node_hours"] == pytest.approx(3.0)  # cloud and stopped: od only
    assert warm["storage_gb_hours"] == pytest.approx(600.0)  # 3 node-hours x 200 GB
    assert warm["root_volume_gb"] == {"od": 200.0}
    assert warm["usd"] == pytest.approx(3 * standby + 2 * 21.957642 + onprem_standby + 4.0)
    assert warm["unpriced_usd"] == 4.0
    assert set(body) == set(USAGE_JSON_SCHEMA["required"])
    assert set(warm) == set(USAGE_JSON_SCHEMA["properties"]["warm_pool"]["properties"])
    assert set(body["tenants"]["a"]) == set(USAGE_JSON_SCHEMA["properties"]["tenants"]["additionalProperties"]["required"])
    big = runner.invoke(main, ["usage", "--config", str(config), "--state", str(state), "--since", T0.isoformat(),
                               "--root-volume-gb", "500", "--json"])
    assert json.loads(big.output)["warm_pool"]["storage_gb_hours"] == pytest.approx(1500.0)  # 3 x 500
    one = runner.invoke(main, ["usage", "--config", str(config), "--state", str(state), "--since", T0.isoformat(),
                               "--tenant", "b", "--json"])
    assert list(json.loads(one.output)["tenants"]) == ["b"]
    table = runner.invoke(main, ["usage", "--config", str(config), "--state", str(state), "--since", T0.isoformat()])
    assert table.exit_code == 0 and "13.75" in table.output
    assert "600.00 storage GB-hours (3.00 stopped node-hours x 200 GB)" in table.output


def test_usage_gives_each_tenants_interruptions_evictions_lost_and_checkpoint_gpu_hours(
    config: Path, tmp_path: Path
) -> None:
    state = tmp_path / "burst.db"
    with Store.open(state) as store:
        store.record_costs([CostEntry(T0, "elastic_spot", 8.0, 2.0, "a", "h100")])
        store.record_losses([
            JobLoss(T0, "j1", "a", "interruption", 8.0, lost_gpu_s=8 * 900.0, group_id="h100"),  # 2 GPU-h
            JobLoss(T0 + timedelta(hours=1), "j1", "a", "checkpoint", 8.0, checkpoint_gpu_s=8 * 45.0),  # 0.1
            JobLoss(T0 + timedelta(hours=1, minutes=1), "j1", "a", "eviction", 8.0, lost_gpu_s=8 * 450.0),  # 1
            JobLoss(T0 + timedelta(hours=2), "j2", "b", "interruption", 4.0, lost_gpu_s=4 * 1800.0),  # 2, no cost rows
            JobLoss(T0 - timedelta(hours=1), "j0", "a", "interruption", 8.0, lost_gpu_s=8 * 3600.0),  # before --since
        ])
    runner = CliRunner()
    args = ["usage", "--config", str(config), "--state", str(state), "--since", T0.isoformat()]
    out = runner.invoke(main, [*args, "--json"])
    assert out.exit_code == 0, out.output
    tenants = json.loads(out.output)["tenants"]
    keys = ("interruptions", "evictions", "lost_gpu_hours", "checkpoint_gpu_hours")
    assert {t: {k: u[k] for k in keys} for t, u in tenants.items()} == {
        "a": {"interruptions": 1, "evictions": 1, "lost_gpu_hours": 3.0, "checkpoint_gpu_hours": 0.1},
        "b": {"interruptions": 1, "evictions": 0, "lost_gpu_hours": 2.0, "checkpoint_gpu_hours": 0.0},
    }
    assert (tenants["a"]["gpu_hours"], tenants["b"]["gpu_hours"]) == (2.0, 0.0)
    required = USAGE_JSON_SCHEMA["properties"]["tenants"]["additionalProperties"]["required"]
    assert set(keys) <= set(required) and set(tenants["b"]) == set(required)
    one = json.loads(runner.invoke(main, [*args, "--tenant", "b", "--json"]).output)["tenants"]
    assert list(one) == ["b"] and one["b"]["lost_gpu_hours"] == 2.0
    table = runner.invoke(main, args)
    assert table.exit_code == 0, table.output
    assert "lost GPU-h" in table.output and "checkpoint GPU-h" in table.output and "3.00" in table.output


def test_usage_schema_says_network_is_null_because_no_provider_reports_it() -> None:
    out = CliRunner().invoke(main, ["usage", "--schema"])
    assert out.exit_code == 0, out.output
    schema = json.loads(out.output)
    for where in (schema["properties"]["network"]["properties"],
                  schema["properties"]["tenants"]["additionalProperties"]["properties"]):
        for key in ("cross_zone_gb", "egress_gb"):
            assert where[key]["type"] == "null" and "no provider reports" in where[key]["description"]


def test_cost_json_has_the_documented_schema_and_the_report_embeds_its_plots(config: Path, tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    rows = ["submit_time,duration_s,gpus,tenant"]
    for h in range(48):  # two days: a daily swing of 2-hour jobs
        for k in range(1 + (h % 24) // 6):
            rows.append(f"{(T0 + timedelta(hours=h, minutes=10 * k)).isoformat()},7200,{4 if k % 2 else 8},{'ab'[k % 2]}")
    trace.write_text("\n".join(rows) + "\n")
    what_if = tmp_path / "no-spot.yaml"
    what_if.write_text("spot: false\n")
    report = tmp_path / "report"
    spot = tmp_path / "spot.csv"  # p5.48xlarge: 10 from Feb 1 in zone a, 8 from Feb 20 in zone b
    spot.write_text("provider,instance_type,region,zone,timestamp,usd_per_hour,source\n"
                    "aws,p5.48xlarge,us-east-1,us-east-1a,2026-02-01T00:00:00Z,10.0,ec2\n"
                    "aws,p5.48xlarge,us-east-1,us-east-1b,2026-02-20T00:00:00Z,8.0,ec2\n")
    out = CliRunner().invoke(main, ["cost", "--config", str(config), "--history", str(trace), "--horizon", "12h",
                                    "--strategy", "burst-no-forecast", "--what-if", str(what_if), "--workers", "1",
                                    "--spot-history", str(spot), "--json", "--report", str(report)])
    assert out.exit_code == 0, out.output
    body = json.loads(out.stdout)
    assert set(body) == {"horizon_h", "total_usd", "by_tenant", "by_tier", "paths", "what_if", "spot_from_history",
                         "capacity", "history", "services"}
    assert body["horizon_h"] == 12.0
    assert body["services"] == {"projected": [], "skipped": []}  # no rate source, no service
    assert set(body["capacity"]) == {"steady_gpus", "above_share", "add_gpus", "cloud_usd_per_gpu_hour",
                                     "cloud_avoided_usd_month", "onprem_running_usd_month", "capex_usd",
                                     "payback_months", "steady_tier"}
    advice = body["capacity"]["steady_tier"]  # burst plan's steady-tier keys, over the projection's 12 hourly steps
    assert set(advice) == set(SteadyAdvice("any", 0, 0, None, 0.0, None, T0, T0).to_json())
    assert (advice["window_start"], advice["window_end"]) == ("2026-03-04T00:00:00+00:00", "2026-03-04T11:00:00+00:00")
    assert body["paths"]["count"] == 50 and set(body["paths"]) == {"count", "level", "phi", "source", "horizon_folds"}
    # From Mar 4 00:00 (the hour after the trace) back to Feb 2: 10 for 18 days, then 8 for 12: the median is 10.
    assert body["spot_from_history"] == {"aws/p5.48xlarge/us-east-1": 10.0}
    assert set(body["total_usd"]) == {"p10", "p50", "p90"}
    assert set(body["by_tier"]) == {"steady", "elastic_on_demand", "elastic_spot", "hot_pool"}
    for entry in body["by_tenant"].values():
        assert set(entry) == {"p10", "p50", "p90", "budget_usd_hour", "budget_usd_month", "exceeds_budget_at",
                              "exceeds_budget"}
    assert set(body["what_if"]) == {"no-spot"}
    assert set(body["what_if"]["no-spot"]) == {"horizon_h", "total_usd", "by_tenant", "by_tier"}
    page = (report / "index.html").read_text()
    assert [p.name for p in report.iterdir()] == ["index.html"]  # one page: its plots are embedded in it
    # demand, cost per day, per tenant, per cost line; no-spot beside the baseline with what it changed
    assert page.count('<img src="data:image/png;base64,') == 4
    assert 'data-option="no-spot"' in page and "spot groups removed" in page


def test_cost_rejects_a_bad_what_if_before_simulating(config: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("spot: false\nregoin: us-west-2\n")
    trace = tmp_path / "t.csv"
    trace.write_text("submit_time,duration_s,gpus\n2026-03-02T00:00:00Z,3600,1\n")
    out = CliRunner().invoke(main, ["cost", "--config", str(config), "--history", str(trace), "--what-if", str(bad)])
    assert out.exit_code != 0
    assert f"{bad}:2: unknown key 'regoin'" in out.output


def test_cost_refuses_a_bad_spot_history_naming_file_and_line(config: Path, tmp_path: Path) -> None:
    history = tmp_path / "spot.csv"
    history.write_text("provider,instance_type,region,zone,timestamp,usd_per_hour,source\n"
                       "aws,p4d.24xlarge,us-east-1,us-east-1a,2026-03-01T00:00:00,2.0,ec2\n")
    trace = tmp_path / "t.csv"
    trace.write_text("submit_time,duration_s,gpus\n2026-03-02T00:00:00Z,3600,1\n")
    out = CliRunner().invoke(main, ["cost", "--config", str(config), "--history", str(trace),
                                    "--spot-history", str(history)])
    assert out.exit_code != 0
    assert f"{history}:2: timestamp must carry a UTC offset" in out.output


def test_cost_says_when_the_history_tenants_have_no_policy(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    rows = ["submit_time,duration_s,gpus,tenant"]
    for h in range(30):
        rows.append(f"{(T0 + timedelta(hours=h)).isoformat()},3600,8,{'ab'[h % 2]}")
    trace.write_text("\n".join(rows) + "\n")
    out = CliRunner().invoke(main, ["cost", "--history", str(trace), "--horizon", "1h", "--strategy",
                                    "burst-no-forecast", "--workers", "1", "--json"])  # the quickstart's policies
    assert out.exit_code == 0, out.output
    assert ("warning: tenant(s) a, b of the history have no policy in the quickstart: they are projected on the "
            "default policy") in out.stderr
    assert "warning: tenant(s) batch, prod, research of the quickstart have no job in the history" in out.stderr
