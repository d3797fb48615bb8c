"""Month-to-date usage gauges from a scripted cost ledger in a real SQLite store, read back from the exposition text."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from burst.metrics import ControllerMetrics
from burst.model import CapacityType, GpuShape, NodeGroup, Tier
from burst.state import CostEntry, Store

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def group(gid: str, model: str, tier: Tier = Tier.ELASTIC, capacity: CapacityType = CapacityType.ON_DEMAND) -> NodeGroup:
    return NodeGroup(id=gid, provider="sim", region="us-east-1", tier=tier, capacity_type=capacity,
                     shape=GpuShape(model, 8, 80.0), instance_type="p5.48xlarge", max_size=4)


GROUPS = (group("onprem", "A100", Tier.STEADY, CapacityType.ONPREM), group("od", "A100"),
          group("spot", "H100", capacity=CapacityType.SPOT))


def scrape(metrics: ControllerMetrics) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """{family: {sorted label items: value}} for the two usage families."""
    text = generate_latest(metrics.registry).decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name in ("burst_month_to_date_gpu_seconds", "burst_month_to_date_spend_usd"):
            out[family.name] = {tuple(sorted(s.labels.items())): s.value for s in family.samples}
    return out


def gh(tenant: str, line: str, model: str) -> tuple[tuple[str, str], ...]:
    return (("gpu_model", model), ("line", line), ("tenant", tenant))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / "burst.db")
    yield s
    s.close()


def test_usage_gauges_add_up_the_months_ledger_rows_incrementally(store: Store) -> None:
    store.record_costs([
        CostEntry(T0 - timedelta(days=2), "steady", 50.0, 40.0, "a", "onprem"),  # February: not this month
        CostEntry(T0, "steady", 10.0, 8.0, "a", "onprem"),
        CostEntry(T0, "elastic_on_demand", 20.0, 3.5, "a", "od"),
        CostEntry(T0, "elastic_spot", 5.0, 2.25, "b", "spot"),
        CostEntry(T0, "steady", 3.0, 0.0, None, "onprem"),  # idle overhead: no tenant
        CostEntry(T0, "hot_pool", 1.0, 0.0, None, "od"),  # warm pool: no tenant
    ])
    metrics = ControllerMetrics()
    metrics.observe_ledger(store, T0 + timedelta(minutes=1), GROUPS)
    assert scrape(metrics) == {
        "burst_month_to_date_gpu_seconds": {gh("a", "steady", "A100"): 8.0 * 3600,
                                            gh("a", "elastic_on_demand", "A100"): 3.5 * 3600,
                                  gh("b", "elastic_spot", "H100"): 2.25 * 3600},
        "burst_month_to_date_spend_usd": {(("tenant", "a"),): 30.0, (("tenant", "b"),): 5.0},
    }
    # The next tick's rows are added to the totals; a row of a group no longer configured counts as "unknown".
    store.record_costs([
        CostEntry(T0 + timedelta(minutes=2), "steady", 1.25, 1.0, "a", "onprem"),
        CostEntry(T0 + timedelta(minutes=2), "elastic_spot", 0.5, 0.75, "b", "gone"),
    ])
    metrics.observe_ledger(store, T0 + timedelta(minutes=2), GROUPS)
    metrics.observe_ledger(store, T0 + timedelta(minutes=3), GROUPS)  # nothing new: nothing counted twice
    got = scrape(metrics)
    assert got["burst_month_to_date_gpu_seconds"] == {
        gh("a", "steady", "A100"): 9.0 * 3600, gh("a", "elastic_on_demand", "A100"): 3.5 * 3600,
        gh("b", "elastic_spot", "H100"): 2.25 * 3600, gh("b", "elastic_spot", "unknown"): 0.75 * 3600}
    assert got["burst_month_to_date_spend_usd"] == {(("tenant", "a"),): 31.25, (("tenant", "b"),): 5.5}


def test_usage_gauges_start_again_at_the_month_start_and_a_restart_reads_the_month_back(store: Store) -> None:
    march_end = datetime(2026, 3, 31, 23, 59, tzinfo=UTC)
    april = datetime(2026, 4, 1, 0, 1, tzinfo=UTC)
    store.record_costs([CostEntry(march_end, "elastic_on_demand", 7.0, 2.0, "a", "od")])
    metrics = ControllerMetrics()
    metrics.observe_ledger(store, march_end, GROUPS)
    assert scrape(metrics)["burst_month_to_date_spend_usd"] == {(("tenant", "a"),): 7.0}
    store.record_costs([CostEntry(april, "elastic_spot", 4.0, 1.5, "b", "spot")])
    metrics.observe_ledger(store, april, GROUPS)
    assert scrape(metrics) == {  # March's label sets are gone, April has b's row only
        "burst_month_to_date_gpu_seconds": {gh("b", "elastic_spot", "H100"): 1.5 * 3600},
        "burst_month_to_date_spend_usd": {(("tenant", "b"),): 4.0},
    }
    restarted = ControllerMetrics()
    restarted.observe_ledger(store, april + timedelta(minutes=1), GROUPS)
    assert scrape(restarted) == scrape(metrics)


def test_tenant_usage_query_sums_per_key_and_returns_the_cursor(store: Store) -> None:
    store.record_costs([
        CostEntry(T0, "steady", 10.0, 8.0, "a", "onprem"),
        CostEntry(T0 + timedelta(minutes=1), "steady", 2.0, 1.0, "a", "onprem"),
        CostEntry(T0 + timedelta(minutes=1), "steady", 3.0, 0.0, None, "onprem"),
    ])
    rows, cursor = store.tenant_usage(T0)
    assert (rows, cursor) == ({("a", "steady", "onprem"): (9.0, 12.0)}, 2)
    assert store.tenant_usage(T0, after_id=cursor) == ({}, 2)  # the overhead row (id 3) has no tenant
    assert store.tenant_usage(T0 + timedelta(minutes=1)) == ({("a", "steady", "onprem"): (1.0, 2.0)}, 2)


def test_spend_is_a_counter_of_what_was_charged_since_start_and_never_goes_back_at_the_month_start(store: Store) -> None:
    march_end = datetime(2026, 3, 31, 23, 59, tzinfo=UTC)
    store.record_costs([CostEntry(march_end - timedelta(hours=1), "steady", 100.0, 8.0, "a", "onprem")])
    metrics = ControllerMetrics()

    def spent() -> dict[str, float]:
        text = generate_latest(metrics.registry).decode()
        return {s.labels["tenant"]: s.value for f in text_string_to_metric_families(text)
                for s in f.samples if s.name == "burst_spend_usd_total"}

    metrics.observe_ledger(store, march_end, GROUPS)
    assert spent() == {"a": 0.0}, "the month so far was spent before this replica started"
    store.record_costs([CostEntry(march_end, "elastic_on_demand", 7.0, 2.0, "a", "od")])
    metrics.observe_ledger(store, march_end + timedelta(seconds=30), GROUPS)
    store.record_costs([CostEntry(datetime(2026, 4, 1, 0, 1, tzinfo=UTC), "elastic_spot", 4.0, 1.5, "a", "spot")])
    metrics.observe_ledger(store, datetime(2026, 4, 1, 0, 1, tzinfo=UTC), GROUPS)
    assert spent() == {"a": 11.0}, "a counter keeps counting across the month start (the gauges start again)"
    store.record_costs([CostEntry(datetime(2026, 4, 1, 0, 2, tzinfo=UTC), "elastic_spot", 2.0, 1.0, "a", "spot")])
    metrics.observe_ledger(store, datetime(2026, 4, 1, 0, 2, tzinfo=UTC), GROUPS, leading=False)
    assert spent() == {"a": 11.0}, "a standby counts nothing: the leader has counted it"
