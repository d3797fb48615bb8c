"""The job source protocol: where pending and running jobs come from and where placements go."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from burst.model import Action, Job, Node, NodeId


@dataclass
class JobEvents:
    """What changed in the jobs during one observation (for metrics and the simulator's report)."""

    completed: list[Job] = field(default_factory=list)
    requeued: list[tuple[Job, float]] = field(default_factory=list)  # (job, seconds of work lost)
    started: list[Job] = field(default_factory=list)
    evicted: list[tuple[Job, float]] = field(default_factory=list)  # (job, seconds of work lost) by a plan's eviction
    lost_nodes: dict[str, tuple[NodeId, ...]] = field(default_factory=dict)  # requeued job id -> the nodes its run had
    failed: list[tuple[str, str, str]] = field(default_factory=list)  # (job id, tenant, why): out of bounds, now failed
    ended_on: dict[str, tuple[tuple[NodeId, ...], datetime]] = field(default_factory=dict)  # completed job id -> the
    # nodes it held and when it finished, so the cost ledger bills its tenant up to then


class JobSource(Protocol):
    """A queue of jobs: the embedded store queue, the simulator's in-memory queue, Kubernetes pods."""

    def observe(self, now: datetime, nodes: Mapping[NodeId, Node]) -> tuple[Sequence[Job], JobEvents]:
        """Active jobs at `now`: finished ones completed, ones whose nodes are gone requeued."""
        ...

    def peek(self, now: datetime, nodes: Mapping[NodeId, Node]) -> Sequence[Job]:
        """The active jobs `observe` would give at `now`, changing nothing (for dry-run plans)."""
        ...

    def apply(self, action: Action, now: datetime) -> None:
        """Carry out a job action (place, reclaim, requeue, evict) from a plan."""
        ...
