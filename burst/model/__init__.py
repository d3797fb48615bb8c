"""The domain model: the one vocabulary every burst subsystem speaks.

Everything here is immutable (frozen dataclasses) and free of I/O. Providers,
policies, pools and forecasting exchange these types, never SDK objects.
Times are timezone-aware UTC datetimes, durations are seconds, money is USD.

One module per thing modelled: `base` (identifiers, units), `nodes` (groups,
nodes, their lifecycle table, offerings, provider events), `gpus` (a node's
GPUs and topology), `jobs`, `services`, `policy` (a tenant's policy),
`forecasts` (demand series and forecasts), `plans` (actions, holds, advice)
and `snapshot` (the planner's view of one instant). Import from `burst.model`.
"""

from __future__ import annotations

from burst.model.base import (
    GroupId,
    JobId,
    NodeId,
    TenantName,
    hours_between,
)
from burst.model.forecasts import (
    ALL_TENANTS,
    ANY_MODEL,
    QUANTILES,
    DemandPoint,
    Forecast,
    RateForecast,
    SpecialEvent,
)
from burst.model.gpus import (
    GPU_LINK_ORDER,
    Gpu,
    GpuHealth,
    GpuLink,
    GpuPairLink,
    GpuSharing,
    NodeGpus,
)
from burst.model.jobs import (
    JOB_TRANSITIONS,
    TERMINAL_JOB_STATES,
    Job,
    JobState,
    gpu_demand_of,
)
from burst.model.nodes import (
    LIVE_NODE_STATES,
    NODE_PATHS,
    NODE_STATE_TIMEOUT_S,
    NODE_TRANSITIONS,
    CapacityType,
    EventKind,
    GpuShape,
    InvalidTransition,
    Node,
    NodeGroup,
    NodeState,
    Offering,
    PowerSaving,
    ProviderEvent,
    Tier,
    Transition,
    WarmPoolSettings,
    WarmState,
)
from burst.model.plans import (
    JOB_ACTION_KINDS,
    UTILISATION_RED,
    UTILISATION_YELLOW,
    Action,
    ActionKind,
    Hold,
    Plan,
    SteadyAdvice,
    utilisation_status,
)
from burst.model.policy import (
    DEFAULT_POLICY_NAME,
    Budget,
    DisruptionPolicy,
    HotPoolPolicy,
    Policy,
    PrescalePolicy,
    SpotPolicy,
    SubmitLimits,
    default_policy,
    month_start,
)
from burst.model.services import (
    Service,
    ServiceEvent,
    TokenCost,
    WorkKind,
)
from burst.model.snapshot import (
    Snapshot,
)

__all__ = [
    "ALL_TENANTS",
    "ANY_MODEL",
    "Action",
    "ActionKind",
    "Budget",
    "CapacityType",
    "DEFAULT_POLICY_NAME",
    "DemandPoint",
    "DisruptionPolicy",
    "EventKind",
    "Forecast",
    "GPU_LINK_ORDER",
    "Gpu",
    "GpuHealth",
    "GpuLink",
    "GpuPairLink",
    "GpuShape",
    "GpuSharing",
    "GroupId",
    "Hold",
    "HotPoolPolicy",
    "InvalidTransition",
    "JOB_ACTION_KINDS",
    "JOB_TRANSITIONS",
    "Job",
    "JobId",
    "JobState",
    "LIVE_NODE_STATES",
    "NODE_PATHS",
    "NODE_STATE_TIMEOUT_S",
    "NODE_TRANSITIONS",
    "Node",
    "NodeGpus",
    "NodeGroup",
    "NodeId",
    "NodeState",
    "Offering",
    "Plan",
    "Policy",
    "PowerSaving",
    "PrescalePolicy",
    "ProviderEvent",
    "QUANTILES",
    "RateForecast",
    "Service",
    "ServiceEvent",
    "Snapshot",
    "SpecialEvent",
    "SpotPolicy",
    "SteadyAdvice",
    "SubmitLimits",
    "TERMINAL_JOB_STATES",
    "TenantName",
    "Tier",
    "TokenCost",
    "Transition",
    "UTILISATION_RED",
    "UTILISATION_YELLOW",
    "WarmPoolSettings",
    "WarmState",
    "WorkKind",
    "default_policy",
    "gpu_demand_of",
    "hours_between",
    "month_start",
    "utilisation_status",
]
