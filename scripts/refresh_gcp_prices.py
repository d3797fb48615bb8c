"""Refresh the GCP on-demand and Spot prices of burst's price catalog (burst/data/prices.csv) from the Cloud Billing
Catalog API.

    python scripts/refresh_gcp_prices.py [--csv burst/data/prices.csv]
        [--storage-csv burst/data/storage_prices.csv] [--api-key KEY] [--dry-run]

Compute Engine is billed per resource, so a machine's hourly price is summed
from SKUs of the Compute Engine service (`services/6F81-5844-456A/skus`):
vCPUs x the family's "Instance Core" SKU + GiB x its "Instance Ram" SKU +
GPUs x the GPU's SKU, each the SKU whose `serviceRegions` lists the row's
region, `category.usageType` OnDemand for the on-demand price and Preemptible
for the Spot price (commitments, sole tenancy and custom machines are other
SKUs and are skipped). `MACHINES` says what each catalog instance type is
made of. For every `gcp` row whose instance type is in `MACHINES` the script
rewrites both prices, the source and the read_on date; a row whose SKUs are
not all found is kept and reported.

It refreshes the `gcp` rows of the storage price CSV too (what a stopped
warm-pool node bills: its boot disk): per row, the OnDemand SKU named as
`DISK_SKUS` says for the row's volume type (e.g. "SSD backed PD Capacity",
optionally followed by " in <location>"; the "Regional ..." SKUs are other
disks) whose `serviceRegions` lists the row's region, priced per GiB-month
("GiBy.mo"), which is the CSV's USD per GB-month (Compute Engine bills binary GB).

The API takes an API key (`--api-key` or GCP_BILLING_API_KEY) or, without
one, an OAuth token from Application Default Credentials.

Response shape (cloud.google.com/billing/v1/how-tos/catalog-api):
`{"skus": [{"name", "skuId", "description", "category": {"serviceDisplayName",
"resourceFamily", "resourceGroup", "usageType"}, "serviceRegions": [...],
"pricingInfo": [{"pricingExpression": {"usageUnit", "tieredRates":
[{"startUsageAmount", "unitPrice": {"currencyCode", "units", "nanos"}}]}}]}],
"nextPageToken": "..."}` (units is an int64, so a JSON string).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from burst.catalog import COLUMNS, csv_text, refresh_storage_rows, usd_text  # noqa: E402

SERVICE = "services/6F81-5844-456A"
"""Compute Engine in the Cloud Billing Catalog."""
ENDPOINT = "https://cloudbilling.googleapis.com/v1"
SOURCE = (f"Cloud Billing Catalog API ({SERVICE}/skus: vCPUs x Instance Core + GiB x Instance Ram + GPUs x GPU; "
          "OnDemand, spot = Preemptible)")


@dataclass(frozen=True)
class Machine:
    """What one catalog instance type is billed as."""

    family: str  # the SKU descriptions' family, e.g. "A2", "N1 Predefined"
    vcpus: int
    ram_gib: float
    gpu: str  # the GPU SKUs' name, e.g. "Nvidia Tesla A100"
    gpus: int


MACHINES: Mapping[str, Machine] = {
    "a2-highgpu-1g": Machine("A2", 12, 85, "Nvidia Tesla A100", 1),
    "a2-highgpu-8g": Machine("A2", 96, 680, "Nvidia Tesla A100", 8),
    "a3-highgpu-8g": Machine("A3", 208, 1872, "Nvidia H100 80GB", 8),
    "g2-standard-4": Machine("G2", 4, 16, "Nvidia L4", 1),
    "g2-standard-48": Machine("G2", 48, 192, "Nvidia L4", 4),
    "n1-standard-8+1xT4": Machine("N1 Predefined", 8, 30, "Nvidia Tesla T4", 1),
    "n1-standard-8+1xV100": Machine("N1 Predefined", 8, 30, "Nvidia Tesla V100", 1),
}
"""Catalog instance type -> its vCPUs, memory and GPUs (Compute Engine machine type documentation)."""

DISK_SKUS: Mapping[str, str] = {
    "pd-standard": "Storage PD Capacity",
    "pd-balanced": "Balanced PD Capacity",
    "pd-ssd": "SSD backed PD Capacity",
}
"""Storage CSV volume type -> the description its zonal capacity SKU starts with."""
STORAGE_SOURCE = f"Cloud Billing Catalog API ({SERVICE}/skus: zonal PD capacity, OnDemand, per GiB-month)"

USAGE = {"OnDemand": "on_demand", "Preemptible": "spot"}
SPOT_PREFIX = r"(?:Spot Preemptible )?"


def unit_price(sku: Mapping[str, Any]) -> float | None:
    """The SKU's USD price per usage unit (the highest tier: a free tier's 0 must not win); None if not USD."""
    best: float | None = None
    for info in sku.get("pricingInfo", [])[-1:]:  # the newest pricing
        for rate in info.get("pricingExpression", {}).get("tieredRates", []):
            price = rate.get("unitPrice", {})
            if price.get("currencyCode", "USD") != "USD":
                continue
            value = int(price.get("units") or 0) + int(price.get("nanos") or 0) / 1e9
            best = value if best is None else max(best, value)
    return best


def component_prices(skus: Iterable[Mapping[str, Any]], region: str) -> dict[tuple[str, str], float]:
    """(usage, SKU description without its location) -> USD per unit, for the SKUs sold in `region`."""
    out: dict[tuple[str, str], float] = {}
    for sku in skus:
        usage = USAGE.get(str(sku.get("category", {}).get("usageType", "")))
        if usage is None or region not in sku.get("serviceRegions", []):
            continue
        what = re.sub(r" running in .*$", "", str(sku.get("description", "")))
        price = unit_price(sku)
        if price is not None:
            out[(usage, what)] = price
    return out


def _find(prices: Mapping[tuple[str, str], float], usage: str, pattern: str) -> float | None:
    matches = [p for (u, what), p in prices.items() if u == usage and re.fullmatch(pattern, what)]
    return matches[0] if len(matches) == 1 else None


def machine_price(prices: Mapping[tuple[str, str], float], machine: Machine, usage: str) -> float | None:
    """The machine's hourly price for `usage` from its components' SKUs; None when one is missing or ambiguous."""
    family = re.escape(machine.family)
    core = _find(prices, usage, rf"{SPOT_PREFIX}{family} Instance Core")
    ram = _find(prices, usage, rf"{SPOT_PREFIX}{family} Instance Ram")
    gpu = _find(prices, usage, rf"{SPOT_PREFIX}{re.escape(machine.gpu)} GPU(?: attached to Spot Preemptible VMs)?")
    if core is None or ram is None or gpu is None:
        return None
    return machine.vcpus * core + machine.ram_gib * ram + machine.gpus * gpu


def fetch_skus(get_page: Callable[[str], Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Every SKU of the service, following nextPageToken (`get_page(token)` returns one page)."""
    skus: list[Mapping[str, Any]] = []
    token = ""
    while True:
        page = get_page(token)
        skus.extend(page.get("skus", []))
        token = str(page.get("nextPageToken") or "")
        if not token:
            return skus


