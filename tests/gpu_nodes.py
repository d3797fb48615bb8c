"""Scripted on-prem nodes for the local GPU scheduler's tests and benchmark (shapes of real machines).

* `nvswitch_node`: DGX A100-like, every pair of its 8 GPUs joined through NVSwitch (NVLink).
* `cube_mesh_node`: DGX-1-like hybrid cube mesh: GPUs 0-3 and 4-7 are each fully
  NVLinked, and GPU i links to GPU i+4; every other pair crosses the sockets.
* `pcie_node`: a PCIe server: pairs (0,1), (2,3), (4,5), (6,7) behind one
  switch each, 0-3 and 4-7 on one host bridge per socket, sockets joined by SYS.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

from burst.model import Gpu, GpuHealth, GpuLink, GpuPairLink, NodeGpus


def _node(
    node_id: str,
    link: Callable[[int, int], GpuLink],
    *,
    n: int = 8,
    model: str = "A100",
    memory_mib: int = 81920,
    health: Mapping[int, GpuHealth] | None = None,
    labels: Mapping[str, str] | None = None,
) -> NodeGpus:
    gpus = tuple(
        Gpu(
            uuid=f"GPU-{node_id}-{i}",
            index=i,
            model=model,
            memory_mib=memory_mib,
            health=(health or {}).get(i, GpuHealth.HEALTHY),
            health_reason="" if (health or {}).get(i, GpuHealth.HEALTHY) is GpuHealth.HEALTHY else "scripted",
            numa_node=0 if i < n // 2 else 1,
        )
        for i in range(n)
    )
    links = tuple(
        GpuPairLink(gpus[a].uuid, gpus[b].uuid, link(a, b)) for a, b in itertools.combinations(range(n), 2)
    )
    return NodeGpus(node_id=node_id, gpus=gpus, links=links, labels=dict(labels or {}))


def nvswitch_node(node_id: str, **kw: object) -> NodeGpus:
    return _node(node_id, lambda a, b: GpuLink.NVLINK, **kw)  # type: ignore[arg-type]


def cube_mesh_node(node_id: str, **kw: object) -> NodeGpus:
    def link(a: int, b: int) -> GpuLink:
        if a // 4 == b // 4 or abs(a - b) == 4:
            return GpuLink.NVLINK
        return GpuLink.SYSTEM

    return _node(node_id, link, **kw)  # type: ignore[arg-type]


def pcie_node(node_id: str, **kw: object) -> NodeGpus:
    def link(a: int, b: int) -> GpuLink:
        if a // 2 == b // 2:
            return GpuLink.PCIE_SWITCH
        if a // 4 == b // 4:
            return GpuLink.HOST_BRIDGE
        return GpuLink.SYSTEM

    return _node(node_id, link, **kw)  # type: ignore[arg-type]
