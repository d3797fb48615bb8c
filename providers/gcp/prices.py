"""Offering prices and availability for GCP groups.

On-demand and Spot prices come from burst's shipped catalog
(burst/data/prices.csv, GCP rows refreshed by scripts/refresh_gcp_prices.py
from the Cloud Billing Catalog API): the runtime passes a lookup in, so this
package needs nothing beyond the domain model. The Compute API publishes no
live Spot price, so there is no second source as there is on AWS.

A (machine type, zone) whose resize failed with ZONE_RESOURCE_POOL_EXHAUSTED
is offered as unavailable for a cooldown measured on the injected clock
(`StockoutCooldowns`), as AWS's InsufficientInstanceCapacity is: the planner
tries another zone's group or another offering meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from burst.model import CapacityType

PriceLookup = Callable[[str, str, CapacityType], "float | None"]
"""(catalog instance type, region, capacity type) -> USD per instance-hour, None when the catalog has no price."""

STOCKOUT_COOLDOWN_S = 600.0
"""How long a (machine type, zone) that hit ZONE_RESOURCE_POOL_EXHAUSTED is offered as unavailable."""


class StockoutCooldowns:
    """(machine type, zone) pairs that recently ran out of capacity, until when."""

    def __init__(self, clock: Callable[[], datetime], cooldown_s: float = STOCKOUT_COOLDOWN_S) -> None:
        self.clock = clock
        self.cooldown = timedelta(seconds=cooldown_s)
        self._until: dict[tuple[str, str], datetime] = {}

    def mark(self, instance_type: str, zone: str) -> None:
        self._until[(instance_type, zone)] = self.clock() + self.cooldown

    def cooling(self, instance_type: str, zone: str) -> bool:
        until = self._until.get((instance_type, zone))
        return until is not None and until > self.clock()