def refresh(text: str, skus: list[Mapping[str, Any]], today: str) -> tuple[str, list[str]]:
    """The CSV `text` with its gcp rows' prices refreshed from `skus`, and one line per change."""
    rows = list(csv.DictReader(io.StringIO(text)))
    changes: list[str] = []
    by_region: dict[str, dict[tuple[str, str], float]] = {}
    for row in rows:
        if row["provider"] != "gcp":
            continue
        name, region = row["instance_type"], row["region"]
        machine = MACHINES.get(name)
        if machine is None:
            changes.append(f"{name} {region}: not in MACHINES, kept")
            continue
        prices = by_region.setdefault(region, component_prices(skus, region))
        on_demand = machine_price(prices, machine, "on_demand")
        spot = machine_price(prices, machine, "spot")
        if on_demand is None:
            changes.append(f"{name} {region}: its SKUs are not all in the catalog, kept")
            continue
        new = (usd_text(on_demand), usd_text(spot) if spot is not None else "")
        old = (row["on_demand_usd_per_hour"], row["spot_usd_per_hour"])
        if (float(old[0]), float(old[1]) if old[1] else None) != (float(new[0]), float(new[1]) if new[1] else None):
            changes.append(f"{name} {region}: {old[0]}/{old[1] or '-'} -> {new[0]}/{new[1] or '-'}")
        row["on_demand_usd_per_hour"], row["spot_usd_per_hour"] = new
        row["source"] = SOURCE
        row["read_on"] = today
    return csv_text(rows, COLUMNS), changes


