"""The price catalog: what one hour of a GPU node costs, and who is charged for it.

Prices come from a dated CSV shipped with the package (``burst/data/prices.csv``:
public list prices of common GPU instance types, each row naming the source it
was read from and the date), optionally overlaid by an operator CSV and then by
explicit rows (``catalog.overrides`` in burst.yaml). Later sources win per
``(provider, instance_type, region)``. On-prem capacity is priced by the
amortised `OnPremCost` model instead of a list price.

Cost attribution rule
---------------------
Every node-hour has a rate. A cloud node costs the catalog price of its group's
capacity type (`Catalog.group_price`); an on-prem node costs
``OnPremCost.usd_per_gpu_hour`` per GPU whether or not it is busy; a warm node
that is stopped or powered off costs its standby rate (`Catalog.standby_price`).
That rate is split per GPU (`Catalog.gpu_hour_price`), and the node-hours are
charged like this:

1. Held GPUs. A tenant is charged for the GPU-hours its jobs hold, at the
   node's per-GPU rate: a job holding ``g`` GPUs of a node for ``h`` hours costs
   ``g * h * gpu_hour_price``. A fractional job pays for its ``gpu_share``.
2. Launched for demand. Capacity launched for a tenant's pending demand is
   charged to that tenant while it is idle but held for it (booting, or ready
   and not yet placed), so a burst is never free for the tenant that caused it.
   Once other work uses the capacity, or it is released to the shared pool, the
   charge follows rule 1 or 3.
3. Unattributed. Everything else (idle steady GPUs, idle elastic capacity nobody
   is waiting for, warm-pool nodes) is a tier overhead line, charged to no
   tenant.

Each charge carries one cost line, chosen by `cost_line`: ``steady`` (on-prem),
``elastic_on_demand``, ``elastic_spot`` or ``hot_pool`` (warm-pool capacity), so
the per-line totals add up to the fleet bill.

Spot price history
------------------
``burst/data/spot_history.csv`` (columns `SPOT_HISTORY_COLUMNS`; refreshed by
``scripts/refresh_aws_spot_history.py`` from EC2 ``describe_spot_price_history``)
holds dated spot prices per zone: each row is the price from its timestamp
until the next row of the same (provider, instance type, region, zone). A
region's price at an instant is the lowest of its zones' prices in effect then
(as the flat catalog's spot column: the cheapest zone), and before a zone's
first row that zone has no price. `SpotHistory.price_at` is that step function;
`Catalog.spot_price_at` falls back to the flat spot price where the history has
nothing at or before the instant.

Standby: what a stopped warm-pool node bills
--------------------------------------------
A stopped (or hibernated) cloud instance bills no compute, only the storage of
its boot volume. ``burst/data/storage_prices.csv`` (columns `STORAGE_COLUMNS`)
holds dated list prices of block storage, USD per GB-month, per (provider,
region, volume type). `Catalog.standby_price` of a cloud group is

    root_volume_gb × usd_per_gb_month / HOURS_PER_MONTH   (730 h)

for the volume type the provider's Terraform node-group module provisions
(`ROOT_VOLUME_TYPES`: gp3 on AWS, pd-ssd on GCP) and the root volume size
(`ROOT_VOLUME_GB`, 200, the modules' ``root_volume_size_gib`` /
``boot_disk_size_gb`` default; ``Catalog.load(root_volume_gb=...)`` changes
it). AWS and GCP both bill these "GB" as binary gigabytes (GiB), the unit the
modules size volumes in, so no conversion applies. A 200 GB gp3 volume in
us-east-1: 200 × 0.08 / 730 ≈ 0.0219 USD/hour. ``scripts/refresh_aws_prices.py``
and ``scripts/refresh_gcp_prices.py`` refresh the file's rows of their provider
from its price API, with each row's ``as_of`` date and source.
A region the file has no row for is priced at its provider's reference region
(`STORAGE_FALLBACK_REGIONS`: us-east-1, us-central1); a provider with no volume
type of its own is priced as AWS (`Catalog.root_volume_price`).
"""

from __future__ import annotations

import bisect
import csv
import io
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal, TypeVar

from burst.model import CapacityType, NodeGroup, Offering, Tier, WarmState
from burst.onprem_cost import DEFAULT_ONPREM, HOURS_PER_YEAR, OnPremCost, finite
from burst.provider_registry import PROVIDERS, ProviderSpec

T = TypeVar("T")

HOURS_PER_MONTH = 730.0
"""Hours in the month that per-GB-month storage prices are quoted for (8760 / 12, as AWS and GCP bill)."""

ROOT_VOLUME_GB = 200.0
"""Boot volume per cloud node, GB: the default of the Terraform node-group modules
(aws-gpu-node-group ``root_volume_size_gib``, gcp-gpu-node-group ``boot_disk_size_gb``)."""

