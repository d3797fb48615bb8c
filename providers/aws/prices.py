"""Offering prices and availability for AWS groups.

On-demand prices come from burst's shipped catalog (burst/data/prices.csv,
refreshed by scripts/refresh_aws_prices.py from the AWS Price List API): the
runtime passes a lookup in, so this package needs nothing beyond the domain
model. Spot prices come from `ec2.describe_spot_price_history` (the newest
price per instance type and zone), falling back to the catalog's spot price.
An offering whose launch failed for capacity (InsufficientInstanceCapacity)
is unavailable for a cooldown measured on the injected clock (`IceCooldowns`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from burst.model import CapacityType

PriceLookup = Callable[[str, str, CapacityType], "float | None"]
"""(instance type, region, capacity type) -> USD per instance-hour, None when the catalog has no price."""

ICE_COOLDOWN_S = 600.0
"""How long an instance type that hit InsufficientInstanceCapacity is offered as unavailable."""


def latest_spot_prices(history: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """The newest SpotPrice per (instance type, zone) of `describe_spot_price_history` entries."""
    newest: dict[tuple[str, str], tuple[Any, float]] = {}
    for entry in history:
        key = (str(entry["InstanceType"]), str(entry["AvailabilityZone"]))
        stamp = entry.get("Timestamp")
        price = float(entry["SpotPrice"])
        if key not in newest or (stamp is not None and stamp > newest[key][0]):
            newest[key] = (stamp, price)
    return {k: v[1] for k, v in newest.items()}


class IceCooldowns:
    """Instance types (optionally per zone) that recently failed for capacity, until when."""

    def __init__(self, clock: Callable[[], datetime], cooldown_s: float = ICE_COOLDOWN_S) -> None:
        self.clock = clock
        self.cooldown = timedelta(seconds=cooldown_s)
        self._until: dict[tuple[str, str], datetime] = {}

    def mark(self, instance_type: str, zone: str = "") -> None:
        self._until[(instance_type, zone)] = self.clock() + self.cooldown

    def cooling(self, instance_type: str, zone: str = "") -> bool:
        now = self.clock()
        return any(
            until > now for key, until in self._until.items() if key == (instance_type, zone) or key == (instance_type, "")
        )