def disk_price(skus: Iterable[Mapping[str, Any]], volume_type: str, region: str) -> float | None:
    """USD per GiB-month of a zonal disk of `volume_type` in `region`; None when no single SKU matches."""
    name = DISK_SKUS.get(volume_type)
    if name is None:
        return None
    found: set[float] = set()
    for sku in skus:
        if (sku.get("category", {}).get("usageType") != "OnDemand" or region not in sku.get("serviceRegions", [])
                or not re.fullmatch(rf"{re.escape(name)}(?: in .+)?", str(sku.get("description", "")))):
            continue
        info = sku.get("pricingInfo", [])[-1:]
        if not info or info[0].get("pricingExpression", {}).get("usageUnit") != "GiBy.mo":
            continue
        price = unit_price(sku)
        if price is not None and price > 0:
            found.add(price)
    return found.pop() if len(found) == 1 else None


def refresh_storage(text: str, skus: list[Mapping[str, Any]], today: str) -> tuple[str, list[str]]:
    """The storage CSV `text` with its gcp rows' USD per GB-month refreshed from `skus`, and one line per change."""
    return refresh_storage_rows(text, "gcp", lambda volume, region: disk_price(skus, volume, region),
                                source=STORAGE_SOURCE, today=today, missing="no single capacity SKU in the catalog")


def _page_getter(api_key: str | None) -> Callable[[str], Mapping[str, Any]]:
    headers: dict[str, str] = {}
    if not api_key:
        import google.auth
        import google.auth.transport.requests

        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-billing.readonly"])
        credentials.refresh(google.auth.transport.requests.Request())
        headers["Authorization"] = f"Bearer {credentials.token}"

    def get_page(token: str) -> Mapping[str, Any]:
        query = {"currencyCode": "USD", "pageSize": "5000", **({"pageToken": token} if token else {}),
                 **({"key": api_key} if api_key else {})}
        req = urllib.request.Request(f"{ENDPOINT}/{SERVICE}/skus?{urllib.parse.urlencode(query)}", headers=headers)
        with urllib.request.urlopen(req, timeout=60) as resp:
            doc: Mapping[str, Any] = json.loads(resp.read())
            return doc

    return get_page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=ROOT / "burst" / "data" / "prices.csv")
    parser.add_argument("--storage-csv", type=Path, default=ROOT / "burst" / "data" / "storage_prices.csv")
    parser.add_argument("--api-key", default=os.environ.get("GCP_BILLING_API_KEY"),
                        help="Cloud Billing API key (default GCP_BILLING_API_KEY; else Application Default Credentials)")
    parser.add_argument("--dry-run", action="store_true", help="print the changes, write nothing")
    args = parser.parse_args(argv)
    skus = fetch_skus(_page_getter(args.api_key))
    today = datetime.now(UTC).date().isoformat()
    for path, refresh_file in ((args.csv, refresh), (args.storage_csv, refresh_storage)):
        text, changes = refresh_file(path.read_text(), skus, today)
        for line in changes:
            print(line)
        if not args.dry_run:
            path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
