"""Cost attribution (burst.costing) against the real shipped catalog and a real SQLite store.

Every expected figure is written out by hand from the price CSV row it uses
(aws p4d.24xlarge in us-east-1: 21.957642 USD/h on demand, 2.4655 USD/h spot)
or from the on-prem model's formula, never computed by the code under test.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from builders import T0, group, job, ready_node
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from burst.catalog import COST_LINES, Catalog, OnPremCost
from burst.costing import attribute_costs
from burst.model import CapacityType, Job, JobState, Node, NodeGroup, NodeState, Tier, Transition, WarmState
from burst.state import CostEntry, Store

P4D_OD = 21.957642  # prices.csv: aws,p4d.24xlarge,us-east-1 on_demand_usd_per_hour
P4D_SPOT = 2.4655  # prices.csv: the same row's spot_usd_per_hour
AT = T0 + timedelta(hours=1)

CATALOG = Catalog.load()


def p4d(gid: str, capacity_type: CapacityType = CapacityType.ON_DEMAND) -> NodeGroup:
    """A sim group naming a real instance type, priced like the aws row (Catalog.find's fallback)."""
    return dataclasses.replace(group(gid, capacity_type=capacity_type), instance_type="p4d.24xlarge")


def steady(gid: str = "rack") -> NodeGroup:
    """An on-prem group: priced by the on-prem model, its instance type needs no catalog row."""
    return dataclasses.replace(group(gid, tier=Tier.STEADY, region="dc1"), instance_type="dgx-a100")


def node(nid: str, g: NodeGroup, state: NodeState, warm_state: WarmState | None = None) -> Node:
    return Node(
        id=nid,
        group_id=g.id,
        state=state,
        gpus=g.gpus_per_node,
        created_at=T0,
        history=(Transition(state, T0),),
        warm_state=warm_state,
    )


def running(jid: str, tenant: str, gpus: int, *nodes: str) -> Job:
    return job(jid, tenant, gpus, state=JobState.RUNNING, nodes=nodes, started=T0)


def by_key(rows: list[CostEntry]) -> dict[tuple[str, str | None, str | None], CostEntry]:
    keyed = {(r.line, r.tenant, r.group_id): r for r in rows}
    assert len(keyed) == len(rows), "one row per (line, tenant, group)"
    return keyed


def test_job_pays_for_its_gpus_and_the_idle_rest_is_overhead() -> None:
    od = p4d("od")
    rows = attribute_costs(
        {od.id: od}, [ready_node("n1", od)], [running("j", "a", 3, "n1")], CATALOG, seconds=1800, at=AT
    )
    got = by_key(rows)
    assert set(got) == {("elastic_on_demand", "a", "od"), ("elastic_on_demand", None, "od")}
    tenant = got[("elastic_on_demand", "a", "od")]
    assert tenant.usd == pytest.approx(3 / 8 * 21.957642 * 0.5)  # 4.117057875
    assert tenant.gpu_hours == pytest.approx(1.5)
    assert tenant.at == AT
    idle = got[("elastic_on_demand", None, "od")]
    assert idle.usd == pytest.approx(5 / 8 * 21.957642 * 0.5)  # 6.861763125
    assert idle.gpu_hours == 0.0


def test_a_multi_node_job_is_split_evenly_over_its_nodes() -> None:
    od = p4d("od")
    nodes = [ready_node("n1", od), ready_node("n2", od)]
    jobs = [running("big", "a", 12, "n1", "n2"), running("small", "b", 2, "n1")]
    got = by_key(attribute_costs({od.id: od}, nodes, jobs, CATALOG, seconds=3600, at=AT))
    # big holds 6 GPUs of each node; small fills n1; n2 has 2 idle GPUs.
    assert got[("elastic_on_demand", "a", "od")].usd == pytest.approx(12 * 21.957642 / 8)
    assert got[("elastic_on_demand", "a", "od")].gpu_hours == pytest.approx(12.0)
    assert got[("elastic_on_demand", "b", "od")].usd == pytest.approx(2 * 21.957642 / 8)
    assert got[("elastic_on_demand", "b", "od")].gpu_hours == pytest.approx(2.0)
    assert got[("elastic_on_demand", None, "od")].usd == pytest.approx(2 * 21.957642 / 8)
    assert sum(r.usd for r in got.values()) == pytest.approx(2 * 21.957642)


def test_a_fractional_job_pays_for_its_share_of_one_gpu() -> None:
    od = p4d("od")
    frac = job("f", "a", 0, gpu_share=0.25, state=JobState.RUNNING, nodes=("n1",), started=T0)
    got = by_key(attribute_costs({od.id: od}, [ready_node("n1", od)], [frac], CATALOG, seconds=7200, at=AT))
    assert got[("elastic_on_demand", "a", "od")].usd == pytest.approx(0.25 * 21.957642 / 8 * 2)
    assert got[("elastic_on_demand", "a", "od")].gpu_hours == pytest.approx(0.5)
    assert got[("elastic_on_demand", None, "od")].usd == pytest.approx(7.75 * 21.957642 / 8 * 2)


def test_spot_nodes_are_charged_the_spot_price_on_the_spot_line() -> None:
    sp = p4d("sp", CapacityType.SPOT)
    got = by_key(
        attribute_costs(
            {sp.id: sp}, [ready_node("s1", sp)], [running("j", "a", 8, "s1")], CATALOG, seconds=3600, at=AT
        )
    )
    assert set(got) == {("elastic_spot", "a", "sp")}  # a full node leaves no idle row
    assert got[("elastic_spot", "a", "sp")].usd == pytest.approx(2.4655)
    assert got[("elastic_spot", "a", "sp")].gpu_hours == pytest.approx(8.0)


def test_warm_nodes_are_hot_pool_overhead_stopped_at_standby_running_at_full_price() -> None:
    od, sp = p4d("od"), p4d("sp", CapacityType.SPOT)
    groups = {od.id: od, sp.id: sp}
    stopped = node("w1", od, NodeState.WARM, WarmState.STOPPED)
    hot = node("w2", od, NodeState.WARM, WarmState.RUNNING)
    rows = attribute_costs(groups, [stopped], [], CATALOG, seconds=3600, at=AT)
    assert [(r.at, r.line, r.tenant, r.group_id, r.gpu_hours) for r in rows] == [
        (AT, "hot_pool", None, "od", 0.0)
    ]
    assert rows[0].usd == pytest.approx(200 * 0.08 / 730)  # its 200 GB gp3 boot volume, us-east-1: 0.0219178 USD
    rows = attribute_costs(groups, [hot], [], CATALOG, seconds=1800, at=AT)
    assert [(r.line, r.tenant, r.group_id) for r in rows] == [("hot_pool", None, "od")]
    assert rows[0].usd == pytest.approx(21.957642 / 2)  # a running warm node costs a full node
    # Stopped spot capacity bills its boot volume too: the same storage price, neither spot nor on demand.
    rows = attribute_costs(
        groups, [node("w3", sp, NodeState.WARM, WarmState.STOPPED)], [], CATALOG, seconds=3600, at=AT
    )
    assert [(r.line, r.group_id) for r in rows] == [("hot_pool", "sp")]
    assert rows[0].usd == pytest.approx(200 * 0.08 / 730)
    # Two warm nodes of one group add up on a single hot_pool row.
    rows = attribute_costs(groups, [stopped, hot], [], CATALOG, seconds=3600, at=AT)
    assert len(rows) == 1 and rows[0].usd == pytest.approx(21.957642 + 200 * 0.08 / 730)


def test_unpaid_states_and_nodes_of_unknown_groups_cost_nothing() -> None:
    od = p4d("od")
    ghost = p4d("ghost")  # not in the groups mapping
    nodes = [
        node("t", od, NodeState.TERMINATED),
        node("tg", od, NodeState.TERMINATING),
        node("f", od, NodeState.FAILED),
        node("gw", ghost, NodeState.WARM, WarmState.STOPPED),
        node("gr", ghost, NodeState.READY),
    ]
    jobs = [running("j", "a", 8, "t"), running("k", "a", 4, "gr")]
    assert attribute_costs({od.id: od}, nodes, jobs, CATALOG, seconds=3600, at=AT) == []


def test_pending_and_finished_jobs_hold_nothing() -> None:
    od = p4d("od")
    jobs = [
        job("p", "a", 4, nodes=("n1",)),  # pending (a stale binding must not charge)
        job("s", "b", 4, state=JobState.SUCCEEDED, nodes=("n1",), started=T0),
        job("c", "c", 4, state=JobState.CHECKPOINTING, nodes=("n1",), started=T0),  # still holds its GPUs
    ]
    got = by_key(attribute_costs({od.id: od}, [ready_node("n1", od)], jobs, CATALOG, seconds=3600, at=AT))
    assert set(got) == {("elastic_on_demand", "c", "od"), ("elastic_on_demand", None, "od")}
    assert got[("elastic_on_demand", "c", "od")].usd == pytest.approx(4 * 21.957642 / 8)


def test_booting_capacity_is_paid_and_idle() -> None:
    od = p4d("od")
    rows = attribute_costs({od.id: od}, [node("b", od, NodeState.BOOTING)], [], CATALOG, seconds=600, at=AT)
    assert [(r.line, r.tenant) for r in rows] == [("elastic_on_demand", None)]
    assert rows[0].usd == pytest.approx(21.957642 / 6)


def test_onprem_is_priced_by_the_catalog_onprem_model() -> None:
    rack = steady()
    per_gpu_hour = 25000 / (4 * 8760) + 700 / 1000 * 1.4 * 0.12 + 0.25  # ≈ 1.0810703 (OnPremCost defaults)
    got = by_key(
        attribute_costs(
            {rack.id: rack},
            [ready_node("r1", rack)],
            [running("j", "a", 2, "r1")],
            CATALOG,
            seconds=3600,
            at=AT,
        )
    )
    assert set(got) == {("steady", "a", "rack"), ("steady", None, "rack")}
    assert got[("steady", "a", "rack")].usd == pytest.approx(2 * per_gpu_hour)
    assert got[("steady", "a", "rack")].usd == pytest.approx(2.16214064, abs=1e-6)
    assert got[("steady", "a", "rack")].gpu_hours == pytest.approx(2.0)
    # Idle owned GPUs are not free: they are steady overhead.
    assert got[("steady", None, "rack")].usd == pytest.approx(6 * per_gpu_hour)
    # A powered-off on-prem warm node still depreciates and is still operated, but draws no power.
    off = node("r2", rack, NodeState.WARM, WarmState.POWERED_OFF)
    rows = attribute_costs({rack.id: rack}, [off], [], CATALOG, seconds=3600, at=AT)
    assert [(r.line, r.tenant) for r in rows] == [("hot_pool", None)]
    assert rows[0].usd == pytest.approx(8 * (25000 / (4 * 8760) + 0.25))


def test_onprem_uses_the_catalogs_own_model_parameters() -> None:
    # capex 1.00 + power 1 kW * PUE 1.0 * 0.50 USD/kWh + ops 0.50 = 2.00 USD per GPU-hour.
    model = OnPremCost(
        capex_usd_per_gpu=35040.0,
        depreciation_years=4.0,
        power_w_per_gpu=1000.0,
        pue=1.0,
        usd_per_kwh=0.5,
        ops_usd_per_gpu_hour=0.5,
    )
    catalog = Catalog.load(onprem=model)
    rack = steady()
    rows = attribute_costs(
        {rack.id: rack}, [ready_node("r1", rack)], [running("j", "a", 8, "r1")], catalog, seconds=5400, at=AT
    )
    assert [(r.line, r.tenant, r.group_id) for r in rows] == [
        ("steady", "a", "rack")
    ]  # a full node: no idle row
    assert rows[0].usd == pytest.approx(8 * 2.0 * 1.5)
    assert rows[0].gpu_hours == pytest.approx(12.0)


def test_rows_round_trip_through_a_sqlite_file_store(tmp_path: Path) -> None:
    od, sp, rack = p4d("od"), p4d("sp", CapacityType.SPOT), steady()
    groups = {g.id: g for g in (od, sp, rack)}
    nodes = [
        ready_node("n1", od),
        ready_node("s1", sp),
        ready_node("r1", rack),
        node("w1", od, NodeState.WARM, WarmState.STOPPED),
    ]
    jobs = [running("ja", "a", 3, "n1"), running("jb", "b", 8, "s1"), running("jc", "a", 4, "r1")]
    rows = attribute_costs(groups, nodes, jobs, CATALOG, seconds=3600, at=AT)
    onprem = 25000 / (4 * 8760) + 700 / 1000 * 1.4 * 0.12 + 0.25
    path = tmp_path / "state.db"
    with Store(path) as store:
        assert store.record_costs(rows) == len(rows)
    with Store.open(path) as store:
        spend = store.spend_by_tenant(since=T0)
        assert set(spend) == {"a", "b"}
        assert spend["a"] == pytest.approx(3 / 8 * 21.957642 + 4 * onprem)
        assert spend["b"] == pytest.approx(2.4655)
        assert store.gpu_hours_by_tenant(since=T0) == {"a": pytest.approx(7.0), "b": pytest.approx(8.0)}
        lines = store.cost_by_line(since=T0)
        assert set(lines) == set(COST_LINES)
        assert lines["elastic_on_demand"] == pytest.approx(21.957642)
        assert lines["elastic_spot"] == pytest.approx(2.4655)
        assert lines["steady"] == pytest.approx(8 * onprem)
        assert lines["hot_pool"] == pytest.approx(200 * 0.08 / 730)  # a stopped p4d: its gp3 boot volume
        assert store.cost_by_line(since=AT + timedelta(seconds=1)) == dict.fromkeys(COST_LINES, 0.0)
        assert sorted(store.costs(since=T0), key=lambda r: (r.line, r.tenant or "", r.group_id or "")) == rows


# ---------------------------------------------------------------- conservation


@dataclass(frozen=True)
class FixedPrices:
    """USD/hour per node by group id, full and standby (a plain price table, like the catalog's)."""

    full: dict[str, float]
    standby: dict[str, float]

    def group_price(self, group: NodeGroup) -> float:
        return self.full[group.id]

    def standby_price(self, group: NodeGroup) -> float:
        return self.standby[group.id]


GROUPS = {
    "od": dataclasses.replace(group("od", gpus=8), instance_type="x"),
    "sp": dataclasses.replace(group("sp", gpus=4, capacity_type=CapacityType.SPOT), instance_type="y"),
    "rack": dataclasses.replace(group("rack", gpus=8, tier=Tier.STEADY), instance_type="z"),
}
PRICES = FixedPrices(full={"od": 32.0, "sp": 6.0, "rack": 9.0}, standby={"od": 1.6, "sp": 0.4, "rack": 5.0})
PAID = {
    NodeState.REQUESTED,
    NodeState.BOOTING,
    NodeState.WAKING,
    NodeState.READY,
    NodeState.DRAINING,
    NodeState.INTERRUPTED,
}


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[Node], list[Job], float]:
    n = draw(st.integers(1, 6))
    nodes = []
    for i in range(n):
        g = GROUPS[draw(st.sampled_from(sorted(GROUPS)))]
        state = draw(st.sampled_from(list(NodeState)))
        warm = draw(st.sampled_from(list(WarmState))) if state is NodeState.WARM else None
        nodes.append(node(f"n{i}", g, state, warm))
    ids = [x.id for x in nodes] + ["gone"]
    jobs = []
    for j in range(draw(st.integers(0, 8))):
        on = tuple(draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3, unique=True)))
        jstate = draw(
            st.sampled_from([JobState.RUNNING, JobState.CHECKPOINTING, JobState.PENDING, JobState.SUCCEEDED])
        )
        tenant = draw(st.sampled_from(["a", "b", "c"]))
        if draw(st.booleans()):
            jobs.append(job(f"j{j}", tenant, draw(st.integers(1, 16)), state=jstate, nodes=on, started=T0))
        else:
            share = draw(st.sampled_from([0.25, 0.5, 1.0]))
            jobs.append(job(f"j{j}", tenant, 0, gpu_share=share, state=jstate, nodes=on, started=T0))
    seconds = draw(st.sampled_from([60.0, 900.0, 3600.0, 5400.0]))
    return nodes, jobs, seconds


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts())
def test_every_paid_node_hour_is_charged_exactly_once(layout: tuple[list[Node], list[Job], float]) -> None:
    nodes, jobs, seconds = layout
    rows = attribute_costs(GROUPS, nodes, jobs, PRICES, seconds=seconds, at=AT)
    hours = seconds / 3600
    per_group: dict[tuple[str, str], float] = defaultdict(float)
    for x in nodes:
        if x.state is NodeState.WARM:
            rate = (
                PRICES.full[x.group_id] if x.warm_state is WarmState.RUNNING else PRICES.standby[x.group_id]
            )
            per_group[("hot_pool", x.group_id)] += rate * hours
        elif x.state in PAID:
            line = {"od": "elastic_on_demand", "sp": "elastic_spot", "rack": "steady"}[x.group_id]
            per_group[(line, x.group_id)] += PRICES.full[x.group_id] * hours
    bill = sum(per_group.values())
    assert sum(r.usd for r in rows) == pytest.approx(bill)
    got: dict[tuple[str, str], float] = defaultdict(float)
    for r in rows:
        assert r.line in COST_LINES and r.usd > 0 and r.at == AT and r.gpu_hours >= 0
        assert r.group_id is not None
        got[(r.line, r.group_id)] += r.usd
        if r.line == "hot_pool":
            assert r.tenant is None and r.gpu_hours == 0
    assert got.keys() == {k for k, v in per_group.items() if v > 0}
    for k, v in per_group.items():
        assert got[k] == pytest.approx(v)
    # Tenants never pay for more GPU-hours than the paid, non-warm nodes have.
    capacity = sum(x.gpus for x in nodes if x.state in PAID) * hours
    assert sum(r.gpu_hours for r in rows if r.tenant is not None) <= capacity + 1e-9