COLUMNS = (
    "provider",
    "instance_type",
    "region",
    "gpu_model",
    "gpus",
    "gpu_memory_gib",
    "on_demand_usd_per_hour",
    "spot_usd_per_hour",
    "source",
    "read_on",
)
"""The price CSV's columns, in order."""

SHIPPED_CSV = "burst/data/prices.csv"
"""How errors name the price CSV shipped with the package."""

SIM_PROVIDER = "sim"
"""The simulated cloud: its groups may name any real instance type."""

CostLine = Literal["steady", "elastic_on_demand", "elastic_spot", "hot_pool"]
COST_LINES: tuple[CostLine, ...] = ("steady", "elastic_on_demand", "elastic_spot", "hot_pool")
"""Every cost line a charge can carry (see the attribution rule above)."""

SPOT_HISTORY_COLUMNS = ("provider", "instance_type", "region", "zone", "timestamp", "usd_per_hour", "source")
"""The spot price history CSV's columns, in order."""

SHIPPED_SPOT_HISTORY_CSV = "burst/data/spot_history.csv"
"""How errors name the spot price history CSV shipped with the package."""

SPOT_MEDIAN_WINDOW_S = 30 * 86400.0
"""How far back `Catalog.projected_spot` looks: the last 30 days."""

STORAGE_COLUMNS = ("provider", "region", "volume_type", "usd_per_gb_month", "as_of", "source")
"""The storage price CSV's columns, in order."""

SHIPPED_STORAGE_CSV = "burst/data/storage_prices.csv"
"""How errors name the storage price CSV shipped with the package."""

class _Registered(Mapping[str, T]):
    """One column of the registered providers' catalog rows (`burst.provider_registry`): those that give it."""

    def __init__(self, column: Callable[[ProviderSpec], T | None]) -> None:
        self._column = column

    def _rows(self) -> dict[str, T]:
        return {name: value for name, spec in PROVIDERS.items() if (value := self._column(spec)) is not None}

    def __getitem__(self, provider: str) -> T:
        return self._rows()[provider]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows())

    def __len__(self) -> int:
        return len(self._rows())


ROOT_VOLUME_TYPES: Mapping[str, str] = _Registered(lambda spec: spec.root_volume_type)
"""The boot volume type each provider's Terraform node-group module creates: what its standby is priced as."""

STORAGE_FALLBACK_REGIONS: Mapping[str, str] = _Registered(lambda spec: spec.storage_region)
"""Where a provider's storage price is taken from when its group's region has no row (`Catalog.root_volume_price`)."""

STORAGE_DEFAULT_PROVIDER = "aws"
"""Providers without a root volume type of their own (libcloud, ...) are priced as this one's."""

_FIX = "add it to catalog.overrides in burst.yaml or to the price CSV"


@dataclass(frozen=True)
class PriceRow:
    """One instance type in one region: its GPUs and its hourly list prices (USD per instance)."""

    provider: str
    instance_type: str
    region: str
    gpu_model: str
    gpus: int
    gpu_memory_gib: float
    on_demand_usd_per_hour: float
    spot_usd_per_hour: float | None
    source: str
    read_on: str

    def __post_init__(self) -> None:
        for name in ("provider", "instance_type", "region", "gpu_model", "source"):
            if not getattr(self, name).strip():
                raise ValueError(f"{name} must not be empty")
        if self.gpus < 1:
            raise ValueError(f"gpus must be >= 1, got {self.gpus}")
        finite(self.gpu_memory_gib, "gpu_memory_gib")
        if self.gpu_memory_gib < 0:
            raise ValueError(f"gpu_memory_gib must be >= 0, got {self.gpu_memory_gib}")
        finite(self.on_demand_usd_per_hour, "on_demand_usd_per_hour")
        if self.on_demand_usd_per_hour <= 0:
            raise ValueError(f"on_demand_usd_per_hour must be > 0, got {self.on_demand_usd_per_hour}")
        if self.spot_usd_per_hour is not None:
            finite(self.spot_usd_per_hour, "spot_usd_per_hour")
            if self.spot_usd_per_hour <= 0:
                raise ValueError(f"spot_usd_per_hour must be > 0 (or empty), got {self.spot_usd_per_hour}")
        try:
            date.fromisoformat(self.read_on)
        except ValueError:
            raise ValueError(f"read_on must be a YYYY-MM-DD date, got {self.read_on!r}") from None

    @property
    def key(self) -> tuple[str, str, str]:
        """What identifies the row: later rows with the same key replace it."""
        return (self.provider, self.instance_type, self.region)

    def cloud_price(self, capacity_type: CapacityType) -> float | None:
        """USD/hour per instance bought as `capacity_type` (None: no spot price listed)."""
        if capacity_type is CapacityType.SPOT:
            return self.spot_usd_per_hour
        return self.on_demand_usd_per_hour


