"""scripts/refresh_gcp_prices.py on a recorded Cloud Billing Catalog response (tests/gcp/data/billing_skus.json: two
pages of Compute Engine SKUs in the API's shape, with commitment, sole-tenancy, custom and other-region SKUs that
must not count). No live calls: the page getter serves the recorded pages."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("refresh_gcp_prices", ROOT / "scripts" / "refresh_gcp_prices.py")
assert spec is not None and spec.loader is not None
script = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = script  # dataclasses look their module up
spec.loader.exec_module(script)

PAGES: list[dict[str, Any]] = json.loads((Path(__file__).parent / "data" / "billing_skus.json").read_text())

CSV = (
    "provider,instance_type,region,gpu_model,gpus,gpu_memory_gib,on_demand_usd_per_hour,spot_usd_per_hour,source,read_on\n"
    "aws,p4d.24xlarge,us-east-1,A100,8,40,21.957642,2.4655,aws list,2026-01-01\n"
    "gcp,a2-highgpu-1g,us-central1,A100,1,40,3.5,1.7,old,2026-01-01\n"
    "gcp,n1-standard-8+1xT4,us-central1,T4,1,16,0.73,0.3,old,2026-01-01\n"
    "gcp,a2-highgpu-1g,europe-west4,A100,1,40,3.9,1.9,old,2026-01-01\n"
    "gcp,g2-standard-4,us-central1,L4,1,24,0.70683,0.28184,old,2026-01-01\n"
)


def recorded_skus() -> list[Any]:
    tokens: list[str] = []

    def get_page(token: str) -> dict[str, Any]:
        tokens.append(token)
        return PAGES[0] if not token else next(p for p, prev in zip(PAGES[1:], PAGES, strict=False)
                                               if prev.get("nextPageToken") == token)

    skus = script.fetch_skus(get_page)
    assert tokens == ["", PAGES[0]["nextPageToken"]]  # followed nextPageToken, stopped without one
    return skus


def test_machine_prices_are_summed_from_core_ram_and_gpu_skus() -> None:
    prices = script.component_prices(recorded_skus(), "us-central1")
    a2 = script.MACHINES["a2-highgpu-1g"]
    assert script.machine_price(prices, a2, "on_demand") == pytest.approx(12 * 0.031611 + 85 * 0.004237 + 2.933908)
    assert script.machine_price(prices, a2, "spot") == pytest.approx(12 * 0.012644 + 85 * 0.001695 + 1.173563)
    t4 = script.MACHINES["n1-standard-8+1xT4"]
    assert script.machine_price(prices, t4, "on_demand") == pytest.approx(8 * 0.031611 + 30 * 0.004237 + 0.35)
    assert script.machine_price(script.component_prices(recorded_skus(), "europe-west4"), a2, "on_demand") is None


def test_the_highest_tier_is_the_price() -> None:
    sku = {"pricingInfo": [{"pricingExpression": {"tieredRates": [
        {"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 0}},
        {"startUsageAmount": 744, "unitPrice": {"currencyCode": "USD", "units": "1", "nanos": 250000000}}]}}]}
    assert script.unit_price(sku) == 1.25


def test_refresh_rewrites_the_gcp_rows_and_keeps_the_rest() -> None:
    text, changes = script.refresh(CSV, recorded_skus(), "2026-12-03")
    rows = {(r["provider"], r["instance_type"], r["region"]): r for r in csv.DictReader(io.StringIO(text))}
    a2 = rows[("gcp", "a2-highgpu-1g", "us-central1")]
    assert (a2["on_demand_usd_per_hour"], a2["spot_usd_per_hour"], a2["read_on"]) == ("3.673385", "1.469366", "2026-12-03")
    assert a2["source"].startswith("Cloud Billing Catalog API (services/6F81-5844-456A/skus")
    t4 = rows[("gcp", "n1-standard-8+1xT4", "us-central1")]
    assert (t4["on_demand_usd_per_hour"], t4["spot_usd_per_hour"]) == ("0.729998", "0.27947")
    for kept in (("gcp", "a2-highgpu-1g", "europe-west4"), ("gcp", "g2-standard-4", "us-central1"),
                 ("aws", "p4d.24xlarge", "us-east-1")):
        assert rows[kept]["read_on"] == "2026-01-01"  # no SKUs for them in this response / another provider
    assert "g2-standard-4 us-central1: its SKUs are not all in the catalog, kept" in changes
    assert "a2-highgpu-1g us-central1: 3.5/1.7 -> 3.673385/1.469366" in changes
    assert text.splitlines()[0] == CSV.splitlines()[0]


def test_every_machine_is_a_catalog_row() -> None:
    from burst.catalog import shipped_prices

    shipped = {r.instance_type for r in shipped_prices() if r.provider == "gcp"}
    assert set(script.MACHINES) <= shipped, set(script.MACHINES) - shipped


def disk_sku(description: str, regions: list[str], nanos: int, *, usage: str = "OnDemand",
             unit: str = "GiBy.mo") -> dict[str, Any]:
    """A Persistent Disk capacity SKU in the Cloud Billing Catalog's shape."""
    return {
        "name": f"{script.SERVICE}/skus/{description}",
        "description": description,
        "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Storage", "resourceGroup": "SSD",
                     "usageType": usage},
        "serviceRegions": regions,
        "pricingInfo": [{"pricingExpression": {"usageUnit": unit, "tieredRates": [
            {"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": nanos}}]}}],
    }


