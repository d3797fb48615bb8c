"""Judge one GPU's health from its NVML readings: `judge(reading) -> (GpuHealth, reason)`.

Pure: no NVML calls, no clock. The verdicts mean what `burst.model.GpuHealth`
says: UNHEALTHY takes no new work (its jobs are moved, checkpoint first),
DEGRADED takes work but is scored lower, HEALTHY is full score.

UNHEALTHY, any of:
  * the GPU is lost (NVML_ERROR_GPU_IS_LOST: it fell off the bus), or NVML
    will not even identify it (handle or UUID failed);
  * volatile uncorrected ECC errors > 0 (memory corrupted since the driver
    loaded; NVIDIA's guidance is to drain and reset the GPU);
  * retired pages pending or row remaps pending (a reset is needed before the
    bad memory is taken out of service);
  * a row remap failed (the GPU ran out of spare rows: RMA territory).

DEGRADED, any of:
  * thermal slowdown (HW slowdown, HW or SW thermal slowdown) in the clock
    event reasons, at any load: the GPU is protecting itself from heat;
  * power-brake slowdown, or the software power cap, while busy;
  * SM clock below `MIN_SM_CLOCK_RATIO` of its maximum while busy;
  * temperature at or above `HOT_TEMPERATURE_C`.

The reason names each reading it rests on, e.g. "sm clock 810/1410 MHz under
97% load"; several reasons are joined with "; ".
"""

from __future__ import annotations

import pynvml  # pure Python: importing it loads no NVIDIA library; only its constants are used here

from burst.model import GpuHealth
from providers.onprem.readings import GpuReading

BUSY_UTIL_PCT = 50
"""GPU utilisation (%) from which a GPU counts as busy. Clock and power throttling on an idle GPU
is the driver saving power and says nothing about the hardware; under real load it costs throughput."""

MIN_SM_CLOCK_RATIO = 0.70
"""A busy GPU whose SM clock is below this fraction of its maximum is degraded. Boost clocks vary
by 10-20% with load and temperature in normal operation; below 70% the GPU is losing about a third
of its throughput, which a scheduler choosing between GPUs should see."""

HOT_TEMPERATURE_C = 85
"""GPU temperature (C) from which a GPU is degraded. Data-centre GPUs start slowing down around
85-90 C (A100/H100 slowdown thresholds); a GPU already this hot has no thermal headroom left."""


def _reason_bit(name: str) -> int:
    """A clock event reason bit: pynvml's `nvmlClocksEventReason<name>`, or the older ThrottleReason alias."""
    value = getattr(pynvml, f"nvmlClocksEventReason{name}", None)
    if value is None:
        value = getattr(pynvml, f"nvmlClocksThrottleReason{name}")
    return int(value)


THERMAL_REASONS: dict[int, str] = {
    _reason_bit("HwSlowdown"): "hw slowdown",
    _reason_bit("HwThermalSlowdown"): "hw thermal slowdown",
    _reason_bit("SwThermalSlowdown"): "sw thermal slowdown",
}
"""Clock event reasons that mean heat (or a hardware protection event): degraded at any load."""

POWER_REASONS: dict[int, str] = {
    _reason_bit("HwPowerBrakeSlowdown"): "hw power brake slowdown",
    _reason_bit("SwPowerCap"): "sw power cap",
}
"""Clock event reasons that mean power limiting: degraded while busy."""


def _names(bits: int, table: dict[int, str]) -> list[str]:
    return [name for bit, name in table.items() if bits & bit]


def _unhealthy(r: GpuReading) -> list[str]:
    out: list[str] = []
    if r.lost:
        out.append("fell off the bus (NVML: GPU is lost)")
    if r.unreadable:
        out.append(f"NVML cannot read it ({r.unreadable})")
    if r.ecc_volatile_uncorrected:
        out.append(f"{r.ecc_volatile_uncorrected} volatile uncorrected ECC error(s)")
    if r.retired_pages_pending:
        out.append("retired pages pending (reset needed)")
    if r.remapped_rows_pending:
        out.append("row remap pending (reset needed)")
    if r.remap_failure:
        out.append("row remapping failed (no spare rows)")
    return out


def _degraded(r: GpuReading) -> list[str]:
    out: list[str] = []
    busy = r.gpu_util_pct is not None and r.gpu_util_pct >= BUSY_UTIL_PCT
    load = f"{r.gpu_util_pct}% load"
    bits = r.clock_event_reasons or 0
    thermal = _names(bits, THERMAL_REASONS)
    if thermal:
        temp = f" at {r.temperature_c} C" if r.temperature_c is not None else ""
        out.append(f"{', '.join(thermal)}{temp}")
    power = _names(bits, POWER_REASONS)
    if power and busy:
        draw = f" ({r.power_w:.0f}/{r.power_limit_w:.0f} W)" if r.power_w is not None and r.power_limit_w else ""
        out.append(f"{', '.join(power)}{draw} under {load}")
    ratio = r.sm_clock_ratio
    if busy and ratio is not None and ratio < MIN_SM_CLOCK_RATIO:
        out.append(f"sm clock {r.sm_clock_mhz}/{r.sm_clock_max_mhz} MHz under {load}")
    if r.temperature_c is not None and r.temperature_c >= HOT_TEMPERATURE_C:
        out.append(f"temperature {r.temperature_c} C (>= {HOT_TEMPERATURE_C} C)")
    return out


def judge(reading: GpuReading) -> tuple[GpuHealth, str]:
    """The GPU's health and why ("" when healthy), from its readings alone; a reading NVML did not give is ignored."""
    bad = _unhealthy(reading)
    if bad:
        return GpuHealth.UNHEALTHY, "; ".join(bad)
    meh = _degraded(reading)
    if meh:
        return GpuHealth.DEGRADED, "; ".join(meh)
    return GpuHealth.HEALTHY, ""
