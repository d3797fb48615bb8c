"""scripts/refresh_aws_spot_history.py against botocore's Stubber, which checks requests and responses against EC2's
own service model: two pages (NextToken) from us-east-1, one from us-west-2, shaped as DescribeSpotPriceHistory's."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from botocore.stub import Stubber

from burst.catalog import SpotHistory, parse_spot_history

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("refresh_aws_spot_history", ROOT / "scripts" / "refresh_aws_spot_history.py")
assert spec is not None and spec.loader is not None
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)

NOW = datetime(2026, 12, 1, tzinfo=UTC)
START = datetime(2026, 11, 1, tzinfo=UTC)

PRICES = (
    "provider,instance_type,region,gpu_model,gpus,gpu_memory_gib,on_demand_usd_per_hour,spot_usd_per_hour,source,read_on\n"
    "aws,p5.48xlarge,us-east-1,H100,8,80,55.04,17.6289,list,2026-12-02\n"
    "aws,p4d.24xlarge,us-east-1,A100,8,40,21.957642,2.4655,list,2026-12-02\n"
    "aws,p5.48xlarge,us-west-2,H100,8,80,55.04,12.6935,list,2026-12-02\n"
    "gcp,a2-highgpu-8g,us-central1,A100,8,40,29.39,8.8,list,2026-12-02\n"
)

OLD = (
    "provider,instance_type,region,zone,timestamp,usd_per_hour,source\n"
    "aws,p5.48xlarge,us-east-1,us-east-1a,2026-10-01T00:00:00Z,20.0,old\n"  # before the window: kept
    "aws,p5.48xlarge,us-east-1,us-east-1a,2026-11-20T00:00:00Z,99.0,old\n"  # inside it: replaced by the API's
    "gcp,a2-highgpu-8g,us-central1,us-central1-a,2026-11-20T00:00:00Z,8.0,gcp\n"  # another provider: kept
)


def entry(instance_type: str, zone: str, price: str, when: datetime) -> dict[str, Any]:
    return {"AvailabilityZone": zone, "InstanceType": instance_type, "ProductDescription": "Linux/UNIX",
            "SpotPrice": price, "Timestamp": when}


def params(types: list[str], token: str | None = None) -> dict[str, Any]:
    p: dict[str, Any] = {"InstanceTypes": types, "ProductDescriptions": ["Linux/UNIX"], "StartTime": START,
                         "EndTime": NOW, "MaxResults": 1000}
    if token:
        p["NextToken"] = token
    return p


def client(region: str) -> Any:
    return boto3.client("ec2", region_name=region, aws_access_key_id="testing", aws_secret_access_key="testing")


def test_refresh_follows_next_token_and_merges_with_the_old_history() -> None:
    east, west = client("us-east-1"), client("us-west-2")
    with Stubber(east) as e, Stubber(west) as w:
        e.add_response("describe_spot_price_history", {
            "SpotPriceHistory": [
                entry("p5.48xlarge", "us-east-1a", "12.500000", datetime(2026, 10, 30, 6, tzinfo=UTC)),  # in effect at start
                entry("p5.48xlarge", "us-east-1b", "11.000000", datetime(2026, 11, 10, tzinfo=UTC)),
                entry("p5.48xlarge", "us-east-1-bos-1a", "3.000000", datetime(2026, 11, 10, tzinfo=UTC)),  # local zone
            ],
            "NextToken": "page-2",
        }, params(["p4d.24xlarge", "p5.48xlarge"]))
        e.add_response("describe_spot_price_history", {
            "SpotPriceHistory": [entry("p4d.24xlarge", "us-east-1c", "2.465500", datetime(2026, 11, 15, tzinfo=UTC))],
            "NextToken": "",
        }, params(["p4d.24xlarge", "p5.48xlarge"], "page-2"))
        w.add_response("describe_spot_price_history", {
            "SpotPriceHistory": [entry("p5.48xlarge", "us-west-2a", "12.693500", datetime(2026, 11, 2, tzinfo=UTC))],
        }, params(["p5.48xlarge"]))
        text, lines = script.refresh(PRICES, OLD, {"us-east-1": east, "us-west-2": west}.__getitem__, NOW, 30)
        e.assert_no_pending_responses()
        w.assert_no_pending_responses()
    assert lines == ["us-east-1: 3 price points for 2 instance type(s)", "us-west-2: 1 price points for 1 instance type(s)"]
    src = script.SOURCE
    assert text.splitlines() == [
        "provider,instance_type,region,zone,timestamp,usd_per_hour,source",
        f"aws,p4d.24xlarge,us-east-1,us-east-1c,2026-11-15T00:00:00Z,2.4655,{src}",
        "aws,p5.48xlarge,us-east-1,us-east-1a,2026-10-01T00:00:00Z,20.0,old",  # kept as written
        f"aws,p5.48xlarge,us-east-1,us-east-1a,2026-10-30T06:00:00Z,12.5,{src}",
        f"aws,p5.48xlarge,us-east-1,us-east-1b,2026-11-10T00:00:00Z,11,{src}",
        f"aws,p5.48xlarge,us-west-2,us-west-2a,2026-11-02T00:00:00Z,12.6935,{src}",
        "gcp,a2-highgpu-8g,us-central1,us-central1-a,2026-11-20T00:00:00Z,8.0,gcp",
    ]
    history = SpotHistory(parse_spot_history(text, "spot_history.csv"))
    # Nov 1-10: zone a's 12.5 (9 d); Nov 10-Dec 1: zone b's 11 is the cheaper (21 d): the 30-day median is 11.
    assert history.median("aws", "p5.48xlarge", "us-east-1", START, NOW) == 11.0
    assert history.price_at("aws", "p5.48xlarge", "us-east-1", datetime(2026, 11, 5, tzinfo=UTC)) == 12.5


def test_local_and_wavelength_zones_are_not_regional() -> None:
    assert script.is_regional_zone("us-east-1a", "us-east-1")
    assert not script.is_regional_zone("us-west-2-lax-1a", "us-west-2")
    assert not script.is_regional_zone("us-east-1-wl1-bos-wlz-1", "us-east-1")
    assert not script.is_regional_zone("us-east-2a", "us-east-1")
