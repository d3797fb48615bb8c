"""NVML GPU discovery for an on-prem node, with the static inventory as its fallback.

`discover()` opens NVML (`nvmlInit`), reads every GPU and every pair's topology,
judges each GPU's health and closes NVML (`nvmlShutdown`, always). No pynvml
exception leaves this module; each is mapped onto an outcome:

* at `nvmlInit` (or pynvml missing): NVML is unavailable. `NVMLError_LibraryNotFound`
  (no driver installed), `NVMLError_DriverNotLoaded`, `NVMLError_NoPermission`,
  `NVMLError_LibRmVersionMismatch` and any other error each get a clear reason;
  the node then serves from its static inventory (`inventory.py`), and the
  status line says both.
* `NVMLError_GpuIsLost` from any call on one GPU: that GPU is read as lost,
  judged UNHEALTHY ("fell off the bus"), and discovery goes on with the others.
* `NVMLError_NotSupported` on an optional field (ECC on a GeForce card, row
  remapping before Ampere, MIG outside A100/H100...): that field is None.
  `NVMLError_FunctionNotFound` (a driver older than the call) reads the same.
* any other `NVMLError` on one field: that field is None and "field: error" is
  collected in the GPU's `errors`; one that stops a GPU from being identified
  (handle, UUID) leaves the GPU `unreadable`, judged UNHEALTHY.

pynvml is imported inside `discover()` and is called through its module
attributes (`pynvml.nvmlDeviceGetCount(...)`), so tests patch the real
functions on the real module.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from burst.model import Gpu, GpuHealth, GpuPairLink, NodeGpus, NodeGroup
from providers.onprem.health import judge
from providers.onprem.inventory import GROUP_LABEL, SOURCE_LABEL, static_inventory
from providers.onprem.readings import GpuReading, NvLinkReading, PairReading, normalize_bus_id, pair_readings

LOST_UUID_PREFIX = "LOST-gpu"
"""UUID placeholder for a GPU lost before its UUID could be read: `LOST-gpu<index>`."""

UNREADABLE_UUID_PREFIX = "UNREADABLE-gpu"
"""UUID placeholder for a GPU whose handle or UUID NVML would not give: `UNREADABLE-gpu<index>`."""

SOURCE_NVML = "nvml"
SOURCE_STATIC = "static"
SOURCE_NONE = "none"


@dataclass(frozen=True)
class DiscoveryResult:
    """What discovery found on one node: readings and topology (NVML) or the static inventory."""

    node_id: str
    source: str  # nvml, static or none
    status: str  # one line for people: what served, how many GPUs, what is wrong
    nvml_available: bool
    unavailable_reason: str | None = None
    driver_version: str | None = None
    readings: tuple[GpuReading, ...] = ()
    pairs: tuple[PairReading, ...] = ()
    node: NodeGpus | None = None
    errors: tuple[str, ...] = ()  # node-level failures (topology, shutdown); per-GPU ones are in each reading


def short_model(name: str) -> str:
    """The GPU model as burst.yaml writes it ("A100", "H100", "L40S") from NVML's name, else the name.

    "NVIDIA A100-SXM4-80GB" -> "A100", "NVIDIA H100 80GB HBM3" -> "H100", "Tesla V100-SXM2-16GB" -> "V100".
    """
    match = re.search(r"\b([A-Z]{1,2}\d{1,4}[A-Z]?)(?=\b|-)", name)
    return match.group(1) if match else name


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _init_reason(nvml: Any, exc: Exception) -> str:
    """A clear reason for a failed nvmlInit."""
    reasons: list[tuple[str, str]] = [
        ("NVMLError_LibraryNotFound",
         "the NVML library (libnvidia-ml.so.1) was not found: no NVIDIA driver is installed on this machine"),
        ("NVMLError_DriverNotLoaded", "the NVIDIA kernel driver is not loaded (is the nvidia module loaded?)"),
        ("NVMLError_NoPermission", "no permission to open the NVIDIA devices (/dev/nvidia*) as this user"),
        ("NVMLError_LibRmVersionMismatch",
         "the NVML library and the loaded kernel driver differ in version (driver upgraded without a reboot?)"),
    ]
    for cls_name, reason in reasons:
        cls = getattr(nvml, cls_name, None)
        if cls is not None and isinstance(exc, cls):
            return reason
    return f"nvmlInit failed: {exc}"


class _GpuReader:
    """Reads one GPU's fields, mapping NVML errors per the module docstring."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self.nvml = nvml
        self.handle = handle
        self.errors: list[str] = []

    def _unsupported(self, exc: Exception) -> bool:
        return isinstance(exc, self.nvml.NVMLError_NotSupported | self.nvml.NVMLError_FunctionNotFound)

    def get(self, field: str, fn: Callable[..., Any] | None, *args: Any) -> Any:
        """`fn(handle, *args)`, or None when unsupported or failed (failure collected); GpuIsLost propagates."""
        if fn is None:  # a pynvml too old to have the call
            return None
        try:
            return fn(self.handle, *args)
        except self.nvml.NVMLError_GpuIsLost:
            raise
        except self.nvml.NVMLError as exc:
            if not self._unsupported(exc):
                self.errors.append(f"{field}: {exc}")
            return None

    def first(self, field: str, names: Sequence[str], *args: Any) -> Any:
        """The first of pynvml's functions `names` the driver supports (newer name first), or None."""
        for name in names:
            fn = getattr(self.nvml, name, None)
            if fn is None:
                continue
            try:
                return fn(self.handle, *args)
            except self.nvml.NVMLError_GpuIsLost:
                raise
            except self.nvml.NVMLError as exc:
                if isinstance(exc, self.nvml.NVMLError_FunctionNotFound):
                    continue
                if not self._unsupported(exc):
                    self.errors.append(f"{field}: {exc}")
                return None
        return None

    def nvlinks(self) -> tuple[NvLinkReading, ...]:
        """Active NVLinks with their remote PCI bus id (and remote device type where the driver says)."""
        nvml = self.nvml
        out: list[NvLinkReading] = []
        for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
            try:
                state = nvml.nvmlDeviceGetNvLinkState(self.handle, link)
            except nvml.NVMLError_GpuIsLost:
                raise
            except nvml.NVMLError as exc:
                # NotSupported: no NVLink at all; InvalidArgument: past the GPU's last link.
                if self._unsupported(exc) or isinstance(exc, nvml.NVMLError_InvalidArgument):
                    break
                self.errors.append(f"nvlink {link} state: {exc}")
                continue
            if state != nvml.NVML_FEATURE_ENABLED:
                continue
            pci = self.get(f"nvlink {link} remote pci", nvml.nvmlDeviceGetNvLinkRemotePciInfo, link)
            remote_type = self.get(
                f"nvlink {link} remote type", getattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", None), link
            )
            bus = normalize_bus_id(_text(pci.busId)) if pci is not None else None
            out.append(NvLinkReading(link, bus, None if remote_type is None else int(remote_type)))
        return tuple(out)


