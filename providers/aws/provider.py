"""`AwsProvider`: burst's node groups as EC2 Auto Scaling groups, behind the `Provider` protocol.

How each protocol method maps onto AWS (every call goes through
`errors.Caller`: retries, circuit breaker, typed errors):

* `node_groups` — discovered once, at construction, by ASG tags or from
  Terraform outputs (see `discovery`); GPU shape from `describe_instance_types`.
* `refresh` — one `describe_auto_scaling_groups` for every managed group, one
  `describe_warm_pool` per group (unless warm pools are off), one
  `describe_instances` of every instance tagged with the cluster. `nodes()`
  and `group_state()` answer from this view, updated by this provider's own
  mutating calls; a listing is therefore as of the last refresh (one tick).
* `nodes` — ASG instances and warm-pool instances (ASG lifecycle states mapped
  onto `NodeState`, `LIFECYCLE_STATES`), plus instances tagged `burst:cluster`
  that no managed group owns (so garbage collection can find them). Node
  timestamps are taken from the injected clock when a state is first seen.
* `set_target` — `set_desired_capacity` (absolute: a resend cannot double a
  launch; ASG sizes take no ClientToken, the actuator's journal protects them).
* `terminate` — `terminate_instance_in_auto_scaling_group` with
  ShouldDecrementDesiredCapacity (not for warm-pool instances, which are
  beyond the target); an instance no managed group owns but tagged with the
  cluster is terminated with `ec2.terminate_instances`. Membership is re-read
  before every attempt, so a retry after a lost response is a no-op.
* `set_warm_pool` / `warm_pool` — `put_warm_pool` (PoolState, MinSize,
  MaxGroupPreparedCapacity, InstanceReusePolicy). NotSupported for Spot and
  mixed-instances groups (AWS's rule; checked here because not every
  endpoint enforces it), for POWERED_OFF, for HIBERNATED on GPU families, and
  for every group when the provider is built with `warm_pools=False`.
* `offerings` — one per instance type (a mixed-instances group's overrides)
  and zone; on-demand price from the catalog lookup, spot price from
  `describe_spot_price_history`; unavailable during an ICE cooldown.
* `poll_events` — SQS (EventBridge events, see `events`) and failed
  `describe_scaling_activities` entries (asynchronous launch failures).

Idempotency: every mutating method remembers the keys it applied, per method,
as the sim does; a call that raised before applying anything does not consume
its key. EC2 calls that take a ClientToken get `client_token(key)`.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
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
from providers.aws import discovery, events
from providers.aws.errors import ERRORS, boto_config, error_code
from providers.aws.prices import ICE_COOLDOWN_S, IceCooldowns, PriceLookup, latest_spot_prices
from providers.base import (
    Caller,
    CircuitBreaker,
    Clock,
    InsufficientCapacity,
    NotFound,
    NotSupported,
    ProviderError,
    RetrySettings,
)
from providers.lifecycle import GroupedProvider, GroupRecord

log = logging.getLogger("burst.providers.aws")

AWS_API_ACTIONS = frozenset(
    {
        "autoscaling:CompleteLifecycleAction",
        "autoscaling:DescribeAutoScalingGroups",
        "autoscaling:DescribeAutoScalingInstances",
        "autoscaling:DescribeScalingActivities",
        "autoscaling:DescribeWarmPool",
        "autoscaling:PutWarmPool",
        "autoscaling:RecordLifecycleActionHeartbeat",
        "autoscaling:SetDesiredCapacity",
        "autoscaling:TerminateInstanceInAutoScalingGroup",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeInstances",
        "ec2:DescribeLaunchTemplateVersions",
        "ec2:DescribeSpotPriceHistory",
        "ec2:TerminateInstances",
        "sqs:DeleteMessageBatch",
        "sqs:ReceiveMessage",
    }
)
"""Every AWS API action (`service:Operation`) the provider calls."""

IAM_PERMISSION_OF: Mapping[str, str] = {"sqs:DeleteMessageBatch": "sqs:DeleteMessage"}
"""API actions whose IAM permission has another name: SQS grants its batch actions through the single ones."""

AWS_IAM_PERMISSIONS = frozenset(IAM_PERMISSION_OF.get(a, a) for a in AWS_API_ACTIONS)
"""The IAM permissions those calls need: exactly what the controller's IAM policy grants."""