class UnknownInstanceType(LookupError):
    """The catalog has no price for an instance type in a region."""

    def __init__(self, provider: str, instance_type: str, region: str) -> None:
        self.provider = provider
        self.instance_type = instance_type
        self.region = region
        super().__init__(self._message())

    def _message(self) -> str:
        return f"no price for {self.provider} instance type {self.instance_type!r} in {self.region}: {_FIX}"


class NoSpotPrice(UnknownInstanceType):
    """The instance type is known but the catalog lists no spot price for it there."""

    def _message(self) -> str:
        return (
            f"no spot price for {self.provider} instance type {self.instance_type!r} in {self.region}: "
            f"add a spot price to catalog.overrides in burst.yaml or to the price CSV"
        )


MIN_BILLED_S: Mapping[str, float] = _Registered(lambda spec: spec.min_billed_s)
"""The shortest time a cloud bills a launched instance, by provider (each provider's spec says): per-second billing
with a 60 s minimum on AWS EC2 (Linux, on-demand and spot) and GCP Compute Engine; the clouds libcloud reaches are
assumed the same; the sim stands in for AWS."""


def min_billed_s(group: NodeGroup) -> float:
    """Seconds a launched node of `group` is billed at least (0 on-prem: owned), so scale-in waits that long."""
    if is_onprem(group):
        return 0.0
    return MIN_BILLED_S.get(group.provider, 60.0)


def is_onprem(group: NodeGroup) -> bool:
    """Whether `group` is owned capacity (on-prem capacity type or the steady tier)."""
    return group.capacity_type is CapacityType.ONPREM or group.tier is Tier.STEADY


def cost_line(group: NodeGroup, warm: bool) -> CostLine:
    """The cost line a node of `group` is booked to; `warm` means it sits in a hot pool."""
    if warm:
        return "hot_pool"
    if is_onprem(group):
        return "steady"
    if group.capacity_type is CapacityType.SPOT:
        return "elastic_spot"
    return "elastic_on_demand"


def _parse_csv(text: str, name: str, columns: tuple[str, ...], build: Callable[[dict[str, str]], T]) -> list[T]:
    """`build` applied to each row of a CSV with exactly `columns`; errors name `name` and the line."""
    reader = csv.DictReader(io.StringIO(text))
    header = tuple(reader.fieldnames or ())
    if header != columns:
        raise ValueError(f"{name}:1: expected columns {','.join(columns)}, got {','.join(header) or 'nothing'}")
    rows: list[T] = []
    for record in reader:
        line = reader.line_num
        if None in record or any(record[c] is None for c in columns):
            raise ValueError(f"{name}:{line}: expected {len(columns)} fields")
        try:
            rows.append(build(record))
        except ValueError as exc:
            raise ValueError(f"{name}:{line}: {exc}") from None
    return rows


def parse_prices(text: str, name: str) -> list[PriceRow]:
    """Rows of a price CSV (`name` is used in errors, which give the file and line)."""
    return _parse_csv(text, name, COLUMNS, _price_row)


def _price_row(record: dict[str, str]) -> PriceRow:
    spot = record["spot_usd_per_hour"].strip()
    return PriceRow(
        provider=record["provider"].strip(),
        instance_type=record["instance_type"].strip(),
        region=record["region"].strip(),
        gpu_model=record["gpu_model"].strip(),
        gpus=int(record["gpus"]),
        gpu_memory_gib=float(record["gpu_memory_gib"]),
        on_demand_usd_per_hour=float(record["on_demand_usd_per_hour"]),
        spot_usd_per_hour=float(spot) if spot else None,
        source=record["source"].strip(),
        read_on=record["read_on"].strip(),
    )


def read_prices(path: Path) -> list[PriceRow]:
    """Rows of the price CSV at `path`."""
    return parse_prices(path.read_text(encoding="utf-8"), str(path))


def shipped_prices() -> list[PriceRow]:
    """Rows of the price CSV shipped with the package."""
    text = resources.files("burst").joinpath("data/prices.csv").read_text(encoding="utf-8")
    return parse_prices(text, SHIPPED_CSV)


