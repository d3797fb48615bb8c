"""The names and units every part of the domain model shares: identifiers are strings, times are UTC."""

from __future__ import annotations

from datetime import datetime
from typing import TypeAlias

NodeId: TypeAlias = str
GroupId: TypeAlias = str
JobId: TypeAlias = str
TenantName: TypeAlias = str


def hours_between(a: datetime, b: datetime) -> float:
    """Hours from a to b (negative if b is before a)."""
    return (b - a).total_seconds() / 3600.0
