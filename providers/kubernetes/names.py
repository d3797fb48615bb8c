"""The names burst reads and writes on Kubernetes objects: labels, taints, annotations, the GPU resource.

Pod annotations (set by whoever writes the pod spec, see deploy/kubernetes/example-pod.yaml):

* `burst.dev/fault-tolerant: "true"`: the job resumes from a checkpoint after an eviction;
* `burst.dev/checkpoint-interval: "10m"`: how often it checkpoints by itself;
* `burst.dev/checkpoint-duration: "45s"`: how long one checkpoint takes (burst asks for one on a spot
  notice only when it fits before the node goes);
* `burst.dev/last-checkpoint: "<RFC 3339 time>"`: when it last wrote one (the job keeps it current).

The checkpoint channel on a pod (burst writes the request, the job or its sidecar answers):

* burst sets `burst.dev/checkpoint-request: <request id>` and `burst.dev/checkpoint-deadline: <RFC 3339>`;
* the job writes its checkpoint, then sets `burst.dev/checkpoint-ack: <request id>`,
  `burst.dev/checkpoint-id: <the new checkpoint's id>` and `burst.dev/last-checkpoint`;
* at the deadline, acknowledged or not, burst evicts the pod.

Services (`burst.workloads.kube_replicas`): a Deployment annotated `burst.dev/service: <name>` runs that
service of its namespace's tenant; `burst.dev/service-mode: replicas|capacity` says whether burst sets its
replicas or keeps placeholder pods (label `burst.dev/placeholder: <name>`) as GPU capacity for it.

Node labels: `burst.dev/tier`, `burst.dev/capacity-type`, `burst.dev/node-group` (DESIGN.md's vocabulary).
"""

from __future__ import annotations

GPU_RESOURCE = "nvidia.com/gpu"

PREFIX = "burst.dev/"
FAULT_TOLERANT = PREFIX + "fault-tolerant"
CHECKPOINT_INTERVAL = PREFIX + "checkpoint-interval"
CHECKPOINT_DURATION = PREFIX + "checkpoint-duration"
LAST_CHECKPOINT = PREFIX + "last-checkpoint"
CHECKPOINT_REQUEST = PREFIX + "checkpoint-request"
CHECKPOINT_DEADLINE = PREFIX + "checkpoint-deadline"
CHECKPOINT_ACK = PREFIX + "checkpoint-ack"
CHECKPOINT_ID = PREFIX + "checkpoint-id"
JOB_ID = PREFIX + "job-id"
GPU_MODEL = PREFIX + "gpu-model"
TENANT = PREFIX + "tenant"
SERVICE = PREFIX + "service"
SERVICE_MODE = PREFIX + "service-mode"
PLACEHOLDER = PREFIX + "placeholder"

TIER = PREFIX + "tier"
CAPACITY_TYPE = PREFIX + "capacity-type"
NODE_GROUP = PREFIX + "node-group"
CORDONED_BY = PREFIX + "cordoned-by"
"""Node annotation: why burst cordoned the node (`hot-pool`, `drain`); burst uncordons only what it cordoned."""

SPOT_TAINT = {"key": PREFIX + "spot", "value": "true", "effect": "NoSchedule"}
"""Spot nodes carry this taint: only pods that tolerate an interruption land there."""

SMP = "application/strategic-merge-patch+json"
"""Every PATCH burst sends is a strategic merge patch (annotations merge by name; a node's taints are one atomic list, so burst sends the whole list)."""