@dataclass(frozen=True)
class SpotPricePoint:
    """One spot price observation: the USD/hour of one instance in one zone from `at` on."""

    provider: str
    instance_type: str
    region: str
    zone: str
    at: datetime
    usd_per_hour: float
    source: str

    def __post_init__(self) -> None:
        for name in ("provider", "instance_type", "region", "zone", "source"):
            if not getattr(self, name).strip():
                raise ValueError(f"{name} must not be empty")
        if self.at.tzinfo is None:
            raise ValueError(f"timestamp must carry a UTC offset (e.g. 2026-12-01T00:00:00Z), got {self.at.isoformat()}")
        finite(self.usd_per_hour, "usd_per_hour")
        if self.usd_per_hour <= 0:
            raise ValueError(f"usd_per_hour must be > 0, got {self.usd_per_hour}")

    @property
    def offering(self) -> tuple[str, str, str]:
        """(provider, instance_type, region): the catalog row this point prices."""
        return (self.provider, self.instance_type, self.region)


def _instant(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"timestamp must be an ISO 8601 instant, got {text!r}") from None


def parse_spot_history(text: str, name: str) -> list[SpotPricePoint]:
    """Rows of a spot price history CSV (`name` is used in errors, which give the file and line)."""
    return _parse_csv(text, name, SPOT_HISTORY_COLUMNS, lambda record: SpotPricePoint(
        provider=record["provider"].strip(),
        instance_type=record["instance_type"].strip(),
        region=record["region"].strip(),
        zone=record["zone"].strip(),
        at=_instant(record["timestamp"].strip()),
        usd_per_hour=float(record["usd_per_hour"]),
        source=record["source"].strip(),
    ))


def read_spot_history(path: Path) -> list[SpotPricePoint]:
    """Rows of the spot price history CSV at `path`."""
    return parse_spot_history(path.read_text(encoding="utf-8"), str(path))


def shipped_spot_history() -> list[SpotPricePoint]:
    """Rows of the spot price history CSV shipped with the package."""
    text = resources.files("burst").joinpath("data/spot_history.csv").read_text(encoding="utf-8")
    return parse_spot_history(text, SHIPPED_SPOT_HISTORY_CSV)


@dataclass(frozen=True)
class StoragePrice:
    """One block-storage volume type in one region: its list price, USD per GB-month."""

    provider: str
    region: str
    volume_type: str
    usd_per_gb_month: float
    as_of: str
    source: str

    def __post_init__(self) -> None:
        for name in ("provider", "region", "volume_type", "source"):
            if not getattr(self, name).strip():
                raise ValueError(f"{name} must not be empty")
        finite(self.usd_per_gb_month, "usd_per_gb_month")
        if self.usd_per_gb_month <= 0:
            raise ValueError(f"usd_per_gb_month must be > 0, got {self.usd_per_gb_month}")
        try:
            date.fromisoformat(self.as_of)
        except ValueError:
            raise ValueError(f"as_of must be a YYYY-MM-DD date, got {self.as_of!r}") from None

    @property
    def key(self) -> tuple[str, str, str]:
        """What identifies the row: later rows with the same key replace it."""
        return (self.provider, self.region, self.volume_type)

    def usd_per_hour(self, gb: float) -> float:
        """USD per hour of a `gb` volume: ``gb × usd_per_gb_month / HOURS_PER_MONTH``."""
        return gb * self.usd_per_gb_month / HOURS_PER_MONTH


def parse_storage_prices(text: str, name: str) -> list[StoragePrice]:
    """Rows of a storage price CSV (`name` is used in errors, which give the file and line)."""
    return _parse_csv(text, name, STORAGE_COLUMNS, lambda record: StoragePrice(
        provider=record["provider"].strip(),
        region=record["region"].strip(),
        volume_type=record["volume_type"].strip(),
        usd_per_gb_month=float(record["usd_per_gb_month"]),
        as_of=record["as_of"].strip(),
        source=record["source"].strip(),
    ))


def read_storage_prices(path: Path) -> list[StoragePrice]:
    """Rows of the storage price CSV at `path`."""
    return parse_storage_prices(path.read_text(encoding="utf-8"), str(path))


@cache
def _shipped_storage() -> tuple[StoragePrice, ...]:
    text = resources.files("burst").joinpath("data/storage_prices.csv").read_text(encoding="utf-8")
    return tuple(parse_storage_prices(text, SHIPPED_STORAGE_CSV))


def shipped_storage_prices() -> list[StoragePrice]:
    """Rows of the storage price CSV shipped with the package."""
    return list(_shipped_storage())


def usd_text(price: float) -> str:
    """A price as the catalog files write it: up to 6 decimals (AWS quotes 10), trailing zeros dropped."""
    return f"{price:.6f}".rstrip("0").rstrip(".")


