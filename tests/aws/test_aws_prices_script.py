"""scripts/refresh_aws_prices.py against botocore's Stubber: moto has no Pricing API. The response is shaped
as AWS's GetProducts answer (PriceList entries are JSON strings)."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
from pathlib import Path

import boto3
from botocore.stub import Stubber

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("refresh_aws_prices", ROOT / "scripts" / "refresh_aws_prices.py")
assert spec is not None and spec.loader is not None
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)


def product(instance_type: str, usd: str, *, os: str = "Linux", capacity: str = "Used") -> str:
    sku = "JRTCKXETXFTEST01"
    return json.dumps({
        "product": {
            "productFamily": "Compute Instance",
            "attributes": {
                "instanceType": instance_type, "regionCode": "us-east-1", "location": "US East (N. Virginia)",
                "locationType": "AWS Region", "operatingSystem": os, "tenancy": "Shared", "preInstalledSw": "NA",
                "capacitystatus": capacity, "licenseModel": "No License required", "gpu": "8", "vcpu": "96",
                "servicecode": "AmazonEC2", "usagetype": f"BoxUsage:{instance_type}", "operation": "RunInstances",
            },
            "sku": sku,
        },
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {f"{sku}.JRTCKXETXF": {
            "priceDimensions": {f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                "unit": "Hrs", "endRange": "Inf", "beginRange": "0", "appliesTo": [],
                "description": f"${usd} per On Demand {os} {instance_type} Instance Hour",
                "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7", "pricePerUnit": {"USD": usd}}},
            "sku": sku, "effectiveDate": "2026-11-01T00:00:00Z", "offerTermCode": "JRTCKXETXF", "termAttributes": {}}}},
        "version": "20261120000000",
        "publicationDate": "2026-11-20T00:00:00Z",
    })


def test_parse_keeps_linux_shared_used_hourly_prices() -> None:
    prices = script.parse_price_list([
        product("p4d.24xlarge", "21.9576000000"),
        product("p4d.24xlarge", "40.1000000000", os="Windows"),
        product("p4d.24xlarge", "5.0000000000", capacity="UnusedCapacityReservation"),
    ])
    assert prices == {("p4d.24xlarge", "us-east-1"): 21.9576}


def test_refresh_rewrites_the_aws_rows_from_get_products() -> None:
    csv_text = (
        "provider,instance_type,region,gpu_model,gpus,gpu_memory_gib,on_demand_usd_per_hour,spot_usd_per_hour,source,read_on\n"
        "aws,p4d.24xlarge,us-east-1,A100,8,40,20.0,2.4655,old,2026-01-01\n"
        "gcp,a2-highgpu-8g,us-central1,A100,8,40,29.39,8.8,gcp list,2026-01-01\n"
    )
    pricing = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="testing",
                           aws_secret_access_key="testing")
    with Stubber(pricing) as stub:
        stub.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": [product("p4d.24xlarge", "21.9576420000")]},
            {"ServiceCode": "AmazonEC2", "Filters": script.product_filters("p4d.24xlarge", "us-east-1"),
             "FormatVersion": "aws_v1", "MaxResults": 100},
        )
        text, changes = script.refresh(csv_text, pricing, "2026-12-03")
        stub.assert_no_pending_responses()
    rows = list(csv.DictReader(io.StringIO(text)))
    aws_row, gcp_row = rows
    assert (aws_row["instance_type"], aws_row["on_demand_usd_per_hour"], aws_row["spot_usd_per_hour"]) == (
        "p4d.24xlarge", "21.957642", "2.4655")
    assert aws_row["source"].startswith("AWS Price List API") and aws_row["read_on"] == "2026-12-03"
    assert (gcp_row["source"], gcp_row["read_on"]) == ("gcp list", "2026-01-01")  # other providers untouched
    assert changes == ["p4d.24xlarge us-east-1: 20.0 -> 21.957642"]


def volume(volume_type: str, region: str, usd: str) -> str:
    """An EBS volume product of the AmazonEC2 offer, as GetProducts returns it."""
    sku = "VOLUMETEST000001"
    return json.dumps({
        "product": {
            "productFamily": "Storage",
            "attributes": {
                "servicecode": "AmazonEC2", "location": "US East (N. Virginia)", "locationType": "AWS Region",
                "storageMedia": "SSD-backed", "volumeType": "General Purpose", "volumeApiName": volume_type,
                "usagetype": f"EBS:VolumeUsage.{volume_type}", "regionCode": region,
            },
            "sku": sku,
        },
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {f"{sku}.JRTCKXETXF": {
            "priceDimensions": {f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                "unit": "GB-Mo", "endRange": "Inf", "beginRange": "0", "appliesTo": [],
                "description": f"${usd} per GB-month of {volume_type} provisioned storage",
                "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7", "pricePerUnit": {"USD": usd}}},
            "sku": sku, "effectiveDate": "2026-11-01T00:00:00Z", "offerTermCode": "JRTCKXETXF", "termAttributes": {}}}},
        "version": "20261120000000",
        "publicationDate": "2026-11-20T00:00:00Z",
    })


def test_parse_storage_keeps_gb_month_prices_of_storage_products() -> None:
    prices = script.parse_storage_price_list([
        volume("gp3", "us-east-1", "0.0800000000"),
        product("p4d.24xlarge", "21.9576000000"),  # an instance: not storage
    ])
    assert prices == {("gp3", "us-east-1"): 0.08}


def test_refresh_storage_rewrites_the_aws_rows_of_the_storage_csv() -> None:
    csv_text = (
        "provider,region,volume_type,usd_per_gb_month,as_of,source\n"
        "aws,us-east-1,gp3,0.07,2026-01-01,old\n"
        "aws,us-west-2,gp3,0.08,2026-01-01,old\n"
        "gcp,us-central1,pd-ssd,0.17,2026-01-01,gcp list\n"
    )
    pricing = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="testing",
                           aws_secret_access_key="testing")
    with Stubber(pricing) as stub:
        for region, answer in (("us-east-1", [volume("gp3", "us-east-1", "0.0800000000")]), ("us-west-2", [])):
            stub.add_response(
                "get_products", {"FormatVersion": "aws_v1", "PriceList": answer},
                {"ServiceCode": "AmazonEC2", "Filters": script.storage_filters("gp3", region),
                 "FormatVersion": "aws_v1", "MaxResults": 100},
            )
        text, changes = script.refresh_storage(csv_text, pricing, "2026-12-03")
        stub.assert_no_pending_responses()
    east, west, gcp = csv.DictReader(io.StringIO(text))
    assert (east["usd_per_gb_month"], east["as_of"]) == ("0.08", "2026-12-03")
    assert east["source"].startswith("AWS Price List API") and "Storage" in east["source"]
    assert (west["usd_per_gb_month"], west["as_of"], west["source"]) == ("0.08", "2026-01-01", "old")  # not listed: kept
    assert (gcp["source"], gcp["as_of"]) == ("gcp list", "2026-01-01")  # other providers untouched
    assert changes == ["gp3 us-east-1: 0.07 -> 0.08", "gp3 us-west-2: not in the Price List API, kept"]
    assert text.splitlines()[0] == csv_text.splitlines()[0]

