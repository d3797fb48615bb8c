"""Spot preemptions from Compute Engine zone operations, parsed into `ParsedEvent`s.

When Compute Engine preempts a Spot VM it records a zone operation of type
`compute.instances.preempted` whose `targetLink` is the VM, and sends the VM
an ACPI soft-off: the VM has 30 seconds before it is stopped (Compute Engine
documentation, "Spot VMs", "Preemption process"). burst lists these
operations per zone with the filter `PREEMPTED_FILTER`; each becomes an
INTERRUPTION whose deadline is the operation's `insertTime` + 30 s, so the
eviction path (checkpoint on notice) has that long.

A VM can also be seen preempted without its operation (a missed poll, or an
operation already aged out of the list): a Spot VM of a managed group whose
status is STOPPING is an interruption in progress (deadline: 30 s from when it
was seen), and TERMINATED is a lost node. The provider does that from
`listManagedInstances`; this module only reads operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from providers.gcp.discovery import last_segment

PREEMPTED = "compute.instances.preempted"
PREEMPTED_FILTER = f'operationType="{PREEMPTED}"'
PREEMPTION_NOTICE_S = 30.0
"""A Spot VM is stopped 30 seconds after Compute Engine starts preempting it."""


class MalformedOperation(ValueError):
    """A zone operation that is not a preemption burst can read (the reason is the message)."""


@dataclass(frozen=True)
class ParsedEvent:
    """One preemption of one VM."""

    event_id: str
    at: datetime
    instance: str  # the VM's name
    zone: str
    deadline: datetime


def parse_preemption(*, op_id: str, operation_type: str, target_link: str, insert_time: str, zone: str) -> ParsedEvent:
    """The preemption a zone operation records; raises MalformedOperation saying why it is not one."""
    if operation_type != PREEMPTED:
        raise MalformedOperation(f"unexpected operationType {operation_type!r}")
    if not op_id:
        raise MalformedOperation("no operation id")
    if "/instances/" not in target_link:
        raise MalformedOperation(f"targetLink {target_link!r} is not a VM")
    at = parse_time(insert_time)
    return ParsedEvent(op_id, at, last_segment(target_link), last_segment(zone),
                       at + timedelta(seconds=PREEMPTION_NOTICE_S))


def parse_time(value: str) -> datetime:
    """An RFC 3339 Compute API timestamp (e.g. 2026-12-03T09:41:12.345-08:00) as UTC."""
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        raise MalformedOperation(f"time {value!r} is not RFC 3339") from None
    if at.tzinfo is None:
        raise MalformedOperation(f"time {value!r} has no offset")
    return at.astimezone(UTC)


def format_time(at: datetime) -> str:
    """A UTC instant in the Compute API's RFC 3339 form (milliseconds, numeric offset)."""
    return at.astimezone(UTC).isoformat(timespec="milliseconds")
