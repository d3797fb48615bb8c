"""Kubernetes nodes of burst's node groups: labels, taints, hot-pool cordons, GPU readiness, drains, clean-up.

`KubernetesNodes` wraps the provider that owns the instances (AWS, GCP, the
sim) and gives the controller the same `Provider`, seen through the cluster:

* a Node object is matched to its instance by `spec.providerID` (the part
  after the last `/`: `aws:///us-east-1a/i-0abc` is `i-0abc`), and labelled
  `burst.dev/tier`, `burst.dev/capacity-type`, `burst.dev/node-group`; a spot
  node also gets the `burst.dev/spot` NoSchedule taint, next to the taints it
  already has;
* an instance the cloud reports ready counts as booting (upcoming capacity,
  toward its group's target) until its Node is Ready and reports
  `nvidia.com/gpu` allocatable, so pods still pending while the device
  plugin starts do not buy a second node; its GPUs are then the allocatable;
* a hot-pool node (warm, or waking) that has joined the cluster stays
  cordoned until burst draws it from the pool (it turns ready);
* a spot interruption notice drains the node (cordon, checkpoint, evict; see
  `drain.py`) while the event passes on to the planner; `terminate` drains
  first and terminates the instance once its pods are gone (or
  `drain_timeout_s` after it began), and its node is reported draining;
* a Node labelled with one of these groups whose instance is no longer
  listed is deleted (the instance is gone).

Every call is made in `refresh()` (once per tick) or `terminate()`, with the
clock passed in, and each is idempotent: labels and cordons are patched only
when they differ.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from burst.model import (
    CapacityType,
    EventKind,
    NodeGroup,
    NodeId,
    NodeState,
    Offering,
    ProviderEvent,
    Transition,
    WarmState,
)
from burst.model import Node as BurstNode
from providers.base import GroupState, Provider
from providers.kubernetes import names
from providers.kubernetes.cluster import ApiException, KubeCluster, Obj
from providers.kubernetes.drain import Drainer

log = logging.getLogger(__name__)

DEFAULT_DRAIN_TIMEOUT_S = 900.0
CONFLICT = 409


def instance_id(node: Obj) -> str:
    """The instance id in the Node's providerID ('' when it has none)."""
    provider_id = str(node.get("spec", {}).get("providerID") or "")
    return provider_id.rstrip("/").rsplit("/", 1)[-1] if provider_id else ""


def gpu_allocatable(node: Obj) -> int:
    raw = (node.get("status", {}).get("allocatable") or {}).get(names.GPU_RESOURCE, "0")
    try:
        return int(str(raw))
    except ValueError:
        return 0


def is_ready(node: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in node.get("status", {}).get("conditions") or [])


def group_labels(group: NodeGroup) -> dict[str, str]:
    return {names.TIER: group.tier.value, names.CAPACITY_TYPE: group.capacity_type.value, names.NODE_GROUP: group.id}


