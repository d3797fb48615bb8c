"""Budgets in `burst cost`: hourly and monthly caps from the tenants' policies, and when the spend passes them.

Unit cases are hand-computed; the end-to-end case runs `burst cost` on a config whose tenants cap spend per hour
only (as the quickstart's do) or per month only, and reads the table, `--json` and the report.
"""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from burst.cli import main
from burst.model import Budget
from burst.projection.budget import HOURLY, MONTHLY, Breach, first_breach, hour_breach_at, spend_intervals
from burst.projection.project import thin_history
from burst.state import CostEntry

T0 = datetime(2026, 3, 2, tzinfo=UTC)
H = timedelta(hours=1)


def test_the_hourly_breach_is_when_one_clock_hours_spend_passes_the_cap() -> None:
    # 60 $ from 00:00 to 00:30 and 60 $ from 00:30 to 01:00: the hour passes 100 $ two thirds into the second span.
    spans = [(T0, T0 + H / 2, 60.0), (T0 + H / 2, T0 + H, 60.0)]
    assert hour_breach_at(spans, 100.0) == T0 + H / 2 + (H / 2) * (40.0 / 60.0)
    assert hour_breach_at(spans, 120.0) is None  # exactly the cap is not past it
    assert hour_breach_at(spans, None) is None
    # 150 $ over 00:30-02:00 is 50 $ in each of three half-hours: 100 $ in 01:00-02:00 and 50 $ in 00:00-01:00, so
    # a 90 $/h cap is passed in the second clock hour, 90 $ into it: at 01:54.
    assert hour_breach_at([(T0 + H / 2, T0 + 2 * H, 150.0)], 90.0) == T0 + H + timedelta(minutes=54)


def test_the_first_breach_is_the_earlier_budget_and_says_which() -> None:
    spans = [(T0 + k * H, T0 + (k + 1) * H, 50.0) for k in range(10)]  # 50 $ an hour for ten hours
    assert first_breach(spans, Budget(usd_per_hour=40.0), start=T0) == Breach(T0 + H * 0.8, HOURLY)
    assert first_breach(spans, Budget(usd_per_month=175.0), start=T0) == Breach(T0 + H * 3.5, MONTHLY)
    both = first_breach(spans, Budget(usd_per_hour=60.0, usd_per_month=175.0), start=T0, month_to_date_usd=100.0)
    assert both == Breach(T0 + H * 1.5, MONTHLY)  # 75 $ left of the month: passed half-way through the second hour
    assert first_breach(spans, Budget(usd_per_hour=60.0, usd_per_month=1000.0), start=T0) is None
    assert first_breach(spans, Budget(), start=T0) is None


def test_a_tenants_spend_spans_from_the_ledgers_previous_tick_not_its_own() -> None:
    # a runs at 01:00 and 05:00; b at every hour. a's 05:00 row billed 04:00-05:00, not 01:00-05:00.
    ledger = [CostEntry(T0 + k * H, "elastic_on_demand", 10.0, 1.0, "b", "od") for k in range(1, 6)]
    ledger += [CostEntry(T0 + H, "elastic_on_demand", 30.0, 1.0, "a", "od"),
               CostEntry(T0 + 5 * H, "elastic_on_demand", 30.0, 1.0, "a", "od"),
               CostEntry(T0 + 5 * H, "steady", 5.0, 0.0, None, "onprem")]
    spans = spend_intervals(ledger, T0)
    assert spans["a"] == [(T0, T0 + H, 30.0), (T0 + 4 * H, T0 + 5 * H, 30.0)]
    assert set(spans) == {"a", "b"}  # overhead is on no tenant
    # 30 $ in 04:00-05:00 passes a 20 $/h cap at 04:40 (it would be 03:40 were it spread over 01:00-05:00 ... and
    # the hour 01:00-02:00 would never see it).
    assert hour_breach_at(spans["a"][1:], 20.0) == T0 + 4 * H + timedelta(minutes=40)


CONFIG = """cluster: budgets
policies_dir: policies
node_groups:
  - {id: od, provider: sim, region: us-east-1, tier: elastic, capacity_type: on_demand, instance_type: p4d.24xlarge,
     gpu_model: A100, gpus_per_node: 8, max_size: 6}
"""
POLICIES = {  # hourly only, like the quickstart's tenants; monthly only, passed in the horizon at 21.96 $/node-hour
    "a": "tenant: a\nbudget:\n  usd_per_hour: 150\n",
    "b": "tenant: b\nbudget:\n  usd_per_month: 40\n",
}