def csv_text(rows: Iterable[Mapping[str, str]], columns: tuple[str, ...]) -> str:
    """`rows` written as a catalog CSV with `columns` (what the refresh scripts write back)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def refresh_storage_rows(
    text: str, provider: str, price_of: Callable[[str, str], float | None], *, source: str, today: str, missing: str
) -> tuple[str, list[str]]:
    """The storage CSV `text` with `provider`'s rows repriced by `price_of(volume_type, region)` (USD per
    GB-month; None keeps the row and says `missing`), and one line per change."""
    rows = list(csv.DictReader(io.StringIO(text)))
    changes: list[str] = []
    for row in rows:
        if row["provider"] != provider:
            continue
        price = price_of(row["volume_type"], row["region"])
        if price is None:
            changes.append(f"{row['volume_type']} {row['region']}: {missing}, kept")
            continue
        if float(row["usd_per_gb_month"]) != price:
            changes.append(f"{row['volume_type']} {row['region']}: {row['usd_per_gb_month']} -> {usd_text(price)}")
        row["usd_per_gb_month"] = usd_text(price)
        row["source"] = source
        row["as_of"] = today
    return csv_text(rows, STORAGE_COLUMNS), changes


class NoStoragePrice(LookupError):
    """Neither the group's region nor its provider's fallback region has a storage price row."""

    def __init__(self, provider: str, region: str, volume_type: str) -> None:
        self.provider, self.region, self.volume_type = provider, region, volume_type
        fallback = STORAGE_FALLBACK_REGIONS.get(provider, region)
        where = region if fallback == region else f"{region} nor in {fallback}"
        super().__init__(f"no {volume_type} storage price for {provider} in {where}: add a row to {SHIPPED_STORAGE_CSV}")


Segment = tuple[datetime, datetime, float]
"""[start, end) and the USD/hour in effect over it."""


class SpotHistory:
    """Spot prices over time per offering: a step function per zone (module doc, "Spot price history")."""

    def __init__(self, points: Iterable[SpotPricePoint]) -> None:
        by_zone: dict[tuple[str, str, str], dict[str, dict[datetime, float]]] = {}
        count = 0
        self._points = tuple(points)
        for p in self._points:
            zone = by_zone.setdefault(p.offering, {}).setdefault(p.zone, {})
            at = p.at.astimezone(UTC)
            count += at not in zone
            zone[at] = p.usd_per_hour  # a later point at the same instant replaces the earlier one
        self._series: dict[tuple[str, str, str], dict[str, tuple[list[datetime], list[float]]]] = {
            key: {z: ([t for t, _ in sorted(s.items())], [v for _, v in sorted(s.items())]) for z, s in zones.items()}
            for key, zones in by_zone.items()
        }
        self._count = count
        self._providers = frozenset(k[0] for k in self._series)

    def __len__(self) -> int:
        return self._count

    def points(self) -> tuple[SpotPricePoint, ...]:
        """The points it was built from, in their order."""
        return self._points

    def offerings(self) -> tuple[tuple[str, str, str], ...]:
        """Every (provider, instance_type, region) with at least one point, sorted."""
        return tuple(sorted(self._series))

    def _resolve(self, provider: str, instance_type: str, region: str) -> tuple[str, str, str] | None:
        """The offering's key; the simulated cloud (and providers without history) borrow any provider's, as `Catalog.find`."""
        key = (provider, instance_type, region)
        if key in self._series:
            return key
        if provider == SIM_PROVIDER or provider not in self._providers:
            for other in sorted(self._series):
                if other[1:] == (instance_type, region):
                    return other
        return None

    def _zones(self, provider: str, instance_type: str, region: str,
               zone: str | None) -> list[tuple[list[datetime], list[float]]]:
        key = self._resolve(provider, instance_type, region)
        if key is None:
            return []
        zones = self._series[key]
        if zone is None:
            return [zones[z] for z in sorted(zones)]
        return [zones[zone]] if zone in zones else []

    @staticmethod
    def _at(series: tuple[list[datetime], list[float]], at: datetime) -> float | None:
        times, values = series
        i = bisect.bisect_right(times, at)
        return values[i - 1] if i else None

    def price_at(self, provider: str, instance_type: str, region: str, at: datetime,
                 zone: str | None = None) -> float | None:
        """USD/hour at `at`: the zone's latest point at or before it, or the lowest over the region's zones; None before any."""
        values = [v for s in self._zones(provider, instance_type, region, zone) if (v := self._at(s, at)) is not None]
        return min(values) if values else None

    def segments(self, provider: str, instance_type: str, region: str, since: datetime, until: datetime,
                 zone: str | None = None) -> list[Segment]:
        """The step function over ``[since, until)`` as pieces; time before the first point is left out."""
        series = self._zones(provider, instance_type, region, zone)
        cuts = sorted({since, *(t for times, _ in series for t in times if since < t < until)})
        out: list[Segment] = []
        for start, end in zip(cuts, [*cuts[1:], until], strict=True):
            values = [v for s in series if (v := self._at(s, start)) is not None]
            if values and end > start:
                out.append((start, end, min(values)))
        return out

    def median(self, provider: str, instance_type: str, region: str, since: datetime, until: datetime,
               zone: str | None = None) -> float | None:
        """The time-weighted median USD/hour over ``[since, until)`` (the lower one on a tie); None if no point covers it.

        The price that the step function is at or below for at least half of
        the covered time (`segments`: time before the first point does not count).
        """
        pieces = sorted((price, (end - start).total_seconds()) for start, end, price in
                        self.segments(provider, instance_type, region, since, until, zone))
        total = sum(d for _, d in pieces)
        covered = 0.0
        for price, seconds in pieces:
            covered += seconds
            if 2 * covered >= total:
                return price
        return None


PRICE_DRIFT_TOLERANCE = 0.10
"""A provider's price this far (a share of the catalog's) from the catalog's is reported (`price_drift`)."""


