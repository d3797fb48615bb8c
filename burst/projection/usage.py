"""Metering from the cost ledger: GPU-hours per tenant by cost line and GPU model, warm-pool node-, GPU- and
storage-hours, and network GB (reported as unknown); and from the job-loss ledger, per tenant, the runs
interrupted and evicted, the GPU-hours of work they lost and the GPU-hours spent checkpointing.

A ledger row carries the GPU-hours a tenant's jobs held on one group's nodes
(`CostEntry.gpu_hours`); the group names the GPU model. Warm (hot-pool) rows
belong to no tenant and carry only USD, so warm-pool node-hours are derived
from the group's configured warm state (`warm_pool.state`): USD / the group's
full USD per node-hour for a pool kept running, USD / its standby USD per
node-hour otherwise (the ledger does not record each node's warm state, so a
pool is assumed to hold nodes in the state its group configures). Warm GPU-hours
are those node-hours × the group's GPUs per node.

Warm-pool storage: a stopped or hibernated cloud node still bills its root
volume, so ``storage_gb_hours`` = the stopped (and hibernated) node-hours ×
the group's root volume size. Groups do not carry the size; it is
`ROOT_VOLUME_GB` (200, the default of the Terraform node-group modules'
``root_volume_size_gib`` on AWS and ``boot_disk_size_gb`` on GCP) unless the
caller says otherwise (``burst usage --root-volume-gb``). Powered-off on-prem
nodes and running warm nodes add no storage-hours here (on-prem disks are
owned; a running node's volume is billed with the running node).

Network: cross-zone and egress GB are ``null``. No provider reports per-node
or per-tenant traffic to burst today, so there is nothing to meter and no
figure is estimated.

Rows of groups the config no longer has count under GPU model ``unknown``;
their warm hours cannot be derived and are left out (`unpriced_hot_pool_usd`
says how much).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from burst.catalog import ROOT_VOLUME_GB, is_onprem
from burst.model import NodeGroup, WarmState
from burst.state import CostEntry, LossTotals

UNKNOWN_MODEL = "unknown"

"""Root volume per cloud node, GB: the Terraform node-group modules' default (module doc)."""

STORAGE_STATES = frozenset({WarmState.STOPPED, WarmState.HIBERNATED})
"""Warm states in which a cloud node bills its root volume and no instance."""

NETWORK_NOTE = ("null: no provider reports cross-zone or egress traffic to burst, so it is not metered "
                "(no figure is estimated)")

_NUMBER = {"type": "number"}
_BY = {"type": "object", "additionalProperties": _NUMBER}
_NETWORK = {"type": "null", "description": NETWORK_NOTE}

