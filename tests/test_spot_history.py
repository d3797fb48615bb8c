"""The spot price history in the catalog: the CSV, the step function per zone and region, the 30-day median."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from burst.catalog import (
    SPOT_HISTORY_COLUMNS,
    Catalog,
    SpotHistory,
    parse_spot_history,
    read_spot_history,
    shipped_prices,
    shipped_spot_history,
)
from burst.model import CapacityType

SPOT, OD = CapacityType.SPOT, CapacityType.ON_DEMAND

HEADER = ",".join(SPOT_HISTORY_COLUMNS)
SRC = "ec2.describe_spot_price_history Linux/UNIX"

# p5.48xlarge in us-east-1: zone a at 10 from Nov 1, then 14 from Nov 11; zone b at 12 from Nov 6, then 8 from Nov 21.
HISTORY = f"""{HEADER}
aws,p5.48xlarge,us-east-1,us-east-1a,2026-11-01T00:00:00Z,10.0,{SRC}
aws,p5.48xlarge,us-east-1,us-east-1a,2026-11-11T00:00:00+00:00,14.0,{SRC}
aws,p5.48xlarge,us-east-1,us-east-1b,2026-11-06T00:00:00Z,12.0,{SRC}
aws,p5.48xlarge,us-east-1,us-east-1b,2026-11-21T00:00:00Z,8.0,{SRC}
"""


def at(day: int, month: int = 11, hour: int = 0) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


@pytest.fixture
def history() -> SpotHistory:
    return SpotHistory(parse_spot_history(HISTORY, "h.csv"))


def test_shipped_history_has_the_documented_columns_and_loads_into_the_catalog() -> None:
    shipped = shipped_spot_history()
    assert all(p.usd_per_hour > 0 and p.at.tzinfo is not None for p in shipped)
    extra = parse_spot_history(HISTORY, "h.csv")
    catalog = Catalog.load(spot_history=extra)
    assert len(catalog.spot_history) == len(shipped) + 4


def test_price_at_is_the_latest_point_at_or_before_and_the_cheapest_zone(history: SpotHistory) -> None:
    key = ("aws", "p5.48xlarge", "us-east-1")
    assert history.price_at(*key, at(31, 10)) is None  # before any point
    assert history.price_at(*key, at(3)) == 10.0  # only zone a priced yet
    assert history.price_at(*key, at(8)) == 10.0  # a 10, b 12
    assert history.price_at(*key, at(11)) == 12.0  # a's 14 starts exactly now; b 12 is lower
    assert history.price_at(*key, at(25)) == 8.0  # a 14, b 8
    assert history.price_at(*key, at(25), zone="us-east-1a") == 14.0
    assert history.price_at(*key, at(3), zone="us-east-1b") is None
    assert history.price_at(*key, at(3), zone="us-east-1c") is None
    assert history.price_at("sim", "p5.48xlarge", "us-east-1", at(25)) == 8.0  # the sim cloud borrows aws's
    assert history.price_at("aws", "p5.48xlarge", "us-west-2", at(25)) is None


def test_catalog_spot_price_at_falls_back_to_the_flat_spot_price(history: SpotHistory) -> None:
    catalog = Catalog(shipped_prices(), spot_history=history)
    assert catalog.spot_price_at("aws", "p5.48xlarge", "us-east-1", at(15)) == 12.0
    assert catalog.spot_price_at("aws", "p5.48xlarge", "us-east-1", at(31, 10)) == 17.6289  # prices.csv's spot
    assert catalog.spot_price_at("aws", "p5.48xlarge", "us-west-2", at(15)) == 12.6935


def test_median_is_time_weighted_over_the_covered_window(history: SpotHistory) -> None:
    key = ("aws", "p5.48xlarge", "us-east-1")
    # Nov 1-6 at 10 (5 d), Nov 6-11 at 10 (5 d), Nov 11-21 at 12 (10 d), Nov 21-Dec 1 at 8 (10 d): 8 covers 10 d of
    # 30, 8 and 10 cover 20 d >= 15 d, so the median is 10.
    assert history.segments(*key, at(1), at(1, 12)) == [
        (at(1), at(6), 10.0), (at(6), at(11), 10.0), (at(11), at(21), 12.0), (at(21), at(1, 12), 8.0)]
    assert history.median(*key, at(1), at(1, 12)) == 10.0
    # Nov 9-11 at 10 (2 d), Nov 11-21 at 12 (10 d), Nov 21-25 at 8 (4 d): 8 and 10 cover 6 d of 16, so 12.
    assert history.median(*key, at(9), at(25)) == 12.0
    # Before Nov 1 is not covered and does not count: Oct 17-Nov 16 is Nov 1-11 at 10 (10 d) and Nov 11-16 at 12 (5 d).
    assert history.median(*key, at(17, 10), at(16)) == 10.0
    assert history.median(*key, at(1, 10), at(1)) is None  # nothing before the first point
    assert history.median(*key, at(21), at(25), zone="us-east-1a") == 14.0


def test_median_takes_the_lower_price_on_an_exact_tie() -> None:
    points = parse_spot_history(f"{HEADER}\naws,g5.xlarge,us-east-1,us-east-1a,2026-11-01T00:00:00Z,5.0,{SRC}\n"
                                f"aws,g5.xlarge,us-east-1,us-east-1a,2026-11-01T01:00:00Z,7.0,{SRC}\n", "t.csv")
    history = SpotHistory(points)
    assert history.median("aws", "g5.xlarge", "us-east-1", at(1), at(1, hour=2)) == 5.0  # 1 h at 5, 1 h at 7
    assert history.median("aws", "g5.xlarge", "us-east-1", at(1), at(1, hour=3)) == 7.0  # 1 h at 5, 2 h at 7


def test_projected_spot_sets_the_last_30_days_median_per_covered_row(history: SpotHistory) -> None:
    catalog = Catalog(shipped_prices(), spot_history=history)
    projected, used = catalog.projected_spot(at(1, 12))
    assert used == {("aws", "p5.48xlarge", "us-east-1"): 10.0}
    assert projected.price("aws", "p5.48xlarge", "us-east-1", SPOT) == 10.0
    assert projected.price("aws", "p5.48xlarge", "us-west-2", SPOT) == 12.6935  # no history: flat
    assert projected.price("aws", "p5.48xlarge", "us-east-1", OD) == 55.04  # on demand untouched
    assert catalog.price("aws", "p5.48xlarge", "us-east-1", SPOT) == 17.6289  # the original is unchanged
    assert catalog.projected_spot(at(1))[1] == {}  # no history before Nov 1


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("aws,p5.48xlarge,us-east-1,us-east-1a,2026-11-01T00:00:00,10.0,src", "h.csv:2: timestamp must carry a UTC offset"),
        ("aws,p5.48xlarge,us-east-1,us-east-1a,yesterday,10.0,src", "h.csv:2: timestamp must be an ISO 8601 instant"),
        ("aws,p5.48xlarge,us-east-1,us-east-1a,2026-11-01T00:00:00Z,0,src", "h.csv:2: usd_per_hour must be > 0"),
        ("aws,p5.48xlarge,us-east-1,,2026-11-01T00:00:00Z,1.0,src", "h.csv:2: zone must not be empty"),
        ("aws,p5.48xlarge,us-east-1,us-east-1a,2026-11-01T00:00:00Z,1.0", "h.csv:2: expected 7 fields"),
    ],
)
def test_bad_rows_name_the_file_and_line(row: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_spot_history(f"{HEADER}\n{row}\n", "h.csv")


def test_bad_header_is_named(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text("provider,instance_type,region,timestamp,usd_per_hour\n")
    with pytest.raises(ValueError, match=f"{path}:1: expected columns {HEADER}"):
        read_spot_history(path)
