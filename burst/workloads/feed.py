"""A job source that feeds arrivals into a queue as the clock passes them.

The quickstart's synthetic generator and trace replay both give "the jobs
submitted in [start, end)"; `ArrivalFeed` submits each window's arrivals to
its queue before the queue is observed. The feed's cursor (how far arrivals
have been submitted) is kept by the caller (the store's meta table in the
daemon), and a job whose id the queue already has is skipped, so a restart
neither loses nor duplicates an arrival.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from burst.model import Action, Job, Node, NodeId
from burst.workloads.base import JobEvents


class ArrivalQueue(Protocol):
    """A queue arrivals can be submitted to (MemoryQueue, StoreQueue)."""

    def submit(self, job: Job) -> None: ...

    def has(self, job_id: str) -> bool: ...

    def observe(self, now: datetime, nodes: Mapping[NodeId, Node]) -> tuple[Sequence[Job], JobEvents]: ...

    def peek(self, now: datetime, nodes: Mapping[NodeId, Node]) -> Sequence[Job]: ...

    def apply(self, action: Action, now: datetime) -> None: ...


Arrivals = Callable[[datetime, datetime], Sequence[Job]]
"""The jobs submitted at or after the first instant and before the second."""


class ArrivalFeed:
    """Submits arrivals up to `now`, then observes the queue (a `JobSource`)."""

    def __init__(
        self,
        queue: ArrivalQueue,
        arrivals: Arrivals,
        *,
        start: datetime,
        load_cursor: Callable[[], datetime | None] = lambda: None,
        save_cursor: Callable[[datetime], None] = lambda _at: None,
    ) -> None:
        self.queue = queue
        self.arrivals = arrivals
        self.start = start
        self._load_cursor = load_cursor
        self._save_cursor = save_cursor
        self.submitted = 0

    def cursor(self) -> datetime:
        """How far arrivals have been submitted (the feed's start before the first observation)."""
        return self._load_cursor() or self.start

    def observe(self, now: datetime, nodes: Mapping[NodeId, Node]) -> tuple[Sequence[Job], JobEvents]:
        """Submit the arrivals in [cursor, now), then advance the queue's jobs to `now`."""
        since = self.cursor()
        if now >= since:
            for job in self.arrivals(since, now):
                if not self.queue.has(job.id):
                    self.queue.submit(job)
                    self.submitted += 1
            self._save_cursor(now)
        return self.queue.observe(now, nodes)

    def peek(self, now: datetime, nodes: Mapping[NodeId, Node]) -> Sequence[Job]:
        """The active jobs at `now` including arrivals not yet submitted, changing nothing."""
        since = self.cursor()
        fresh = [j for j in self.arrivals(since, now) if not self.queue.has(j.id)] if now >= since else []
        return [*self.queue.peek(now, nodes), *fresh]

    def apply(self, action: Action, now: datetime) -> None:
        """Carry out a job action on the queue."""
        self.queue.apply(action, now)
