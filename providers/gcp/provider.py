"""`GcpProvider`: burst's node groups as zonal managed instance groups (MIGs), behind the `Provider` protocol.

All calls use google-cloud-compute's own clients over its REST transport,
pointed at `endpoint` when one is given (a local Compute API in tests). How
each protocol method maps onto the Compute API (every call goes through
`errors.Caller`: retries on 429/5xx, typed errors):

* `node_groups` — discovered once, at construction: `instanceGroupManagers.list`
  in each configured zone, and `instanceTemplates.get` of each MIG's template,
  whose `properties.labels` carry burst's labels (see `discovery`). GPU shape
  from the template's guest accelerators or its accelerator-optimized
  machine type. Listed groups (burst.yaml) are read with
  `instanceGroupManagers.get`.
* `refresh` — per group `instanceGroupManagers.get` (targetSize,
  targetStoppedSize) and `listManagedInstances`; per zone `instances.list` of
  the VMs labelled with the cluster (creation times, labels, and VMs no group
  owns, for garbage collection). `nodes()` and `group_state()` answer from
  this view, updated by this provider's own mutating calls.
* `set_target` — `instanceGroupManagers.resize` (absolute).
* `terminate` — `instanceGroupManagers.deleteInstances` of exactly these VMs
  (the MIG lowers its target size with them); a labelled VM no managed group
  owns is deleted with `instances.delete`. Membership is re-read first.
* `set_warm_pool` / `warm_pool` — the MIG's standby pool: `patch` with
  `standbyPolicy.mode` SCALE_OUT_POOL and `targetStoppedSize` (or
  `targetSuspendedSize`). Standby VMs are beyond `targetSize`, as burst's warm
  nodes are beyond the target. NotSupported for Spot groups, for RUNNING and
  POWERED_OFF, and for HIBERNATED (suspended) on any group with GPUs:
  Compute Engine cannot suspend a VM with GPUs attached.
* `offerings` — one per group (a zonal MIG has one machine type and one zone),
  priced from the catalog lookup; unavailable during a stockout cooldown.
* `poll_events` — `zoneOperations.list` of `compute.instances.preempted`
  operations (INTERRUPTION with the 30 s deadline, see `events`), Spot VMs
  seen STOPPING or TERMINATED in the managed listing without such an
  operation, and creation errors in the listing's `lastAttempt`
  (LAUNCH_FAILED; ZONE_RESOURCE_POOL_EXHAUSTED starts a stockout cooldown).

Idempotency: every mutating method remembers the keys it applied, per method;
a call that raised before applying anything does not consume its key. Every
resize, deleteInstances, patch and delete carries `requestId` =
`request_id(key)`, a UUIDv5 of the action's key, so a resend after a lost
response or a restart is applied once by the Compute API. Operations are
awaited with `zoneOperations.wait` on a client built with the same endpoint
and credentials as the others (the library's own operation helper would use
its default endpoint).

Standby VMs are recreated by Compute Engine after 60 days; a node's
`created_at` is its VM's `creationTimestamp`, so the hot-pool step's age
rotation (`warm_pool.max_age`, capped below 60 days here) sees real ages, and
`standby_age_s` reports one.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from burst.model import (
    CapacityType,
    EventKind,
    GpuShape,
    Node,
    NodeGroup,
    NodeId,
    NodeState,
    Offering,
    ProviderEvent,
    Tier,
    WarmPoolSettings,
    WarmState,
)
from providers.base import (
    BackendUnavailable,
    Caller,
    Clock,
    CredentialsError,
    InsufficientCapacity,
    NotFound,
    NotSupported,
    RetrySettings,
)
from providers.gcp import discovery, events
from providers.gcp.errors import (
    CAPACITY_CODES,
    CREDENTIALS_FIX,
    ERRORS,
    map_operation_error,
)
from providers.gcp.prices import STOCKOUT_COOLDOWN_S, PriceLookup, StockoutCooldowns
from providers.lifecycle import GroupedProvider, GroupRecord

log = logging.getLogger("burst.providers.gcp")

GCP_API_METHODS = frozenset(
    {
        "compute.instanceGroupManagers.deleteInstances",
        "compute.instanceGroupManagers.get",
        "compute.instanceGroupManagers.list",
        "compute.instanceGroupManagers.listManagedInstances",
        "compute.instanceGroupManagers.patch",
        "compute.instanceGroupManagers.resize",
        "compute.instanceTemplates.get",
        "compute.instances.delete",
        "compute.instances.list",
        "compute.regions.get",
        "compute.zoneOperations.list",
        "compute.zoneOperations.wait",
    }
)
"""Every Compute API method (REST discovery id) the provider calls; the README maps them to IAM permissions."""

GCP_IAM_PERMISSIONS: Mapping[str, str] = {
    "compute.instanceGroupManagers.deleteInstances": "compute.instanceGroupManagers.update",
    "compute.instanceGroupManagers.get": "compute.instanceGroupManagers.get",
    "compute.instanceGroupManagers.list": "compute.instanceGroupManagers.list",
    "compute.instanceGroupManagers.listManagedInstances": "compute.instanceGroupManagers.get",
    "compute.instanceGroupManagers.patch": "compute.instanceGroupManagers.update",
    "compute.instanceGroupManagers.resize": "compute.instanceGroupManagers.update",
    "compute.instanceTemplates.get": "compute.instanceTemplates.get",
    "compute.instances.delete": "compute.instances.delete",
    "compute.instances.list": "compute.instances.list",
    "compute.regions.get": "compute.regions.get",
    "compute.zoneOperations.list": "compute.zoneOperations.list",
    "compute.zoneOperations.wait": "compute.zoneOperations.get",
}
"""The IAM permission each method in GCP_API_METHODS needs (what the controller's custom role grants)."""

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
STANDBY_RECREATE_S = 60 * 86400.0
"""Compute Engine recreates a standby (stopped or suspended) MIG VM after 60 days."""
STANDBY_MAX_AGE_S = STANDBY_RECREATE_S - 86400.0
"""The warm-pool max age a GCP group is held to: rotated by burst a day before Compute Engine would recreate it."""
SEEN_KEPT = 10_000

BOOTING_ACTIONS = frozenset(
    {"CREATING", "CREATING_WITHOUT_RETRIES", "RECREATING", "VERIFYING", "REFRESHING", "RESTARTING",
     "STARTING", "RESUMING", "SUSPENDING"}
)
GOING_ACTIONS = frozenset({"DELETING", "ABANDONING"})
BOOTING_STATUSES = frozenset({"", "PROVISIONING", "STAGING", "REPAIRING"})


def request_id(key: str) -> str:
    """The Compute API requestId for an idempotency key: a UUIDv5 of it (stable across retries and restarts)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"burst:{key}"))


@dataclass(frozen=True)
class Managed:
    """One row of listManagedInstances, as burst reads it."""

    name: str
    url: str
    action: str
    status: str
    instance_id: int
    errors: tuple[tuple[str, str], ...] = ()


@dataclass
class _Group(GroupRecord):
    spec: discovery.GroupSpec
    managed: dict[str, Managed] = field(default_factory=dict)  # VM name -> row


def node_state(m: Managed, spot: bool, before: NodeState | None) -> tuple[NodeState, WarmState | None] | None:
    """burst's node state for one managed VM (None: not a node any more)."""
    if m.action in GOING_ACTIONS:
        return NodeState.TERMINATING, None
    if m.action in BOOTING_ACTIONS:
        return NodeState.BOOTING, None
    status = m.status
    if status in BOOTING_STATUSES:
        return NodeState.BOOTING, None
    if status == "RUNNING":
        return NodeState.READY, None
    if spot and status == "STOPPING" and before is NodeState.READY:
        return NodeState.READY, None  # being preempted: it serves out its 30 s notice (the job can checkpoint)
    if spot and status in ("STOPPING", "TERMINATED", "STOPPED"):
        return NodeState.INTERRUPTED, None  # preempted: a Spot group keeps no standby VMs
    if status in ("TERMINATED", "STOPPED"):
        return NodeState.WARM, WarmState.STOPPED
    if status == "SUSPENDED":
        return NodeState.WARM, WarmState.HIBERNATED
    if status in ("STOPPING", "SUSPENDING"):
        return (NodeState.DRAINING if before is NodeState.READY else NodeState.BOOTING), None
    return None


class GcpProvider(GroupedProvider[_Group]):
    """Zonal managed instance groups as burst node groups (see the module docstring)."""

    def __init__(
        self,
        *,
        cluster: str,
        project: str,
        clock: Clock,
        zones: Sequence[str] = (),
        region: str | None = None,
        name: str = "gcp",
        endpoint: str | None = None,
        groups: Sequence[NodeGroup] | None = None,
        prices: PriceLookup | None = None,
        credentials: Any = None,
        default_boot_latency_s: float = 300.0,
        retry: RetrySettings | None = None,
        stockout_cooldown_s: float = STOCKOUT_COOLDOWN_S,
        operation_waits: int = 10,
        timeout_s: float = 30.0,
    ) -> None:
        """Connect and discover the groups.

        `groups` (from burst.yaml) names the managed groups explicitly (ids are
        MIG names); else MIGs whose template is labelled with the cluster, in
        `zones` (or every zone of `region`). Credentials: `credentials`, else
        anonymous for a plain-HTTP `endpoint` (a local emulator: real
        credentials are never sent over plain HTTP), else Application Default
        Credentials. Raises CredentialsError, and discovery.DiscoveryError for
        a group that cannot be managed.
        """
        from google.api_core.client_options import ClientOptions
        from google.cloud import compute_v1

        self._compute = compute_v1
        self.name = name
        self.cluster = cluster
        self.project = project
        self._clock = clock
        self._prices = prices
        self._default_boot = default_boot_latency_s
        self._waits = max(1, operation_waits)
        self._timeout = timeout_s
        self._caller = Caller(retry or RetrySettings(), ERRORS)
        self._stockouts = StockoutCooldowns(clock, stockout_cooldown_s)
        self.called: set[str] = set()
        credentials = credentials if credentials is not None else _credentials(endpoint)
        opts = ClientOptions(api_endpoint=endpoint) if endpoint else None
        kw: dict[str, Any] = {"credentials": credentials, "client_options": opts, "transport": "rest"}
        self.migs = compute_v1.InstanceGroupManagersClient(**kw)
        self.templates = compute_v1.InstanceTemplatesClient(**kw)
        self.instances = compute_v1.InstancesClient(**kw)
        self.zone_operations = compute_v1.ZoneOperationsClient(**kw)
        self.regions = compute_v1.RegionsClient(**kw)
        self._keys: set[tuple[str, str]] = set()
        self._nodes: dict[NodeId, Node] = {}
        self._labelled: dict[NodeId, tuple[str, str, datetime | None, dict[str, str]]] = {}  # name -> zone, status, created, labels
        self._orphans: dict[NodeId, str] = {}  # VM name -> zone, labelled with the cluster, in no managed group
        self._terminated: set[NodeId] = set()
        self._seen: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._pending: list[ProviderEvent] = []
        self._started = clock()
        if region is None and not zones:
            raise discovery.DiscoveryError("gcp: give zones or a region to look for managed instance groups in")
        self.region = region or discovery.region_of_zone(zones[0])
        self.zones = tuple(zones) or self._region_zones(self.region)
        self._groups: dict[str, _Group] = {}
        self._discover(groups)

    # ------------------------------------------------------------ calls

    def _call(self, method: str, fn: Callable[..., Any], /, **params: Any) -> Any:
        """One Compute API call (`fn(**params)`), with the library's own retries off: `Caller` retries."""
        self.called.add(method)
        return self._caller.run(method, lambda: fn(**params, retry=None, timeout=self._timeout))

    def _list(self, method: str, fn: Callable[..., Any], /, **params: Any) -> list[Any]:
        """Every item of a paged list call (each page fetched under the same retries)."""
        self.called.add(method)
        return self._caller.run(method, lambda: list(fn(**params, retry=None, timeout=self._timeout)))

    def _await(self, op: Any, zone: str, method: str) -> None:
        """Wait for a zone operation to be DONE (zoneOperations.wait) and raise its error, typed."""
        done = self._compute.Operation.Status.DONE
        for _ in range(self._waits):
            if op.status == done:
                break
            name = op.name
            op = self._call("compute.zoneOperations.wait", self.zone_operations.wait,
                            project=self.project, zone=zone, operation=name)
        else:
            raise BackendUnavailable(f"{method}: operation {op.name} not done after {self._waits} waits; "
                                     "retried on a later tick with the same requestId")
        errors = [(str(e.code), str(e.message)) for e in op.error.errors] if "error" in op else []
        if errors:
            raise map_operation_error(errors, method)

    def _region_zones(self, region: str) -> tuple[str, ...]:
        found = self._call("compute.regions.get", self.regions.get, project=self.project, region=region)
        return tuple(sorted(discovery.last_segment(z) for z in found.zones))

    # ------------------------------------------------------------ discovery

    def _discover(self, listed: Sequence[NodeGroup] | None) -> None:
        if listed is not None:
            for g in listed:
                mig, zone = self._find_mig(g)
                spec = discovery.GroupSpec(
                    mig=g.id, zone=zone, template=discovery.last_segment(mig.instance_template),
                    capacity_type=g.capacity_type, machine_type=g.instance_type.split("+")[0],
                    instance_type=g.instance_type, gpu_model=g.shape.gpu_model, gpus_per_node=g.gpus_per_node,
                    gpu_memory_gib=g.shape.gpu_memory_gib, min_size=g.min_size, max_size=g.max_size,
                    target_size=int(mig.target_size),
                )
                group = dataclasses.replace(g, provider=self.name, zone=zone, warm_pool=_capped(g.warm_pool))
                self._add(group, spec, mig)
            return
        templates: dict[str, Any] = {}
        specs: list[tuple[discovery.GroupSpec, Any]] = []
        for zone in self.zones:
            migs = self._list("compute.instanceGroupManagers.list", self.migs.list, project=self.project, zone=zone)
            for mig in migs:
                url = str(mig.instance_template)
                if "/regions/" in url:
                    log.warning("skipping managed instance group: regional instance templates are not supported yet",
                                extra={"group": mig.name, "template": url})
                    continue
                tname = discovery.last_segment(url)
                if tname not in templates:
                    templates[tname] = self._call("compute.instanceTemplates.get", self.templates.get,
                                                  project=self.project, instance_template=tname)
                props = templates[tname].properties
                found = discovery.spec_from_template(
                    mig=str(mig.name), zone=zone, template=tname, target_size=int(mig.target_size),
                    labels=dict(props.labels), machine_type=discovery.last_segment(str(props.machine_type)),
                    accelerators=[discovery.Accelerator(discovery.last_segment(a.accelerator_type), int(a.accelerator_count))
                                  for a in props.guest_accelerators],
                    provisioning_model=str(props.scheduling.provisioning_model or ""), cluster=self.cluster,
                )
                if found is not None:
                    specs.append((found, mig))
        for spec, mig in sorted(specs, key=lambda s: s[0].mig):
            if spec.mig in self._groups:
                raise discovery.DiscoveryError(
                    f"gcp: managed instance groups named {spec.mig} in {self._groups[spec.mig].spec.zone} and "
                    f"{spec.zone}: burst names a group by its MIG name; rename one")
            group = NodeGroup(
                id=spec.mig,
                provider=self.name,
                region=discovery.region_of_zone(spec.zone),
                tier=Tier.ELASTIC,
                capacity_type=spec.capacity_type,
                shape=GpuShape(spec.gpu_model, spec.gpus_per_node, spec.gpu_memory_gib),
                instance_type=spec.instance_type,
                min_size=spec.min_size,
                max_size=spec.max_size,
                zone=spec.zone,
                boot_latency_s=spec.boot_latency_s if spec.boot_latency_s is not None else self._default_boot,
                warm_pool=_capped(WarmPoolSettings()),
            )
            self._add(group, spec, mig)

    def _find_mig(self, g: NodeGroup) -> tuple[Any, str]:
        for zone in ([g.zone] if g.zone else list(self.zones)):
            try:
                mig = self._call("compute.instanceGroupManagers.get", self.migs.get,
                                 project=self.project, zone=zone, instance_group_manager=g.id)
            except NotFound:
                continue
            return mig, zone
        where = g.zone or ", ".join(self.zones)
        raise discovery.DiscoveryError(
            f"node group {g.id}: no managed instance group of that name in {where}; "
            "a gcp group's id is its managed instance group's name")

    def _add(self, group: NodeGroup, spec: discovery.GroupSpec, mig: Any) -> None:
        warm = _warm_of(mig)
        self._groups[group.id] = _Group(group=group, spec=spec, desired=int(mig.target_size), warm=warm)

    # ------------------------------------------------------------ protocol: reads

    def offerings(self, group_id: str) -> Sequence[Offering]:
        """The group's one offering (machine type, zone), catalog-priced; unavailable in a stockout cooldown."""
        g = self._group(group_id)
        capacity = g.group.capacity_type
        price = self._prices(g.spec.instance_type, g.group.region, capacity) if self._prices else None
        return [Offering(
            instance_type=g.spec.instance_type, zone=g.spec.zone, capacity_type=capacity,
            price_per_hour=float(price) if price is not None else 0.0,
            available=not self._stockouts.cooling(g.spec.instance_type, g.spec.zone),
        )]

    def standby_age_s(self, node_id: NodeId) -> float:
        """Seconds since the node's VM was created (Compute Engine recreates standby VMs at 60 days). Raises NotFound."""
        node = self._nodes.get(node_id)
        if node is None:
            raise NotFound(f"unknown node {node_id!r}")
        return (self._clock() - node.created_at).total_seconds()

    # ------------------------------------------------------------ protocol: writes

    def set_target(self, group_id: str, size: int, *, key: str) -> None:
        """`instanceGroupManagers.resize` to `size` (see Provider.set_target).

        Raises NotFound, InvalidTarget (outside [min_size, max_size]),
        InsufficientCapacity (the zone is in its stockout cooldown, or the
        resize failed with ZONE_RESOURCE_POOL_EXHAUSTED), QuotaExceeded,
        CredentialsError, BackendUnavailable (retried with the same key and so
        the same requestId).
        """
        g = self._resizing(group_id, size, key)
        if g is None:
            return
        if size > g.desired and self._stockouts.cooling(g.spec.instance_type, g.spec.zone):
            raise InsufficientCapacity(
                f"{group_id}: {g.spec.zone} is cooling down after ZONE_RESOURCE_POOL_EXHAUSTED for {g.spec.instance_type}")
        request = self._compute.ResizeInstanceGroupManagerRequest(
            project=self.project, zone=g.spec.zone, instance_group_manager=g.spec.mig, size=size,
            request_id=request_id(key),
        )
        method = "compute.instanceGroupManagers.resize"
        try:
            op = self._call(method, self.migs.resize_unary, request=request)
            self._await(op, g.spec.zone, method)
        except InsufficientCapacity:
            self._stockouts.mark(g.spec.instance_type, g.spec.zone)
            raise
        self._keys.add(("set_target", key))
        g.desired = size

    def set_warm_pool(self, group_id: str, size: int, state: WarmState, *, key: str) -> None:
        """Patch the MIG's standby pool to `size` VMs in `state` (see Provider.set_warm_pool).

        Raises NotFound, InvalidTarget (negative), NotSupported (see the module
        docstring), CredentialsError, BackendUnavailable.
        """
        g = self._warming(group_id, size)
        if g.group.capacity_type is CapacityType.SPOT:
            raise NotSupported(f"{group_id}: burst keeps no standby pool for Spot groups (a stopped Spot VM may not "
                               "start when needed, and a preempted one is not standby capacity)")
        if state is WarmState.RUNNING or state is WarmState.POWERED_OFF:
            raise NotSupported(f"{group_id}: a GCP standby pool holds stopped or suspended VMs; use stopped")
        if state is WarmState.HIBERNATED and g.group.gpus_per_node > 0:
            raise NotSupported(f"{group_id}: Compute Engine cannot suspend a VM with GPUs attached; use stopped")
        if ("set_warm_pool", key) in self._keys:
            return
        c = self._compute
        resource = c.InstanceGroupManager(
            standby_policy=c.InstanceGroupManagerStandbyPolicy(mode="SCALE_OUT_POOL"),
            target_stopped_size=size if state is WarmState.STOPPED else 0,
            target_suspended_size=size if state is WarmState.HIBERNATED else 0,
        )
        request = c.PatchInstanceGroupManagerRequest(
            project=self.project, zone=g.spec.zone, instance_group_manager=g.spec.mig,
            instance_group_manager_resource=resource, request_id=request_id(key),
        )
        method = "compute.instanceGroupManagers.patch"
        op = self._call(method, self.migs.patch_unary, request=request)
        self._await(op, g.spec.zone, method)
        self._keys.add(("set_warm_pool", key))
        g.warm = (size, state)

    def terminate(self, node_ids: Sequence[NodeId], *, key: str) -> None:
        """Delete exactly these VMs (see Provider.terminate). Raises NotFound after doing the others."""
        if ("terminate", key) in self._keys:
            return
        ids = list(dict.fromkeys(node_ids))
        for gid in self._groups:
            self._list_managed(gid)  # membership re-read: a retry after a lost response is a no-op
        by_group: dict[str, list[Managed]] = collections.defaultdict(list)
        orphans: list[NodeId] = []
        missing: list[NodeId] = []
        for iid in ids:
            owner = self._group_of(iid)
            if owner is not None:
                m = self._groups[owner].managed[iid]
                if m.action not in GOING_ACTIONS:
                    by_group[owner].append(m)
                continue
            if iid in self._orphans:
                orphans.append(iid)
            else:
                missing.append(iid)
        c = self._compute
        for gid, rows in by_group.items():
            g = self._groups[gid]
            body = c.InstanceGroupManagersDeleteInstancesRequest(
                instances=[r.url for r in rows], skip_instances_on_validation_error=True)
            request = c.DeleteInstancesInstanceGroupManagerRequest(
                project=self.project, zone=g.spec.zone, instance_group_manager=g.spec.mig,
                instance_group_managers_delete_instances_request_resource=body,
                request_id=request_id(f"{key}/{g.spec.mig}"),
            )
            method = "compute.instanceGroupManagers.deleteInstances"
            op = self._call(method, self.migs.delete_instances_unary, request=request)
            self._await(op, g.spec.zone, method)
            spot = g.group.capacity_type is CapacityType.SPOT
            for r in rows:
                before = self._nodes.get(r.name)
                state = node_state(r, spot, before.state if before else None)
                if state is not None and state[0] is NodeState.WARM:
                    g.warm = (max(0, g.warm[0] - 1), g.warm[1])
                else:
                    g.desired = max(0, g.desired - 1)
                g.managed[r.name] = dataclasses.replace(r, action="DELETING")
                self._terminated.add(r.name)
                self._observe_vm(r.name, gid, NodeState.TERMINATING, None, self._tags_for(r.name, gid))
        for iid in orphans:
            zone = self._orphans[iid]
            request = c.DeleteInstanceRequest(project=self.project, zone=zone, instance=iid,
                                              request_id=request_id(f"{key}/{iid}"))
            try:
                op = self._call("compute.instances.delete", self.instances.delete_unary, request=request)
                self._await(op, zone, "compute.instances.delete")
            except NotFound:
                missing.append(iid)
                continue
            self._terminated.add(iid)
            node = self._nodes.get(iid)
            if node is not None:
                self._observe_vm(iid, node.group_id, NodeState.TERMINATING, None, dict(node.tags))
        self._keys.add(("terminate", key))
        if missing:
            raise NotFound(f"not found or already terminated: {', '.join(missing)}")

    # ------------------------------------------------------------ refresh

    def refresh(self) -> None:
        """Re-read every managed group, its managed VMs and the cluster's labelled VMs (one tick's view).

        Raises CredentialsError, BackendUnavailable (the provider is unhealthy this tick).
        """
        for gid, g in self._groups.items():
            mig = self._call("compute.instanceGroupManagers.get", self.migs.get,
                             project=self.project, zone=g.spec.zone, instance_group_manager=g.spec.mig)
            g.desired = int(mig.target_size)
            g.warm = _warm_of(mig, g.warm[1])
            self._list_managed(gid)
        self._list_labelled()
        seen: set[NodeId] = set()
        for gid, g in self._groups.items():
            spot = g.group.capacity_type is CapacityType.SPOT
            for name, m in g.managed.items():
                before = self._nodes.get(name)
                mapped = node_state(m, spot, before.state if before else None)
                if mapped is None:
                    continue
                seen.add(name)
                self._launch_errors(gid, m)
                if spot:
                    self._status_preemption(gid, m)
                self._observe_vm(name, gid, mapped[0], mapped[1], self._tags_for(name, gid))
        managed_names = {n for g in self._groups.values() for n in g.managed}
        self._orphans = {}
        for name, (zone, status, _, labels) in self._labelled.items():
            if name in managed_names or status not in ORPHAN_STATES:
                continue
            self._orphans[name] = zone
            seen.add(name)
            self._observe_vm(name, "", ORPHAN_STATES[status], None, self._tags_for(name, "", labels))
        for iid in [n for n in self._nodes if n not in seen]:
            del self._nodes[iid]

    def _list_managed(self, gid: str) -> None:
        g = self._groups[gid]
        rows = self._list("compute.instanceGroupManagers.listManagedInstances", self.migs.list_managed_instances,
                          project=self.project, zone=g.spec.zone, instance_group_manager=g.spec.mig)
        managed: dict[str, Managed] = {}
        for r in rows:
            url = str(r.instance)
            name = str(r.name) or discovery.last_segment(url)
            errors = tuple((str(e.code), str(e.message)) for e in r.last_attempt.errors.errors) if "last_attempt" in r else ()
            managed[name] = Managed(name=name, url=url, action=str(r.current_action or "NONE"),
                                    status=str(r.instance_status or ""), instance_id=int(r.id or 0), errors=errors)
        g.managed = managed

    def _list_labelled(self) -> None:
        zones = sorted({g.spec.zone for g in self._groups.values()} | set(self.zones))
        out: dict[NodeId, tuple[str, str, datetime | None, dict[str, str]]] = {}
        flt = f'labels.{discovery.CLUSTER_LABEL}="{self.cluster}"'
        for zone in zones:
            found = self._list("compute.instances.list", self.instances.list,
                               request=self._compute.ListInstancesRequest(project=self.project, zone=zone, filter=flt))
            for inst in found:
                created = _time_or_none(str(inst.creation_timestamp or ""))
                out[str(inst.name)] = (zone, str(inst.status or ""), created, dict(inst.labels))
        self._labelled = out

    def _tags_for(self, name: NodeId, gid: str, labels: Mapping[str, str] | None = None) -> dict[str, str]:
        known = self._labelled.get(name)
        tags = dict(labels if labels is not None else (known[3] if known else {}))
        tags["burst:cluster"] = tags.get(discovery.CLUSTER_LABEL, self.cluster)
        if gid or "burst:group" not in tags:
            tags["burst:group"] = gid
        return tags

    def _observe_vm(self, iid: NodeId, gid: str, state: NodeState, warm: WarmState | None, tags: dict[str, str]) -> None:
        """Record what a VM is now (a VM first seen starts at its creation time, from the labelled listing)."""
        known = self._labelled.get(iid)
        self.observe(iid, gid, state, warm, tags, created=known[2] if known else None)

    # ------------------------------------------------------------ events

    def poll_events(self) -> Sequence[ProviderEvent]:
        """Preemptions (zone operations and Spot VM status) and launch failures since the last poll, oldest first.

        Each event is returned once: operations are remembered by id, VMs by
        name and instance id. Never raises for an operation it cannot read
        (logged with why). Raises CredentialsError, BackendUnavailable.
        """
        out = list(self._pending)
        self._pending = []
        zones = sorted({g.spec.zone for g in self._groups.values() if g.group.capacity_type is CapacityType.SPOT})
        cutoff = self._started.timestamp() - events.PREEMPTION_NOTICE_S
        for zone in zones:
            ops = self._list("compute.zoneOperations.list", self.zone_operations.list,
                             request=self._compute.ListZoneOperationsRequest(
                                 project=self.project, zone=zone, filter=events.PREEMPTED_FILTER))
            for op in ops:
                event = self._preemption_of(op, zone, cutoff)
                if event is not None:
                    out.append(event)
        return sorted(out, key=lambda e: e.at)

    def _preemption_of(self, op: Any, zone: str, cutoff: float) -> ProviderEvent | None:
        op_id = str(op.id or op.name or "")
        if f"op:{op_id}" in self._seen:
            return None
        try:
            parsed = events.parse_preemption(op_id=op_id, operation_type=str(op.operation_type),
                                             target_link=str(op.target_link), insert_time=str(op.insert_time),
                                             zone=str(op.zone or zone))
        except events.MalformedOperation as exc:
            log.warning("ignoring zone operation", extra={"operation": op_id, "why": str(exc)})
            self._remember(f"op:{op_id}")
            return None
        self._remember(f"op:{op_id}")
        if parsed.at.timestamp() < cutoff:
            return None  # before this provider started: its deadline is long past
        gid = self._group_of(parsed.instance)
        if gid is None:
            for other, g in self._groups.items():
                if g.spec.zone == parsed.zone:
                    self._list_managed(other)
            gid = self._group_of(parsed.instance)
        if gid is None:
            log.info("ignoring preemption of a VM no managed group owns",
                     extra={"operation": op_id, "instance": parsed.instance})
            return None
        m = self._groups[gid].managed[parsed.instance]
        vm_key = f"vm:{m.name}/{m.instance_id}"
        if vm_key in self._seen:
            return None  # already reported from its status
        self._remember(vm_key)
        return ProviderEvent(EventKind.INTERRUPTION, parsed.at, gid, parsed.instance, deadline=parsed.deadline,
                             detail="spot preemption (compute.instances.preempted)")

    def _status_preemption(self, gid: str, m: Managed) -> None:
        """A Spot VM seen STOPPING (being preempted) or TERMINATED (preempted) without its operation."""
        if m.action != "NONE" or m.status not in ("STOPPING", "TERMINATED", "STOPPED") or m.name in self._terminated:
            return
        vm_key = f"vm:{m.name}/{m.instance_id}"
        if vm_key in self._seen:
            return
        self._remember(vm_key)
        now = self._clock()
        if m.status == "STOPPING":
            self._pending.append(ProviderEvent(
                EventKind.INTERRUPTION, now, gid, m.name,
                deadline=now + timedelta(seconds=events.PREEMPTION_NOTICE_S),
                detail="spot preemption (VM status STOPPING)"))
        else:
            self._pending.append(ProviderEvent(EventKind.NODE_LOST, now, gid, m.name, detail=f"VM status {m.status}"))

    def _launch_errors(self, gid: str, m: Managed) -> None:
        """LAUNCH_FAILED for a creation error in a managed VM's lastAttempt (once per VM and error code)."""
        g = self._groups[gid]
        for code, message in m.errors:
            key = f"err:{m.name}/{code}"
            if key in self._seen:
                continue
            self._remember(key)
            if code in CAPACITY_CODES:
                self._stockouts.mark(g.spec.instance_type, g.spec.zone)
            self._pending.append(ProviderEvent(EventKind.LAUNCH_FAILED, self._clock(), gid, m.name,
                                               detail=f"{code}: {message}"[:300]))

    def _remember(self, key: str) -> None:
        self._seen[key] = None
        while len(self._seen) > SEEN_KEPT:
            self._seen.popitem(last=False)

    # ------------------------------------------------------------ helpers

    def _group_of(self, name: NodeId) -> str | None:
        for gid, g in self._groups.items():
            if name in g.managed:
                return gid
        return None


ORPHAN_STATES: Mapping[str, NodeState] = {
    "PROVISIONING": NodeState.BOOTING,
    "STAGING": NodeState.BOOTING,
    "RUNNING": NodeState.READY,
    "STOPPING": NodeState.DRAINING,
    "TERMINATED": NodeState.DRAINING,
    "SUSPENDED": NodeState.DRAINING,
}
"""Statuses of labelled VMs no managed group owns (orphans) and burst's node state for each."""


def _credentials(endpoint: str | None) -> Any:
    """Anonymous credentials for a plain-HTTP endpoint (an emulator); else Application Default Credentials."""
    if endpoint and endpoint.startswith("http://"):
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials()  # type: ignore[no-untyped-call]
    import google.auth
    from google.auth import exceptions as auth_exceptions

    try:
        credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM])
    except auth_exceptions.DefaultCredentialsError:
        raise CredentialsError(f"GCP credentials not found (Application Default Credentials): {CREDENTIALS_FIX}") from None
    return credentials


def _warm_of(mig: Any, default: WarmState = WarmState.STOPPED) -> tuple[int, WarmState]:
    suspended = int(mig.target_suspended_size or 0)
    if suspended:
        return suspended, WarmState.HIBERNATED
    return int(mig.target_stopped_size or 0), (default if default is not WarmState.HIBERNATED else WarmState.STOPPED)


def _capped(settings: WarmPoolSettings) -> WarmPoolSettings:
    """The warm-pool settings with max age below Compute Engine's 60-day standby recreation."""
    if settings.max_age_s <= STANDBY_MAX_AGE_S:
        return settings
    return dataclasses.replace(settings, max_age_s=STANDBY_MAX_AGE_S)


def _time_or_none(value: str) -> datetime | None:
    if not value:
        return None
    try:
        return events.parse_time(value)
    except events.MalformedOperation:
        return None