def price_drift(
    group: NodeGroup, offerings: Iterable[Offering], catalog_price: float, *, tolerance: float = PRICE_DRIFT_TOLERANCE
) -> str | None:
    """What is wrong with the catalog's price of `group` by its provider's own offerings, or None.

    The offerings of the group's instance type and capacity type that carry a
    price (AWS: the spot price history; libcloud: the configured or driver
    price) are compared with `catalog_price` (USD per node-hour, what the
    planner and the ledger use); a difference above `tolerance` is one line
    naming the group, both prices and the fix. Offerings priced from the
    catalog itself, or at 0 (unknown), never disagree.
    """
    prices = sorted(o.price_per_hour for o in offerings
                    if o.instance_type == group.instance_type and o.capacity_type is group.capacity_type
                    and o.price_per_hour > 0)
    if not prices or catalog_price <= 0:
        return None
    low, high = prices[0], prices[-1]
    if max(abs(low - catalog_price), abs(high - catalog_price)) <= tolerance * catalog_price:
        return None
    offered = f"{low:.4f}" if low == high else f"{low:.4f}-{high:.4f}"
    return (f"node group {group.id}: {group.provider} offers {group.instance_type} ({group.capacity_type.value}) at "
            f"{offered} USD/h, the price catalog says {catalog_price:.4f}; plans and the cost ledger use the "
            f"catalog's: refresh it or set catalog.overrides in burst.yaml")