def _read_gpu(nvml: Any, index: int) -> tuple[GpuReading, Any]:
    """One GPU's reading and its handle (None when it is lost or unreadable)."""
    uuid: str | None = None
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(nvml.nvmlDeviceGetUUID(handle))
    except nvml.NVMLError_GpuIsLost as exc:
        return GpuReading(index=index, uuid=uuid or f"{LOST_UUID_PREFIX}{index}", lost=True, errors=(f"identity: {exc}",)), None
    except nvml.NVMLError as exc:
        return GpuReading(
            index=index, uuid=uuid or f"{UNREADABLE_UUID_PREFIX}{index}", unreadable=f"identity: {exc}",
            errors=(f"identity: {exc}",),
        ), None
    r = _GpuReader(nvml, handle)
    try:
        name = r.get("name", nvml.nvmlDeviceGetName)
        memory = r.get("memory", nvml.nvmlDeviceGetMemoryInfo)
        mig = r.get("mig mode", getattr(nvml, "nvmlDeviceGetMigMode", None))
        pci = r.get("pci", nvml.nvmlDeviceGetPciInfo)
        numa = r.get("numa node", getattr(nvml, "nvmlDeviceGetNumaNodeId", None))
        links = r.nvlinks()
        sm = r.get("sm clock", nvml.nvmlDeviceGetClockInfo, nvml.NVML_CLOCK_SM)
        sm_max = r.get("sm clock max", nvml.nvmlDeviceGetMaxClockInfo, nvml.NVML_CLOCK_SM)
        temp = r.get("temperature", nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU)
        power = r.get("power", nvml.nvmlDeviceGetPowerUsage)
        limit = r.get("power limit", nvml.nvmlDeviceGetEnforcedPowerLimit)
        reasons = r.first(
            "clock event reasons",
            ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
        )
        ecc_vol = r.get("ecc volatile", nvml.nvmlDeviceGetTotalEccErrors,
                        nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC)
        ecc_agg = r.get("ecc aggregate", nvml.nvmlDeviceGetTotalEccErrors,
                        nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_AGGREGATE_ECC)
        retired = r.get("retired pages pending", nvml.nvmlDeviceGetRetiredPagesPendingStatus)
        remap = r.get("remapped rows", getattr(nvml, "nvmlDeviceGetRemappedRows", None))
        util = r.get("utilization", nvml.nvmlDeviceGetUtilizationRates)
    except nvml.NVMLError_GpuIsLost as exc:
        return GpuReading(index=index, uuid=uuid, lost=True, errors=(*r.errors, f"lost: {exc}")), None
    mib = 1024 * 1024
    reading = GpuReading(
        index=index,
        uuid=uuid,
        name=None if name is None else _text(name),
        memory_total_mib=None if memory is None else int(memory.total) // mib,
        memory_used_mib=None if memory is None else int(memory.used) // mib,
        mig_enabled=None if mig is None else int(mig[0]) == nvml.NVML_DEVICE_MIG_ENABLE,
        pci_bus_id=None if pci is None else normalize_bus_id(_text(pci.busId)),
        numa_node=None if numa is None or int(numa) < 0 else int(numa),
        nvlinks=links,
        sm_clock_mhz=None if sm is None else int(sm),
        sm_clock_max_mhz=None if sm_max is None else int(sm_max),
        temperature_c=None if temp is None else int(temp),
        power_w=None if power is None else int(power) / 1000.0,
        power_limit_w=None if limit is None else int(limit) / 1000.0,
        clock_event_reasons=None if reasons is None else int(reasons),
        ecc_volatile_uncorrected=None if ecc_vol is None else int(ecc_vol),
        ecc_aggregate_uncorrected=None if ecc_agg is None else int(ecc_agg),
        retired_pages_pending=None if retired is None else int(retired) == nvml.NVML_FEATURE_ENABLED,
        remapped_rows_correctable=None if remap is None else int(remap[0]),
        remapped_rows_uncorrectable=None if remap is None else int(remap[1]),
        remapped_rows_pending=None if remap is None else bool(remap[2]),
        remap_failure=None if remap is None else bool(remap[3]),
        gpu_util_pct=None if util is None else int(util.gpu),
        memory_util_pct=None if util is None else int(util.memory),
        errors=tuple(r.errors),
    )
    return reading, handle


