"""Refresh the AWS on-demand prices of burst's price catalog (burst/data/prices.csv) from the AWS Price List API.

    python scripts/refresh_aws_prices.py [--csv burst/data/prices.csv]
        [--storage-csv burst/data/storage_prices.csv] [--dry-run]

For every `aws` row of the CSV it asks `pricing.get_products` (service
AmazonEC2, the endpoint in us-east-1) for the Linux, shared-tenancy, no
pre-installed software, "Used" capacity product of that instance type and
region, and rewrites the row's on-demand price, source and read_on date.
Spot prices are left alone (the provider reads them live from
describe_spot_price_history; the dated history `burst cost` projects from
is refreshed by scripts/refresh_aws_spot_history.py). Credentials come from boto3's default chain;
the Price List API needs `pricing:GetProducts`.

It refreshes the `aws` rows of the storage price CSV too (what a stopped
warm-pool node bills: its boot volume): the AmazonEC2 product of family
"Storage" with that `volumeApiName` (e.g. gp3) and `regionCode`, whose
on-demand rate is in USD per "GB-Mo".

Response shape: each `PriceList` entry is a JSON *string* holding one product
and its terms, as documented for the Price List Query API
(docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html):
`{"product": {"attributes": {"instanceType", "regionCode", "operatingSystem",
...}}, "terms": {"OnDemand": {OFFER: {"priceDimensions": {RATE: {"unit":
"Hrs", "pricePerUnit": {"USD": "32.7726000000"}}}}}}}`.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from burst.catalog import COLUMNS, csv_text, refresh_storage_rows, usd_text  # noqa: E402

SOURCE = "AWS Price List API (pricing.get_products, AmazonEC2 OnDemand, Linux/Shared/NA/Used)"
STORAGE_SOURCE = "AWS Price List API (pricing.get_products, AmazonEC2 productFamily Storage, OnDemand GB-Mo)"
LINUX_FILTERS = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}


def product_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    wanted = {"instanceType": instance_type, "regionCode": region, **LINUX_FILTERS}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in wanted.items()]


def _largest_usd(doc: dict[str, Any], unit: str) -> float | None:
    """The largest positive USD price per `unit` in a product's on-demand terms (a free tier's 0 must not win)."""
    prices = [
        float(dim["pricePerUnit"]["USD"])
        for term in doc.get("terms", {}).get("OnDemand", {}).values()
        for dim in term.get("priceDimensions", {}).values()
        if dim.get("unit") == unit and "USD" in dim.get("pricePerUnit", {})
    ]
    best = max(prices, default=0.0)
    return best if best > 0 else None


def parse_price_list(price_list: Iterable[str]) -> dict[tuple[str, str], float]:
    """On-demand USD/hour per (instance type, region) from `get_products` PriceList entries (JSON strings).

    Only Linux, shared tenancy, no pre-installed software, used capacity; the
    largest hourly USD price of a product's on-demand terms is its price
    (a free tier's 0 must not win).
    """
    out: dict[tuple[str, str], float] = {}
    for text in price_list:
        doc = json.loads(text)
        attrs = doc.get("product", {}).get("attributes", {})
        if any(attrs.get(k) != v for k, v in LINUX_FILTERS.items()):
            continue
        key = (str(attrs.get("instanceType", "")), str(attrs.get("regionCode", "")))
        price = _largest_usd(doc, "Hrs")
        if price is not None:
            out[key] = max(out.get(key, 0.0), price)
    return out


def storage_filters(volume_type: str, region: str) -> list[dict[str, str]]:
    wanted = {"productFamily": "Storage", "volumeApiName": volume_type, "regionCode": region}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in wanted.items()]


def parse_storage_price_list(price_list: Iterable[str]) -> dict[tuple[str, str], float]:
    """USD per GB-month per (volume type, region) from `get_products` PriceList entries of EBS volumes."""
    out: dict[tuple[str, str], float] = {}
    for text in price_list:
        doc = json.loads(text)
        product = doc.get("product", {})
        if product.get("productFamily") != "Storage":
            continue
        attrs = product.get("attributes", {})
        key = (str(attrs.get("volumeApiName", "")), str(attrs.get("regionCode", "")))
        price = _largest_usd(doc, "GB-Mo")
        if price is not None:
            out[key] = max(out.get(key, 0.0), price)
    return out


def _fetch(pricing: Any, filters: list[dict[str, str]],
           parse: Callable[[Iterable[str]], dict[tuple[str, str], float]], key: tuple[str, str]) -> float | None:
    """The price of `key` from every page of `get_products` with `filters` (None if the API lists none)."""
    params: dict[str, Any] = {"ServiceCode": "AmazonEC2", "Filters": filters, "FormatVersion": "aws_v1",
                              "MaxResults": 100}
    found: dict[tuple[str, str], float] = {}
    while True:
        page = pricing.get_products(**params)
        found.update(parse(page.get("PriceList", [])))
        if not page.get("NextToken"):
            break
        params["NextToken"] = page["NextToken"]
    return found.get(key)


def fetch_on_demand(pricing: Any, instance_type: str, region: str) -> float | None:
    """The on-demand price of one instance type in one region (None if the API lists none)."""
    return _fetch(pricing, product_filters(instance_type, region), parse_price_list, (instance_type, region))


def fetch_storage(pricing: Any, volume_type: str, region: str) -> float | None:
    """The USD per GB-month of one EBS volume type in one region (None if the API lists none)."""
    return _fetch(pricing, storage_filters(volume_type, region), parse_storage_price_list, (volume_type, region))


def refresh(text: str, pricing: Any, today: str) -> tuple[str, list[str]]:
    """The CSV `text` with its aws rows' on-demand prices refreshed, and one line per change."""
    rows = list(csv.DictReader(io.StringIO(text)))
    changes: list[str] = []
    for row in rows:
        if row["provider"] != "aws":
            continue
        price = fetch_on_demand(pricing, row["instance_type"], row["region"])
        if price is None:
            changes.append(f"{row['instance_type']} {row['region']}: not in the Price List API, kept")
            continue
        if float(row["on_demand_usd_per_hour"]) != price:
            changes.append(f"{row['instance_type']} {row['region']}: {row['on_demand_usd_per_hour']} -> {usd_text(price)}")
        row["on_demand_usd_per_hour"] = usd_text(price)
        row["source"] = SOURCE if not row["spot_usd_per_hour"] else f"{SOURCE}; spot: {row['source']}"
        row["read_on"] = today
    return csv_text(rows, COLUMNS), changes


def refresh_storage(text: str, pricing: Any, today: str) -> tuple[str, list[str]]:
    """The storage CSV `text` with its aws rows' USD per GB-month refreshed, and one line per change."""
    return refresh_storage_rows(text, "aws", lambda volume, region: fetch_storage(pricing, volume, region),
                                source=STORAGE_SOURCE, today=today, missing="not in the Price List API")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=ROOT / "burst" / "data" / "prices.csv")
    parser.add_argument("--storage-csv", type=Path, default=ROOT / "burst" / "data" / "storage_prices.csv")
    parser.add_argument("--dry-run", action="store_true", help="print the changes, write nothing")
    args = parser.parse_args(argv)
    import boto3

    pricing = boto3.client("pricing", region_name="us-east-1")
    today = datetime.now(UTC).date().isoformat()
    for path, refresh_file in ((args.csv, refresh), (args.storage_csv, refresh_storage)):
        text, changes = refresh_file(path.read_text(), pricing, today)
        for line in changes:
            print(line)
        if not args.dry_run:
            path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