LIFECYCLE_STATES: Mapping[str, tuple[NodeState, WarmState | None]] = {
    "Pending": (NodeState.BOOTING, None),
    "Pending:Wait": (NodeState.BOOTING, None),
    "Pending:Proceed": (NodeState.BOOTING, None),
    "Quarantined": (NodeState.BOOTING, None),
    "InService": (NodeState.READY, None),
    "EnteringStandby": (NodeState.DRAINING, None),
    "Standby": (NodeState.DRAINING, None),
    "Detaching": (NodeState.DRAINING, None),
    "Terminating": (NodeState.TERMINATING, None),
    "Terminating:Wait": (NodeState.TERMINATING, None),
    "Terminating:Proceed": (NodeState.TERMINATING, None),
    "Warmed:Pending": (NodeState.BOOTING, None),
    "Warmed:Pending:Wait": (NodeState.BOOTING, None),
    "Warmed:Pending:Proceed": (NodeState.BOOTING, None),
    "Warmed:Stopped": (NodeState.WARM, WarmState.STOPPED),
    "Warmed:Running": (NodeState.WARM, WarmState.RUNNING),
    "Warmed:Hibernated": (NodeState.WARM, WarmState.HIBERNATED),
    "Warmed:Terminating": (NodeState.TERMINATING, None),
    "Warmed:Terminating:Wait": (NodeState.TERMINATING, None),
    "Warmed:Terminating:Proceed": (NodeState.TERMINATING, None),
}
"""ASG lifecycle states and burst's node state (and warm state) for each; Terminated/Detached are gone."""

EC2_STATES: Mapping[str, NodeState] = {
    "pending": NodeState.BOOTING,
    "running": NodeState.READY,
    "stopping": NodeState.DRAINING,
    "stopped": NodeState.DRAINING,
    "shutting-down": NodeState.TERMINATING,
}
"""EC2 instance states of instances no managed group owns (orphans) and burst's node state for each."""

LISTED_EC2_STATES = list(EC2_STATES)
GPU_FAMILIES = ("p", "g")
"""Instance families whose GPU types cannot hibernate (EC2 hibernation excludes accelerated instances)."""
SEEN_EVENTS_KEPT = 10_000


