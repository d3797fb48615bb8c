"""Checkpoint-then-evict on Kubernetes: the checkpoint channel (burst/agent/channel.py) over pod annotations.

The channel's messages map onto a pod like this: a `CheckpointRequest`
(job, request id, deadline) is the annotations `burst.dev/checkpoint-request`
and `burst.dev/checkpoint-deadline`; the `CheckpointAck` is the job setting
`burst.dev/checkpoint-ack` to that request id (with `burst.dev/checkpoint-id`,
its new checkpoint, and `burst.dev/last-checkpoint`); an `Eviction` is the
pod's policy/v1 Eviction subresource, so PodDisruptionBudgets are honoured.

A drain (`drain_node`: a spot notice, or a node burst terminates) cordons
the node and evicts every pod on it; `evict` does the same for chosen pods
(a plan's eviction). Each pod goes through, one `step(now)` per tick:

1. fault-tolerant pods get a checkpoint request (deadline: the notice's, or
   now + `checkpoint_grace_s`) unless one is outstanding; others skip to 3;
2. wait until the ack names the request, or the deadline passes (then the
   pod resumes from its last checkpoint);
3. POST the eviction. 429 (a PodDisruptionBudget allows no disruption now)
   is retried on each step for `pdb_retry_s` from the first refusal (never
   past a node's reclaim deadline); then `on_pdb_timeout` decides: `wait`
   keeps honouring the budget (the pod stays, reported `blocked`),
   `delete` deletes the pod (the node is going anyway).

Nothing here sleeps: waiting is "not yet" on this step, and time is the
`now` the caller passes in.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from providers.kubernetes import names
from providers.kubernetes.cluster import KubeCluster, Obj

log = logging.getLogger(__name__)

PodKey = tuple[str, str]  # (namespace, name)
Escalation = Literal["wait", "delete"]

DEFAULT_CHECKPOINT_GRACE_S = 120.0
DEFAULT_PDB_RETRY_S = 300.0


def rfc3339(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Victim:
    pod: PodKey
    deadline: datetime
    reason: str
    node_deadline: datetime | None = None
    request_id: str | None = None
    first_refusal: datetime | None = None


@dataclass
class StepReport:
    """What one step did, pod by pod."""

    requested: list[PodKey] = field(default_factory=list)  # checkpoint asked for
    acked: list[PodKey] = field(default_factory=list)  # the ack arrived before the deadline
    expired: list[PodKey] = field(default_factory=list)  # the deadline passed without an ack
    evicted: list[PodKey] = field(default_factory=list)
    blocked: list[PodKey] = field(default_factory=list)  # a PDB refused (429); retried on the next step
    deleted: list[PodKey] = field(default_factory=list)  # escalated past a PDB after pdb_retry_s


def fault_tolerant(pod: Obj) -> bool:
    value = (pod.get("metadata", {}).get("annotations") or {}).get(names.FAULT_TOLERANT, "")
    return value.strip().lower() in ("true", "1", "yes")


def _time(value: str | None) -> datetime | None:
    try:
        at = datetime.fromisoformat((value or "").replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def _outstanding(annotations: dict[str, str], now: datetime) -> tuple[str, datetime] | None:
    """The pod's unanswered checkpoint request still inside its deadline: (request id, deadline)."""
    request = annotations.get(names.CHECKPOINT_REQUEST)
    if not request or annotations.get(names.CHECKPOINT_ACK) == request:
        return None
    deadline = _time(annotations.get(names.CHECKPOINT_DEADLINE))
    return (request, deadline) if deadline is not None and deadline > now else None


def pods_on(cluster: KubeCluster, node_name: str) -> list[PodKey]:
    return sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in cluster.pods()
                  if p.get("spec", {}).get("nodeName") == node_name)


