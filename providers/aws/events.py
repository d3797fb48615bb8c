"""EventBridge events delivered on an SQS queue, parsed into `ProviderEvent`s.

The Terraform module routes three EC2 event types to the controller's queue
with EventBridge rules; each SQS message body is one EventBridge event, as
EventBridge delivers it to an SQS target (the event JSON itself). The shapes
below are AWS's documented examples:

* "EC2 Spot Instance Interruption Warning", from the EC2 User Guide, "Spot
  Instance interruption notices"
  (docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html)::

      {"version": "0", "id": "12345678-1234-1234-1234-123456789012",
       "detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
       "account": "123456789012", "time": "yyyy-mm-ddThh:mm:ssZ", "region": "us-east-2",
       "resources": ["arn:aws:ec2:us-east-2:123456789012:instance/i-1234567890abcdef0"],
       "detail": {"instance-id": "i-1234567890abcdef0", "instance-action": "action"}}

  `instance-action` is hibernate, stop or terminate; the instance goes two
  minutes after the event, so the deadline is `time` + 120 s.
* "EC2 Instance Rebalance Recommendation", from the EC2 User Guide, "EC2
  instance rebalance recommendations"
  (docs.aws.amazon.com/AWSEC2/latest/UserGuide/rebalance-recommendations.html): the same
  envelope with `"detail": {"instance-id": "i-1234567890abcdef0"}`.
* "EC2 Instance State-change Notification", from the EC2 User Guide, "State
  change events for your instances"
  (docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitoring-instance-state-changes.html): the
  same envelope with `"detail": {"instance-id": "i-abcd1111", "state": "pending"}`, state one
  of pending, running, stopping, stopped, shutting-down, terminated.

`parse_event` turns one body into a `ParsedEvent` or raises `MalformedEvent`
with the reason; which instances belong to which group is the provider's
business (see `AwsProvider.poll_events`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from burst.model import EventKind

INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
STATE_CHANGE = "EC2 Instance State-change Notification"
EVENT_KINDS = {INTERRUPTION: EventKind.INTERRUPTION, REBALANCE: EventKind.REBALANCE, STATE_CHANGE: EventKind.NODE_LOST}

SPOT_NOTICE_S = 120.0
"""A Spot instance is interrupted two minutes after its interruption warning."""

LOST_STATES = frozenset({"shutting-down", "terminated", "stopping", "stopped"})
"""State-change states that mean a serving node is gone (a warm-pool node stopping is expected)."""


class MalformedEvent(ValueError):
    """An SQS message that is not one of the EventBridge events burst reads (the reason is the message)."""


@dataclass(frozen=True)
class ParsedEvent:
    """One EventBridge event about one instance."""

    event_id: str
    kind: EventKind
    at: datetime
    instance_id: str
    deadline: datetime | None = None
    state: str = ""
    action: str = ""


def parse_event(body: str) -> ParsedEvent:
    """The event in one SQS message body; raises MalformedEvent saying why it is not one burst reads."""
    try:
        doc: Any = json.loads(body)
    except (ValueError, TypeError) as exc:
        raise MalformedEvent(f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise MalformedEvent("not a JSON object")
    detail_type = doc.get("detail-type")
    if detail_type not in EVENT_KINDS:
        raise MalformedEvent(f"unexpected detail-type {detail_type!r}")
    if doc.get("source") != "aws.ec2":
        raise MalformedEvent(f"unexpected source {doc.get('source')!r}")
    event_id = doc.get("id")
    if not isinstance(event_id, str) or not event_id:
        raise MalformedEvent("no event id")
    detail = doc.get("detail")
    if not isinstance(detail, dict):
        raise MalformedEvent("no detail object")
    instance_id = detail.get("instance-id")
    if not isinstance(instance_id, str) or not instance_id.startswith("i-"):
        raise MalformedEvent(f"no instance-id in detail ({instance_id!r})")
    at = _time(doc.get("time"))
    kind = EVENT_KINDS[detail_type]
    if kind is EventKind.INTERRUPTION:
        return ParsedEvent(
            event_id, kind, at, instance_id,
            deadline=at + timedelta(seconds=SPOT_NOTICE_S),
            action=str(detail.get("instance-action", "")),
        )
    if kind is EventKind.NODE_LOST:
        state = detail.get("state")
        if not isinstance(state, str) or not state:
            raise MalformedEvent("state-change event without a state")
        return ParsedEvent(event_id, kind, at, instance_id, state=state)
    return ParsedEvent(event_id, kind, at, instance_id)


def _time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise MalformedEvent(f"no event time ({value!r})")
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise MalformedEvent(f"event time {value!r} is not ISO 8601") from None
    if at.tzinfo is None:
        raise MalformedEvent(f"event time {value!r} has no time zone")
    return at.astimezone(UTC)


def event_body(
    kind: str, instance_id: str, at: datetime, *, event_id: str, region: str = "us-east-1",
    account: str = "123456789012", state: str | None = None, action: str = "terminate",
) -> str:
    """An EventBridge event body in AWS's documented shape (for tests and `burst` tooling that replays events)."""
    detail: dict[str, str] = {"instance-id": instance_id}
    if kind == INTERRUPTION:
        detail["instance-action"] = action
    if kind == STATE_CHANGE:
        detail["state"] = state or "terminated"
    return json.dumps(
        {
            "version": "0",
            "id": event_id,
            "detail-type": kind,
            "source": "aws.ec2",
            "account": account,
            "time": at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": region,
            "resources": [f"arn:aws:ec2:{region}:{account}:instance/{instance_id}"],
            "detail": detail,
        }
    )
