"""Finding burst's node groups in a GCP project: zonal managed instance groups and their instance templates.

A managed instance group (MIG) carries no labels of its own, so burst reads
its discovery labels from the MIG's instance template, on the template's
`properties.labels` (DESIGN.md's vocabulary; values lower-case, as GCP
labels must be). The labels also reach every VM the MIG creates from the
template, which is how a VM the MIG no longer owns is still known to be
burst's (garbage collection):

    burst-cluster        the cluster id (only groups of this cluster are managed)
    burst-tier           elastic (GCP is cloud capacity)
    burst-capacity-type  on_demand | spot (must agree with scheduling.provisioningModel)
    burst-gpu-model      e.g. a100 (optional: else from the accelerators; upper-cased: A100)
    burst-max-size       the group's ceiling (required: a MIG has no maximum of its own)
    burst-min-size       the group's floor (optional, default 0)
    burst-boot-latency   seconds from resize to ready (optional)

The GPU shape comes from the template's `guestAccelerators` (N1 + T4/V100),
or, for accelerator-optimized machine types whose GPUs come with the machine
(A2, A3, G2), from `ACCELERATOR_MACHINES`. The catalog key of an N1 machine
with attached GPUs is `<machine>+<count>x<model>` (e.g. n1-standard-8+1xT4),
as in burst/data/prices.csv.

The functions here are pure: they read values the provider took from API
responses and return `GroupSpec`s.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from burst.model import CapacityType, Tier

log = logging.getLogger("burst.providers.gcp")

CLUSTER_LABEL = "burst-cluster"
TIER_LABEL = "burst-tier"
CAPACITY_LABEL = "burst-capacity-type"
GPU_MODEL_LABEL = "burst-gpu-model"
MIN_SIZE_LABEL = "burst-min-size"
MAX_SIZE_LABEL = "burst-max-size"
BOOT_LATENCY_LABEL = "burst-boot-latency"

ACCELERATOR_TYPES: Mapping[str, tuple[str, float]] = {
    "nvidia-tesla-t4": ("T4", 16.0),
    "nvidia-tesla-v100": ("V100", 16.0),
    "nvidia-tesla-p100": ("P100", 16.0),
    "nvidia-tesla-p4": ("P4", 8.0),
    "nvidia-tesla-a100": ("A100", 40.0),
    "nvidia-a100-80gb": ("A100-80GB", 80.0),
    "nvidia-h100-80gb": ("H100", 80.0),
    "nvidia-h100-mega-80gb": ("H100", 80.0),
    "nvidia-l4": ("L4", 24.0),
}
"""Compute Engine accelerator type names and burst's GPU model (and GiB per GPU) for each."""

ACCELERATOR_MACHINES: Sequence[tuple[str, str, int | None]] = (
    (r"a2-highgpu-(\d+)g", "nvidia-tesla-a100", None),
    (r"a2-megagpu-16g", "nvidia-tesla-a100", 16),
    (r"a2-ultragpu-(\d+)g", "nvidia-a100-80gb", None),
    (r"a3-highgpu-(\d+)g", "nvidia-h100-80gb", None),
    (r"a3-megagpu-8g", "nvidia-h100-mega-80gb", 8),
    (r"g2-standard-(4|8|12|16|32)", "nvidia-l4", 1),
    (r"g2-standard-24", "nvidia-l4", 2),
    (r"g2-standard-48", "nvidia-l4", 4),
    (r"g2-standard-96", "nvidia-l4", 8),
)
"""Accelerator-optimized machine types (GPUs come with the machine): pattern, accelerator type, count
(None: the count is the pattern's number)."""


class DiscoveryError(ValueError):
    """A node group that cannot be managed as described (the message names it and the fix)."""


@dataclass(frozen=True)
class Accelerator:
    """One `guestAccelerators` entry: its accelerator type's name (last path segment) and count."""

    type: str
    count: int


@dataclass(frozen=True)
class GroupSpec:
    """What burst knows about one zonal MIG after reading it and its instance template."""

    mig: str
    zone: str
    template: str
    capacity_type: CapacityType
    machine_type: str
    instance_type: str  # the catalog key (machine type, or machine+NxMODEL for attached GPUs)
    gpu_model: str
    gpus_per_node: int
    gpu_memory_gib: float
    min_size: int
    max_size: int
    target_size: int
    boot_latency_s: float | None = None


