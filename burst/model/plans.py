"""What one tick decides: typed actions, the holds that explain inaction, steady-tier advice."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from burst.model.base import JobId, NodeId, TenantName
from burst.model.nodes import WarmState


class ActionKind(StrEnum):
    """What an action asks the actuator (or job source) to do."""

    SCALE_UP = "scale_up"
    SCALE_DOWN = "scale_down"
    TERMINATE_NODES = "terminate_nodes"
    SET_WARM_POOL = "set_warm_pool"
    PLACE_JOB = "place_job"
    REQUEST_CHECKPOINT = "request_checkpoint"
    EVICT_JOB = "evict_job"
    RECLAIM_JOB = "reclaim_job"
    REQUEUE_JOB = "requeue_job"


JOB_ACTION_KINDS = frozenset({
    ActionKind.PLACE_JOB, ActionKind.REQUEST_CHECKPOINT, ActionKind.EVICT_JOB, ActionKind.RECLAIM_JOB,
    ActionKind.REQUEUE_JOB,
})
"""Actions on a job: their `count` is GPUs. Every other action's is nodes."""


@dataclass(frozen=True)
class Action:
    """One typed step of a plan, with the reason a reader of `burst plan` sees.

    `target` is the group, node or job acted on; `count` is how many nodes
    (scale actions) or GPUs (job actions) it concerns; `size` is the absolute
    group size asked for, where it applies. `step` names the planner step that
    produced it.
    """

    kind: ActionKind
    target: str
    reason: str
    step: str
    count: int | None = None
    size: int | None = None
    node_ids: tuple[NodeId, ...] = ()
    tenant: TenantName | None = None
    warm_state: WarmState | None = None
    gpu_uuids: tuple[str, ...] = ()
    id: str = ""

    @property
    def count_unit(self) -> str:
        """What `count` counts: `gpus` for an action on a job, `nodes` for one on a group or its nodes."""
        return "gpus" if self.kind in JOB_ACTION_KINDS else "nodes"

    @property
    def key(self) -> str:
        """Idempotency key derived from what the action does (stable across restarts)."""
        parts = [self.kind.value, self.target]
        if self.size is not None:
            parts.append(f"size={self.size}")
        if self.node_ids:
            parts.append("nodes=" + ",".join(sorted(self.node_ids)))
        if self.warm_state is not None:
            parts.append(f"warm={self.warm_state.value}")
        return ":".join(parts)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind.value, "target": self.target}
        if self.count is not None:
            out["count"] = self.count
            out["count_unit"] = self.count_unit
        if self.size is not None:
            out["size"] = self.size
        if self.node_ids:
            out["node_ids"] = list(self.node_ids)
        if self.gpu_uuids:
            out["gpu_uuids"] = list(self.gpu_uuids)
        if self.tenant is not None:
            out["tenant"] = self.tenant
        if self.warm_state is not None:
            out["warm_state"] = self.warm_state.value
        out["step"] = self.step
        out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class Hold:
    """A non-decision: something the planner considered and did not do, and why."""

    subject: str
    reason: str
    step: str
    tenant: TenantName | None = None
    job_ids: tuple[JobId, ...] = ()  # the jobs a hold about several of them covers (`burst explain JOB` finds it)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"subject": self.subject, "step": self.step, "reason": self.reason}
        if self.tenant is not None:
            out["tenant"] = self.tenant
        if self.job_ids:
            out["job_ids"] = list(self.job_ids)
        return out


UTILISATION_YELLOW = 0.6
UTILISATION_RED = 0.8
"""Steady-tier status bands: green below 60% forecast utilisation, yellow to 80%, red above."""


def utilisation_status(utilisation: float) -> str:
    """Decide the steady tier's traffic light for a forecast utilisation (green / yellow / red)."""
    if utilisation > UTILISATION_RED:
        return "red"
    return "yellow" if utilisation >= UTILISATION_YELLOW else "green"


@dataclass(frozen=True)
class SteadyAdvice:
    """The steady (on-prem) tier's capacity recommendation for one GPU model over a planning window.

    `recommended_gpus` is the P50 over the window of the forecast P50 demand
    (summed over tenants): GPUs demanded at least half the time, which on-prem
    serves at its lowest unit cost. `utilisation` is the mean forecast share of
    today's `steady_gpus` that demand would keep busy (1.0 when there are none
    and demand is positive); `status` is its traffic light. The three are None
    when today's steady GPUs are not known (a series file forecast alone).
    With prices, `cost_optimal_gpus` is the size that minimises owned cost
    plus on-demand overflow (burst.planner.steady), and the year figures
    price both sizes.
    """

    gpu_model: str
    steady_gpus: int | None
    recommended_gpus: int
    utilisation: float | None
    utilisation_at_recommended: float
    status: str | None
    window_start: datetime
    window_end: datetime
    cost_optimal_quantile: float | None = None  # 1 - owned / on-demand USD per GPU-hour (None: prices not known)
    cost_optimal_gpus: int | None = None  # that quantile of the forecast P50 demand over the window
    year_usd_at_recommended: float | None = None  # a year of owning `recommended_gpus`, demand above on-demand
    year_usd_at_cost_optimal: float | None = None  # the same at `cost_optimal_gpus`

    def to_json(self) -> dict[str, Any]:
        def usd(v: float | None) -> float | None:
            return None if v is None else round(v, 2)

        return {
            "gpu_model": self.gpu_model,
            "steady_gpus": self.steady_gpus,
            "recommended_gpus": self.recommended_gpus,
            "utilisation": None if self.utilisation is None else round(self.utilisation, 4),
            "utilisation_at_recommended": round(self.utilisation_at_recommended, 4),
            "status": self.status,
            "window_start": self.window_start.isoformat(),
            "window_end": self.window_end.isoformat(),
            "cost_optimal_quantile": None if self.cost_optimal_quantile is None else round(self.cost_optimal_quantile, 4),
            "cost_optimal_gpus": self.cost_optimal_gpus,
            "year_usd_at_recommended": usd(self.year_usd_at_recommended),
            "year_usd_at_cost_optimal": usd(self.year_usd_at_cost_optimal),
        }


@dataclass(frozen=True)
class Plan:
    """What one tick decided: ordered actions, the holds that explain inaction, and steady-tier advice."""

    id: str
    at: datetime
    actions: tuple[Action, ...]
    holds: tuple[Hold, ...] = ()
    advice: tuple[SteadyAdvice, ...] = ()

    def of_kind(self, *kinds: ActionKind) -> list[Action]:
        return [a for a in self.actions if a.kind in kinds]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "actions": [a.to_json() for a in self.actions],
            "holds": [h.to_json() for h in self.holds],
            "steady_tier": [a.to_json() for a in self.advice],
        }