USAGE_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "burst usage --json",
    "type": "object",
    "required": ["since", "until", "tenants", "idle", "warm_pool", "total_usd", "network"],
    "properties": {
        "since": {"type": "string", "description": "ISO instant the window starts at (inclusive)"},
        "until": {"type": ["string", "null"], "description": "ISO instant the window ends at (exclusive); null: now"},
        "tenants": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["gpu_hours", "usd", "by_tier", "by_gpu_model", "cross_zone_gb", "egress_gb",
                             "lost_gpu_hours", "interruptions", "evictions", "checkpoint_gpu_hours"],
                "properties": {
                    "gpu_hours": {**_NUMBER, "description": "GPU-hours the tenant's jobs held"},
                    "usd": {**_NUMBER, "description": "USD charged to the tenant (held GPUs at the node's rate)"},
                    "by_tier": {**_BY, "description": "GPU-hours per cost line (steady, elastic_on_demand, elastic_spot)"},
                    "by_gpu_model": {**_BY, "description": "GPU-hours per GPU model ('unknown': group no longer configured)"},
                    "cross_zone_gb": _NETWORK,
                    "egress_gb": _NETWORK,
                    "lost_gpu_hours": {**_NUMBER, "description": "GPU-hours of work lost beyond the last checkpoint "
                                       "(interruptions and evictions): seconds lost x the job's GPUs / 3600"},
                    "interruptions": {"type": "integer", "description": "runs requeued because their nodes were lost"},
                    "evictions": {"type": "integer", "description": "runs a plan evicted or requeued"},
                    "checkpoint_gpu_hours": {**_NUMBER, "description": "GPU-hours spent on checkpoints plans asked of "
                                             "running jobs: checkpoint duration x the job's GPUs / 3600"},
                },
            },
        },
        "idle": {
            "type": "object",
            "required": ["gpu_hours", "usd", "by_tier"],
            "description": "capacity paid for but held by no job: on-prem GPUs owned and idle, cloud nodes booting or "
                           "idle before their release (the fleet's, on no tenant; left out with --tenant)",
            "properties": {
                "gpu_hours": {**_NUMBER, "description": "idle GPU-hours paid for"},
                "usd": {**_NUMBER, "description": "USD of those GPU-hours"},
                "by_tier": {**_BY, "description": "idle USD per cost line (steady, elastic_on_demand, elastic_spot)"},
            },
        },
        "total_usd": {**_NUMBER, "description": "the window's whole spend: the tenants' USD, idle capacity and warm "
                      "pools (with no --tenant, what the run's summary says it spent over the same window)"},
        "warm_pool": {
            "type": "object",
            "required": ["node_hours", "gpu_hours", "stopped_node_hours", "storage_gb_hours", "usd", "unpriced_usd"],
            "properties": {
                "node_hours": {**_NUMBER, "description": "warm node-hours (USD / the rate of the group's warm state)"},
                "gpu_hours": {**_NUMBER, "description": "warm node-hours x GPUs per node"},
                "stopped_node_hours": {**_NUMBER, "description": "warm node-hours of cloud groups kept stopped or hibernated"},
                "storage_gb_hours": {**_NUMBER, "description": "stopped_node_hours x root volume GB (by group)"},
                "root_volume_gb": {**_BY, "description": "the root volume GB assumed per cloud group metered"},
                "usd": {**_NUMBER, "description": "the hot_pool line's USD"},
                "unpriced_usd": {**_NUMBER, "description": "hot_pool USD of groups not in the config (no hours derived)"},
            },
        },
        "network": {
            "type": "object",
            "required": ["cross_zone_gb", "egress_gb"],
            "properties": {"cross_zone_gb": _NETWORK, "egress_gb": _NETWORK},
        },
    },
}
"""The JSON Schema of `burst usage --json` (`burst usage --schema` prints it)."""


@dataclass
class TenantUsage:
    """One tenant's metered use."""

    gpu_hours: float = 0.0
    usd: float = 0.0
    by_tier: dict[str, float] = field(default_factory=dict)
    by_gpu_model: dict[str, float] = field(default_factory=dict)
    losses: LossTotals = field(default_factory=LossTotals)

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu_hours": round(self.gpu_hours, 6),
            "usd": round(self.usd, 6),
            "by_tier": {k: round(v, 6) for k, v in sorted(self.by_tier.items())},
            "by_gpu_model": {k: round(v, 6) for k, v in sorted(self.by_gpu_model.items())},
            "cross_zone_gb": None,
            "egress_gb": None,
            "lost_gpu_hours": round(self.losses.lost_gpu_hours, 6),
            "interruptions": self.losses.interruptions,
            "evictions": self.losses.evictions,
            "checkpoint_gpu_hours": round(self.losses.checkpoint_gpu_hours, 6),
        }


@dataclass
class Usage:
    """Metering of a ledger window: tenants, and the fleet's warm pools."""

    tenants: dict[str, TenantUsage]
    warm_pool_gpu_hours: float
    warm_pool_usd: float
    unpriced_hot_pool_usd: float = 0.0
    warm_pool_node_hours: float = 0.0
    stopped_node_hours: float = 0.0
    storage_gb_hours: float = 0.0
    root_volume_gb: dict[str, float] = field(default_factory=dict)
    idle: TenantUsage = field(default_factory=TenantUsage)
    """Capacity paid for and held by no job (rows on no tenant, the hot pool apart): `by_tier` holds USD here."""

    @property
    def total_usd(self) -> float:
        """The window's whole spend: every tenant's, idle capacity's and the warm pools'."""
        return sum(u.usd for u in self.tenants.values()) + self.idle.usd + self.warm_pool_usd

    def to_json(self) -> dict[str, Any]:
        """The `burst usage --json` object, less `since` and `until` (`USAGE_JSON_SCHEMA`)."""
        return {
            "tenants": {t: u.to_json() for t, u in sorted(self.tenants.items())},
            "idle": {"gpu_hours": round(self.idle.gpu_hours, 6), "usd": round(self.idle.usd, 6),
                     "by_tier": {k: round(v, 6) for k, v in sorted(self.idle.by_tier.items())}},
            "total_usd": round(self.total_usd, 6),
            "warm_pool": {"node_hours": round(self.warm_pool_node_hours, 6),
                          "gpu_hours": round(self.warm_pool_gpu_hours, 6),
                          "stopped_node_hours": round(self.stopped_node_hours, 6),
                          "storage_gb_hours": round(self.storage_gb_hours, 6),
                          "root_volume_gb": dict(sorted(self.root_volume_gb.items())),
                          "usd": round(self.warm_pool_usd, 6),
                          "unpriced_usd": round(self.unpriced_hot_pool_usd, 6)},
            "network": {"cross_zone_gb": None, "egress_gb": None},
        }