def last_segment(url: str) -> str:
    """The name at the end of a Compute API resource URL or partial path."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def region_of_zone(zone: str) -> str:
    """us-central1-a -> us-central1."""
    return zone.rsplit("-", 1)[0]


def gpu_shape(machine_type: str, accelerators: Sequence[Accelerator]) -> tuple[str, str, int, float] | None:
    """(catalog instance type, GPU model, GPUs, GiB per GPU) of a machine type and its accelerators; None without GPUs."""
    attached = [a for a in accelerators if a.count > 0]
    if attached:
        first = attached[0]
        model, memory = ACCELERATOR_TYPES.get(first.type, (first.type.upper(), 0.0))
        count = sum(a.count for a in attached)
        bundled = _bundled(machine_type)
        key = machine_type if bundled is not None else f"{machine_type}+{count}x{model}"
        return key, model, count, memory
    bundled = _bundled(machine_type)
    if bundled is None:
        return None
    accel, count = bundled
    model, memory = ACCELERATOR_TYPES[accel]
    return machine_type, model, count, memory


def _bundled(machine_type: str) -> tuple[str, int] | None:
    for pattern, accel, count in ACCELERATOR_MACHINES:
        m = re.fullmatch(pattern, machine_type)
        if m:
            return accel, count if count is not None else int(m.group(1))
    return None


def spec_from_template(
    *,
    mig: str,
    zone: str,
    template: str,
    target_size: int,
    labels: Mapping[str, str],
    machine_type: str,
    accelerators: Sequence[Accelerator],
    provisioning_model: str,
    cluster: str,
) -> GroupSpec | None:
    """The spec a MIG's template labels describe, or None (with a logged reason) when it is not a managed group."""
    if labels.get(CLUSTER_LABEL) != cluster:
        return None
    spot = provisioning_model.upper() == "SPOT"
    try:
        tier = Tier(labels.get(TIER_LABEL, Tier.ELASTIC.value))
        capacity = CapacityType(labels.get(CAPACITY_LABEL, (CapacityType.SPOT if spot else CapacityType.ON_DEMAND).value))
    except ValueError:
        log.warning("skipping managed instance group: bad burst labels", extra={
            "group": mig, "why": f"{TIER_LABEL}={labels.get(TIER_LABEL)!r} {CAPACITY_LABEL}={labels.get(CAPACITY_LABEL)!r}; "
            "use tier elastic and capacity type on_demand or spot"})
        return None
    if tier is not Tier.ELASTIC or capacity is CapacityType.ONPREM:
        log.warning("skipping managed instance group: GCP groups are elastic on_demand or spot", extra={"group": mig})
        return None
    if (capacity is CapacityType.SPOT) != spot:
        log.warning("skipping managed instance group: its capacity-type label disagrees with the template", extra={
            "group": mig, "why": f"{CAPACITY_LABEL}={capacity.value} but scheduling.provisioningModel="
            f"{provisioning_model or 'STANDARD'}; Spot groups need provisioningModel SPOT"})
        return None
    shape = gpu_shape(machine_type, accelerators)
    if shape is None:
        log.warning("skipping managed instance group: its template has no GPUs",
                    extra={"group": mig, "machine_type": machine_type})
        return None
    try:
        max_size = int(labels[MAX_SIZE_LABEL])
        min_size = int(labels.get(MIN_SIZE_LABEL, "0"))
        boot = labels.get(BOOT_LATENCY_LABEL)
        boot_s = float(boot) if boot else None
    except (KeyError, ValueError):
        log.warning("skipping managed instance group: no usable burst-max-size label", extra={
            "group": mig, "why": f"set {MAX_SIZE_LABEL} (and optionally {MIN_SIZE_LABEL}) on the template's labels"})
        return None
    key, model, count, memory = shape
    gpu_model = labels.get(GPU_MODEL_LABEL)
    return GroupSpec(
        mig=mig,
        zone=zone,
        template=template,
        capacity_type=capacity,
        machine_type=machine_type,
        instance_type=key,
        gpu_model=gpu_model.upper() if gpu_model else model,
        gpus_per_node=count,
        gpu_memory_gib=memory,
        min_size=min_size,
        max_size=max_size,
        target_size=target_size,
        boot_latency_s=boot_s,
    )