def client_token(key: str) -> str:
    """The EC2 ClientToken for an idempotency key: a UUIDv5 of it (stable across restarts, 36 characters)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"burst:{key}"))


@dataclass
class _Group(GroupRecord):
    spec: discovery.GroupSpec
    instances: dict[str, str] = field(default_factory=dict)  # instance id -> lifecycle state (incl. warm pool)


class AwsProvider(GroupedProvider[_Group]):
    """EC2 Auto Scaling groups as burst node groups (see the module docstring)."""

    def __init__(
        self,
        *,
        cluster: str,
        region: str,
        clock: Clock,
        name: str = "aws",
        endpoint_url: str | None = None,
        groups: Sequence[NodeGroup] | None = None,
        terraform_outputs: Path | None = None,
        events_queue_url: str | None = None,
        prices: PriceLookup | None = None,
        warm_pools: bool = True,
        default_boot_latency_s: float = 300.0,
        retry: RetrySettings | None = None,
        breaker_failures: int = 5,
        breaker_cool_off_s: float = 60.0,
        ice_cooldown_s: float = ICE_COOLDOWN_S,
        sqs_wait_s: int = 1,
        launch_hook: str | None = None,
        terminate_hook: str | None = None,
        session: Any = None,
    ) -> None:
        """Connect and discover the groups.

        `groups` (from burst.yaml) names the managed groups explicitly (ids are
        ASG names, settings as given); else `terraform_outputs` (a `terraform
        output -json` file); else ASG tags. Credentials come from boto3's
        default chain (or `session`). Raises CredentialsError, and
        discovery.DiscoveryError for a group that cannot be managed.
        """
        import boto3  # the SDK is imported only where it is used

        self.name = name
        self.cluster = cluster
        self.region = region
        self._clock = clock
        self._prices = prices
        self._warm_pools = warm_pools
        self._default_boot = default_boot_latency_s
        self._sqs_wait_s = sqs_wait_s
        self._launch_hook = launch_hook
        self._terminate_hook = terminate_hook
        self.breaker = CircuitBreaker(clock, failure_threshold=breaker_failures, cool_off_s=breaker_cool_off_s)
        self._caller = Caller(retry or RetrySettings(), ERRORS, breaker=self.breaker)
        self._ice = IceCooldowns(clock, ice_cooldown_s)
        session = session or boto3.session.Session()
        cfg = boto_config()
        kw: dict[str, Any] = {"region_name": region, "endpoint_url": endpoint_url, "config": cfg}
        self.autoscaling = session.client("autoscaling", **kw)
        self.ec2 = session.client("ec2", **kw)
        self.sqs = session.client("sqs", **kw)
        self._keys: set[tuple[str, str]] = set()
        self._nodes: dict[NodeId, Node] = {}
        self._orphans: dict[NodeId, str] = {}  # instance id -> EC2 state, tagged with the cluster, in no group
        self._instance_tags: dict[NodeId, dict[str, str]] = {}
        self._terminated: set[NodeId] = set()
        self._seen_events: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._acks: list[dict[str, str]] = []
        self._seen_activities: set[str] = set()
        self._started_wall = datetime.now(UTC)
        tf_controller: Mapping[str, Any] = {}
        tf_groups: list[Mapping[str, Any]] = []
        if terraform_outputs is not None and groups is None:
            tf_groups, tf_controller = discovery.terraform_groups(terraform_outputs)
        self.events_queue_url = events_queue_url or (str(tf_controller.get("events_queue_url") or "") or None)
        self._groups: dict[str, _Group] = {}
        self._discover(groups, tf_groups, str(terraform_outputs))

    @property
    def clients(self) -> tuple[Any, ...]:
        """The boto3 clients this provider calls (tests attach event hooks to them)."""
        return (self.autoscaling, self.ec2, self.sqs)

    # ------------------------------------------------------------ discovery

    def _call(self, client: Any, operation: str, **params: Any) -> Any:
        return self._caller.run(operation, lambda: getattr(client, operation)(**params))

    def _describe_asgs(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        params: dict[str, Any] = {"MaxRecords": 100}
        if names is not None:
            params["AutoScalingGroupNames"] = list(names)
        else:
            params["Filters"] = [{"Name": f"tag:{discovery.CLUSTER_TAG}", "Values": [self.cluster]}]
        while True:
            page = self._call(self.autoscaling, "describe_auto_scaling_groups", **params)
            out.extend(page.get("AutoScalingGroups", []))
            token = page.get("NextToken")
            if not token:
                return out
            params["NextToken"] = token

    def _template_type(self, asg: Mapping[str, Any]) -> str | None:
        ref = discovery.launch_template_ref(asg)
        if not ref:
            return None
        params: dict[str, Any] = {"Versions": [str(ref.get("Version") or "$Default")]}
        if ref.get("LaunchTemplateId"):
            params["LaunchTemplateId"] = ref["LaunchTemplateId"]
        else:
            params["LaunchTemplateName"] = ref["LaunchTemplateName"]
        versions = self._call(self.ec2, "describe_launch_template_versions", **params).get("LaunchTemplateVersions", [])
        data = versions[0].get("LaunchTemplateData", {}) if versions else {}
        return str(data["InstanceType"]) if data.get("InstanceType") else None

    def _discover(
        self, listed: Sequence[NodeGroup] | None, tf_groups: Sequence[Mapping[str, Any]], tf_source: str
    ) -> None:
        if listed is not None:
            asgs = {a["AutoScalingGroupName"]: a for a in self._describe_asgs([g.id for g in listed])} if listed else {}
            for g in listed:
                asg = asgs.get(g.id)
                if asg is None:
                    raise discovery.DiscoveryError(
                        f"node group {g.id}: no Auto Scaling group of that name in {self.region}; "
                        "an aws group's id is its Auto Scaling group's name"
                    )
                spec = discovery.GroupSpec(
                    asg_name=g.id, tier=g.tier, capacity_type=g.capacity_type,
                    instance_types=discovery.override_types(asg) or (g.instance_type,),
                    zones=tuple(asg.get("AvailabilityZones", [])), min_size=g.min_size, max_size=g.max_size,
                    desired=int(asg["DesiredCapacity"]), mixed=bool(asg.get("MixedInstancesPolicy")),
                )
                self._add(dataclasses.replace(g, provider=self.name), spec)
            return
        specs: list[discovery.GroupSpec] = []
        if tf_groups:
            asgs = {a["AutoScalingGroupName"]: a for a in self._describe_asgs([str(d.get("id")) for d in tf_groups])}
            specs = [discovery.spec_from_terraform(d, asgs.get(str(d.get("id"))), tf_source) for d in tf_groups]
        else:
            for asg in self._describe_asgs(None):
                template = self._template_type(asg) if not discovery.override_types(asg) else None
                found = discovery.spec_from_asg(asg, template, self.cluster)
                if found is not None:
                    specs.append(found)
        shapes = self._shapes({s.instance_types[0] for s in specs})
        for spec in sorted(specs, key=lambda s: s.asg_name):
            shape = shapes.get(spec.instance_types[0])
            if shape is None and (spec.gpu_model is None or spec.gpus_per_node is None):
                log.warning("skipping Auto Scaling group: its instance type has no GPUs",
                            extra={"group": spec.asg_name, "instance_type": spec.instance_types[0]})
                continue
            model = spec.gpu_model or (shape[0] if shape else "")
            gpus = spec.gpus_per_node or (shape[1] if shape else 1)
            memory = shape[2] if shape else 0.0
            warm = spec.warm_pool
            group = NodeGroup(
                id=spec.asg_name,
                provider=self.name,
                region=self.region,
                tier=Tier.ELASTIC,
                capacity_type=spec.capacity_type,
                shape=GpuShape(model, gpus, memory),
                instance_type=spec.instance_types[0],
                min_size=spec.min_size,
                max_size=spec.max_size,
                zone=spec.zones[0] if len(spec.zones) == 1 else "",
                boot_latency_s=spec.boot_latency_s if spec.boot_latency_s is not None else self._default_boot,
                warm_pool=WarmPoolSettings(
                    min_size=int(warm.get("min_size", 0)),
                    max_prepared=int(warm.get("max_prepared", 0)),
                    state=WarmState(str(warm.get("state", WarmState.STOPPED.value))),
                    reuse_on_scale_in=bool(warm.get("reuse_on_scale_in", True)),
                ),
            )
            self._add(group, spec)

    def _shapes(self, types: Iterable[str]) -> dict[str, tuple[str, int, float]]:
        wanted = sorted(types)
        if not wanted:
            return {}
        found = self._call(self.ec2, "describe_instance_types", InstanceTypes=wanted).get("InstanceTypes", [])
        out: dict[str, tuple[str, int, float]] = {}
        for entry in found:
            info = discovery.gpu_info(entry)
            if info is not None:
                out[str(entry["InstanceType"])] = info
        return out

    def _add(self, group: NodeGroup, spec: discovery.GroupSpec) -> None:
        warm = (0 if group.capacity_type is CapacityType.SPOT else group.warm_pool.min_size, group.warm_pool.state)
        self._groups[group.id] = _Group(group=group, spec=spec, desired=spec.desired, warm=warm)

    # ------------------------------------------------------------ protocol: reads

    def offerings(self, group_id: str) -> Sequence[Offering]:
        """One offering per instance type and zone; spot prices from the spot price history. Raises NotFound."""
        g = self._group(group_id)
        types = g.spec.instance_types
        zones = g.spec.zones or ("",)
        capacity = g.group.capacity_type
        spot: dict[tuple[str, str], float] = {}
        if capacity is CapacityType.SPOT:
            history = self._call(
                self.ec2, "describe_spot_price_history", InstanceTypes=list(types),
                ProductDescriptions=["Linux/UNIX"], StartTime=datetime.now(UTC), MaxResults=1000,
            ).get("SpotPriceHistory", [])
            spot = latest_spot_prices(history)
        out = []
        for itype in types:
            for zone in zones:
                price = spot.get((itype, zone))
                if price is None:
                    price = self._catalog_price(itype, capacity)
                out.append(
                    Offering(
                        instance_type=itype,
                        zone=zone,
                        capacity_type=capacity,
                        price_per_hour=price,
                        available=not self._ice.cooling(itype, zone),
                    )
                )
        return out

    def _catalog_price(self, instance_type: str, capacity: CapacityType) -> float:
        if self._prices is None:
            return 0.0
        price = self._prices(instance_type, self.region, capacity)
        return float(price) if price is not None else 0.0

    # ------------------------------------------------------------ protocol: writes

    def set_target(self, group_id: str, size: int, *, key: str) -> None:
        """`set_desired_capacity` to `size` (see Provider.set_target).

        Raises NotFound, InvalidTarget (outside [min_size, max_size]),
        InsufficientCapacity (every offering of the group is in its ICE
        cooldown, or AWS said so), QuotaExceeded, CredentialsError,
        BackendUnavailable (retried next tick with the same key).
        """
        g = self._resizing(group_id, size, key)
        if g is None:
            return
        if size > g.desired and all(o.available is False for o in self._cached_offerings(g)):
            raise InsufficientCapacity(
                f"{group_id}: every instance type is cooling down after InsufficientInstanceCapacity"
            )
        try:
            self._call(
                self.autoscaling, "set_desired_capacity",
                AutoScalingGroupName=g.spec.asg_name, DesiredCapacity=size, HonorCooldown=False,
            )
        except InsufficientCapacity:
            for itype in g.spec.instance_types:
                self._ice.mark(itype)
            raise
        self._keys.add(("set_target", key))
        g.desired = size

    def _cached_offerings(self, g: _Group) -> list[Offering]:
        zones = g.spec.zones or ("",)
        return [
            Offering(t, z, g.group.capacity_type, 0.0, available=not self._ice.cooling(t, z))
            for t in g.spec.instance_types
            for z in zones
        ]

    def set_warm_pool(self, group_id: str, size: int, state: WarmState, *, key: str) -> None:
        """`put_warm_pool` keeping `size` instances in `state` (see Provider.set_warm_pool).

        Raises NotFound, InvalidTarget (negative), NotSupported (see the module
        docstring), CredentialsError, BackendUnavailable.
        """
        g = self._warming(group_id, size)
        if not self._warm_pools:
            raise NotSupported(f"{group_id}: warm pools are turned off for provider {self.name}")
        if g.group.capacity_type is CapacityType.SPOT or g.spec.mixed:
            raise NotSupported(f"{group_id}: AWS has no warm pools for Spot or mixed-instances groups")
        if state is WarmState.POWERED_OFF:
            raise NotSupported(f"{group_id}: powered_off is an on-prem warm state; use stopped, running or hibernated")
        if state is WarmState.HIBERNATED and g.group.instance_type.startswith(GPU_FAMILIES):
            raise NotSupported(f"{group_id}: {g.group.instance_type} cannot hibernate; use stopped or running")
        if ("set_warm_pool", key) in self._keys:
            return
        self._call(
            self.autoscaling, "put_warm_pool",
            AutoScalingGroupName=g.spec.asg_name,
            PoolState=discovery.pool_state_of(state),
            MinSize=size,
            MaxGroupPreparedCapacity=size,
            InstanceReusePolicy={"ReuseOnScaleIn": g.group.warm_pool.reuse_on_scale_in},
        )
        self._keys.add(("set_warm_pool", key))
        g.warm = (size, state)

    def terminate(self, node_ids: Sequence[NodeId], *, key: str) -> None:
        """Terminate these instances (see Provider.terminate). Raises NotFound after doing the others."""
        if ("terminate", key) in self._keys:
            return
        ids = list(dict.fromkeys(node_ids))
        missing: list[NodeId] = []
        for iid in ids:
            if not self._caller.run("TerminateInstanceInAutoScalingGroup", functools.partial(self._terminate_one, iid)):
                missing.append(iid)
        self._keys.add(("terminate", key))
        if missing:
            raise NotFound(f"not found or already terminated: {', '.join(missing)}")

    def _terminate_one(self, iid: NodeId) -> bool:
        """Terminate one instance if it is still there; False when it is unknown or already gone.

        Re-reads the instance's membership first, so a retry after a lost
        response (the first attempt did terminate it) does nothing more.
        """
        found = self.autoscaling.describe_auto_scaling_instances(InstanceIds=[iid]).get("AutoScalingInstances", [])
        member = next((m for m in found if m.get("AutoScalingGroupName") in self._asg_names()), None)
        if member is not None:
            state = str(member.get("LifecycleState", ""))
            if "Terminat" in state:
                return True  # already terminating: a no-op
            warm = state.startswith("Warmed:")
            self.autoscaling.terminate_instance_in_auto_scaling_group(
                InstanceId=iid, ShouldDecrementDesiredCapacity=not warm
            )
            gid = self._gid_of_asg(str(member["AutoScalingGroupName"]))
            g = self._groups[gid]
            if not warm:
                g.desired = max(g.group.min_size, g.desired - 1)
            g.instances[iid] = "Terminating"
            self._terminated.add(iid)
            self.observe(iid, gid, NodeState.TERMINATING, None, self._tags_for(iid, gid))
            return True
        reservations = self.ec2.describe_instances(
            Filters=[
                {"Name": "instance-id", "Values": [iid]},
                {"Name": f"tag:{discovery.CLUSTER_TAG}", "Values": [self.cluster]},
                {"Name": "instance-state-name", "Values": LISTED_EC2_STATES},
            ]
        ).get("Reservations", [])
        if not any(r.get("Instances") for r in reservations):
            return False
        state = reservations[0]["Instances"][0]["State"]["Name"]
        if state != "shutting-down":
            self.ec2.terminate_instances(InstanceIds=[iid])
        self._terminated.add(iid)
        node = self._nodes.get(iid)
        if node is not None:
            self.observe(iid, node.group_id, NodeState.TERMINATING, None, dict(node.tags))
        return True

    # ------------------------------------------------------------ refresh

    def refresh(self) -> None:
        """Re-read every managed group, its warm pool and the cluster's tagged instances (one tick's view).

        Raises CredentialsError, BackendUnavailable (the provider is unhealthy this tick).
        """
        asgs = {a["AutoScalingGroupName"]: a for a in self._describe_asgs(self._asg_names())} if self._groups else {}
        for g in self._groups.values():
            asg = asgs.get(g.spec.asg_name)
            if asg is None:
                log.warning("managed Auto Scaling group not found", extra={"group": g.group.id})
                g.instances = {}
                continue
            g.desired = int(asg["DesiredCapacity"])
            g.instances = {str(i["InstanceId"]): str(i["LifecycleState"]) for i in asg.get("Instances", [])}
            if self._warm_pools and g.group.capacity_type is not CapacityType.SPOT:
                pool = self._call(self.autoscaling, "describe_warm_pool", AutoScalingGroupName=g.spec.asg_name)
                conf = pool.get("WarmPoolConfiguration")
                if conf:
                    g.warm = (int(conf.get("MinSize", 0)), discovery.warm_state_of(conf.get("PoolState")))
                for inst in pool.get("Instances", []):
                    g.instances[str(inst["InstanceId"])] = str(inst["LifecycleState"])
        tagged = self._tagged_instances()
        self._complete_launch_hooks()
        seen: set[NodeId] = set()
        for gid, g in self._groups.items():
            for iid, lifecycle in g.instances.items():
                mapped = LIFECYCLE_STATES.get(lifecycle)
                if mapped is None:
                    continue
                seen.add(iid)
                self.observe(iid, gid, mapped[0], mapped[1], self._tags_for(iid, gid, tagged.get(iid)))
        managed_asgs = set(self._asg_names())
        self._orphans = {}
        for iid, (state, tags) in tagged.items():
            if iid in seen or state not in EC2_STATES:
                continue
            if tags.get(discovery.ASG_NAME_TAG) in managed_asgs and state != "shutting-down":
                continue  # a group member the group listing does not show yet (or any more)
            self._orphans[iid] = state
            gid = tags.get(discovery.GROUP_TAG) or tags.get(discovery.ASG_NAME_TAG) or ""
            seen.add(iid)
            self.observe(iid, gid, EC2_STATES[state], None, dict(tags))
        for iid in [n for n in self._nodes if n not in seen]:
            del self._nodes[iid]

    def _tagged_instances(self) -> dict[NodeId, tuple[str, dict[str, str]]]:
        out: dict[NodeId, tuple[str, dict[str, str]]] = {}
        params: dict[str, Any] = {
            "Filters": [
                {"Name": f"tag:{discovery.CLUSTER_TAG}", "Values": [self.cluster]},
                {"Name": "instance-state-name", "Values": LISTED_EC2_STATES},
            ],
            "MaxResults": 1000,
        }
        while True:
            page = self._call(self.ec2, "describe_instances", **params)
            for res in page.get("Reservations", []):
                for inst in res.get("Instances", []):
                    tags = {str(t["Key"]): str(t.get("Value", "")) for t in inst.get("Tags", [])}
                    out[str(inst["InstanceId"])] = (str(inst["State"]["Name"]), tags)
            token = page.get("NextToken")
            if not token:
                break
            params["NextToken"] = token
        self._instance_tags.update({iid: tags for iid, (_, tags) in out.items()})
        return out

    def _tags_for(
        self, iid: NodeId, gid: str, listed: tuple[str, dict[str, str]] | None = None
    ) -> dict[str, str]:
        tags = dict(listed[1]) if listed else dict(self._instance_tags.get(iid, {}))
        tags.setdefault(discovery.CLUSTER_TAG, self.cluster)
        tags[discovery.GROUP_TAG] = gid
        return tags

    # ------------------------------------------------------------ events

    def poll_events(self) -> Sequence[ProviderEvent]:
        """Interruptions, rebalance recommendations and lost nodes from SQS; launch failures from ASG activities.

        A message is deleted on the poll after the one that returned its
        event (the caller has recorded it by then), or at once when it is
        malformed, a duplicate (same EventBridge id) or about an instance no
        managed group owns; each such message is logged with why. Never
        raises for a bad message. Raises CredentialsError, BackendUnavailable.
        """
        self._ack()
        out: list[ProviderEvent] = []
        if self.events_queue_url:
            out.extend(self._queue_events())
        out.extend(self._activity_events())
        return sorted(out, key=lambda e: e.at)

    def _ack(self) -> None:
        while self._acks:
            batch, self._acks = self._acks[:10], self._acks[10:]
            try:
                self._call(self.sqs, "delete_message_batch", QueueUrl=self.events_queue_url, Entries=batch)
            except ProviderError:
                self._acks = batch + self._acks  # kept for the next poll; the events are deduplicated by id
                raise

    def _queue_events(self) -> list[ProviderEvent]:
        out: list[ProviderEvent] = []
        wait = self._sqs_wait_s
        for _ in range(10):
            resp = self._call(
                self.sqs, "receive_message", QueueUrl=self.events_queue_url,
                MaxNumberOfMessages=10, WaitTimeSeconds=wait,
            )
            messages = resp.get("Messages", [])
            if not messages:
                break
            wait = 0
            for msg in messages:
                entry = {"Id": str(len(self._acks)), "ReceiptHandle": str(msg["ReceiptHandle"])}
                event = self._event_of(str(msg.get("Body", "")), str(msg.get("MessageId", "")))
                if event is not None:
                    out.append(event)
                self._acks.append(entry)
        for i, entry in enumerate(self._acks):
            entry["Id"] = str(i)
        return out

    def _event_of(self, body: str, message_id: str) -> ProviderEvent | None:
        try:
            parsed = events.parse_event(body)
        except events.MalformedEvent as exc:
            log.warning("ignoring SQS message", extra={"message_id": message_id, "why": str(exc)})
            return None
        if parsed.event_id in self._seen_events:
            log.info("ignoring duplicate event", extra={"event_id": parsed.event_id, "message_id": message_id})
            return None
        gid = self._group_of_instance(parsed.instance_id)
        if gid is None:
            log.info("ignoring event for an instance no managed group owns",
                     extra={"event_id": parsed.event_id, "instance": parsed.instance_id})
            self._remember(parsed.event_id)
            return None
        if parsed.kind is EventKind.NODE_LOST:
            node = self._nodes.get(parsed.instance_id)
            ours = parsed.instance_id in self._terminated
            warm = node is not None and node.state is NodeState.WARM or self._groups[gid].instances.get(
                parsed.instance_id, ""
            ).startswith("Warmed:")
            if parsed.state not in events.LOST_STATES or ours or warm:
                self._remember(parsed.event_id)
                return None
        self._remember(parsed.event_id)
        detail = {
            EventKind.INTERRUPTION: f"spot interruption warning ({parsed.action or 'terminate'})",
            EventKind.REBALANCE: "rebalance recommendation",
            EventKind.NODE_LOST: f"instance {parsed.state}",
        }.get(parsed.kind, "")
        return ProviderEvent(parsed.kind, parsed.at, gid, parsed.instance_id, deadline=parsed.deadline, detail=detail)

    def _remember(self, event_id: str) -> None:
        self._seen_events[event_id] = None
        while len(self._seen_events) > SEEN_EVENTS_KEPT:
            self._seen_events.popitem(last=False)

    def _group_of_instance(self, iid: NodeId) -> str | None:
        for gid, g in self._groups.items():
            if iid in g.instances:
                return gid
        found = self._call(self.autoscaling, "describe_auto_scaling_instances", InstanceIds=[iid])
        for m in found.get("AutoScalingInstances", []):
            name = str(m.get("AutoScalingGroupName", ""))
            if name in self._asg_names():
                return self._gid_of_asg(name)
        return None

    def _activity_events(self) -> list[ProviderEvent]:
        out: list[ProviderEvent] = []
        for gid, g in self._groups.items():
            resp = self._call(
                self.autoscaling, "describe_scaling_activities", AutoScalingGroupName=g.spec.asg_name, MaxRecords=20
            )
            out.extend(self.launch_failures(gid, resp.get("Activities", [])))
        return out

    def launch_failures(self, group_id: str, activities: Iterable[Mapping[str, Any]]) -> list[ProviderEvent]:
        """LAUNCH_FAILED events for failed scaling activities not seen before (started since this provider began).

        A failure that names InsufficientInstanceCapacity starts the ICE
        cooldown of the group's instance types.
        """
        g = self._group(group_id)
        out = []
        for act in activities:
            aid = str(act.get("ActivityId", ""))
            if not aid or aid in self._seen_activities:
                continue
            started = act.get("StartTime")
            if isinstance(started, datetime) and started.astimezone(UTC) < self._started_wall:
                self._seen_activities.add(aid)
                continue
            if act.get("StatusCode") not in ("Failed", "Cancelled"):
                continue
            self._seen_activities.add(aid)
            message = str(act.get("StatusMessage") or act.get("Description") or "launch failed")
            if "InsufficientInstanceCapacity" in message or "sufficient" in message and "capacity" in message:
                for itype in g.spec.instance_types:
                    if itype in message or len(g.spec.instance_types) == 1:
                        self._ice.mark(itype)
            out.append(ProviderEvent(EventKind.LAUNCH_FAILED, self._clock(), group_id, detail=message[:300]))
        return out

    # ------------------------------------------------------------ lifecycle hooks

    def _complete_launch_hooks(self) -> None:
        if not self._launch_hook:
            return
        for g in self._groups.values():
            for iid, lifecycle in sorted(g.instances.items()):  # in id order: the calls are reproducible
                if lifecycle == "Pending:Wait":
                    try:
                        self.complete_launch(iid)
                    except NotFound as exc:  # waiting on a hook of the user's, not burst's: theirs to complete
                        log.debug("launch hook not completed", extra={"node": iid, "detail": str(exc)})

    def complete_launch(self, node_id: NodeId) -> None:
        """Let a launching instance waiting on the launch hook go InService (its bootstrap has finished)."""
        self._lifecycle("complete_lifecycle_action", node_id, self._launch_hook, result="CONTINUE")

    def heartbeat_termination(self, node_id: NodeId) -> None:
        """Keep a terminating instance in Terminating:Wait while its jobs checkpoint (checkpoint on scale-in)."""
        self._lifecycle("record_lifecycle_action_heartbeat", node_id, self._terminate_hook)

    def complete_termination(self, node_id: NodeId) -> None:
        """Release a terminating instance once its jobs have checkpointed."""
        self._lifecycle("complete_lifecycle_action", node_id, self._terminate_hook, result="CONTINUE")

    def _lifecycle(self, operation: str, node_id: NodeId, hook: str | None, *, result: str | None = None) -> None:
        if not hook:
            raise NotSupported(f"provider {self.name} was built without that lifecycle hook")
        gid = self._group_of_instance(node_id)
        if gid is None:
            raise NotFound(f"{node_id} is in no managed group")
        params: dict[str, Any] = {
            "AutoScalingGroupName": self._groups[gid].spec.asg_name,
            "LifecycleHookName": hook,
            "InstanceId": node_id,
        }
        if result is not None:
            params["LifecycleActionResult"] = result
        try:
            self._call(self.autoscaling, operation, **params)
        except NotFound:
            raise
        except ProviderError as exc:
            if "No active Lifecycle Action" in str(exc):
                raise NotFound(f"{node_id}: no lifecycle action waiting on {hook}") from None
            raise

    # ------------------------------------------------------------ helpers

    def _asg_names(self) -> list[str]:
        return [g.spec.asg_name for g in self._groups.values()]

    def _gid_of_asg(self, name: str) -> str:
        return next(gid for gid, g in self._groups.items() if g.spec.asg_name == name)

    @staticmethod
    def code_of(exc: BaseException) -> str:
        return error_code(exc)