def _ancestors(nvml: Any, live: Sequence[tuple[GpuReading, Any]], errors: list[str]) -> dict[tuple[str, str], int | None]:
    out: dict[tuple[str, str], int | None] = {}
    for i, (ra, ha) in enumerate(live):
        for rb, hb in live[i + 1:]:
            key = (ra.uuid, rb.uuid) if ra.uuid < rb.uuid else (rb.uuid, ra.uuid)
            try:
                out[key] = int(nvml.nvmlDeviceGetTopologyCommonAncestor(ha, hb))
            except nvml.NVMLError as exc:
                out[key] = None
                if not isinstance(exc, nvml.NVMLError_NotSupported):
                    errors.append(f"topology gpu{ra.index}-gpu{rb.index}: {exc}")
    return out


def node_gpus(node_id: str, readings: Sequence[GpuReading], pairs: Sequence[PairReading],
              labels: dict[str, str] | None = None) -> NodeGpus:
    """The scheduler's view (`NodeGpus`) of NVML readings: health judged, links from the pair readings."""
    gpus: list[Gpu] = []
    for r in readings:
        health, reason = judge(r)
        gpus.append(Gpu(
            uuid=r.uuid,
            index=r.index,
            model=short_model(r.name) if r.name else "unknown",
            memory_mib=r.memory_total_mib or 0,
            health=health,
            health_reason=reason,
            numa_node=r.numa_node,
            mig_enabled=bool(r.mig_enabled),
        ))
    links = tuple(GpuPairLink(p.a, p.b, p.link) for p in pairs)
    return NodeGpus(node_id=node_id, gpus=tuple(gpus), links=links, labels=dict(labels or {}))