def _trace(path: Path) -> Path:
    rows = ["submit_time,duration_s,gpus,tenant"]
    for h in range(48):  # two days of 2-hour, one-node jobs of each tenant
        for tenant in ("a", "b"):
            rows.append(f"{(T0 + timedelta(hours=h, minutes=5)).isoformat()},7200,8,{tenant}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="module")
def costed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, str]:
    """`burst cost` on two days of history (tenant a capped per hour, b per month): its JSON, report and table."""
    tmp_path = tmp_path_factory.mktemp("budgets")
    (tmp_path / "policies").mkdir()
    for tenant, text in POLICIES.items():
        (tmp_path / "policies" / f"{tenant}.yaml").write_text(text)
    config = tmp_path / "burst.yaml"
    config.write_text(CONFIG)
    trace = _trace(tmp_path / "trace.csv")
    args = ["cost", "--config", str(config), "--history", str(trace), "--horizon", "12h", "--strategy",
            "burst-no-forecast", "--workers", "1"]
    runner = CliRunner(env={"COLUMNS": "250"})
    out = runner.invoke(main, [*args, "--json", "--report", str(tmp_path / "report")])
    assert out.exit_code == 0, out.output
    table = runner.invoke(main, args)
    assert table.exit_code == 0, table.output
    return json.loads(out.stdout), (tmp_path / "report" / "index.html").read_text(), table.stdout


def test_cost_shows_each_tenants_hourly_and_monthly_budget_and_its_breach(costed: tuple[dict[str, Any], str, str]) -> None:
    body, page, table = costed
    tenants = body["by_tenant"]
    assert (tenants["a"]["budget_usd_hour"], tenants["a"]["budget_usd_month"]) == (150.0, None)
    assert (tenants["b"]["budget_usd_hour"], tenants["b"]["budget_usd_month"]) == (None, 40.0)
    assert tenants["a"]["exceeds_budget_at"] is None and tenants["a"]["exceeds_budget"] is None
    b_at = datetime.fromisoformat(tenants["b"]["exceeds_budget_at"])
    start = T0 + timedelta(hours=48)  # the hour after the trace's last submission
    assert tenants["b"]["exceeds_budget"] == MONTHLY
    assert start < b_at < start + timedelta(hours=4)  # 40 $ at 21.96 $ a node-hour: within two hours of its start

    row_a = re.search(r'<tr data-tenant="a">(.*?)</tr>', page)
    row_b = re.search(r'<tr data-tenant="b">(.*?)</tr>', page)
    assert row_a and row_b
    assert 'data-key="budget_usd_hour" data-value="150.0">$150/hour' in row_a.group(1)
    assert 'data-key="budget_usd_month" data-value="None">none' in row_a.group(1)
    assert "not within the horizon" in row_a.group(1)
    assert 'data-key="budget_usd_month" data-value="40.0">$40/month' in row_b.group(1)
    assert (f'data-key="exceeds_budget_at" data-value="{b_at.isoformat()}">{b_at:%Y-%m-%d %H:%M} UTC (monthly'
            in row_b.group(1))

    lines = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
             for line in table.splitlines() if line.count("│") == 8}  # the per-tenant table's rows
    assert lines["a"][3:] == ["150", "none", "not within the horizon"]
    assert lines["b"][3:] == ["none", "40", f"{b_at:%Y-%m-%d %H:%M} UTC (monthly)"]


def test_thin_history_is_said_in_the_table_the_json_and_the_report(costed: tuple[dict[str, Any], str, str]) -> None:
    body, page, table = costed
    assert body["history"]["days"] == 2.0
    note = body["history"]["thin"]
    assert note.startswith("thin history: the forecast rests on 2.0 days of demand history, less than a week")
    assert "band is wide" in note and "cannot see a weekly cycle" in note
    assert f'<p class="thin-history"><strong>{html.escape(note)}.</strong></p>' in page
    assert " ".join(table.split()).count(" ".join(note.split())) == 1  # the candidates table's caption, wrapped


def test_a_week_of_history_or_more_is_not_called_thin() -> None:
    assert thin_history(7 * 86400.0) is None and thin_history(None) is None
    assert "a weekly or a daily cycle" in (thin_history(11 * 3600.0) or "")
    assert "11 hours" in (thin_history(11 * 3600.0) or "")
