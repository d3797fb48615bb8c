"""burst's seeded SYNTHETIC workload generator (for the quickstart and examples).

The jobs this module makes are invented, not measured: a daily sine of
arrivals, quieter weekends, and on some days a burst of several times the base
rate inside a window of hours. They exist so the quickstart shows burst
reacting to a burst on a machine without `../shared/data`; tests and
benchmarks replay the real traces in `burst.sim.traces` instead.

Arrivals are generated per UTC hour from a random stream seeded by
(seed, hour), and bursts per UTC day from a stream seeded by (seed, day), so
`jobs_between(a, c) == jobs_between(a, b) + jobs_between(b, c)`: the daemon can
pull arrivals tick by tick, restart, and see exactly the same jobs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from burst.bounds import (
    MAX_JOB_GPUS,
    MAX_LIST_LENGTH,
    MAX_NAME_LENGTH,
    MAX_RATE_PER_HOUR,
    MAX_TEXT_LENGTH,
    shown,
)
from burst.model import Job
from policies.durations import parse_duration

_HOUR = timedelta(hours=1)
_MIN_DURATION_S = 60.0
_MAX_DURATION_S = 12 * 3600.0
_DURATION_SIGMA = 0.8  # lognormal shape of job durations


@dataclass(frozen=True)
class TenantMix:
    """One tenant's slice of the synthetic arrivals and the shape of its jobs."""

    name: str
    share: float
    gpus: tuple[int, ...] = (1, 2, 4, 8)
    fault_tolerant: bool = False
    checkpoint_interval_s: float | None = None
    mean_duration_s: float = 3600.0
    gpu_model: str | None = None


def _default_tenants() -> tuple[TenantMix, ...]:
    return (
        TenantMix("prod", 0.3, gpus=(1, 2), mean_duration_s=2700.0),
        TenantMix("research", 0.4, gpus=(1, 2, 4, 8)),
        TenantMix("batch", 0.3, gpus=(4, 8), fault_tolerant=True, checkpoint_interval_s=600.0),
    )


