"""The provider protocol every backend implements, and the typed errors it raises.

A provider is a thin, side-effecting adapter between burst and one backend (an
AWS account, a GCP project, an on-prem rack, the simulator). Only the actuator
calls the mutating methods; the reconcile loop calls the read methods once per
tick after `refresh()`.

Contract shared by every method (each docstring adds its own):

* **Asynchronous.** Mutating calls record an intent and return; their results
  (nodes booting, nodes gone) are observed on a later `refresh()`, never
  returned.
* **Idempotent by key.** Every mutating call carries a `key` derived from the
  action. A key the provider has already applied (per method) is a no-op, so a
  retry after a crash between "sent" and "recorded" never doubles a launch. A
  call that raised before applying anything does not consume its key. To issue
  the same request again on purpose (e.g. retrying terminate until NotFound),
  use a new key.
* **Eventually consistent listings.** `nodes()` may lag the provider's own
  view: a node just launched can be missing for a while. Sizes (`target()`) are
  the provider's record of what was asked and are what burst counts, together
  with booting capacity, so a stale listing never causes a second launch.
* **Typed errors.** SDK exceptions never leave the provider module; they are
  mapped onto `ProviderError` subclasses below, each saying what the caller does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol, TypeAlias, runtime_checkable

from burst.model import Node, NodeGroup, NodeId, Offering, ProviderEvent, WarmState

Clock: TypeAlias = Callable[[], datetime]
"""Returns the current time (timezone-aware UTC). Injected so tests and the simulator control time."""


class ProviderError(Exception):
    """Base of every error a provider raises on purpose (SDK errors are mapped onto subclasses)."""


class InsufficientCapacity(ProviderError):
    """The backend cannot supply the nodes asked for right now (EC2 ICE, GCE ZONE_RESOURCE_POOL_EXHAUSTED).

    Nothing was applied. The planner tries another group or offering on the
    next tick, and this offering is avoided for a cooldown.
    """


class QuotaExceeded(ProviderError):
    """An account/project quota (vCPUs, GPUs, instances) forbids the size asked for.

    Nothing was applied. The group is capped at its current size until the
    quota changes; the planner plans around it.
    """


class NotFound(ProviderError):
    """The group or node named does not exist (or no longer does).

    On `terminate` this means the node is already gone: the caller treats it as
    success (terminate is retried until NotFound). On any other call it means
    burst's view of the groups is stale: rediscover them.
    """


class NotSupported(ProviderError):
    """The backend cannot do this for this group (e.g. warm pools on Spot, hibernation of GPU types).

    The caller skips the capability for that group (the planner filters on it)
    and does not retry.
    """


class CredentialsError(ProviderError):
    """The provider's credentials are missing, expired or lack a permission.

    The provider is marked unhealthy and nothing is planned on it until a
    later refresh succeeds; the message names the credential or permission.
    """


class InvalidTarget(ProviderError, ValueError):
    """A size outside the group's [min_size, max_size] (or negative). A bug in the caller: nothing was applied."""


@runtime_checkable
class Provider(Protocol):
    """One backend's node groups behind one interface (see the module docstring for the shared contract)."""

    name: str
    """Short, stable name of this provider instance (matches `NodeGroup.provider`)."""

    def node_groups(self) -> Sequence[NodeGroup]:
        """The node groups this provider manages, discovered by tags or Terraform outputs.

        Synchronous and read-only. Raises CredentialsError.
        """
        ...

    def offerings(self, group_id: str) -> Sequence[Offering]:
        """What `group_id` can launch: instance type, zone, capacity type, USD/hour, availability.

        An offering known to be failing right now has `available=False`.
        Synchronous and read-only. Raises NotFound (unknown group), CredentialsError.
        """
        ...

    def nodes(self) -> Mapping[NodeId, Node]:
        """Every non-terminated node of every group, warm-pool nodes included, by id.

        Eventually consistent: a newly launched node may be missing for a
        provider-documented delay, and states may lag. Count capacity from
        `target()`, not from this listing. Raises CredentialsError.
        """
        ...

    def target(self, group_id: str) -> int:
        """The desired size of `group_id` as the provider records it (ASG DesiredCapacity, MIG targetSize).

        Immediately consistent with the last applied `set_target`/`terminate`.
        Warm-pool nodes are not included. Raises NotFound, CredentialsError.
        """
        ...

    def set_target(self, group_id: str, size: int, *, key: str) -> None:
        """Ask for `group_id` to have `size` serving nodes (absolute, not a delta).

        Asynchronous: nodes are launched (from the warm pool first, where there
        is one) or removed by the backend afterwards; observe them through
        `nodes()`. Idempotent by `key`.

        Raises NotFound (unknown group); InvalidTarget (size outside
        [min_size, max_size]); InsufficientCapacity / QuotaExceeded (the group
        cannot get that many nodes: nothing is applied); CredentialsError.
        """
        ...

    def set_warm_pool(self, group_id: str, size: int, state: WarmState, *, key: str) -> None:
        """Keep `size` prepared nodes in WARM(`state`) beyond the target of `group_id`.

        Asynchronous: nodes are prepared (booted, then stopped/hibernated) or
        removed afterwards. Idempotent by `key`. A warm node is consumed first
        when the target grows.

        Raises NotFound; InvalidTarget (negative size); NotSupported (no warm
        pools for this group, or not in that state); InsufficientCapacity;
        CredentialsError.
        """
        ...

    def warm_pool(self, group_id: str) -> tuple[int, WarmState]:
        """The warm-pool size and state last asked of `group_id` (0 and its configured state if never). Raises NotFound."""
        ...

    def terminate(self, node_ids: Sequence[NodeId], *, key: str) -> None:
        """Terminate exactly these nodes (burst picks victims) and decrement their group's desired size.

        Asynchronous: nodes move to TERMINATING and later disappear from
        `nodes()`. Terminating a node already terminating is a no-op.
        Idempotent by `key`.

        Raises NotFound for ids that are unknown or already terminated, after
        terminating the others in the same call: the caller treats those as
        done (terminate is retried, with a new key, until NotFound).
        Raises CredentialsError.
        """
        ...

    def poll_events(self) -> Sequence[ProviderEvent]:
        """Events since the last poll: interruption notices (with deadline), rebalance, launch failures.

        Drained: each event is returned exactly once, in the order it happened.
        Raises CredentialsError.
        """
        ...

    def refresh(self) -> None:
        """Bring the provider's cached view up to date; called once per tick before the reads.

        Raises CredentialsError (the provider is then unhealthy for this tick).
        """
        ...
