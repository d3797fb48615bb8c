"""What an owned GPU costs per hour: the amortised on-prem cost model the price catalog charges steady capacity at."""

from __future__ import annotations

import math
from dataclasses import dataclass

HOURS_PER_YEAR = 8760.0
"""Hours in a (non-leap) year, used to amortise on-prem capex."""


def finite(value: float, name: str) -> None:
    """Refuse a value that is not a finite number (ValueError naming it)."""
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")


@dataclass(frozen=True)
class OnPremCost:
    """What an owned GPU costs per hour, busy or idle (utilisation-independent).

    ``usd_per_gpu_hour = capex_usd_per_gpu / (depreciation_years * 8760)
    + power_w_per_gpu / 1000 * pue * usd_per_kwh + ops_usd_per_gpu_hour``:
    straight-line depreciation of the purchase price, the energy the GPU draws
    at the facility's PUE, and operations (staff, support, space) per GPU-hour.
    With the defaults: 25000 / 35040 + 0.7 * 1.4 * 0.12 + 0.25 ≈ 1.0811 USD.
    It is never zero, so owned capacity is never treated as free.
    """

    capex_usd_per_gpu: float = 25000.0
    depreciation_years: float = 4.0
    power_w_per_gpu: float = 700.0
    pue: float = 1.4
    usd_per_kwh: float = 0.12
    ops_usd_per_gpu_hour: float = 0.25

    def __post_init__(self) -> None:
        for name in ("capex_usd_per_gpu", "depreciation_years", "power_w_per_gpu", "pue", "usd_per_kwh"):
            value = getattr(self, name)
            finite(value, name)
            if value <= 0:
                raise ValueError(f"onprem {name} must be > 0, got {value}")
        finite(self.ops_usd_per_gpu_hour, "ops_usd_per_gpu_hour")
        if self.ops_usd_per_gpu_hour < 0:
            raise ValueError(f"onprem ops_usd_per_gpu_hour must be >= 0, got {self.ops_usd_per_gpu_hour}")

    @property
    def capex_usd_per_gpu_hour(self) -> float:
        """Depreciation per GPU-hour."""
        return self.capex_usd_per_gpu / (self.depreciation_years * HOURS_PER_YEAR)

    @property
    def power_usd_per_gpu_hour(self) -> float:
        """Energy per GPU-hour, facility overhead (PUE) included."""
        return self.power_w_per_gpu / 1000 * self.pue * self.usd_per_kwh

    @property
    def usd_per_gpu_hour(self) -> float:
        """The full hourly cost of one owned GPU (see the class docstring)."""
        return self.capex_usd_per_gpu_hour + self.power_usd_per_gpu_hour + self.ops_usd_per_gpu_hour

    @property
    def standby_usd_per_gpu_hour(self) -> float:
        """A powered-off GPU still depreciates and is still operated, but draws no power."""
        return self.capex_usd_per_gpu_hour + self.ops_usd_per_gpu_hour


DEFAULT_ONPREM = OnPremCost()


__all__ = ["DEFAULT_ONPREM", "HOURS_PER_YEAR", "OnPremCost", "finite"]