class KubernetesNodes:
    """A `Provider` seen through the cluster's Node objects (see the module docstring)."""

    def __init__(self, inner: Provider, cluster: KubeCluster, drainer: Drainer, *, clock: Callable[[], datetime],
                 sync: bool = True, drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "kubernetes")
        self.cluster = cluster
        self.drainer = drainer
        self.clock = clock
        self.sync = sync
        self.drain_timeout = timedelta(seconds=drain_timeout_s)
        self._groups = {g.id: g for g in inner.node_groups()}
        self._gpu_ready: set[NodeId] = set()
        self._terminating: dict[NodeId, tuple[str, datetime]] = {}  # instance -> (key, drain start)

    # ------------------------------------------------------------ the cluster's view

    def _by_instance(self) -> dict[str, Obj]:
        return {iid: n for n in self.cluster.nodes() if (iid := instance_id(n))}

    def node_name(self, node_id: NodeId) -> str | None:
        """The Kubernetes Node name of an instance (None while it has not joined)."""
        found = self._by_instance().get(node_id)
        return found["metadata"]["name"] if found else None

    def nodes(self) -> Mapping[NodeId, BurstNode]:
        """The instances, with ready ones booting until their Node reports GPUs, and drained ones draining."""
        by_instance = self._by_instance()
        now = self.clock()
        out: dict[NodeId, BurstNode] = {}
        for node_id, node in self.inner.nodes().items():
            if node.state is NodeState.READY:
                k8s = by_instance.get(node_id)
                gpus = gpu_allocatable(k8s) if k8s is not None and is_ready(k8s) else 0
                if node_id in self._terminating:
                    node = node.transition(NodeState.DRAINING, now)
                elif gpus > 0 or node_id in self._gpu_ready:
                    self._gpu_ready.add(node_id)
                    node = dataclasses.replace(node, gpus=gpus or node.gpus)
                else:
                    node = _booting(node)
            out[node_id] = node
        return out

    # ------------------------------------------------------------ per tick

    def refresh(self) -> None:
        self.inner.refresh()
        if self.sync:
            self.cluster.sync()
        now = self.clock()
        listed = self.inner.nodes()
        by_instance = self._by_instance()
        for node_id, k8s in by_instance.items():
            node = listed.get(node_id)
            if node is None:
                continue
            group = self._groups.get(node.group_id)
            if group is not None:
                self._label(k8s, group)
            self._hot_pool_cordon(k8s, node)
        self._finish_terminations(listed, by_instance, now)
        for node_id, k8s in by_instance.items():
            labels = k8s["metadata"].get("labels") or {}
            gone = node_id not in listed or listed[node_id].state is NodeState.TERMINATED
            if labels.get(names.NODE_GROUP) in self._groups and gone:
                log.info("instance gone; deleting its Node", extra={"node": k8s["metadata"]["name"]})
                self.cluster.delete_node(k8s["metadata"]["name"])
                self.drainer.forget_node(k8s["metadata"]["name"])
                self._gpu_ready.discard(node_id)

    def _label(self, k8s: Obj, group: NodeGroup) -> None:
        """Patch the group's labels where they differ, and add the spot taint to a spot node that lacks it.

        `spec.taints` has no merge key, so a strategic merge patch replaces the whole list: the patch carries
        the node's taints with the spot one appended, and the resourceVersion they were read at, so a taint
        another writer added meanwhile makes the patch conflict (retried next tick) instead of vanishing.
        """
        meta = k8s["metadata"]
        labels = meta.get("labels") or {}
        want = group_labels(group)
        patch: Obj = {}
        if any(labels.get(k) != v for k, v in want.items()):
            patch["metadata"] = {"labels": want}
        taints: list[Obj] = list(k8s.get("spec", {}).get("taints") or [])
        if group.capacity_type is CapacityType.SPOT and not any(t.get("key") == names.SPOT_TAINT["key"] for t in taints):
            patch["spec"] = {"taints": [*taints, dict(names.SPOT_TAINT)]}
            if meta.get("resourceVersion"):
                patch.setdefault("metadata", {})["resourceVersion"] = meta["resourceVersion"]
        if not patch:
            return
        try:
            self.cluster.patch_node(meta["name"], patch)
        except ApiException as exc:
            if exc.status != CONFLICT:
                raise
            log.info("node changed since it was read; tainting it next tick", extra={"node": meta["name"]})

    def _hot_pool_cordon(self, k8s: Obj, node: BurstNode) -> None:
        name = k8s["metadata"]["name"]
        by = (k8s["metadata"].get("annotations") or {}).get(names.CORDONED_BY)
        if node.state in (NodeState.WARM, NodeState.WAKING):
            self.drainer.cordon(name, "hot-pool")
        elif node.state is NodeState.READY and by == "hot-pool":
            self.cluster.patch_node(name, {"metadata": {"annotations": {names.CORDONED_BY: None}},
                                           "spec": {"unschedulable": None}})

    def _finish_terminations(self, listed: Mapping[NodeId, BurstNode], by_instance: Mapping[str, Obj],
                             now: datetime) -> None:
        for node_id, (key, since) in list(self._terminating.items()):
            k8s = by_instance.get(node_id)
            name = k8s["metadata"]["name"] if k8s is not None else None
            if node_id not in listed:
                del self._terminating[node_id]
            elif name is None or self.drainer.drained(name) or now - since >= self.drain_timeout:
                self.inner.terminate((node_id,), key=key)
                del self._terminating[node_id]

    # ------------------------------------------------------------ the rest of the protocol

    def poll_events(self) -> Sequence[ProviderEvent]:
        """The provider's events; an interruption notice also starts draining its node."""
        events = list(self.inner.poll_events())
        now = self.clock()
        for e in events:
            if e.kind is EventKind.INTERRUPTION and e.node_id is not None:
                name = self.node_name(e.node_id)
                if name is not None:
                    self.drainer.drain_node(name, now, deadline=e.deadline, reason=f"spot interruption of {e.node_id}")
        return events

    def terminate(self, node_ids: Sequence[NodeId], *, key: str) -> None:
        """Drain each node that has joined the cluster, then terminate its instance (asynchronous, by `key`)."""
        now = self.clock()
        direct: list[NodeId] = []
        for node_id in node_ids:
            name = self.node_name(node_id)
            if name is None:
                direct.append(node_id)
                continue
            self._terminating.setdefault(node_id, (key, now))
            self.drainer.drain_node(name, now, deadline=None, reason=f"terminate ({key})")
        if direct:
            self.inner.terminate(direct, key=key)

    def node_groups(self) -> Sequence[NodeGroup]:
        return self.inner.node_groups()

    def offerings(self, group_id: str) -> Sequence[Offering]:
        return self.inner.offerings(group_id)

    def group_state(self, group_id: str) -> GroupState:
        return self.inner.group_state(group_id)

    def set_target(self, group_id: str, size: int, *, key: str) -> None:
        self.inner.set_target(group_id, size, key=key)

    def set_warm_pool(self, group_id: str, size: int, state: WarmState, *, key: str) -> None:
        self.inner.set_warm_pool(group_id, size, state, key=key)


def _booting(node: BurstNode) -> BurstNode:
    """The node as still booting: the cloud says ready, the cluster does not have its GPUs yet."""
    history = node.history[:-1] if node.history and node.history[-1].state is NodeState.READY else node.history
    if not history or history[-1].state is not NodeState.BOOTING:
        history = (*history, Transition(NodeState.BOOTING, node.created_at))
    return dataclasses.replace(node, state=NodeState.BOOTING, history=history, idle_since=None)


__all__ = ["KubernetesNodes", "gpu_allocatable", "group_labels", "instance_id", "is_ready"]
