"""Finding burst's node groups in an AWS account: Auto Scaling group tags, or Terraform outputs.

Tags (DESIGN.md's discovery vocabulary), set by the Terraform node-group
module on the Auto Scaling group (propagated to its instances):

    burst:cluster        the cluster id (only groups of this cluster are managed)
    burst:tier           elastic (AWS is cloud capacity)
    burst:capacity-type  on_demand | spot
    burst:gpu-model      e.g. A100 (optional: else the instance type's GpuInfo name)
    burst:boot-latency   seconds from launch to ready (optional)

Or a `terraform output -json` file: every output whose value is a
`burst_node_group` object (or a list of them) with `provider` "aws", in
DESIGN.md's schema `{id, provider, region, zone(s), tier, capacity_type,
gpu_model, gpus_per_node, instance_types, min_size, max_size, warm_pool}`;
`id` is the Auto Scaling group's name. A `burst_controller` output gives the
cluster and the events queue URL.

The functions here are pure: they read API responses and files' JSON, and
return `GroupSpec`s; the provider makes the calls.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from burst.model import CapacityType, Tier, WarmState

log = logging.getLogger("burst.providers.aws")

CLUSTER_TAG = "burst:cluster"
TIER_TAG = "burst:tier"
CAPACITY_TAG = "burst:capacity-type"
GPU_MODEL_TAG = "burst:gpu-model"
BOOT_LATENCY_TAG = "burst:boot-latency"
GROUP_TAG = "burst:group"
ASG_NAME_TAG = "aws:autoscaling:groupName"


class DiscoveryError(ValueError):
    """A node group that cannot be managed as described (the message names it and the fix)."""


@dataclass(frozen=True)
class GroupSpec:
    """What burst knows about one Auto Scaling group before asking EC2 about its instance types."""

    asg_name: str
    tier: Tier
    capacity_type: CapacityType
    instance_types: tuple[str, ...]
    zones: tuple[str, ...]
    min_size: int
    max_size: int
    desired: int
    mixed: bool
    gpu_model: str | None = None
    gpus_per_node: int | None = None
    boot_latency_s: float | None = None
    warm_pool: Mapping[str, Any] = field(default_factory=dict)


def tags_of(asg: Mapping[str, Any]) -> dict[str, str]:
    return {str(t["Key"]): str(t.get("Value", "")) for t in asg.get("Tags", [])}


def launch_template_ref(asg: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The group's launch template specification (plain or inside a mixed instances policy)."""
    if asg.get("LaunchTemplate"):
        return dict(asg["LaunchTemplate"])
    mixed = asg.get("MixedInstancesPolicy") or {}
    spec = (mixed.get("LaunchTemplate") or {}).get("LaunchTemplateSpecification")
    return dict(spec) if spec else None


def override_types(asg: Mapping[str, Any]) -> tuple[str, ...]:
    """Instance types a mixed instances policy lists (its overrides), in order."""
    mixed = asg.get("MixedInstancesPolicy") or {}
    overrides = (mixed.get("LaunchTemplate") or {}).get("Overrides") or []
    return tuple(str(o["InstanceType"]) for o in overrides if o.get("InstanceType"))


def spec_from_asg(asg: Mapping[str, Any], template_type: str | None, cluster: str) -> GroupSpec | None:
    """The spec an ASG's tags describe, or None (with a logged reason) when it is not a managed group."""
    name = str(asg["AutoScalingGroupName"])
    tags = tags_of(asg)
    if tags.get(CLUSTER_TAG) != cluster:
        return None
    try:
        tier = Tier(tags.get(TIER_TAG, Tier.ELASTIC.value))
        capacity = CapacityType(tags.get(CAPACITY_TAG, ""))
    except ValueError:
        log.warning(
            "skipping Auto Scaling group: bad burst tags",
            extra={"group": name, "why": f"{TIER_TAG}={tags.get(TIER_TAG)!r} {CAPACITY_TAG}={tags.get(CAPACITY_TAG)!r}; "
                   "use tier elastic and capacity type on_demand or spot"},
        )
        return None
    if tier is not Tier.ELASTIC or capacity is CapacityType.ONPREM:
        log.warning("skipping Auto Scaling group: AWS groups are elastic on_demand or spot", extra={"group": name})
        return None
    types = override_types(asg) or ((template_type,) if template_type else ())
    if not types:
        log.warning("skipping Auto Scaling group: no instance type in its launch template", extra={"group": name})
        return None
    boot = tags.get(BOOT_LATENCY_TAG)
    return GroupSpec(
        asg_name=name,
        tier=tier,
        capacity_type=capacity,
        instance_types=types,
        zones=tuple(str(z) for z in asg.get("AvailabilityZones", [])),
        min_size=int(asg["MinSize"]),
        max_size=int(asg["MaxSize"]),
        desired=int(asg["DesiredCapacity"]),
        mixed=bool(asg.get("MixedInstancesPolicy")),
        gpu_model=tags.get(GPU_MODEL_TAG) or None,
        boot_latency_s=float(boot) if boot else None,
    )


