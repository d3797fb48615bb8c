"""The GPUs of one node as the local scheduler sees them: identity, health, sharing and topology."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from burst.model.base import NodeId


class GpuSharing(StrEnum):
    """How jobs asking for a fraction of a GPU may share one (the node agent sets what the mode needs)."""

    NONE = "none"  # every job gets whole GPUs to itself
    MPS = "mps"  # CUDA Multi-Process Service: concurrent kernels, per-client thread limit
    TIME_SLICING = "time_slicing"  # the driver's time slices: contexts take turns


class GpuHealth(StrEnum):
    """The scheduler's verdict on one GPU, judged from its NVML readings (providers/onprem/health.py)."""

    HEALTHY = "healthy"  # takes new work at full score
    DEGRADED = "degraded"  # takes new work, scored lower (throttling, clocks below max under load)
    UNHEALTHY = "unhealthy"  # no new work; its jobs are moved, checkpoint first


class GpuLink(StrEnum):
    """How two GPUs of one node talk, best first (NVML topology levels, NVLink above them all)."""

    SAME = "same"  # the same GPU
    NVLINK = "nvlink"  # at least one active NVLink between them
    PCIE_SWITCH = "pcie_switch"  # NVML SINGLE / MULTIPLE: behind the same PCIe switch(es)
    HOST_BRIDGE = "host_bridge"  # NVML HOSTBRIDGE: the same PCIe host bridge
    NUMA_NODE = "numa_node"  # NVML NODE: the same NUMA node, across host bridges
    SYSTEM = "system"  # NVML SYSTEM: across sockets (SMP interconnect)

    @property
    def rank(self) -> int:
        """0 for the best link; larger is slower."""
        return GPU_LINK_ORDER.index(self)


GPU_LINK_ORDER: tuple[GpuLink, ...] = tuple(GpuLink)


@dataclass(frozen=True)
class Gpu:
    """One physical GPU as the local scheduler sees it: identity, size, health."""

    uuid: str
    index: int
    model: str
    memory_mib: int
    health: GpuHealth = GpuHealth.HEALTHY
    health_reason: str = ""
    numa_node: int | None = None
    mig_enabled: bool = False


@dataclass(frozen=True)
class GpuPairLink:
    """The link between GPUs `a` and `b` of one node (by UUID)."""

    a: str
    b: str
    link: GpuLink


@dataclass(frozen=True)
class NodeGpus:
    """A node's GPUs and the link between pairs of them (a pair not listed is the worst link, SYSTEM)."""

    node_id: NodeId
    gpus: tuple[Gpu, ...]
    links: tuple[GpuPairLink, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)

    @functools.cached_property
    def _link_of(self) -> dict[tuple[str, str], GpuLink]:
        return {(min(p.a, p.b), max(p.a, p.b)): p.link for p in self.links}

    def link(self, a: str, b: str) -> GpuLink:
        """The link between GPUs `a` and `b`."""
        if a == b:
            return GpuLink.SAME
        return self._link_of.get((a, b) if a < b else (b, a), GpuLink.SYSTEM)
