"""The price catalog: shipped data, on-prem cost model, lookups, overrides and cost lines."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from burst.catalog import (
    COLUMNS,
    COST_LINES,
    HOURS_PER_MONTH,
    ROOT_VOLUME_GB,
    ROOT_VOLUME_TYPES,
    STORAGE_COLUMNS,
    STORAGE_DEFAULT_PROVIDER,
    STORAGE_FALLBACK_REGIONS,
    Catalog,
    NoSpotPrice,
    NoStoragePrice,
    OnPremCost,
    PriceRow,
    StoragePrice,
    UnknownInstanceType,
    cost_line,
    parse_prices,
    parse_storage_prices,
    read_storage_prices,
    shipped_prices,
    shipped_storage_prices,
)
from burst.model import CapacityType, GpuShape, NodeGroup, Tier, WarmState

OD, SPOT, ONPREM = CapacityType.ON_DEMAND, CapacityType.SPOT, CapacityType.ONPREM

DEFAULT_ONPREM_RATE = 25000.0 / (4.0 * 8760) + 700.0 / 1000 * 1.4 * 0.12 + 0.25
"""The default on-prem rate, worked by hand: 0.71347... capex + 0.1176 power + 0.25 ops."""


def make_group(
    provider: str = "aws",
    instance_type: str = "g5.xlarge",
    region: str = "us-east-1",
    *,
    capacity_type: CapacityType = OD,
    tier: Tier = Tier.ELASTIC,
    gpus: int = 1,
    gpu_model: str = "A10G",
) -> NodeGroup:
    return NodeGroup(
        id=f"{provider}-{instance_type}-{region}-{capacity_type.value}",
        provider=provider,
        region=region,
        tier=tier,
        capacity_type=capacity_type,
        shape=GpuShape(gpu_model, gpus),
        instance_type=instance_type,
    )


def price_row(**kw: object) -> PriceRow:
    fields: dict[str, object] = {
        "provider": "aws",
        "instance_type": "g5.xlarge",
        "region": "us-east-1",
        "gpu_model": "A10G",
        "gpus": 1,
        "gpu_memory_gib": 24.0,
        "on_demand_usd_per_hour": 1.0,
        "spot_usd_per_hour": 0.4,
        "source": "test",
        "read_on": "2026-12-02",
    }
    fields.update(kw)
    return PriceRow(**fields)  # type: ignore[arg-type]


HEADER = ",".join(COLUMNS)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.load()


# ---------------------------------------------------------------- shipped data


def test_shipped_csv_loads(catalog: Catalog) -> None:
    rows = catalog.rows()
    assert len(rows) >= 30
    assert {r.provider for r in rows} == {"aws", "gcp"}
    assert len({r.key for r in shipped_prices()}) == len(shipped_prices()), (
        "duplicate keys in the shipped CSV"
    )
    for key in (
        ("aws", "p5.48xlarge", "us-east-1"),
        ("aws", "p4d.24xlarge", "us-east-1"),
        ("aws", "g5.xlarge", "us-east-1"),
        ("aws", "g4dn.xlarge", "us-west-2"),
        ("gcp", "a2-highgpu-8g", "us-central1"),
        ("gcp", "g2-standard-4", "europe-west4"),
        ("gcp", "n1-standard-8+1xT4", "us-central1"),
    ):
        assert catalog.find(*key) is not None, key


def test_every_row_has_source_and_date(catalog: Catalog) -> None:
    for row in catalog.rows():
        assert row.source.strip(), row.key
        date.fromisoformat(row.read_on)
        assert row.gpus >= 1 and row.on_demand_usd_per_hour > 0


def test_spot_is_cheaper_than_on_demand(catalog: Catalog) -> None:
    with_spot = [r for r in catalog.rows() if r.spot_usd_per_hour is not None]
    assert with_spot
    for row in with_spot:
        assert row.spot_usd_per_hour is not None
        assert row.spot_usd_per_hour < row.on_demand_usd_per_hour, row.key


def test_read_on_is_the_latest_row_date(catalog: Catalog) -> None:
    assert catalog.read_on() == max(r.read_on for r in catalog.rows())
    newer = Catalog.load(extra=[price_row(instance_type="x.large", read_on="2027-01-31")])
    assert newer.read_on() == "2027-01-31"


def test_shipped_prices_look_up_by_capacity_type(catalog: Catalog) -> None:
    row = catalog.row("aws", "g5.xlarge", "us-east-1")
    assert catalog.price("aws", "g5.xlarge", "us-east-1", OD) == row.on_demand_usd_per_hour
    assert catalog.price("aws", "g5.xlarge", "us-east-1", SPOT) == row.spot_usd_per_hour
    assert catalog.price("aws", "p5.48xlarge", "us-east-1", ONPREM) == pytest.approx(8 * DEFAULT_ONPREM_RATE)


# ---------------------------------------------------------------- on-prem cost


def test_onprem_default_rate_hand_computed() -> None:
    cost = OnPremCost()
    assert cost.usd_per_gpu_hour == DEFAULT_ONPREM_RATE
    assert cost.usd_per_gpu_hour == 1.0810703196347031
    assert cost.capex_usd_per_gpu_hour == 25000.0 / 35040.0
    assert cost.power_usd_per_gpu_hour == pytest.approx(0.1176)
    assert cost.standby_usd_per_gpu_hour == pytest.approx(25000.0 / 35040.0 + 0.25)


@pytest.mark.parametrize(
    "field",
    ["capex_usd_per_gpu", "depreciation_years", "power_w_per_gpu", "pue", "usd_per_kwh"],
)
def test_onprem_rejects_non_positive_inputs(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        OnPremCost(**{field: 0.0})
    with pytest.raises(ValueError, match=field):
        OnPremCost(**{field: float("nan")})


def test_onprem_ops_may_be_zero_but_not_negative() -> None:
    assert OnPremCost(ops_usd_per_gpu_hour=0.0).usd_per_gpu_hour > 0
    with pytest.raises(ValueError, match="ops_usd_per_gpu_hour"):
        OnPremCost(ops_usd_per_gpu_hour=-0.01)


def test_onprem_groups_are_priced_without_lookup(catalog: Catalog) -> None:
    rack = make_group(
        "onprem", "dgx-h100", "dc1", capacity_type=ONPREM, tier=Tier.STEADY, gpus=8, gpu_model="H100"
    )
    assert catalog.group_price(rack) == 8 * DEFAULT_ONPREM_RATE
    assert catalog.gpu_hour_price(rack) == pytest.approx(DEFAULT_ONPREM_RATE)
    assert catalog.standby_price(rack) == pytest.approx(8 * (25000.0 / 35040.0 + 0.25))
    custom = Catalog.load(
        onprem=OnPremCost(
            capex_usd_per_gpu=35040.0,
            depreciation_years=1.0,
            power_w_per_gpu=1000.0,
            pue=1.0,
            usd_per_kwh=1.0,
            ops_usd_per_gpu_hour=0.0,
        )
    )
    assert custom.gpu_hour_price(rack) == pytest.approx(4.0 + 1.0)  # 35040/8760 capex + 1 kW at 1 USD


# ---------------------------------------------------------------- lookups and errors


def test_unknown_instance_type_names_type_region_and_fix(catalog: Catalog) -> None:
    with pytest.raises(UnknownInstanceType) as info:
        catalog.price("aws", "p9.mega", "us-east-1", OD)
    message = str(info.value)
    assert "p9.mega" in message and "us-east-1" in message
    assert "catalog.overrides in burst.yaml" in message and "price CSV" in message
    assert "\n" not in message
    assert isinstance(info.value, LookupError)
    assert (info.value.provider, info.value.instance_type, info.value.region) == (
        "aws",
        "p9.mega",
        "us-east-1",
    )


def test_known_type_in_another_region_is_still_unknown(catalog: Catalog) -> None:
    with pytest.raises(UnknownInstanceType, match="ap-south-1"):
        catalog.price("aws", "g5.xlarge", "ap-south-1", OD)


def test_missing_spot_price_raises_no_spot_price() -> None:
    cat = Catalog.load(extra=[price_row(instance_type="od.only", spot_usd_per_hour=None)])
    assert cat.price("aws", "od.only", "us-east-1", OD) == 1.0
    with pytest.raises(NoSpotPrice) as info:
        cat.price("aws", "od.only", "us-east-1", SPOT)
    assert isinstance(info.value, UnknownInstanceType)
    assert "od.only" in str(info.value) and "catalog.overrides in burst.yaml" in str(info.value)
    with pytest.raises(NoSpotPrice):
        cat.group_price(make_group("aws", "od.only", capacity_type=SPOT))


def test_sim_provider_matches_a_real_instance_type(catalog: Catalog) -> None:
    real = catalog.row("aws", "p4d.24xlarge", "us-east-1")
    sim = make_group("sim", "p4d.24xlarge", "us-east-1", gpus=8, gpu_model="A100")
    assert catalog.group_price(sim) == real.on_demand_usd_per_hour
    assert catalog.price("sim", "p4d.24xlarge", "us-east-1", SPOT) == real.spot_usd_per_hour
    assert (
        catalog.price("sim", "g2-standard-4", "us-central1", OD)
        == catalog.row("gcp", "g2-standard-4", "us-central1").on_demand_usd_per_hour
    )
    assert catalog.find("some-new-cloud", "g5.xlarge", "us-east-1") == catalog.row(
        "aws", "g5.xlarge", "us-east-1"
    )
    with pytest.raises(UnknownInstanceType, match="sim"):
        catalog.price("sim", "p4d.24xlarge", "mars-1", OD)


def test_known_provider_does_not_borrow_another_providers_price(catalog: Catalog) -> None:
    assert catalog.find("gcp", "g5.xlarge", "us-east-1") is None


def test_gpu_hour_price_divides_by_gpus_per_node(catalog: Catalog) -> None:
    g = make_group("aws", "p5.48xlarge", gpus=8, gpu_model="H100")
    assert catalog.gpu_hour_price(g) == pytest.approx(catalog.group_price(g) / 8)


# ---------------------------------------------------------------- overrides


def test_extra_rows_override_shipped_rows(catalog: Catalog) -> None:
    shipped = catalog.row("aws", "g5.xlarge", "us-east-1")
    override = price_row(on_demand_usd_per_hour=0.9, spot_usd_per_hour=0.3, source="negotiated")
    cat = Catalog.load(extra=[override])
    assert shipped.on_demand_usd_per_hour != 0.9
    assert cat.price("aws", "g5.xlarge", "us-east-1", OD) == 0.9
    assert cat.row("aws", "g5.xlarge", "us-east-1").source == "negotiated"
    assert len(cat) == len(catalog)


def test_csv_path_overrides_shipped_and_extra_overrides_csv(tmp_path: Path) -> None:
    path = tmp_path / "prices.csv"
    path.write_text(
        f"{HEADER}\n"
        "aws,g5.xlarge,us-east-1,A10G,1,24,0.8,0.3,site contract,2026-11-01\n"
        "onprem,dgx-a100,dc1,A100,8,40,20.0,,asset register,2026-10-01\n"
    )
    cat = Catalog.load(path)
    assert cat.price("aws", "g5.xlarge", "us-east-1", OD) == 0.8
    assert cat.row("onprem", "dgx-a100", "dc1").gpus == 8
    cat = Catalog.load(path, extra=[price_row(on_demand_usd_per_hour=0.7)])
    assert cat.price("aws", "g5.xlarge", "us-east-1", OD) == 0.7


def test_sim_override_wins_over_real_type(catalog: Catalog) -> None:
    cat = Catalog.load(extra=[price_row(provider="sim", on_demand_usd_per_hour=0.11, spot_usd_per_hour=None)])
    assert cat.price("sim", "g5.xlarge", "us-east-1", OD) == 0.11
    assert cat.price("aws", "g5.xlarge", "us-east-1", OD) == catalog.price(
        "aws", "g5.xlarge", "us-east-1", OD
    )


# ---------------------------------------------------------------- bad CSVs


def test_bad_extra_csv_line_reports_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "extra.csv"
    path.write_text(
        f"{HEADER}\n"
        "aws,g5.xlarge,us-east-1,A10G,1,24,0.8,0.3,ok,2026-11-01\n"
        "aws,g5.2xlarge,us-east-1,A10G,1,24,not-a-price,,bad,2026-11-01\n"
    )
    with pytest.raises(ValueError, match=r"extra\.csv:3:"):
        Catalog.load(path)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("aws,g5.xlarge,us-east-1,A10G,0,24,1.0,,src,2026-11-01", "gpus"),
        ("aws,g5.xlarge,us-east-1,A10G,1,24,1.0,0,src,2026-11-01", "spot_usd_per_hour"),
        ("aws,g5.xlarge,us-east-1,A10G,1,24,-1.0,,src,2026-11-01", "on_demand_usd_per_hour"),
        ("aws,g5.xlarge,us-east-1,A10G,1,24,1.0,,,2026-11-01", "source"),
        ("aws,g5.xlarge,us-east-1,A10G,1,24,1.0,,src,yesterday", "read_on"),
        ("aws,g5.xlarge,us-east-1,A10G,1,24,1.0", "fields"),
    ],
)
def test_bad_rows_are_rejected_with_line_number(line: str, reason: str) -> None:
    with pytest.raises(ValueError, match=rf"x\.csv:2: .*{reason}"):
        parse_prices(f"{HEADER}\n{line}\n", "x.csv")


def test_wrong_header_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"x\.csv:1: expected columns"):
        parse_prices("provider,instance_type\naws,g5.xlarge\n", "x.csv")


# ---------------------------------------------------------------- cheapest


def test_cheapest_by_per_gpu_price(catalog: Catalog) -> None:
    best = catalog.cheapest("H100", OD)
    assert best is not None and best.gpu_model == "H100"
    h100 = [r for r in catalog.rows() if r.gpu_model == "H100"]
    assert best.on_demand_usd_per_hour / best.gpus == min(r.on_demand_usd_per_hour / r.gpus for r in h100)
    spot = catalog.cheapest("A100", SPOT)
    assert spot is not None and spot.spot_usd_per_hour is not None
    assert catalog.cheapest("B300", OD) is None


def test_cheapest_compares_per_gpu_not_per_instance() -> None:
    cat = Catalog(
        [
            price_row(
                instance_type="big", gpus=8, on_demand_usd_per_hour=8.0, spot_usd_per_hour=None
            ),  # 1.00/GPU
            price_row(
                instance_type="small", gpus=1, on_demand_usd_per_hour=1.5, spot_usd_per_hour=0.9
            ),  # 1.50/GPU
        ]
    )
    best = cat.cheapest("a10g", OD)
    assert best is not None and best.instance_type == "big"
    spot = cat.cheapest("A10G", SPOT)
    assert spot is not None and spot.instance_type == "small"  # "big" has no spot price


# ---------------------------------------------------------------- standby and cost lines


STORAGE_HEADER = ",".join(STORAGE_COLUMNS)


def test_standby_price_is_the_boot_volume_storage(catalog: Catalog) -> None:
    # A stopped node bills its 200 GB boot volume at the region's list price per GB-month, 730 h a month.
    assert (HOURS_PER_MONTH, ROOT_VOLUME_GB) == (730.0, 200.0)
    spot = make_group("aws", "p4d.24xlarge", capacity_type=SPOT, gpus=8, gpu_model="A100")
    assert catalog.standby_price(spot) == pytest.approx(200 * 0.08 / 730)  # gp3 us-east-1: 0.0219178 USD/h
    assert catalog.standby_price(spot) == pytest.approx(0.021917808)
    oregon = make_group("aws", "g4dn.xlarge", "us-west-2", gpu_model="T4")
    assert catalog.standby_price(oregon) == pytest.approx(200 * 0.08 / 730)  # gp3 us-west-2 lists 0.08 too
    iowa = make_group("gcp", "a2-highgpu-8g", "us-central1", gpus=8, gpu_model="A100")
    assert catalog.root_volume_price(iowa).volume_type == "pd-ssd"  # what the GCP module's template makes
    assert catalog.standby_price(iowa) == pytest.approx(200 * 0.17 / 730)  # 0.0465753 USD/h
    # Whatever the capacity type and the instance price: the same volume costs the same.
    assert catalog.standby_price(make_group("aws", "g5.xlarge")) == catalog.standby_price(spot)
    bigger = Catalog.load(root_volume_gb=500)
    assert bigger.standby_price(spot) == pytest.approx(500 * 0.08 / 730)
    assert bigger.warm_price(spot, WarmState.STOPPED) == bigger.standby_price(spot)
    running = catalog.row("aws", "p4d.24xlarge", "us-east-1").spot_usd_per_hour
    assert bigger.warm_price(spot, WarmState.RUNNING) == running  # a running warm node costs a full node
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="root_volume_gb"):
            Catalog.load(root_volume_gb=bad)


def test_standby_price_survives_derived_catalogs() -> None:
    cat = Catalog.load(root_volume_gb=300)
    group = make_group("aws", "p4d.24xlarge", gpus=8)
    assert cat.with_spot_history([]).standby_price(group) == pytest.approx(300 * 0.08 / 730)
    projected, _ = cat.projected_spot(datetime(2026, 12, 1, tzinfo=UTC))
    assert projected.standby_price(group) == pytest.approx(300 * 0.08 / 730)
    assert projected.storage_rows() == cat.storage_rows()


def test_standby_price_falls_back_to_the_providers_reference_region(catalog: Catalog) -> None:
    # No row for these regions: the provider's us-east-1 / us-central1 price, not a failure.
    assert STORAGE_FALLBACK_REGIONS == {"aws": "us-east-1", "gcp": "us-central1"}
    ireland = make_group("aws", "g5.xlarge", "eu-west-1")
    assert catalog.root_volume_price(ireland).region == "us-east-1"
    assert catalog.standby_price(ireland) == pytest.approx(200 * 0.08 / 730)
    netherlands = make_group("gcp", "g2-standard-4", "europe-west4", gpu_model="L4")
    assert catalog.root_volume_price(netherlands).key == ("gcp", "us-central1", "pd-ssd")
    assert catalog.standby_price(netherlands) == pytest.approx(200 * 0.17 / 730)
    # A row for the region, added by the caller, wins over the fallback.
    row = StoragePrice("aws", "eu-west-1", "gp3", 0.088, "2026-12-01", "test")
    assert Catalog.load(storage=[row]).standby_price(ireland) == pytest.approx(200 * 0.088 / 730)
    # Without even the fallback row there is nothing to price with: a named error.
    with pytest.raises(NoStoragePrice, match=r"gp3 storage price for aws in eu-west-1 nor in us-east-1"):
        Catalog([], storage=[]).standby_price(ireland)


def test_other_providers_borrow_storage_like_instance_prices(catalog: Catalog) -> None:
    # The simulated cloud prices a real instance type like its row's provider, storage included.
    assert catalog.standby_price(make_group("sim", "a2-highgpu-8g", "us-central1", gpus=8)) == pytest.approx(
        200 * 0.17 / 730
    )
    assert catalog.standby_price(make_group("sim", "p4d.24xlarge", gpus=8)) == pytest.approx(200 * 0.08 / 730)
    # Other clouds (libcloud) and made-up instance types: priced as AWS gp3 in us-east-1, never free.
    assert STORAGE_DEFAULT_PROVIDER == "aws"
    assert catalog.standby_price(make_group("libcloud", "some-size", "fr-par-1")) == pytest.approx(200 * 0.08 / 730)


def test_shipped_storage_prices() -> None:
    rows = shipped_storage_prices()
    assert len({r.key for r in rows}) == len(rows), "duplicate keys in the shipped storage CSV"
    prices = {r.key: r.usd_per_gb_month for r in rows}
    assert prices[("aws", "us-east-1", "gp3")] == 0.08
    assert prices[("aws", "us-west-2", "gp3")] == 0.08
    assert prices[("gcp", "us-central1", "pd-balanced")] == 0.10
    assert prices[("gcp", "us-central1", "pd-ssd")] == 0.17
    for row in rows:
        assert row.source.startswith("https://"), row.key
        date.fromisoformat(row.as_of)
    for provider, region in STORAGE_FALLBACK_REGIONS.items():
        assert (provider, region, ROOT_VOLUME_TYPES[provider]) in prices  # every fallback exists


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("aws,us-east-1,gp3,0,2026-12-01,src", "usd_per_gb_month must be > 0"),
        ("aws,us-east-1,gp3,cheap,2026-12-01,src", "could not convert"),
        ("aws,us-east-1,gp3,inf,2026-12-01,src", "usd_per_gb_month must be a finite number"),
        ("aws,,gp3,0.08,2026-12-01,src", "region must not be empty"),
        ("aws,us-east-1,gp3,0.08,last week,src", "as_of"),
        ("aws,us-east-1,gp3,0.08", "expected 6 fields"),
    ],
)
def test_bad_storage_rows_name_file_and_line(line: str, reason: str) -> None:
    text = f"{STORAGE_HEADER}\naws,us-east-1,gp3,0.08,2026-12-01,ok\n{line}\n"
    with pytest.raises(ValueError, match=rf"^s\.csv:3: .*{reason}"):
        parse_storage_prices(text, "s.csv")


def test_bad_storage_file_names_its_path(tmp_path: Path) -> None:
    path = tmp_path / "storage.csv"
    path.write_text("provider,region,price\naws,us-east-1,0.08\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:1: expected columns provider,region,volume_type"):
        read_storage_prices(path)
    path.write_text(f"{STORAGE_HEADER}\ngcp,us-central1,pd-ssd,-0.17,2026-12-01,src\n")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:2: usd_per_gb_month must be > 0"):
        read_storage_prices(path)


def test_cost_line_mapping() -> None:
    steady = make_group("onprem", "dgx", "dc1", capacity_type=ONPREM, tier=Tier.STEADY, gpus=8)
    on_demand = make_group(capacity_type=OD)
    spot = make_group(capacity_type=SPOT)
    assert cost_line(steady, warm=False) == "steady"
    assert cost_line(on_demand, warm=False) == "elastic_on_demand"
    assert cost_line(spot, warm=False) == "elastic_spot"
    for g in (steady, on_demand, spot):
        assert cost_line(g, warm=True) == "hot_pool"
    assert set(COST_LINES) == {"steady", "elastic_on_demand", "elastic_spot", "hot_pool"}


# ------------------------------------------------------------------ provider prices against the catalog


def test_price_drift_names_a_group_offered_off_the_catalog_price() -> None:
    from burst.catalog import price_drift
    from burst.model import Offering

    spot = make_group("aws", "p4d.24xlarge", capacity_type=CapacityType.SPOT, gpus=8, gpu_model="A100")

    def offer(price: float, itype: str = "p4d.24xlarge", zone: str = "us-east-1a") -> Offering:
        return Offering(itype, zone, CapacityType.SPOT, price)

    assert price_drift(spot, [offer(10.5), offer(9.6, zone="us-east-1b")], 10.0) is None  # within 10%
    assert price_drift(spot, [offer(0.0)], 10.0) is None  # a price the provider does not know
    assert price_drift(spot, [offer(30.0, itype="p5.48xlarge")], 10.0) is None  # not the group's type
    line = price_drift(spot, [offer(12.5), offer(11.0, zone="us-east-1b")], 10.0)
    assert line == (f"node group {spot.id}: aws offers p4d.24xlarge (spot) at 11.0000-12.5000 USD/h, the price "
                    "catalog says 10.0000; plans and the cost ledger use the catalog's: refresh it or set "
                    "catalog.overrides in burst.yaml")


def test_runtime_price_drift_reads_each_providers_offerings() -> None:
    from burst.runtime import build_runtime, load_run_config
    from providers.sim import SimProvider

    runtime = build_runtime(load_run_config(None), ephemeral=True)
    try:
        assert runtime.price_drift() == []  # the quickstart's sim cloud is priced from the catalog
        groups = runtime.providers["sim"].node_groups()
        prices = {g.id: runtime.catalog.group_price(g) * (1.5 if g.id == "cloud-a100-spot" else 1.0) for g in groups}
        runtime.providers["sim"] = SimProvider(groups, clock=runtime.now, cluster=runtime.config.cluster, prices=prices)
        (line,) = runtime.price_drift()
        assert line.startswith("node group cloud-a100-spot: sim offers ")
    finally:
        runtime.close()