def meter(
    rows: Iterable[CostEntry],
    groups: Mapping[str, NodeGroup],
    standby_price: Callable[[NodeGroup], float],
    *,
    tenant: str | None = None,
    group_price: Callable[[NodeGroup], float] | None = None,
    root_volume_gb: Callable[[NodeGroup], float] = lambda group: ROOT_VOLUME_GB,
    losses: Mapping[str, LossTotals] | None = None,
    gpu_models: Mapping[str, str] | None = None,
) -> Usage:
    """The usage in `rows` (module doc); with `tenant`, only that tenant's (warm pools are the fleet's).

    `group_price` prices a node of a group whose warm pool is kept running
    (without it, such rows count as unpriced). `losses` are the job-loss
    ledger's totals per tenant (`Store.loss_totals`) over the same window; a
    tenant with losses and no cost rows is listed too. `gpu_models` names the
    GPU model of groups not in `groups` (as the state's last run recorded them).
    """
    tenants: dict[str, TenantUsage] = defaultdict(TenantUsage)
    idle = TenantUsage()
    warm_gh = warm_usd = unpriced = warm_nh = stopped_nh = storage = 0.0
    volumes: dict[str, float] = {}
    for row in rows:
        group = groups.get(row.group_id or "")
        if row.line == "hot_pool" and row.tenant is None:
            warm_usd += row.usd
            state = group.warm_pool.state if group is not None else None
            if group is None:
                price = 0.0
            elif state is WarmState.RUNNING:
                price = group_price(group) if group_price is not None else 0.0
            else:
                price = standby_price(group)
            if group is None or price <= 0:
                unpriced += row.usd
                continue
            node_h = row.usd / price
            warm_nh += node_h
            warm_gh += node_h * group.gpus_per_node
            if state in STORAGE_STATES and not is_onprem(group):
                gb = volumes[group.id] = root_volume_gb(group)
                stopped_nh += node_h
                storage += node_h * gb
            continue
        if row.tenant is None:
            if tenant is None:  # the fleet's idle capacity: on no tenant, so not on one asked for
                idle.gpu_hours += row.gpu_hours
                idle.usd += row.usd
                idle.by_tier[row.line] = idle.by_tier.get(row.line, 0.0) + row.usd
            continue
        if tenant is not None and row.tenant != tenant:
            continue
        u = tenants[row.tenant]
        u.gpu_hours += row.gpu_hours
        u.usd += row.usd
        u.by_tier[row.line] = u.by_tier.get(row.line, 0.0) + row.gpu_hours
        if group is not None:
            model = group.shape.gpu_model
        else:
            model = (gpu_models or {}).get(row.group_id or "", UNKNOWN_MODEL)
        u.by_gpu_model[model] = u.by_gpu_model.get(model, 0.0) + row.gpu_hours
    for name, totals in (losses or {}).items():
        if tenant is None or name == tenant:
            tenants[name].losses = totals
    return Usage(dict(tenants), warm_gh, warm_usd, unpriced, warm_nh, stopped_nh, storage, volumes, idle)


__all__ = ["NETWORK_NOTE", "ROOT_VOLUME_GB", "USAGE_JSON_SCHEMA", "TenantUsage", "Usage", "meter"]