class Catalog:
    """Hourly prices of node groups, looked up by (provider, instance type, region)."""

    def __init__(
        self,
        rows: Iterable[PriceRow],
        *,
        onprem: OnPremCost = DEFAULT_ONPREM,
        spot_history: SpotHistory | None = None,
        storage: Iterable[StoragePrice] | None = None,
        root_volume_gb: float = ROOT_VOLUME_GB,
    ) -> None:
        """`storage`: storage price rows (None: the shipped ones; a later row with the same key wins)."""
        self.spot_history = spot_history or SpotHistory(())
        finite(root_volume_gb, "root_volume_gb")
        if root_volume_gb <= 0:
            raise ValueError(f"root_volume_gb must be > 0, got {root_volume_gb}")
        self.onprem = onprem
        self.root_volume_gb = root_volume_gb
        self._storage = {s.key: s for s in (_shipped_storage() if storage is None else storage)}
        by_key: dict[tuple[str, str, str], PriceRow] = {}
        for row in rows:
            by_key[row.key] = row  # later rows override earlier ones
        self._by_key = by_key
        self._by_type: dict[tuple[str, str], list[PriceRow]] = {}
        for row in sorted(by_key.values(), key=lambda r: r.key):
            self._by_type.setdefault((row.instance_type, row.region), []).append(row)
        self._providers = frozenset(k[0] for k in by_key)

    @classmethod
    def load(
        cls,
        path: Path | None = None,
        *,
        extra: Sequence[PriceRow] = (),
        onprem: OnPremCost = DEFAULT_ONPREM,
        spot_history: Sequence[SpotPricePoint] = (),
        storage: Sequence[StoragePrice] = (),
        root_volume_gb: float = ROOT_VOLUME_GB,
    ) -> Catalog:
        """The shipped prices, then each registered provider's own, then the rows of the CSV at `path`, then
        `extra` (each overriding the last).

        The spot price history is the shipped one plus `spot_history`; the
        storage prices are the shipped ones overridden by `storage`. Cloud
        standby is priced for a `root_volume_gb` boot volume per node.
        """
        rows = shipped_prices()
        for spec in PROVIDERS.values():
            if spec.price_csv is not None:
                rows.extend(read_prices(spec.price_csv))
        if path is not None:
            rows.extend(read_prices(path))
        rows.extend(extra)
        history = SpotHistory([*shipped_spot_history(), *spot_history])
        return cls(rows, onprem=onprem, spot_history=history, storage=[*_shipped_storage(), *storage],
                   root_volume_gb=root_volume_gb)

    def __len__(self) -> int:
        return len(self._by_key)

    def rows(self) -> tuple[PriceRow, ...]:
        """Every row in effect, sorted by key."""
        return tuple(sorted(self._by_key.values(), key=lambda r: r.key))

    def read_on(self) -> str:
        """The latest date any row was read on ('' for an empty catalog)."""
        return max((r.read_on for r in self._by_key.values()), default="")

    def storage_rows(self) -> tuple[StoragePrice, ...]:
        """Every storage price row in effect, sorted by key."""
        return tuple(sorted(self._storage.values(), key=lambda r: r.key))

    def _derived(self, rows: Iterable[PriceRow], spot_history: SpotHistory) -> Catalog:
        """A catalog with other price rows or spot history and this one's on-prem, storage and volume size."""
        return Catalog(rows, onprem=self.onprem, spot_history=spot_history, storage=self.storage_rows(),
                       root_volume_gb=self.root_volume_gb)

    def find(self, provider: str, instance_type: str, region: str) -> PriceRow | None:
        """The row for an instance type, or None.

        An exact (provider, instance_type, region) row wins. The simulated cloud
        and providers the catalog has no rows for fall back to the same
        instance type and region of any provider, so a sim group can name a
        real instance type and be priced like it.
        """
        row = self._by_key.get((provider, instance_type, region))
        if row is not None:
            return row
        if provider == SIM_PROVIDER or provider not in self._providers:
            matches = self._by_type.get((instance_type, region))
            if matches:
                return matches[0]
        return None

    def row(self, provider: str, instance_type: str, region: str) -> PriceRow:
        """The row for an instance type; raises `UnknownInstanceType` if there is none."""
        row = self.find(provider, instance_type, region)
        if row is None:
            raise UnknownInstanceType(provider, instance_type, region)
        return row

    def price(self, provider: str, instance_type: str, region: str, capacity_type: CapacityType) -> float:
        """USD per hour of one instance bought as `capacity_type`.

        ONPREM prices the instance type's GPUs at the on-prem rate. Raises
        `UnknownInstanceType` for an unknown instance type and `NoSpotPrice`
        for SPOT where no spot price is listed.
        """
        row = self.row(provider, instance_type, region)
        if capacity_type is CapacityType.ONPREM:
            return self.onprem.usd_per_gpu_hour * row.gpus
        value = row.cloud_price(capacity_type)
        if value is None:
            raise NoSpotPrice(provider, instance_type, region)
        return value

    def spot_price_at(self, provider: str, instance_type: str, region: str, at: datetime, zone: str | None = None) -> float:
        """USD per hour of one spot instance at `at`: the history's step function, else the flat spot price.

        Raises `UnknownInstanceType` / `NoSpotPrice` where neither has a price.
        """
        price = self.spot_history.price_at(provider, instance_type, region, at, zone)
        if price is not None:
            return price
        return self.price(provider, instance_type, region, CapacityType.SPOT)

    def with_spot_history(self, points: Iterable[SpotPricePoint]) -> Catalog:
        """This catalog with `points` added to its spot price history (a later point at the same instant wins)."""
        history = SpotHistory([*self.spot_history.points(), *points])
        return self._derived(self.rows(), history)

    def projected_spot(self, start: datetime,
                       window_s: float = SPOT_MEDIAN_WINDOW_S) -> tuple[Catalog, dict[tuple[str, str, str], float]]:
        """This catalog with each row's spot price set to the history's median over the `window_s` before `start`.

        The rule a projection from `start` on uses: the time-weighted median of
        the last 30 days (by default) per offering, held flat over the horizon.
        Rows the history does not cover in the window keep their flat spot price.
        Returns the catalog and the medians used, per (provider, instance_type, region).
        """
        since = start - timedelta(seconds=window_s)
        used: dict[tuple[str, str, str], float] = {}
        rows: list[PriceRow] = []
        for row in self.rows():
            median = self.spot_history.median(*row.key, since, start)
            if median is not None:
                used[row.key] = median
                row = replace(row, spot_usd_per_hour=median)
            rows.append(row)
        catalog = self._derived(rows, self.spot_history)
        return catalog, used

    def group_price(self, group: NodeGroup) -> float:
        """USD per hour of one node of `group` (on-prem: GPUs × the on-prem rate, no lookup)."""
        if is_onprem(group):
            return self.onprem.usd_per_gpu_hour * group.gpus_per_node
        return self.price(group.provider, group.instance_type, group.region, group.capacity_type)

    def gpu_hour_price(self, group: NodeGroup) -> float:
        """USD per GPU-hour on a node of `group`: the rate tenants are charged for held GPUs."""
        return self.group_price(group) / group.gpus_per_node

    def root_volume_price(self, group: NodeGroup) -> StoragePrice:
        """The storage price row a cloud node of `group` pays for its boot volume.

        The volume type is the provider's `ROOT_VOLUME_TYPES` entry. A provider
        without one is priced as the provider it borrows instance prices from
        (`find`: the simulated cloud naming a real instance type), else as
        `STORAGE_DEFAULT_PROVIDER` (AWS gp3: libcloud and other clouds have no
        rows; a stopped VM bills its disk there too, so a non-zero estimate is
        kept rather than 0). The row is the group's region's; a region without
        one falls back to the provider's `STORAGE_FALLBACK_REGIONS` row
        (us-east-1 on AWS, us-central1 on GCP), so a region the file lacks is
        priced at the reference region's list price instead of failing.
        Raises `NoStoragePrice` only when that fallback row is missing too.
        """
        provider = group.provider
        if provider not in ROOT_VOLUME_TYPES:
            borrowed = self.find(provider, group.instance_type, group.region)
            if borrowed is not None and borrowed.provider in ROOT_VOLUME_TYPES:
                provider = borrowed.provider
            else:
                provider = STORAGE_DEFAULT_PROVIDER
        volume_type = ROOT_VOLUME_TYPES[provider]
        for region in (group.region, STORAGE_FALLBACK_REGIONS[provider]):
            row = self._storage.get((provider, region, volume_type))
            if row is not None:
                return row
        raise NoStoragePrice(provider, group.region, volume_type)

    def standby_price(self, group: NodeGroup) -> float:
        """USD per hour of a stopped (cloud) or powered-off (on-prem) warm-pool node of `group`.

        Cloud: the storage of its boot volume, whatever the group's capacity
        type: ``root_volume_gb × usd_per_gb_month / HOURS_PER_MONTH`` with the
        row `root_volume_price` picks (its fallbacks are documented there), e.g.
        200 × 0.08 / 730 ≈ 0.0219 USD/hour for AWS gp3 in us-east-1.
        On-prem: depreciation and operations of its GPUs, without power.
        """
        if is_onprem(group):
            return self.onprem.standby_usd_per_gpu_hour * group.gpus_per_node
        return self.root_volume_price(group).usd_per_hour(self.root_volume_gb)

    def warm_price(self, group: NodeGroup, state: WarmState) -> float:
        """USD per hour of a warm-pool node of `group` in `state` (a running one costs a full node)."""
        if state is WarmState.RUNNING:
            return self.group_price(group)
        return self.standby_price(group)

    def cheapest(self, gpu_model: str, capacity_type: CapacityType) -> PriceRow | None:
        """The row with the lowest per-GPU price for `gpu_model` bought as `capacity_type`.

        SPOT skips rows without a spot price; ONPREM prices every row alike, so
        the tie-break (provider, instance type, region) decides. None if no row fits.
        """
        best: tuple[float, tuple[str, str, str]] | None = None
        best_row: PriceRow | None = None
        for row in self._by_key.values():
            if row.gpu_model.casefold() != gpu_model.casefold():
                continue
            if capacity_type is CapacityType.ONPREM:
                per_gpu = self.onprem.usd_per_gpu_hour
            else:
                value = row.cloud_price(capacity_type)
                if value is None:
                    continue
                per_gpu = value / row.gpus
            rank = (per_gpu, row.key)
            if best is None or rank < best:
                best, best_row = rank, row
        return best_row


__all__ = [
    "COLUMNS",
    "COST_LINES",
    "SPOT_HISTORY_COLUMNS",
    "SPOT_MEDIAN_WINDOW_S",
    "STORAGE_COLUMNS",
    "STORAGE_DEFAULT_PROVIDER",
    "STORAGE_FALLBACK_REGIONS",
    "DEFAULT_ONPREM",
    "HOURS_PER_MONTH",
    "HOURS_PER_YEAR",
    "ROOT_VOLUME_GB",
    "ROOT_VOLUME_TYPES",
    "Catalog",
    "CostLine",
    "NoSpotPrice",
    "NoStoragePrice",
    "OnPremCost",
    "PriceRow",
    "SpotHistory",
    "SpotPricePoint",
    "StoragePrice",
    "UnknownInstanceType",
    "cost_line",
    "is_onprem",
    "PRICE_DRIFT_TOLERANCE",
    "parse_prices",
    "price_drift",
    "parse_spot_history",
    "parse_storage_prices",
    "read_spot_history",
    "read_prices",
    "read_storage_prices",
    "shipped_prices",
    "shipped_spot_history",
    "shipped_storage_prices",
]
