"""Scripted GPU nodes for NVML discovery tests: the real `pynvml` functions patched with readings.

The values and their shapes follow the NVML API reference (docs.nvidia.com/deploy/nvml-api): "Device Queries"
(nvmlDeviceGetName/UUID/MemoryInfo/PciInfo/ClockInfo/MaxClockInfo/Temperature/PowerUsage/EnforcedPowerLimit/
UtilizationRates/TotalEccErrors/RetiredPagesPendingStatus/RemappedRows/MigMode; memory in bytes, power in mW,
clocks in MHz), "Clock Event Reasons" (the nvmlClocksEventReason* bitmask), "NvLink Methods"
(nvmlDeviceGetNvLinkState/RemotePciInfo/RemoteDeviceType) and "Topology Queries"
(nvmlDeviceGetTopologyCommonAncestor levels 0-50). Errors are pynvml's own classes: `pynvml.NVMLError(code)`
builds the generated subclass for that code (e.g. NVMLError_GpuIsLost).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

MIB = 1024 * 1024
A100_80GB = 81920 * MIB


@dataclass
class FakeGpu:
    """One GPU's NVML answers; a field set to an int NVML error code raises that error instead."""

    uuid: str
    bus_id: str
    name: str = "NVIDIA A100-SXM4-80GB"
    memory: Any = A100_80GB
    used: int = 1024 * MIB
    numa: Any = 0
    sm: Any = 1410
    sm_max: int = 1410
    temp: Any = 45
    power_mw: Any = 90_000
    limit_mw: int = 400_000
    reasons: Any = 0
    util: Any = 0
    ecc_volatile: Any = 0
    ecc_aggregate: Any = 0
    retired_pending: Any = pynvml.NVML_FEATURE_DISABLED
    remapped: Any = (0, 0, 0, 0)
    mig: Any = (pynvml.NVML_DEVICE_MIG_DISABLE, pynvml.NVML_DEVICE_MIG_DISABLE)
    nvlinks: list[tuple[str, int]] = field(default_factory=list)  # (remote bus id, remote device type)
    lost: bool = False  # every call about this GPU raises NVML_ERROR_GPU_IS_LOST


def _answer(value: Any) -> Any:
    if isinstance(value, Error):
        raise pynvml.NVMLError(value.code)
    return value


@dataclass(frozen=True)
class Error:
    """A scripted NVML failure: NVML error `code`."""

    code: int


NOT_SUPPORTED = Error(pynvml.NVML_ERROR_NOT_SUPPORTED)


def install(monkeypatch: pytest.MonkeyPatch, gpus: list[FakeGpu], topology: Callable[[int, int], int]) -> None:
    """Patch pynvml so this process sees `gpus` (handles are their indices) joined by `topology(i, j)`."""

    def gpu(handle: int) -> FakeGpu:
        g = gpus[handle]
        if g.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return g

    def handle_by_index(i: int) -> int:
        if gpus[i].lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return i

    def nvlink_state(h: int, link: int) -> int:
        g = gpu(h)
        if link >= 12:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if not g.nvlinks:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return pynvml.NVML_FEATURE_ENABLED if link < len(g.nvlinks) else pynvml.NVML_FEATURE_DISABLED

    calls: dict[str, Callable[..., Any]] = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: "550.54.15",
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": handle_by_index,
        "nvmlDeviceGetUUID": lambda h: gpu(h).uuid,
        "nvmlDeviceGetName": lambda h: gpu(h).name,
        "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(total=_answer(gpu(h).memory), used=gpu(h).used),
        "nvmlDeviceGetMigMode": lambda h: _answer(gpu(h).mig),
        "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(busId=gpu(h).bus_id.encode()),
        "nvmlDeviceGetNumaNodeId": lambda h: _answer(gpu(h).numa),
        "nvmlDeviceGetNvLinkState": nvlink_state,
        "nvmlDeviceGetNvLinkRemotePciInfo": lambda h, link: SimpleNamespace(busId=gpu(h).nvlinks[link][0].encode()),
        "nvmlDeviceGetNvLinkRemoteDeviceType": lambda h, link: gpu(h).nvlinks[link][1],
        "nvmlDeviceGetClockInfo": lambda h, clock: _answer(gpu(h).sm),
        "nvmlDeviceGetMaxClockInfo": lambda h, clock: gpu(h).sm_max,
        "nvmlDeviceGetTemperature": lambda h, sensor: _answer(gpu(h).temp),
        "nvmlDeviceGetPowerUsage": lambda h: _answer(gpu(h).power_mw),
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: gpu(h).limit_mw,
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: _answer(gpu(h).reasons),
        "nvmlDeviceGetTotalEccErrors": lambda h, kind, counter: _answer(
            gpu(h).ecc_volatile if counter == pynvml.NVML_VOLATILE_ECC else gpu(h).ecc_aggregate
        ),
        "nvmlDeviceGetRetiredPagesPendingStatus": lambda h: _answer(gpu(h).retired_pending),
        "nvmlDeviceGetRemappedRows": lambda h: _answer(gpu(h).remapped),
        "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=_answer(gpu(h).util), memory=0),
        "nvmlDeviceGetTopologyCommonAncestor": lambda a, b: topology(gpu(a) and a, gpu(b) and b),
    }
    for name, fn in calls.items():
        monkeypatch.setattr(pynvml, name, fn)