def terraform_groups(path: Path) -> tuple[list[Mapping[str, Any]], Mapping[str, Any]]:
    """The aws `burst_node_group` objects and the `burst_controller` object of a `terraform output -json` file."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise DiscoveryError(f"{path}: cannot read terraform outputs ({exc}); run `terraform output -json > {path}`") from None
    if not isinstance(doc, dict):
        raise DiscoveryError(f"{path}: not a `terraform output -json` object")
    groups: list[Mapping[str, Any]] = []
    controller: Mapping[str, Any] = {}
    for name, output in doc.items():
        value = output.get("value") if isinstance(output, dict) and "value" in output else output
        if name == "burst_controller" and isinstance(value, dict):
            controller = value
            continue
        for item in node_group_objects(value):
            if item.get("provider") == "aws":
                groups.append(item)
    return groups, controller


def node_group_objects(value: Any) -> Iterator[Mapping[str, Any]]:
    """The `burst_node_group`-shaped objects (an id and a capacity type) anywhere inside a terraform output value."""
    if isinstance(value, dict):
        if "id" in value and "capacity_type" in value:
            yield value
        else:
            for v in value.values():
                yield from node_group_objects(v)
    elif isinstance(value, list):
        for v in value:
            yield from node_group_objects(v)


def spec_from_terraform(doc: Mapping[str, Any], asg: Mapping[str, Any] | None, source: str) -> GroupSpec:
    """The spec of one `burst_node_group` output (its ASG, when found, fills zones and the desired size)."""
    gid = str(doc.get("id", ""))
    where = f"{source}: burst_node_group {gid or '?'}"
    try:
        tier = Tier(str(doc.get("tier", "elastic")))
        capacity = CapacityType(str(doc["capacity_type"]))
        types = tuple(str(t) for t in doc.get("instance_types") or ())
        zones_raw = doc.get("zones", doc.get("zone", ()))
        zones = (zones_raw,) if isinstance(zones_raw, str) else tuple(str(z) for z in zones_raw or ())
        min_size, max_size = int(doc.get("min_size", 0)), int(doc["max_size"])
    except (KeyError, ValueError, TypeError) as exc:
        raise DiscoveryError(f"{where}: {exc}; see DESIGN.md's burst_node_group schema") from None
    if not gid or not types:
        raise DiscoveryError(f"{where}: id and instance_types are required")
    if asg is None:
        raise DiscoveryError(f"{where}: no Auto Scaling group named {gid!r} in this region; run terraform apply")
    warm = doc.get("warm_pool") if isinstance(doc.get("warm_pool"), dict) else {}
    return GroupSpec(
        asg_name=gid,
        tier=tier,
        capacity_type=capacity,
        instance_types=types,
        zones=zones or tuple(str(z) for z in asg.get("AvailabilityZones", [])),
        min_size=min_size,
        max_size=max_size,
        desired=int(asg["DesiredCapacity"]),
        mixed=bool(asg.get("MixedInstancesPolicy")),
        gpu_model=str(doc["gpu_model"]) if doc.get("gpu_model") else None,
        gpus_per_node=int(doc["gpus_per_node"]) if doc.get("gpus_per_node") else None,
        warm_pool=warm or {},
    )


def gpu_info(instance_type: Mapping[str, Any]) -> tuple[str, int, float] | None:
    """(model, GPUs, GiB per GPU) from one `describe_instance_types` entry, None without GPUs."""
    info = instance_type.get("GpuInfo") or {}
    gpus = info.get("Gpus") or []
    if not gpus:
        return None
    first = gpus[0]
    count = sum(int(g.get("Count", 0)) for g in gpus)
    memory = float((first.get("MemoryInfo") or {}).get("SizeInMiB", 0)) / 1024.0
    return str(first.get("Name", "")), count, memory


def warm_state_of(pool_state: str | None) -> WarmState:
    """burst's warm state for an ASG warm pool's PoolState."""
    return {"Running": WarmState.RUNNING, "Hibernated": WarmState.HIBERNATED}.get(pool_state or "", WarmState.STOPPED)


def pool_state_of(state: WarmState) -> str:
    """The ASG PoolState for a burst warm state (POWERED_OFF is on-prem only)."""
    return {WarmState.RUNNING: "Running", WarmState.HIBERNATED: "Hibernated", WarmState.STOPPED: "Stopped"}[state]


def names(groups: Sequence[GroupSpec]) -> list[str]:
    return [g.asg_name for g in groups]
