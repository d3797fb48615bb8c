"""What NVML discovery reads from each GPU, and the pairwise topology derived from it.

Everything here is plain data and pure functions: `discovery.py` fills these
types from pynvml, tests build them by hand, and `health.judge` reads them. A
field NVML could not give (the GPU does not support it, the driver is too old,
the call failed) is `None`; the failure's reason, when it is not simply "not
supported", is in `GpuReading.errors`.

Units follow nvidia-smi rather than raw NVML: memory in MiB (NVML: bytes),
power in W (NVML: mW), clocks in MHz, temperature in degrees C.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from burst.model import GpuLink

# NVML topology levels (nvmlGpuTopologyLevel_t, NVML API reference "Topology Queries";
# the same numbers as pynvml.NVML_TOPOLOGY_*), copied so this module needs no pynvml.
TOPOLOGY_INTERNAL = 0  # the same board (multi-GPU boards)
TOPOLOGY_SINGLE = 10  # one PCIe switch between them
TOPOLOGY_MULTIPLE = 20  # several PCIe switches, no host bridge
TOPOLOGY_HOSTBRIDGE = 30  # the same PCIe host bridge
TOPOLOGY_NODE = 40  # the same NUMA node, across host bridges
TOPOLOGY_SYSTEM = 50  # across NUMA nodes (the SMP interconnect)

_LEVEL_LINK = {
    TOPOLOGY_INTERNAL: GpuLink.PCIE_SWITCH,
    TOPOLOGY_SINGLE: GpuLink.PCIE_SWITCH,
    TOPOLOGY_MULTIPLE: GpuLink.PCIE_SWITCH,
    TOPOLOGY_HOSTBRIDGE: GpuLink.HOST_BRIDGE,
    TOPOLOGY_NODE: GpuLink.NUMA_NODE,
    TOPOLOGY_SYSTEM: GpuLink.SYSTEM,
}

# `nvidia-smi topo -m` legend for each level.
_LEVEL_LABEL = {
    TOPOLOGY_INTERNAL: "PSB",
    TOPOLOGY_SINGLE: "PIX",
    TOPOLOGY_MULTIPLE: "PXB",
    TOPOLOGY_HOSTBRIDGE: "PHB",
    TOPOLOGY_NODE: "NODE",
    TOPOLOGY_SYSTEM: "SYS",
}

TOPOLOGY_LEGEND = (
    "X = self, NV# = # NVLinks (direct or through NVSwitch), PIX = one PCIe switch, "
    "PXB = several PCIe switches, PHB = the same host bridge, NODE = the same NUMA node, "
    "SYS = across NUMA nodes, ? = unknown (treated as SYS)"
)

# NVML nvmlNvLinkDeviceType_t (pynvml.NVML_NVLINK_DEVICE_TYPE_*).
NVLINK_REMOTE_GPU = 0x00
NVLINK_REMOTE_IBMNPU = 0x01
NVLINK_REMOTE_SWITCH = 0x02


def normalize_bus_id(bus_id: str) -> str:
    """A PCI bus id in NVML's form, `dddddddd:bb:dd.f` lower case, whatever domain width it came with.

    NVML writes the domain with 8 hex digits (`00000000:07:00.0`), sysfs and
    lspci with 4 (`0000:07:00.0`); NVLink remote PCI info uses NVML's form.
    """
    text = bus_id.strip().lower()
    parts = text.split(":")
    if len(parts) == 3:
        parts[0] = parts[0][-8:].rjust(8, "0")
    return ":".join(parts)


@dataclass(frozen=True)
class NvLinkReading:
    """One active NVLink of a GPU: its number and what sits at the other end."""

    link: int
    remote_bus_id: str | None  # nvmlDeviceGetNvLinkRemotePciInfo().busId, normalised
    remote_type: int | None = None  # nvmlDeviceGetNvLinkRemoteDeviceType (GPU, IBMNPU, SWITCH); None if unknown


@dataclass(frozen=True)
class GpuReading:
    """Everything discovery read from one GPU through NVML (None: NVML could not say)."""

    index: int
    uuid: str
    name: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    mig_enabled: bool | None = None  # current MIG mode (nvmlDeviceGetMigMode()[0]); None: no MIG support
    pci_bus_id: str | None = None
    numa_node: int | None = None
    nvlinks: tuple[NvLinkReading, ...] = ()  # active links only
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None  # the enforced limit
    clock_event_reasons: int | None = None  # nvmlClocksEventReason* / nvmlClocksThrottleReason* bitmask
    ecc_volatile_uncorrected: int | None = None  # since the last driver load
    ecc_aggregate_uncorrected: int | None = None  # over the GPU's life
    retired_pages_pending: bool | None = None  # page retirement (pre-Ampere)
    remapped_rows_correctable: int | None = None  # row remapping (Ampere and later)
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remap_failure: bool | None = None
    gpu_util_pct: int | None = None
    memory_util_pct: int | None = None
    lost: bool = False  # NVML said NVML_ERROR_GPU_IS_LOST: the GPU fell off the bus
    unreadable: str | None = None  # why NVML would not identify the GPU (handle or UUID failed)
    errors: tuple[str, ...] = field(default=())  # "field: NVML error" for each field that failed

    @property
    def sm_clock_ratio(self) -> float | None:
        """SM clock as a fraction of its maximum, or None when either is unknown."""
        if self.sm_clock_mhz is None or not self.sm_clock_max_mhz:
            return None
        return self.sm_clock_mhz / self.sm_clock_max_mhz


@dataclass(frozen=True)
class PairReading:
    """How GPUs `a` and `b` (UUIDs, a < b) connect: PCIe common ancestor and NVLinks."""

    a: str
    b: str
    ancestor_level: int | None  # nvmlDeviceGetTopologyCommonAncestor, None if it failed
    nvlinks: int = 0  # active NVLinks joining them, directly or through a shared NVSwitch
    via_switch: bool = False

    @property
    def link(self) -> GpuLink:
        """The scheduler's `GpuLink`: NVLink when any is active, else the PCIe level (unknown: SYSTEM)."""
        if self.nvlinks > 0:
            return GpuLink.NVLINK
        if self.ancestor_level is None:
            return GpuLink.SYSTEM
        return _LEVEL_LINK.get(self.ancestor_level, GpuLink.SYSTEM)

    @property
    def label(self) -> str:
        """The `nvidia-smi topo -m` cell: NV<n>, PIX, PXB, PHB, NODE, SYS, or ? when unknown."""
        if self.nvlinks > 0:
            return f"NV{self.nvlinks}"
        if self.ancestor_level is None:
            return "?"
        return _LEVEL_LABEL.get(self.ancestor_level, "SYS")