def bus(i: int) -> str:
    return f"00000000:{0x07 + 0x10 * i:02X}:00.0"


def dgx_a100(monkeypatch: pytest.MonkeyPatch, **changes: dict[str, Any]) -> list[FakeGpu]:
    """DGX A100: 8 GPUs, each with 12 NVLinks into 6 NVSwitches; GPUs 0-3 on NUMA node 0, 4-7 on node 1."""
    switches = [f"00000000:{0xC0 + s:02X}:00.0" for s in range(6)]
    gpus = [
        FakeGpu(uuid=f"GPU-a100-{i}", bus_id=bus(i), numa=i // 4,
                nvlinks=[(switches[k % 6], pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH) for k in range(12)])
        for i in range(8)
    ]
    for i, fields in changes.items():
        for key, value in fields.items():
            setattr(gpus[int(i[1:])], key, value)
    install(monkeypatch, gpus, lambda a, b: pynvml.NVML_TOPOLOGY_NODE if a // 4 == b // 4 else pynvml.NVML_TOPOLOGY_SYSTEM)
    return gpus


CUBE_MESH = {(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3), (4, 5), (4, 6), (4, 7), (5, 6), (5, 7), (6, 7),
             (0, 4), (1, 5), (2, 6), (3, 7)}


def dgx1(monkeypatch: pytest.MonkeyPatch) -> list[FakeGpu]:
    """DGX-1 (V100) hybrid cube mesh: GPU-to-GPU NVLinks in CUBE_MESH; PCIe pairs (0,1),(2,3).. on one switch."""
    gpus = [FakeGpu(uuid=f"GPU-v100-{i}", bus_id=bus(i), name="Tesla V100-SXM2-32GB", memory=32768 * MIB,
                    numa=i // 4, sm_max=1530, sm=1530, mig=NOT_SUPPORTED) for i in range(8)]
    for a, b in sorted(CUBE_MESH):
        gpus[a].nvlinks.append((gpus[b].bus_id, pynvml.NVML_NVLINK_DEVICE_TYPE_GPU))
        gpus[b].nvlinks.append((gpus[a].bus_id, pynvml.NVML_NVLINK_DEVICE_TYPE_GPU))

    def topology(a: int, b: int) -> int:
        if a // 2 == b // 2:
            return pynvml.NVML_TOPOLOGY_SINGLE
        return pynvml.NVML_TOPOLOGY_NODE if a // 4 == b // 4 else pynvml.NVML_TOPOLOGY_SYSTEM

    install(monkeypatch, gpus, topology)
    return gpus
