"""The controller's side of the agent link: what each node agent is told, and what it reported.

`AgentHub` holds, per node, the work not yet fetched and the last report; the
HTTP router (`burst.agent.router`) is a thin shell over it. Thread-safe: the
HTTP server and the reconcile loop call it from different threads.
"""

from __future__ import annotations

import hmac
import threading
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from burst.agent.channel import (
    Assignment,
    CheckpointAck,
    CheckpointRequest,
    Eviction,
    JobStatus,
    Report,
    Work,
)
from burst.model import Gpu, GpuHealth, NodeGpus


class UnknownAgent(KeyError):
    """A node id with no configured token."""


@dataclass
class _Pending:
    assignments: list[Assignment] = field(default_factory=list)
    checkpoints: list[CheckpointRequest] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)


@dataclass(frozen=True)
class AgentView:
    """The last report of one agent, as the controller keeps it."""

    node_id: str
    last_seen: datetime
    discovery: str
    gpus: NodeGpus


class AgentHub:
    """Per-node work queues and reports, behind per-agent tokens (see the module docstring)."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._tokens = dict(tokens)
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = defaultdict(_Pending)
        self._views: dict[str, AgentView] = {}
        self._statuses: list[JobStatus] = []
        self._acks: list[CheckpointAck] = []

    def authorised(self, node_id: str, token: str) -> bool:
        """Whether `token` is `node_id`'s token (constant-time comparison)."""
        expected = self._tokens.get(node_id)
        return expected is not None and hmac.compare_digest(expected.encode(), token.encode())

    def knows(self, node_id: str) -> bool:
        return node_id in self._tokens

    def _check(self, node_id: str) -> None:
        if node_id not in self._tokens:
            raise UnknownAgent(node_id)

    def assign(self, node_id: str, assignment: Assignment) -> None:
        """Queue a job start for the node's agent."""
        self._check(node_id)
        with self._lock:
            self._pending[node_id].assignments.append(assignment)

    def request_checkpoint(self, node_id: str, request: CheckpointRequest) -> None:
        """Queue a checkpoint request (the agent signals the job on its next poll)."""
        self._check(node_id)
        with self._lock:
            self._pending[node_id].checkpoints.append(request)

    def evict(self, node_id: str, eviction: Eviction) -> None:
        """Queue an eviction (the agent kills the job's process group on its next poll)."""
        self._check(node_id)
        with self._lock:
            self._pending[node_id].evictions.append(eviction)

    def take_work(self, node_id: str) -> Work:
        """Everything queued for the node since its last poll (drained)."""
        self._check(node_id)
        with self._lock:
            pending = self._pending.pop(node_id, _Pending())
        return Work(assignments=pending.assignments, checkpoints=pending.checkpoints, evictions=pending.evictions)

    def record(self, report: Report) -> None:
        """Keep the agent's GPUs and health, and collect its job statuses and checkpoint acks."""
        self._check(report.node_id)
        gpus = NodeGpus(
            node_id=report.node_id,
            gpus=tuple(
                Gpu(uuid=g.uuid, index=g.index, model=g.model, memory_mib=g.memory_mib,
                    health=GpuHealth(g.health), health_reason=g.health_reason)
                for g in report.gpus
            ),
        )
        with self._lock:
            self._views[report.node_id] = AgentView(report.node_id, report.at, report.discovery, gpus)
            self._statuses.extend(report.jobs)
            self._acks.extend(report.acks)

    def views(self) -> dict[str, AgentView]:
        """The last report of every agent that has reported."""
        with self._lock:
            return dict(self._views)

    def drain(self) -> tuple[list[JobStatus], list[CheckpointAck]]:
        """Job statuses and acks reported since the last drain (the reconcile loop consumes them)."""
        with self._lock:
            statuses, acks = self._statuses, self._acks
            self._statuses, self._acks = [], []
        return statuses, acks