class Drainer:
    """Cordon, checkpoint, then evict through the Eviction API (see the module docstring)."""

    def __init__(self, cluster: KubeCluster, *, checkpoint_grace_s: float = DEFAULT_CHECKPOINT_GRACE_S,
                 pdb_retry_s: float = DEFAULT_PDB_RETRY_S, on_pdb_timeout: Escalation = "wait") -> None:
        self.cluster = cluster
        self.checkpoint_grace = timedelta(seconds=checkpoint_grace_s)
        self.pdb_retry = timedelta(seconds=pdb_retry_s)
        self.on_pdb_timeout = on_pdb_timeout
        self._victims: dict[PodKey, _Victim] = {}
        self._draining: dict[str, tuple[datetime | None, str]] = {}  # node name -> (reclaim deadline, reason)
        self.removed: set[PodKey] = set()
        """Pods burst evicted or deleted (their jobs are requeued, not completed)."""
        self.acked: dict[PodKey, datetime] = {}
        """When each acknowledged checkpoint was taken (its `burst.dev/last-checkpoint`, else when the ack was read)."""

    # ------------------------------------------------------------ asking

    def cordon(self, node_name: str, why: str) -> None:
        """Mark the node unschedulable, noting that burst did it (and why)."""
        node = self.cluster.node(node_name)
        if node is not None and node.get("spec", {}).get("unschedulable") and \
                (node["metadata"].get("annotations") or {}).get(names.CORDONED_BY) == why:
            return
        self.cluster.patch_node(node_name, {"metadata": {"annotations": {names.CORDONED_BY: why}},
                                            "spec": {"unschedulable": True}})

    def drain_node(self, node_name: str, now: datetime, *, deadline: datetime | None, reason: str) -> None:
        """Cordon the node and checkpoint-then-evict every pod on it (by `deadline` when the node is reclaimed)."""
        if node_name in self._draining:
            return
        if self.cluster.node(node_name) is not None:
            self.cordon(node_name, "drain")
        self._draining[node_name] = (deadline, reason)
        self._adopt(node_name, now)

    def evict(self, pods: Iterable[PodKey], now: datetime, *, reason: str, deadline: datetime | None = None) -> None:
        """Checkpoint-then-evict these pods (a plan's eviction or requeue)."""
        for pod in pods:
            self._victims.setdefault(pod, _Victim(pod, deadline or now + self.checkpoint_grace, reason))

    def request_checkpoint(self, pod: PodKey, request_id: str, deadline: datetime) -> None:
        """Ask the pod's job to checkpoint by `deadline` (a plan's request_checkpoint; no eviction follows)."""
        self.cluster.patch_pod(pod[0], pod[1], {"metadata": {"annotations": {
            names.CHECKPOINT_REQUEST: request_id, names.CHECKPOINT_DEADLINE: rfc3339(deadline)}}})

    def handles(self, pod: PodKey) -> bool:
        """Whether the pod is on its way out through this drainer (its checkpoint request is the drainer's)."""
        return pod in self._victims

    def draining(self) -> dict[str, tuple[datetime | None, str]]:
        """Nodes being drained: their reclaim deadline (None for a scale-in) and why."""
        return dict(self._draining)

    def drained(self, node_name: str) -> bool:
        """Whether the node's drain has no pod left to evict (pods a PDB still protects count as left)."""
        return node_name in self._draining and not any(
            self._node_of(v.pod) == node_name for v in self._victims.values())

    def forget_node(self, node_name: str) -> None:
        self._draining.pop(node_name, None)

    # ------------------------------------------------------------ the step

    def step(self, now: datetime) -> StepReport:
        """Advance every victim by what `now` allows (see the module docstring)."""
        report = StepReport()
        for node_name in list(self._draining):
            self._adopt(node_name, now)
        for key in sorted(self._victims):
            victim = self._victims[key]
            pod = self.cluster.pod(*key)
            if pod is None:
                del self._victims[key]
                continue
            if fault_tolerant(pod) and not self._checkpointed(pod, victim, now, report):
                continue
            self._evict(pod, victim, now, report)
        return report

    def _adopt(self, node_name: str, now: datetime) -> None:
        deadline, reason = self._draining[node_name]
        for pod in pods_on(self.cluster, node_name):
            if pod not in self._victims:
                self._victims[pod] = _Victim(pod, deadline or now + self.checkpoint_grace, reason,
                                             node_deadline=deadline)

    def _node_of(self, pod: PodKey) -> str | None:
        found = self.cluster.pod(*pod)
        return found.get("spec", {}).get("nodeName") if found else None

    def _checkpointed(self, pod: Obj, victim: _Victim, now: datetime, report: StepReport) -> bool:
        """True once the pod may be evicted: its ack arrived, or the deadline passed."""
        annotations = pod["metadata"].get("annotations") or {}
        if victim.request_id is None and _outstanding(annotations, now) is not None:
            victim.request_id, asked_by = _outstanding(annotations, now) or ("", now)
            victim.deadline = min(victim.deadline, asked_by)  # a plan's request already on the pod: answer that one
        if victim.request_id is None:
            victim.request_id = f"evict-{pod['metadata'].get('uid', pod['metadata']['name'])}-{now:%Y%m%dT%H%M%S}"
            self.request_checkpoint(victim.pod, victim.request_id, victim.deadline)
            report.requested.append(victim.pod)
            return False
        if annotations.get(names.CHECKPOINT_ACK) == victim.request_id:
            report.acked.append(victim.pod)
            self.acked[victim.pod] = _time(annotations.get(names.LAST_CHECKPOINT)) or now
            return True
        if now >= victim.deadline:
            log.warning("checkpoint deadline passed without an ack; evicting", extra={"pod": "/".join(victim.pod)})
            report.expired.append(victim.pod)
            return True
        return False

    def _evict(self, pod: Obj, victim: _Victim, now: datetime, report: StepReport) -> None:
        ns, name = victim.pod
        code = self.cluster.evict_pod(ns, name)
        if code != 429:
            report.evicted.append(victim.pod)
            self.removed.add(victim.pod)
            del self._victims[victim.pod]
            return
        victim.first_refusal = victim.first_refusal or now
        limit = victim.first_refusal + self.pdb_retry
        if victim.node_deadline is not None:
            limit = min(limit, victim.node_deadline)
        if now >= limit and self.on_pdb_timeout == "delete":
            log.warning("a PodDisruptionBudget blocked the eviction past the retry budget; deleting the pod",
                        extra={"pod": f"{ns}/{name}", "reason": victim.reason})
            self.cluster.delete_pod(ns, name)
            report.deleted.append(victim.pod)
            self.removed.add(victim.pod)
            del self._victims[victim.pod]
            return
        report.blocked.append(victim.pod)


__all__ = ["Drainer", "Escalation", "PodKey", "StepReport", "fault_tolerant", "pods_on", "rfc3339"]