def nvlink_counts(a: GpuReading, b: GpuReading, gpu_bus_ids: frozenset[str]) -> tuple[int, bool]:
    """Active NVLinks joining `a` and `b`, and whether they go through an NVSwitch.

    A direct link is one of `a`'s links whose remote end is `b`'s PCI bus id (or
    the other way round). On NVSwitch systems (DGX A100/H100) every link ends on
    a switch, whose bus id is no GPU of this node (or whose remote type says
    SWITCH); two GPUs that reach the same switch talk over NVLink through it,
    with as many links as the smaller of their links into the shared switches.
    """
    if a.pci_bus_id is not None and b.pci_bus_id is not None:
        direct = sum(1 for ln in a.nvlinks if ln.remote_bus_id == b.pci_bus_id)
        if direct == 0:
            direct = sum(1 for ln in b.nvlinks if ln.remote_bus_id == a.pci_bus_id)
        if direct:
            return direct, False

    def fabric(r: GpuReading) -> list[NvLinkReading]:
        return [
            ln for ln in r.nvlinks
            if ln.remote_bus_id is not None
            and (ln.remote_type == NVLINK_REMOTE_SWITCH
                 or (ln.remote_type is None and ln.remote_bus_id not in gpu_bus_ids))
        ]

    fa, fb = fabric(a), fabric(b)
    shared = {ln.remote_bus_id for ln in fa} & {ln.remote_bus_id for ln in fb}
    if not shared:
        return 0, False
    return min(sum(1 for ln in fa if ln.remote_bus_id in shared), sum(1 for ln in fb if ln.remote_bus_id in shared)), True


def pair_readings(readings: Sequence[GpuReading], ancestors: dict[tuple[str, str], int | None]) -> tuple[PairReading, ...]:
    """Every pair of the readings (lost GPUs left out), keyed by sorted UUIDs, with NVLink counts filled in."""
    live = [r for r in readings if not r.lost]
    buses = frozenset(r.pci_bus_id for r in live if r.pci_bus_id is not None)
    out: list[PairReading] = []
    for i, x in enumerate(live):
        for y in live[i + 1:]:
            a, b = (x, y) if x.uuid < y.uuid else (y, x)
            count, via_switch = nvlink_counts(a, b, buses)
            out.append(PairReading(a.uuid, b.uuid, ancestors.get((a.uuid, b.uuid)), count, via_switch))
    return tuple(out)
