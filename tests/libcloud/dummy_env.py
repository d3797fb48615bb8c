"""libcloud's Dummy driver, made to behave like a cloud for the provider's generic logic.

The stock `DummyNodeDriver` ignores the name asked for (it names nodes
`dummy-N`), keeps no metadata, numbers ids by list length (so ids repeat after
a destroy) and has every node running at once. `GroupDriver` subclasses it
and keeps its listing and its two pre-existing nodes (which are no group's),
but honours names and `ex_metadata` (kept in `extra["metadata"]`, as
OpenStack's driver does), gives unique ids, boots nodes in `boot_s` seconds
of the test's clock, records every call, and raises injected exceptions
(libcloud's own exception classes) per method. `StopStartDriver` adds
`stop_node`/`start_node`, so it can hold a warm pool; `GroupDriver` cannot.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from libcloud.compute.base import Node, NodeImage, NodeLocation, NodeSize
from libcloud.compute.drivers.dummy import DummyNodeDriver
from libcloud.compute.types import NodeState

GPU_SIZE = NodeSize(id="gpu-8xa100", name="GPU 8x A100", ram=1179648, disk=8000, bandwidth=None, price=30.0,
                    driver=None, extra={"gpus": 8})


class GroupDriver(DummyNodeDriver):
    """The Dummy driver with names, metadata, boot time, unique ids, a call log and injected faults."""

    def __init__(self, clock: Callable[[], datetime], *, boot_s: float = 60.0, wake_s: float = 30.0) -> None:
        super().__init__(0)
        self.clock = clock
        self.boot = timedelta(seconds=boot_s)
        self.wake = timedelta(seconds=wake_s)
        self.calls: collections.Counter[str] = collections.Counter()
        self.faults: dict[str, list[BaseException]] = collections.defaultdict(list)
        self.lose: dict[str, int] = collections.defaultdict(int)  # method -> calls applied whose reply is lost
        self._ids = itertools.count(100)
        self._ready_at: dict[str, datetime] = {}

    # what a test injects
    def fail(self, method: str, *errors: BaseException) -> None:
        """The next calls of `method` raise these, in order (nothing is applied)."""
        self.faults[method].extend(errors)

    def _enter(self, method: str) -> None:
        self.calls[method] += 1
        if self.faults[method]:
            raise self.faults[method].pop(0)

    def _leave(self, method: str) -> None:
        if self.lose[method] > 0:
            self.lose[method] -= 1
            raise ConnectionResetError(f"{method}: connection reset before the reply")  # applied, reply lost

    def list_sizes(self, location: Any = None) -> list[NodeSize]:
        self._enter("list_sizes")
        return [*super().list_sizes(location), GPU_SIZE]

    def list_locations(self) -> list[NodeLocation]:
        self._enter("list_locations")
        return list(super().list_locations())

    def list_images(self, location: Any = None) -> list[NodeImage]:
        self._enter("list_images")
        return [*super().list_images(location), NodeImage(id="ubuntu-22.04-cuda", name="Ubuntu 22.04 CUDA", driver=self)]

    def list_nodes(self) -> list[Node]:
        self._enter("list_nodes")
        now = self.clock()
        for node in self.nl:
            ready = self._ready_at.get(str(node.id))
            if node.state in (NodeState.PENDING, NodeState.STARTING) and ready is not None and now >= ready:
                node.state = NodeState.RUNNING
        return list(self.nl)

    def create_node(self, name: str, size: Any, image: Any, location: Any = None,  # type: ignore[override]
                    ex_metadata: dict[str, str] | None = None) -> Node:
        self._enter("create_node")
        nid = f"dummy-{next(self._ids)}"
        node = Node(id=nid, name=name, state=NodeState.PENDING, public_ips=[], private_ips=[], driver=self,
                    size=size, image=image, extra={"metadata": dict(ex_metadata or {}), "location": location})
        self.nl.append(node)
        self._ready_at[nid] = self.clock() + self.boot
        self._leave("create_node")
        return node

    def destroy_node(self, node: Node) -> bool:
        self._enter("destroy_node")
        live = [n for n in self.nl if n.id == node.id]
        if not live:
            from libcloud.common.exceptions import BaseHTTPError

            raise BaseHTTPError(404, f"node {node.id} not found")
        for n in live:
            n.state = NodeState.TERMINATED
            self.nl.remove(n)
        self._leave("destroy_node")
        return True

    def by_name(self, name: str) -> list[Node]:
        return [n for n in self.nl if n.name == name]

    def vanish(self, node_id: str) -> None:
        """The cloud removes a node without being asked (a reclaim, a host failure)."""
        self.nl[:] = [n for n in self.nl if n.id != node_id]


class StopStartDriver(GroupDriver):
    """A GroupDriver whose nodes can be stopped and started (what a warm pool needs)."""

    def stop_node(self, node: Node) -> bool:
        self._enter("stop_node")
        for n in self.nl:
            if n.id == node.id:
                n.state = NodeState.STOPPED
        return True

    def start_node(self, node: Node) -> bool:
        self._enter("start_node")
        for n in self.nl:
            if n.id == node.id:
                n.state = NodeState.STARTING
                self._ready_at[str(n.id)] = self.clock() + self.wake
        return True