DISK_SKUS = [
    disk_sku("SSD backed PD Capacity", ["us-central1"], 170000000),
    disk_sku("Regional SSD backed PD Capacity", ["us-central1"], 340000000),  # a regional disk: not the boot disk
    disk_sku("Balanced PD Capacity", ["us-central1"], 100000000),
    disk_sku("SSD backed PD Capacity in Netherlands", ["europe-west4"], 187000000),
    disk_sku("SSD backed PD Capacity", ["us-central1"], 120000000, usage="Commit1Yr"),  # not on demand
]

STORAGE_CSV = (
    "provider,region,volume_type,usd_per_gb_month,as_of,source\n"
    "aws,us-east-1,gp3,0.08,2026-01-01,aws list\n"
    "gcp,us-central1,pd-ssd,0.16,2026-01-01,old\n"
    "gcp,us-central1,pd-balanced,0.1,2026-01-01,old\n"
    "gcp,europe-west4,pd-ssd,0.17,2026-01-01,old\n"
    "gcp,us-east4,pd-ssd,0.187,2026-01-01,old\n"
)


def test_disk_prices_are_the_zonal_on_demand_capacity_skus() -> None:
    assert script.disk_price(DISK_SKUS, "pd-ssd", "us-central1") == pytest.approx(0.17)
    assert script.disk_price(DISK_SKUS, "pd-balanced", "us-central1") == pytest.approx(0.10)
    assert script.disk_price(DISK_SKUS, "pd-ssd", "europe-west4") == pytest.approx(0.187)
    assert script.disk_price(DISK_SKUS, "pd-ssd", "us-east4") is None  # no SKU for the region
    assert script.disk_price(DISK_SKUS, "hyperdisk-balanced", "us-central1") is None  # not in DISK_SKUS
    hourly = [disk_sku("SSD backed PD Capacity", ["us-west1"], 1000, unit="GiBy.h")]
    assert script.disk_price(hourly, "pd-ssd", "us-west1") is None  # only per-month prices are read


def test_refresh_storage_rewrites_the_gcp_rows_and_keeps_the_rest() -> None:
    text, changes = script.refresh_storage(STORAGE_CSV, DISK_SKUS, "2026-12-03")
    rows = {(r["provider"], r["region"], r["volume_type"]): r for r in csv.DictReader(io.StringIO(text))}
    ssd = rows[("gcp", "us-central1", "pd-ssd")]
    assert (ssd["usd_per_gb_month"], ssd["as_of"]) == ("0.17", "2026-12-03")
    assert ssd["source"].startswith("Cloud Billing Catalog API")
    assert rows[("gcp", "europe-west4", "pd-ssd")]["usd_per_gb_month"] == "0.187"
    assert rows[("gcp", "us-east4", "pd-ssd")]["as_of"] == "2026-01-01"  # no SKU for it here: kept
    assert rows[("aws", "us-east-1", "gp3")]["source"] == "aws list"  # another provider
    assert changes == [
        "pd-ssd us-central1: 0.16 -> 0.17",
        "pd-ssd europe-west4: 0.17 -> 0.187",
        "pd-ssd us-east4: no single capacity SKU in the catalog, kept",
    ]
    assert text.splitlines()[0] == STORAGE_CSV.splitlines()[0]
