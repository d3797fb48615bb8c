"""The static GPU inventory a node serves from when NVML is unavailable.

Built from the node's `provider: onprem` node group in burst.yaml (passed in as
`burst.model.NodeGroup`s; reading the file is the caller's job): the group's
`gpu_model`, `gpus_per_node` and `gpu_memory_gib`. NVML-less nodes have no
real GPU UUIDs, so each GPU gets a **synthetic** one, `STATIC-<uuid5>`, a
UUIDv5 of (group id, node id, GPU index): stable across restarts and
recognisably not NVIDIA's `GPU-...` form. burst.yaml says nothing about
links, so every pair is unknown, which `NodeGpus.link` reads as SYSTEM (the
worst link), and every GPU is taken as healthy: nothing was measured.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from burst.model import Gpu, GpuHealth, NodeGpus, NodeGroup

ONPREM_PROVIDER = "onprem"

STATIC_UUID_NAMESPACE = uuid.UUID("6b1f3c3e-5d2a-5b8e-9f51-2f4a0c7d9e10")
"""Namespace of the synthetic static-inventory UUIDs. Changing it changes every static GPU's UUID."""

STATIC_UUID_PREFIX = "STATIC-"

STATIC_REASON = "static inventory: not measured (NVML unavailable)"

SOURCE_LABEL = "burst.dev/gpu-source"
GROUP_LABEL = "burst.dev/node-group"


def static_uuid(group_id: str, node_id: str, index: int) -> str:
    """The synthetic, stable UUID of GPU `index` of node `node_id` in group `group_id`."""
    return STATIC_UUID_PREFIX + str(uuid.uuid5(STATIC_UUID_NAMESPACE, f"{group_id}/{node_id}/{index}"))


@dataclass(frozen=True)
class StaticInventory:
    """The static inventory chosen for a node, or None with `note` saying why there is none."""

    node: NodeGpus | None
    group_id: str | None
    note: str


def static_inventory(groups: Sequence[NodeGroup], node_id: str, group_id: str | None = None) -> StaticInventory:
    """The node's GPUs as burst.yaml declares them: group `group_id`, else the only onprem group.

    With several onprem groups and no `group_id`, the first is used and the note
    says so (and how to choose); with none, there is no inventory.
    """
    onprem = [g for g in groups if g.provider == ONPREM_PROVIDER]
    if group_id is not None:
        chosen = [g for g in onprem if g.id == group_id]
        if not chosen:
            known = ", ".join(g.id for g in onprem) or "none"
            return StaticInventory(None, None, f"no provider: onprem node group {group_id!r} in burst.yaml (onprem groups: {known})")
        group = chosen[0]
    elif not onprem:
        return StaticInventory(None, None, "no provider: onprem node group in burst.yaml to build a static inventory from")
    else:
        group = onprem[0]
    shape = group.shape
    gpus = tuple(
        Gpu(
            uuid=static_uuid(group.id, node_id, i),
            index=i,
            model=shape.gpu_model,
            memory_mib=int(round(shape.gpu_memory_gib * 1024)),
            health=GpuHealth.HEALTHY,
            health_reason=STATIC_REASON,
        )
        for i in range(shape.gpus_per_node)
    )
    memory = f" {shape.gpu_memory_gib:g} GiB" if shape.gpu_memory_gib else ""
    note = f"group {group.id}: {shape.gpus_per_node} x {shape.gpu_model}{memory}, synthetic UUIDs, links unknown (SYS)"
    if group_id is None and len(onprem) > 1:
        note += f" (first of {len(onprem)} onprem groups; choose with --group)"
    node = NodeGpus(node_id=node_id, gpus=gpus, links=(), labels={SOURCE_LABEL: "static", GROUP_LABEL: group.id})
    return StaticInventory(node, group.id, note)
