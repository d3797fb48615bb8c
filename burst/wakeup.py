"""What wakes the reconcile loop before its heartbeat: events, batched as Karpenter batches pending pods.

These events wake the loop: a job submitted or finished, a node ready or
lost, an interruption notice (and jobs the loop's own tick evicted or
requeued, so they are placed next). Not at once: a tick runs once events have been
quiet for `idle_s` (1 s, Karpenter's `batchIdleDuration`) or `max_s` after
the first of them (10 s, its `batchMaxDuration`), so a burst of submissions
is planned in one tick. `loop_interval` is the heartbeat: a tick runs at least
that often and catches whatever no event reported (each tick recomputes from
observed state, so a missed event costs latency, never correctness).

One rule, `Batch`, decides when a tick serves events in both the daemon and
the simulator. The daemon learns of events from `Watch`es polled between
ticks (`Wakeup`) and from `Wakeup.notify` (the API, in-process); the
simulator knows in advance when each will happen (`batch_end`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from burst.model import EventKind, JobState, Node, NodeId, NodeState, ProviderEvent

log = logging.getLogger("burst.wakeup")

BATCH_IDLE_S = 1.0
"""Quiet time after the last event before the loop ticks (Karpenter's batchIdleDuration default)."""
BATCH_MAX_S = 10.0
"""Longest a tick waits after the first event of a batch (Karpenter's batchMaxDuration default)."""
POLL_S = 1.0
"""How often the daemon polls its watches between ticks (never more than the batch's idle time)."""


class WakeReason(StrEnum):
    """Why the loop ticked before its heartbeat."""

    JOB_SUBMITTED = "job_submitted"
    JOB_FINISHED = "job_finished"
    JOB_REQUEUED = "job_requeued"  # the loop's own tick evicted or requeued jobs: place them and the GPUs they free
    NODE_READY = "node_ready"
    NODE_LOST = "node_lost"
    INTERRUPTION = "interruption"


@dataclass(frozen=True)
class WakeEvent:
    """One event that wakes the loop, at the instant it happened (or was seen)."""

    reason: WakeReason
    at: datetime


@dataclass
class Batch:
    """Events waiting for a tick, and when the tick is due: `idle_s` after the last, `max_s` after the first at most."""

    idle_s: float = BATCH_IDLE_S
    max_s: float = BATCH_MAX_S
    first: datetime | None = None
    last: datetime | None = None
    reasons: list[WakeReason] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.idle_s < 0 or self.max_s < self.idle_s:
            raise ValueError(f"batch window: need 0 <= idle ({self.idle_s:g} s) <= max ({self.max_s:g} s)")

    def note(self, event: WakeEvent) -> None:
        """Add an event to the batch (events may be noted out of order)."""
        if self.first is None or event.at < self.first:
            self.first = event.at
        if self.last is None or event.at > self.last:
            self.last = event.at
        self.reasons.append(event.reason)

    def due(self) -> datetime | None:
        """When the batch's tick runs: None with no event waiting."""
        if self.first is None or self.last is None:
            return None
        return min(self.last + timedelta(seconds=self.idle_s), self.first + timedelta(seconds=self.max_s))

    def clear(self) -> None:
        """A tick has served the batch."""
        self.first = self.last = None
        self.reasons = []


def batch_end(events: Iterable[datetime], *, idle_s: float = BATCH_IDLE_S, max_s: float = BATCH_MAX_S) -> datetime | None:
    """When the tick serving the first of `events` (ascending instants) runs: None when there is none.

    Later events join the batch while they come before it is due, exactly as
    the daemon's `Batch` sees them arrive one by one.
    """
    batch = Batch(idle_s=idle_s, max_s=max_s)
    for at in events:
        due = batch.due()
        if due is not None and at > due:
            break
        batch.note(WakeEvent(WakeReason.JOB_SUBMITTED, at))
    return batch.due()


class Watch(Protocol):
    """A source of wake events the daemon polls between ticks."""

    def reset(self, now: datetime) -> None:
        """A tick has just run: what it saw is the new baseline."""
        ...

    def poll(self, now: datetime) -> Sequence[WakeEvent]:
        """Events since the baseline or the last poll, each reported once."""
        ...


class Wakeup:
    """The daemon's wait between ticks: until a batch of events is due or the heartbeat, whichever is first.

    Thread-safe `notify` lets in-process event sources (the API's submit)
    add events without waiting for a poll.
    """

    def __init__(
        self,
        watches: Sequence[Watch],
        clock: Callable[[], datetime],
        *,
        idle_s: float = BATCH_IDLE_S,
        max_s: float = BATCH_MAX_S,
        poll_s: float = POLL_S,
    ) -> None:
        self.watches = list(watches)
        self.clock = clock
        self.poll_s = min(poll_s, idle_s) if idle_s > 0 else poll_s
        self._batch = Batch(idle_s=idle_s, max_s=max_s)
        self._lock = threading.Lock()
        self.last_reasons: tuple[WakeReason, ...] = ()  # what woke the last tick; () for the heartbeat

    def notify(self, reason: WakeReason, at: datetime | None = None) -> None:
        """An event happened now (or at `at`): the loop ticks within the batch window."""
        with self._lock:
            self._batch.note(WakeEvent(reason, at or self.clock()))

    def reset(self, now: datetime) -> None:
        """A tick ran at `now`: the batch is served and every watch takes its new baseline."""
        with self._lock:
            self._batch.clear()
        for watch in self.watches:
            watch.reset(now)

    def wait(self, heartbeat_s: float, sleep: Callable[[float], None], stop: threading.Event) -> tuple[WakeReason, ...]:
        """Sleep (through `sleep(seconds)`, which may advance a simulated clock) until the next tick is due.

        Returns the reasons of the batch that ended the wait, or () when the
        heartbeat did. Watches are polled every `poll_s`.
        """
        heartbeat_at = self.clock() + timedelta(seconds=heartbeat_s)
        while not stop.is_set():
            now = self.clock()
            events: list[WakeEvent] = []
            for watch in self.watches:
                try:
                    events.extend(watch.poll(now))
                except Exception:  # a watch that cannot read leaves its events to the heartbeat
                    log.exception("wake-up watch failed", extra={"watch": type(watch).__name__})
            with self._lock:
                for event in events:
                    self._batch.note(event)
                due = self._batch.due()
                reasons = tuple(self._batch.reasons)
            target = heartbeat_at if due is None else min(heartbeat_at, due)
            if now >= target:
                self.last_reasons = reasons if due is not None and due <= now else ()
                return self.last_reasons
            sleep(min(self.poll_s, (target - now).total_seconds()))
        return ()


class JobStates(Protocol):
    """What a job watch reads (the store provides it)."""

    def active_job_states(self) -> Mapping[str, JobState]:
        """Each pending or running job's state (a cheap read: polled every second)."""
        ...

    def finish_times(self) -> Sequence[datetime]:
        """When the running jobs are due to finish, for those whose end is known (read once per tick)."""
        ...


class JobWatch:
    """Jobs submitted (a new pending job: `burst submit` on the same store, the API) or finished (a running job
    gone from the active set, or due to finish by its known duration) since the last tick."""

    def __init__(self, jobs: JobStates) -> None:
        self.jobs = jobs
        self._seen: dict[str, JobState] = {}
        self._finishes: list[datetime] = []

    def reset(self, now: datetime) -> None:
        self._seen = dict(self.jobs.active_job_states())
        self._finishes = sorted(f for f in self.jobs.finish_times() if f > now)

    def poll(self, now: datetime) -> list[WakeEvent]:
        out: list[WakeEvent] = []
        while self._finishes and self._finishes[0] <= now:
            out.append(WakeEvent(WakeReason.JOB_FINISHED, self._finishes.pop(0)))
        states = self.jobs.active_job_states()
        for jid, state in states.items():
            if jid not in self._seen:
                self._seen[jid] = state
                out.append(WakeEvent(WakeReason.JOB_SUBMITTED, now))
        for jid in [j for j in self._seen if j not in states]:
            if self._seen.pop(jid) is not JobState.PENDING:
                out.append(WakeEvent(WakeReason.JOB_FINISHED, now))
        return out


class ProviderEvents(Protocol):
    """Drains the providers' event sources between ticks, keeping what it drained for the next tick."""

    def drain_events(self) -> Sequence[ProviderEvent]: ...


class NoticeWatch:
    """Interruption notices and lost nodes a provider reports (SQS, zone operations, the sim), read between ticks;
    the controller hands them to the next tick as if it had polled them itself.

    Each read is an API call where the source is remote, so it is made at most once per `min_wall_s` of wall
    time (a simulated clock polls every simulated second, far more often than that).
    """

    def __init__(self, events: ProviderEvents, *, min_wall_s: float = 0.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.events = events
        self.min_wall_s = min_wall_s
        self.monotonic = monotonic
        self._read_at: float | None = None

    def reset(self, now: datetime) -> None:
        return None

    def poll(self, now: datetime) -> list[WakeEvent]:
        wall = self.monotonic()
        if self._read_at is not None and wall - self._read_at < self.min_wall_s:
            return []
        self._read_at = wall
        out = []
        for event in self.events.drain_events():
            if event.kind is EventKind.INTERRUPTION:
                out.append(WakeEvent(WakeReason.INTERRUPTION, now))
            elif event.kind is EventKind.NODE_LOST:
                out.append(WakeEvent(WakeReason.NODE_LOST, now))
        return out


class NodeListing(Protocol):
    """What a node watch reads of a provider: its nodes."""

    def nodes(self) -> Mapping[NodeId, Node]: ...


class NodeWatch:
    """Nodes that became ready or were lost since the last look, for a provider whose listing is cheap to read
    every second (the sim provider, in memory; a cloud's listing is left to the heartbeat and its events)."""

    def __init__(self, provider: NodeListing) -> None:
        self.provider = provider
        self._states: dict[NodeId, NodeState] = {}

    def reset(self, now: datetime) -> None:
        self._states = {nid: n.state for nid, n in self.provider.nodes().items()}

    def poll(self, now: datetime) -> list[WakeEvent]:
        nodes = self.provider.nodes()
        out: list[WakeEvent] = []
        for nid, node in nodes.items():
            before = self._states.get(nid)
            if node.state is before:
                continue
            if node.state is NodeState.READY:
                out.append(WakeEvent(WakeReason.NODE_READY, now))
            elif before is NodeState.READY:  # interrupted or failed (burst's own terminations leave at its tick)
                out.append(WakeEvent(WakeReason.NODE_LOST, now))
        out += [WakeEvent(WakeReason.NODE_LOST, now) for nid, state in self._states.items()
                if nid not in nodes and state is NodeState.READY]
        self._states = {nid: n.state for nid, n in nodes.items()}
        return out


__all__ = [
    "BATCH_IDLE_S",
    "BATCH_MAX_S",
    "Batch",
    "JobWatch",
    "NodeWatch",
    "NoticeWatch",
    "Wakeup",
    "WakeEvent",
    "WakeReason",
    "Watch",
    "batch_end",
]
