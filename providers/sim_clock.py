"""The simulated cloud's clock and its record of calls: time that moves only when told to, and what was asked."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)


class ManualClock:
    """A clock that moves only when told to: call it for the time, `advance` it by seconds."""

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start time")
        self.now = start

    def __call__(self) -> datetime:
        """The current time."""
        return self.now

    def advance(self, seconds: float) -> datetime:
        """Move forward by `seconds` (>= 0) and return the new time."""
        if seconds < 0:
            raise ValueError(f"cannot advance a clock backwards ({seconds} s)")
        self.now += timedelta(seconds=seconds)
        return self.now

    def advance_to(self, when: datetime) -> datetime:
        """Move forward to `when` (no-op if it is not later) and return the new time."""
        if when > self.now:
            self.now = when
        return self.now


@dataclass(frozen=True)
class Call:
    """One mutating call the provider received, as the actuator made it."""

    method: str
    args: tuple[object, ...]
    key: str | None
    at: datetime
    duplicate: bool = False  # the key had been applied before: the call had no effect
    error: Exception | None = None  # what the call raised, if anything


__all__ = ["DEFAULT_START", "Call", "ManualClock"]