def _nvml_status(node: NodeGpus, driver: str | None, errors: int) -> str:
    counts = {h: sum(1 for g in node.gpus if g.health is h) for h in GpuHealth}
    text = (f"NVML: {len(node.gpus)} GPU(s) on {node.node_id}" + (f", driver {driver}" if driver else "")
            + f": {counts[GpuHealth.HEALTHY]} healthy, {counts[GpuHealth.DEGRADED]} degraded, "
            f"{counts[GpuHealth.UNHEALTHY]} unhealthy")
    return text + (f"; {errors} reading(s) failed (see errors)" if errors else "")


def _fallback(node_id: str, reason: str, groups: Sequence[NodeGroup], group_id: str | None) -> DiscoveryResult:
    inv = static_inventory(groups, node_id, group_id)
    if inv.node is not None:
        status = f"NVML unavailable: {reason}; the static inventory serves: {inv.note}"
        source = SOURCE_STATIC
    else:
        status = f"NVML unavailable: {reason}; no static inventory: {inv.note}"
        source = SOURCE_NONE
    return DiscoveryResult(node_id=node_id, source=source, status=status, nvml_available=False,
                           unavailable_reason=reason, node=inv.node)


def discover(node_id: str | None = None, *, groups: Sequence[NodeGroup] = (), group_id: str | None = None) -> DiscoveryResult:
    """Discover this node's GPUs through NVML; without NVML, serve the static inventory of `groups`.

    `node_id` defaults to the host name. `groups` are burst.yaml's node groups
    (only `provider: onprem` ones are used) and `group_id` picks the node's
    group among them. Never raises for an NVML failure: see the module docstring.
    """
    node_id = node_id or socket.gethostname()
    try:
        import pynvml as nvml
    except ImportError:
        return _fallback(node_id, "pynvml is not installed (pip install nvidia-ml-py)", groups, group_id)
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return _fallback(node_id, _init_reason(nvml, exc), groups, group_id)
    errors: list[str] = []
    try:
        driver: str | None
        try:
            driver = _text(nvml.nvmlSystemGetDriverVersion())
        except nvml.NVMLError as exc:
            driver = None
            errors.append(f"driver version: {exc}")
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as exc:
            return _fallback(node_id, f"NVML could not count the GPUs: {exc}", groups, group_id)
        read = [_read_gpu(nvml, i) for i in range(count)]
        live = [(reading, handle) for reading, handle in read if handle is not None]
        readings = tuple(reading for reading, _ in read)
        pairs = pair_readings(readings, _ancestors(nvml, live, errors))
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError as exc:
            errors.append(f"nvmlShutdown: {exc}")
    labels = {SOURCE_LABEL: SOURCE_NVML}
    inv = static_inventory(groups, node_id, group_id) if groups else None
    if inv is not None and inv.group_id is not None:
        labels[GROUP_LABEL] = inv.group_id
    node = node_gpus(node_id, readings, pairs, labels)
    failed = len(errors) + sum(len(r.errors) for r in readings if not r.lost and r.unreadable is None)
    return DiscoveryResult(
        node_id=node_id, source=SOURCE_NVML, status=_nvml_status(node, driver, failed), nvml_available=True,
        driver_version=driver, readings=readings, pairs=pairs, node=node, errors=tuple(errors),
    )