@dataclass(frozen=True)
class SyntheticSettings:
    """The knobs of the generator; `from_mapping` reads them from `workload.synthetic`."""

    seed: int = 7
    base_jobs_per_hour: float = 20.0
    daily_amplitude: float = 0.5
    peak_hour: float = 14.0
    weekend_factor: float = 0.5
    burst_probability: float = 0.5
    burst_factor: float = 4.0
    burst_hours: int = 2
    burst_window: tuple[int, int] = (9, 17)
    tenants: tuple[TenantMix, ...] = field(default_factory=_default_tenants)

    def __post_init__(self) -> None:
        _check(self.base_jobs_per_hour >= 0, "base_jobs_per_hour", "must be >= 0")
        _check(0 <= self.daily_amplitude <= 1, "daily_amplitude", "must be in [0, 1]")
        _check(0 <= self.peak_hour < 24, "peak_hour", "must be in [0, 24)")
        _check(self.weekend_factor >= 0, "weekend_factor", "must be >= 0")
        _check(0 <= self.burst_probability <= 1, "burst_probability", "must be in [0, 1]")
        _check(self.burst_factor >= 1, "burst_factor", "must be >= 1")
        _check(1 <= self.burst_hours <= 24, "burst_hours", "must be an integer in [1, 24]")
        lo, hi = self.burst_window
        _check(0 <= lo < hi <= 24, "burst_window", "must be [start_hour, end_hour] with 0 <= start < end <= 24")
        _check(hi - lo >= self.burst_hours, "burst_window", "must be at least burst_hours long")
        peak = self.base_jobs_per_hour * (1 + self.daily_amplitude) * max(1.0, self.weekend_factor) * self.burst_factor
        _check(peak <= MAX_RATE_PER_HOUR, "base_jobs_per_hour",
               f"the peak rate (base_jobs_per_hour x (1 + daily_amplitude) x weekend_factor x burst_factor) is "
               f"{peak:.4g} per hour, over the limit of {MAX_RATE_PER_HOUR:g}")
        _check(bool(self.tenants), "tenants", "must name at least one tenant")
        _check(sum(t.share for t in self.tenants) > 0, "tenants", "shares must not all be zero")

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> SyntheticSettings:
        """Decide the settings a `workload.synthetic` mapping denotes, or raise ValueError naming the key."""
        if not isinstance(raw, Mapping):
            raise ValueError(f"workload.synthetic: expected a mapping, got {type(raw).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"workload.synthetic.{unknown[0]}: unknown setting (known: {', '.join(sorted(known))})")
        values: dict[str, Any] = {}
        for key, value in raw.items():
            if key == "tenants":
                values[key] = _tenants(value)
            elif key == "burst_window":
                values[key] = _window(value)
            elif key in ("seed", "burst_hours"):
                values[key] = _integer(value, key)
            else:
                values[key] = _number(value, key)
        return cls(**values)


class SyntheticWorkload:
    """Deterministic synthetic arrivals: the same settings always give the same jobs."""

    def __init__(self, settings: SyntheticSettings | None = None) -> None:
        self.settings = settings or SyntheticSettings()
        total = sum(t.share for t in self.settings.tenants)
        self._cumulative_shares: list[float] = []
        acc = 0.0
        for tenant in self.settings.tenants:
            acc += tenant.share / total
            self._cumulative_shares.append(acc)

    def rate_at(self, at: datetime) -> float:
        """Decide the expected arrivals per hour in the UTC hour containing `at`."""
        s = self.settings
        hour_start = _floor_hour(at)
        hour = hour_start.hour + 0.5
        rate = s.base_jobs_per_hour * (1 + s.daily_amplitude * math.cos(2 * math.pi * (hour - s.peak_hour) / 24))
        if hour_start.weekday() >= 5:
            rate *= s.weekend_factor
        if any(b_start <= hour_start < b_end for b_start, b_end in self._day_bursts(hour_start)):
            rate *= s.burst_factor
        return rate

    def bursts_between(self, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
        """Decide the burst intervals that overlap [start, end)."""
        start, end = _utc(start), _utc(end)
        day = start.replace(hour=0, minute=0, second=0, microsecond=0)
        out: list[tuple[datetime, datetime]] = []
        while day < end:
            out.extend((b0, b1) for b0, b1 in self._day_bursts(day) if b0 < end and b1 > start)
            day += timedelta(days=1)
        return out

    def jobs_between(self, start: datetime, end: datetime) -> list[Job]:
        """Decide the jobs submitted in [start, end), ordered by submission time."""
        start, end = _utc(start), _utc(end)
        jobs: list[Job] = []
        hour = _floor_hour(start)
        while hour < end:
            jobs.extend(j for j in self._hour_jobs(hour) if start <= j.submitted_at < end)
            hour += _HOUR
        return jobs

    def _day_bursts(self, any_time: datetime) -> list[tuple[datetime, datetime]]:
        s = self.settings
        day = any_time.replace(hour=0, minute=0, second=0, microsecond=0)
        rng = random.Random(f"{s.seed}:burst:{day.date().toordinal()}")
        if rng.random() >= s.burst_probability:
            return []
        lo, hi = s.burst_window
        first = rng.randint(lo, hi - s.burst_hours)
        b_start = day + timedelta(hours=first)
        return [(b_start, b_start + timedelta(hours=s.burst_hours))]

    def _hour_jobs(self, hour: datetime) -> list[Job]:
        index = int(hour.timestamp() // 3600)
        rng = random.Random(f"{self.settings.seed}:hour:{index}")
        count = _poisson(rng, self.rate_at(hour))
        offsets = sorted(rng.uniform(0.0, 3600.0) for _ in range(count))
        stamp = hour.strftime("%Y%m%d%H")
        return [self._job(rng, f"syn-{stamp}-{k:03d}", hour + timedelta(seconds=off)) for k, off in enumerate(offsets)]

    def _job(self, rng: random.Random, job_id: str, submitted_at: datetime) -> Job:
        draw = rng.random()
        tenant = next(
            (t for t, edge in zip(self.settings.tenants, self._cumulative_shares, strict=True) if draw < edge),
            self.settings.tenants[-1],
        )
        mu = math.log(tenant.mean_duration_s) - _DURATION_SIGMA**2 / 2
        duration = min(_MAX_DURATION_S, max(_MIN_DURATION_S, rng.lognormvariate(mu, _DURATION_SIGMA)))
        return Job(
            id=job_id,
            tenant=tenant.name,
            gpus=rng.choice(tenant.gpus),
            submitted_at=submitted_at,
            gpu_model=tenant.gpu_model,
            fault_tolerant=tenant.fault_tolerant,
            checkpoint_interval_s=tenant.checkpoint_interval_s,
            duration_s=round(duration, 1),
        )


def _poisson(rng: random.Random, lam: float) -> int:
    """Draw a Poisson count: inversion below 500, a rounded normal above (exp(-lam) underflows)."""
    if lam <= 0:
        return 0
    if lam > 500:
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    u = rng.random()
    k, p = 0, math.exp(-lam)
    cumulative = p
    while u > cumulative:
        k += 1
        p *= lam / k
        cumulative += p
        if p == 0.0:
            break
    return k


def _utc(at: datetime) -> datetime:
    if at.tzinfo is None:
        raise ValueError(f"expected a timezone-aware datetime, got {at.isoformat()}")
    return at.astimezone(UTC)


def _floor_hour(at: datetime) -> datetime:
    return _utc(at).replace(minute=0, second=0, microsecond=0)


def _check(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ValueError(f"workload.synthetic.{key}: {message}")


def _number(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"workload.synthetic.{key}: expected a number, got {shown(value)}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number) or abs(number) > 1e12:
        raise ValueError(f"workload.synthetic.{key}: expected a number within +-1e12, got {shown(value)}")
    return number


def _integer(value: object, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"workload.synthetic.{key}: expected an integer, got {shown(value)}")
    if abs(value) > 2**63:
        raise ValueError(f"workload.synthetic.{key}: expected an integer within +-2**63, got {shown(value)}")
    return value


def _window(value: object) -> tuple[int, int]:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise ValueError(f"workload.synthetic.burst_window: expected [start_hour, end_hour], got {shown(value)}")
    return _integer(value[0], "burst_window"), _integer(value[1], "burst_window")


_TENANT_KEYS = ("share", "gpus", "fault_tolerant", "checkpoint_interval", "mean_duration", "gpu_model")


def _tenants(value: object) -> tuple[TenantMix, ...]:
    if not isinstance(value, Mapping) or not value:
        raise ValueError("workload.synthetic.tenants: expected a mapping of tenant name to its mix")
    if len(value) > MAX_LIST_LENGTH:
        raise ValueError(f"workload.synthetic.tenants: {len(value)} tenants, more than the limit of {MAX_LIST_LENGTH}")
    for name in value:
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_LENGTH:
            raise ValueError(f"workload.synthetic.tenants: tenant names are 1 .. {MAX_NAME_LENGTH} characters, "
                             f"got {shown(name)}")
    return tuple(_tenant(str(name), spec) for name, spec in value.items())


def _tenant(name: str, spec: object) -> TenantMix:
    where = f"workload.synthetic.tenants.{name}"
    if not isinstance(spec, Mapping):
        raise ValueError(f"{where}: expected a mapping with keys {', '.join(_TENANT_KEYS)}")
    unknown = sorted(set(spec) - set(_TENANT_KEYS))
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(_TENANT_KEYS)})")
    if "share" not in spec:
        raise ValueError(f"{where}.share: required")
    share = _number(spec["share"], f"tenants.{name}.share")
    if share < 0:
        raise ValueError(f"{where}.share: must be >= 0")
    gpus_raw = spec.get("gpus", [1, 2, 4, 8])
    if isinstance(gpus_raw, int) and not isinstance(gpus_raw, bool):
        gpus_raw = [gpus_raw]
    if not isinstance(gpus_raw, Sequence) or isinstance(gpus_raw, str) or not gpus_raw:
        raise ValueError(f"{where}.gpus: expected a list of GPU counts, got {shown(gpus_raw)}")
    if len(gpus_raw) > MAX_LIST_LENGTH:
        raise ValueError(f"{where}.gpus: {len(gpus_raw)} counts, more than the limit of {MAX_LIST_LENGTH}")
    gpus = tuple(_integer(g, f"tenants.{name}.gpus") for g in gpus_raw)
    if any(not 1 <= g <= MAX_JOB_GPUS for g in gpus):
        raise ValueError(f"{where}.gpus: every GPU count must be within 1 .. {MAX_JOB_GPUS}")
    fault_tolerant = spec.get("fault_tolerant", False)
    if not isinstance(fault_tolerant, bool):
        raise ValueError(f"{where}.fault_tolerant: expected true or false, got {shown(fault_tolerant)}")
    try:
        checkpoint = parse_duration(spec["checkpoint_interval"]) if "checkpoint_interval" in spec else None
    except ValueError as exc:
        raise ValueError(f"{where}.checkpoint_interval: {exc}") from None
    try:
        mean = parse_duration(spec.get("mean_duration", 3600.0))
    except ValueError as exc:
        raise ValueError(f"{where}.mean_duration: {exc}") from None
    if mean <= 0:
        raise ValueError(f"{where}.mean_duration: must be > 0")
    model = spec.get("gpu_model")
    if model is not None and (not isinstance(model, str) or not 0 < len(model) <= MAX_TEXT_LENGTH):
        raise ValueError(f"{where}.gpu_model: expected a string of 1 .. {MAX_TEXT_LENGTH} characters, got {shown(model)}")
    return TenantMix(name, share, gpus, fault_tolerant, checkpoint, mean, model)


__all__ = ["SyntheticSettings", "SyntheticWorkload", "TenantMix"]
