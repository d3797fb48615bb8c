"""What every provider shares about its groups and nodes: the lifecycle table applied in one place.

A backend reports raw states (an ASG lifecycle state, a MIG action, a libcloud
node state) mapped onto `NodeState`; `GroupedProvider.observe` moves the node it
had along the table (`Node.walk_to`) and keeps its tags current, so no provider
walks the table itself. The reads every group-keeping provider answers the same
way (`node_groups`, `nodes`, `group_state`) live here too; a provider module
keeps only its API calls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from burst.model import Node, NodeGroup, NodeId, NodeState, WarmState
from providers.base import Clock, GroupState, InvalidTarget, NotFound

T = TypeVar("T")


@dataclass
class GroupRecord:
    """A provider's record of one group: the group, its desired size and its warm pool as last read or asked
    (a provider's own record adds what its API calls need)."""

    group: NodeGroup
    desired: int
    warm: tuple[int, WarmState]


G = TypeVar("G", bound=GroupRecord)


def find_group(groups: Mapping[str, T], group_id: str) -> T:
    """The group named `group_id`; NotFound (naming the groups there are) when there is none."""
    try:
        return groups[group_id]
    except KeyError:
        raise NotFound(f"unknown node group {group_id!r} (groups: {', '.join(groups) or 'none'})") from None


def observed(before: Node | None, node_id: NodeId, group_id: str, gpus: int, state: NodeState,
             warm: WarmState | None, tags: Mapping[str, str], *, at: datetime, by: str,
             created: datetime | None = None) -> Node:
    """The node a backend now reports in `state`: `before` walked along the lifecycle table (a node not seen
    before starts REQUESTED at `created`, else at `at`), its tags those reported. A state no walk leads to is
    an observed re-sync by provider `by` (see `Node.walk_to`)."""
    if before is not None and before.state is state and before.warm_state == warm:
        return before if dict(before.tags) == dict(tags) else dataclasses.replace(before, tags=dict(tags))
    node = before or Node.requested(node_id, group_id, gpus, min(created or at, at), tags=dict(tags))
    node = node.walk_to(state, at, warm_state=warm, observed_by=by)
    return dataclasses.replace(node, tags=dict(tags)) if dict(node.tags) != dict(tags) else node


class GroupedProvider(Generic[G]):
    """The shared half of a provider that keeps a record per group and a listing of nodes: the reads, the group
    lookup and the lifecycle walk. A subclass sets `name`, `_clock`, `_groups`, `_nodes` and `_keys` and makes the calls."""

    name: str
    _clock: Clock
    _groups: dict[str, G]
    _nodes: dict[NodeId, Node]
    _keys: set[tuple[str, str]]  # (method, key) of every mutating call applied

    def node_groups(self) -> Sequence[NodeGroup]:
        """The groups this provider manages (found at construction; sorted by id when discovered)."""
        return [g.group for g in self._groups.values()]

    def nodes(self) -> Mapping[NodeId, Node]:
        """Every non-terminated node as of the last refresh (see the provider's module docstring)."""
        return dict(self._nodes)

    def group_state(self, group_id: str) -> GroupState:
        """The group's desired size and warm pool as of the last refresh, updated by this provider's own calls.
        Raises NotFound."""
        g = self._group(group_id)
        return GroupState(g.desired, *g.warm)

    def _group(self, group_id: str) -> G:
        return find_group(self._groups, group_id)

    def _resizing(self, group_id: str, size: int, key: str) -> G | None:
        """The group `set_target` is to resize to `size`, or None when `key` was applied already.
        Raises NotFound, InvalidTarget (outside [min_size, max_size])."""
        g = self._group(group_id)
        if not g.group.min_size <= size <= g.group.max_size:
            raise InvalidTarget(f"{group_id}: size {size} is outside [{g.group.min_size}, {g.group.max_size}]")
        return None if ("set_target", key) in self._keys else g

    def _warming(self, group_id: str, size: int) -> G:
        """The group `set_warm_pool` is to keep `size` warm nodes of. Raises NotFound, InvalidTarget (negative)."""
        g = self._group(group_id)
        if size < 0:
            raise InvalidTarget(f"{group_id}: warm pool size {size} is negative")
        return g

    def observe(self, node_id: NodeId, group_id: str, state: NodeState, warm: WarmState | None,
                tags: Mapping[str, str], *, created: datetime | None = None) -> Node:
        """Record that the backend reports `node_id` (of `group_id`) in `state`, moving its node along the
        lifecycle table from what it was; returns the node as recorded."""
        gpus = self._groups[group_id].group.gpus_per_node if group_id in self._groups else 0
        node = observed(self._nodes.get(node_id), node_id, group_id, gpus, state, warm, tags,
                        at=self._clock(), by=self.name, created=created)
        self._nodes[node_id] = node
        return node


__all__ = ["GroupRecord", "GroupedProvider", "find_group", "observed"]
