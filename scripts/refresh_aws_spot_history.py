"""Refresh burst's spot price history (burst/data/spot_history.csv) from EC2 describe_spot_price_history.

    python scripts/refresh_aws_spot_history.py [--prices burst/data/prices.csv]
        [--csv burst/data/spot_history.csv] [--days 30] [--dry-run]

For every region of the price catalog's `aws` rows it asks
`ec2.describe_spot_price_history` (that region's endpoint; product
Linux/UNIX; the catalog's instance types of that region) for the last
`--days` days, following `NextToken` until the last page, and writes one row
per (instance type, zone, timestamp). Local and Wavelength zones (names with
more than the region and one letter, e.g. us-west-2-lax-1a) are left out, as
the catalog's flat spot column leaves them out. Rows of other providers and of
offerings not refreshed are kept; for refreshed offerings, rows before the
window are kept and rows inside it are replaced by the API's. Credentials come
from boto3's default chain; the call needs `ec2:DescribeSpotPriceHistory`.

Response shape (docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html):
`{"SpotPriceHistory": [{"AvailabilityZone": "us-east-1a", "InstanceType":
"p5.48xlarge", "ProductDescription": "Linux/UNIX", "SpotPrice": "12.693500",
"Timestamp": datetime}], "NextToken": "..."}`; the last page's NextToken is
empty or absent. The answer also holds the price in effect at StartTime (its
timestamp can be before it).
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from burst.catalog import SPOT_HISTORY_COLUMNS, parse_prices  # noqa: E402

PRODUCT = "Linux/UNIX"
SOURCE = "EC2 describe_spot_price_history (Linux/UNIX)"


def _usd(price: float) -> str:
    return f"{price:.6f}".rstrip("0").rstrip(".")


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_regional_zone(zone: str, region: str) -> bool:
    """Whether `zone` is one of `region`'s ordinary availability zones (not a Local or Wavelength zone)."""
    return re.fullmatch(re.escape(region) + r"[a-z]", zone) is not None


def fetch_history(ec2: Any, instance_types: Iterable[str], start: datetime, end: datetime) -> list[dict[str, Any]]:
    """Every SpotPriceHistory entry of `instance_types` in [start, end], all pages."""
    params: dict[str, Any] = {"InstanceTypes": sorted(instance_types), "ProductDescriptions": [PRODUCT],
                              "StartTime": start, "EndTime": end, "MaxResults": 1000}
    out: list[dict[str, Any]] = []
    while True:
        page = ec2.describe_spot_price_history(**params)
        out.extend(page.get("SpotPriceHistory", []))
        token = page.get("NextToken")
        if not token:
            return out
        params["NextToken"] = token


def history_rows(entries: Iterable[Mapping[str, Any]], region: str) -> list[dict[str, str]]:
    """CSV rows (SPOT_HISTORY_COLUMNS) of `entries` from `region`'s endpoint, local zones left out."""
    rows = []
    for e in entries:
        zone = str(e["AvailabilityZone"])
        if e.get("ProductDescription", PRODUCT) != PRODUCT or not is_regional_zone(zone, region):
            continue
        rows.append({"provider": "aws", "instance_type": str(e["InstanceType"]), "region": region, "zone": zone,
                     "timestamp": _stamp(e["Timestamp"]), "usd_per_hour": _usd(float(e["SpotPrice"])),
                     "source": SOURCE})
    return rows


def refresh(prices_text: str, history_text: str, client: Callable[[str], Any], now: datetime,
            days: float = 30.0) -> tuple[str, list[str]]:
    """The history CSV `history_text` refreshed for the aws rows of `prices_text`, and one line per region.

    `client(region)` gives an EC2 client for that region.
    """
    start = now - timedelta(days=days)
    by_region: dict[str, set[str]] = {}
    for row in parse_prices(prices_text, "prices.csv"):
        if row.provider == "aws":
            by_region.setdefault(row.region, set()).add(row.instance_type)
    old = list(csv.DictReader(io.StringIO(history_text))) if history_text.strip() else []
    fresh: list[dict[str, str]] = []
    lines: list[str] = []
    for region in sorted(by_region):
        types = by_region[region]
        got = history_rows(fetch_history(client(region), types, start, now), region)
        fresh.extend(got)
        lines.append(f"{region}: {len(got)} price points for {len(types)} instance type(s)")
    refreshed = {("aws", t, r) for r, types in by_region.items() for t in types}
    first_fresh: dict[tuple[str, str, str], str] = {}
    for row in fresh:
        key = (row["provider"], row["instance_type"], row["region"])
        first_fresh[key] = min(first_fresh.get(key, row["timestamp"]), row["timestamp"])
    kept = []
    for row in old:
        key = (row["provider"], row["instance_type"], row["region"])
        if key not in refreshed:
            kept.append(row)
        elif row["timestamp"] < min(_stamp(start), first_fresh.get(key, _stamp(start))):
            kept.append(row)  # before the window (and before the API's first answer)
    merged: dict[tuple[str, ...], dict[str, str]] = {}
    for row in [*kept, *fresh]:
        merged[tuple(row[c] for c in SPOT_HISTORY_COLUMNS[:5])] = row
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(SPOT_HISTORY_COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(merged[k] for k in sorted(merged))
    return out.getvalue(), lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prices", type=Path, default=ROOT / "burst" / "data" / "prices.csv")
    parser.add_argument("--csv", type=Path, default=ROOT / "burst" / "data" / "spot_history.csv")
    parser.add_argument("--days", type=float, default=30.0, help="how far back to ask (EC2 keeps 90 days)")
    parser.add_argument("--dry-run", action="store_true", help="print the counts, write nothing")
    args = parser.parse_args(argv)
    import boto3

    history = args.csv.read_text() if args.csv.exists() else ""
    text, lines = refresh(args.prices.read_text(), history, lambda region: boto3.client("ec2", region_name=region),
                          datetime.now(UTC), args.days)
    for line in lines:
        print(line)
    if not args.dry_run:
        args.csv.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
