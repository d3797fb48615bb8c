"""`LibcloudProvider`: burst node groups over any apache-libcloud compute driver, behind the `Provider` protocol.

libcloud has no node-group object, so this provider is the group manager: a
group is the set of nodes whose metadata says `burst-cluster: <cluster>` and
`burst-group: <group id>` (where the driver keeps metadata) and whose name is
`<cluster>-<group>-<digest>-<index>`, and the provider scales it node by node.

How each protocol method maps onto the driver (every call goes through
`errors.Caller`: retries on transient errors, typed errors):

* `node_groups` — from config (`burst.yaml` node groups with provider
  libcloud), each with a `GroupSpec` naming the driver size, image, location
  and extra `create_node` arguments.
* `refresh` — one `list_nodes()`; members are recognised by metadata, else by
  name. `nodes()` and `group_state()` answer from this view, updated by this
  provider's own calls (a listing is as of the last refresh: one tick). A
  pool node being prepared that is running is stopped here (`stop_node`).
* `set_target` — absolute: wakes stopped warm-pool nodes first
  (`start_node`), then `create_node` for the rest; scales in with
  `destroy_node` (booting and failed nodes first, then the newest). The
  target is the provider's own record: set by `set_target`, lowered by
  `terminate` and by a node that vanished outside burst (a NODE_LOST event;
  nothing replaces it until burst asks again).
* `terminate` — `destroy_node` of exactly these nodes; unknown or already
  terminated ids raise NotFound after the others are done.
* `set_warm_pool` / `warm_pool` — only where the driver can stop and start
  nodes (`stop_node`/`ex_stop_node` and `start_node`/`ex_start_node`) and only
  in state `stopped`: pool nodes are created, then stopped once running; a
  stopped member is a warm node. NotSupported otherwise, and for Spot groups.
* `offerings` — one per group: its size in its location, priced from the
  group spec, else the price lookup (the catalog), else the driver's size
  price (libcloud's bundled pricing data); unavailable during a capacity
  cooldown after InsufficientCapacity.
* `poll_events` — NODE_LOST for nodes that vanished without burst asking,
  LAUNCH_FAILED for nodes the driver lists in ERROR. Drivers expose no
  interruption notices, so there are none.

Idempotency: every mutating method remembers the keys it applied, per method.
A create for a key derives its node names from the key (`node_name`), and a
node of that name, listed or created earlier, counts as done, so a retried
create (after a lost response, a crash, a restart) makes no duplicate; where
`create_node` takes an `ex_clienttoken` (EC2), it gets a UUIDv5 of the name.
A call that raised before applying anything does not consume its key. A
create that fails part-way (the third of four nodes hits a quota) keeps the
nodes already made, records the target they reach and raises: the same key
sent again creates only the missing ones.

Limits: the group role (serving or warm) of a node is known from this
provider's own calls and, after a restart, from its state (stopped: warm);
a pool node that was still being prepared when the controller restarted is
counted as serving. Warm state `running`, `hibernated` and reuse of
scaled-in nodes are not supported.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import logging
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from libcloud.compute.base import NodeDriver
from libcloud.compute.types import NodeState as LcState

from burst.model import (
    CapacityType,
    EventKind,
    Node,
    NodeGroup,
    NodeId,
    NodeState,
    Offering,
    ProviderEvent,
    WarmState,
)
from providers.base import (
    Caller,
    Clock,
    InsufficientCapacity,
    NotFound,
    NotSupported,
    ProviderError,
    RetrySettings,
)
from providers.libcloud.errors import error_mapping
from providers.lifecycle import GroupedProvider, GroupRecord

log = logging.getLogger("burst.providers.libcloud")

CLUSTER_KEY = "burst-cluster"
GROUP_KEY = "burst-group"
"""Metadata keys burst writes on the nodes it creates (lower-case and hyphenated: valid on every cloud)."""

CLUSTER_TAG = "burst:cluster"
GROUP_TAG = "burst:group"
"""Tag names of `Node.tags`, as every provider reports them."""

CAPACITY_COOLDOWN_S = 300.0
"""How long a group's offering stays unavailable after the cloud said it has no capacity."""

STOPPED_STATES = frozenset({LcState.STOPPED, LcState.SUSPENDED, LcState.PAUSED})
BOOTING_STATES = frozenset({LcState.PENDING, LcState.STARTING, LcState.REBOOTING})
SERVING, PREPARING, WARM = "serving", "preparing", "warm"
PriceLookup = Callable[[str, str, CapacityType], float | None]
"""(instance_type, region, capacity type) -> USD/hour, or None when unknown (the catalog)."""


@dataclass(frozen=True)
class GroupSpec:
    """How nodes of one group are created: the driver's size, image and location, and extra create arguments."""

    size: str
    image: str
    location: str | None = None
    price_per_hour: float | None = None
    create_args: Mapping[str, Any] = field(default_factory=dict)


class LibcloudConfigError(ValueError):
    """A group spec the driver cannot honour (unknown size, image or location): one line naming the fix."""


def node_name(cluster: str, group_id: str, what: str, key: str, index: int) -> str:
    """The name of the `index`-th node a call (`what`, `key`) creates in a group: stable across retries and restarts."""
    digest = hashlib.sha256(f"{what}:{key}".encode()).hexdigest()[:8]
    return f"{cluster}-{group_id}-{digest}-{index}"


def supports_stop_start(driver: Any) -> bool:
    """Whether the driver can stop and start nodes (a method of its own, not NodeDriver's placeholder)."""
    cls = type(driver)

    def has(standard: str, extension: str) -> bool:
        own = getattr(cls, standard, None)
        return (own is not None and own is not getattr(NodeDriver, standard, None)) or callable(
            getattr(cls, extension, None)
        )

    return has("stop_node", "ex_stop_node") and has("start_node", "ex_start_node")


@dataclass
class _Member:
    id: NodeId
    name: str
    group_id: str
    role: str
    handle: Any  # the driver's Node, as last listed or returned
    created_at: datetime
    listed: bool = False
    destroying: bool = False
    waking: bool = False
    failed_reported: bool = False


@dataclass
class _Group(GroupRecord):
    spec: GroupSpec
    size: Any = None
    image: Any = None
    location: Any = None
    capacity_until: datetime | None = None


class LibcloudProvider(GroupedProvider[_Group]):
    """Node groups over one libcloud compute driver (see the module docstring)."""

    def __init__(
        self,
        driver: Any,
        groups: Sequence[NodeGroup],
        specs: Mapping[str, GroupSpec],
        *,
        cluster: str,
        clock: Clock,
        name: str = "libcloud",
        prices: PriceLookup | None = None,
        metadata_arg: str | None = "ex_metadata",
        warm_pools: bool | None = None,
        retry: RetrySettings | None = None,
        list_grace_s: float = 300.0,
        capacity_cooldown_s: float = CAPACITY_COOLDOWN_S,
        credentials_fix: str = "check the libcloud section's key_env/secret_env variables",
    ) -> None:
        """Resolve each group's size, image and location on the driver, then list its nodes.

        `metadata_arg` is the `create_node` keyword that carries metadata
        (`ex_metadata` for EC2 and OpenStack, `ex_tags` for Azure; None, or a
        driver whose `create_node` does not take it: members are known by
        name only). `warm_pools` None means "where the
        driver can stop and start nodes". A node created but not yet listed is
        kept as booting for `list_grace_s` before it counts as lost.

        Raises LibcloudConfigError (a spec the driver cannot honour),
        CredentialsError, BackendUnavailable.
        """
        self.driver = driver
        self.name = name
        self.cluster = cluster
        self._clock = clock
        self._prices = prices
        self._metadata_arg = metadata_arg
        self.stop_start = supports_stop_start(driver)
        self._warm_pools = self.stop_start if warm_pools is None else (warm_pools and self.stop_start)
        self._grace = timedelta(seconds=list_grace_s)
        self._cooldown = timedelta(seconds=capacity_cooldown_s)
        self._caller = Caller(retry or RetrySettings(), error_mapping(credentials_fix))
        self._create_params = _parameters(getattr(driver, "create_node", None))
        self._keys: set[tuple[str, str]] = set()
        self._members: dict[NodeId, _Member] = {}
        self._orphans: dict[NodeId, _Member] = {}
        self._nodes: dict[NodeId, Node] = {}
        self._gone: set[NodeId] = set()
        self._events: list[ProviderEvent] = []
        self._groups: dict[str, _Group] = {}
        for g in groups:
            spec = specs.get(g.id)
            if spec is None:
                raise LibcloudConfigError(f"node group {g.id}: no libcloud group spec (size and image) for it")
            self._groups[g.id] = _Group(group=dataclasses.replace(g, provider=name), spec=spec, desired=0,
                                    warm=(0, WarmState.STOPPED))
        self._resolve_specs()
        self._refresh(initial=True)
        for gid, entry in self._groups.items():
            entry.desired = len(self._role(gid, SERVING))
            entry.warm = (len(self._role(gid, WARM)) if self._warm_pools else 0, WarmState.STOPPED)

    # ------------------------------------------------------------ driver objects

    def _run(self, what: str, fn: Callable[[], Any], **kw: Any) -> Any:
        return self._caller.run(what, fn, **kw)

    def _resolve_specs(self) -> None:
        sizes: list[Any] | None = None
        locations: list[Any] | None = None
        images: list[Any] | None = None
        for gid, g in sorted(self._groups.items()):
            spec = g.spec
            if spec.location:
                if locations is None:
                    locations = list(self._run("list_locations", self.driver.list_locations))
                g.location = _pick(locations, spec.location)
                if g.location is None:
                    raise LibcloudConfigError(
                        f"node group {gid}: location {spec.location!r} is not one the driver lists; "
                        f"use one of {_ids(locations)}"
                    )
            if sizes is None:
                sizes = list(self._run("list_sizes", self.driver.list_sizes))
            g.size = _pick(sizes, spec.size)
            if g.size is None:
                raise LibcloudConfigError(
                    f"node group {gid}: size {spec.size!r} is not one the driver lists (by id or name)"
                )
            g.image = self._image(spec.image)
            if g.image is None:
                if images is None:
                    images = list(self._run("list_images", self.driver.list_images))
                g.image = _pick(images, spec.image)
            if g.image is None:
                raise LibcloudConfigError(f"node group {gid}: image {spec.image!r} is not one the driver lists")

    def _image(self, image_id: str) -> Any:
        getter = getattr(type(self.driver), "get_image", None)
        if getter is None or getter is getattr(NodeDriver, "get_image", None):
            return None
        try:
            return self._run("get_image", lambda: self.driver.get_image(image_id))
        except (NotFound, NotSupported):
            return None

    # ------------------------------------------------------------ listing

    def _group_of(self, handle: Any) -> tuple[str | None, bool]:
        """(group id, ours) of a listed driver node: by its metadata, else by its name; (None, False) if not ours.

        A node tagged with this cluster but naming no configured group is
        ours with group None (an orphan, listed so garbage collection finds it).
        """
        meta = metadata_of(handle)
        if CLUSTER_KEY in meta:
            if meta[CLUSTER_KEY] != self.cluster:
                return None, False
            gid = meta.get(GROUP_KEY, "")
            return (gid if gid in self._groups else None), True
        name = str(getattr(handle, "name", "") or "")
        for gid in self._groups:
            prefix = f"{self.cluster}-{gid}-"
            if name.startswith(prefix) and _SUFFIX.fullmatch(name[len(prefix):]):
                return gid, True
        return None, False

    def _list(self, *, initial: bool = False) -> dict[NodeId, Any]:
        """List the driver's nodes and update the members; return the live listed nodes that are ours by id."""
        listed = list(self._run("list_nodes", self.driver.list_nodes))
        now = self._clock()
        seen: set[NodeId] = set()
        orphans: dict[NodeId, _Member] = {}
        for handle in listed:
            nid = str(handle.id)
            if handle.state == LcState.TERMINATED:
                continue
            gid, tagged = self._group_of(handle)
            if not tagged:
                continue
            seen.add(nid)
            if gid is None:
                meta = metadata_of(handle)
                prior = self._orphans.get(nid)
                orphans[nid] = prior or _Member(nid, str(handle.name), meta.get(GROUP_KEY, ""), SERVING, handle, now)
                orphans[nid].handle, orphans[nid].listed = handle, True
                continue
            member = self._members.get(nid)
            if member is None:
                if nid in self._gone:
                    continue
                role = WARM if self._warm_pools and handle.state in STOPPED_STATES else SERVING
                member = _Member(nid, str(handle.name), gid, role, handle, now)
                self._members[nid] = member
                if not initial:
                    log.info("adopting a node of the group created elsewhere", extra={"node": nid, "group": gid})
            member.handle, member.listed = handle, True
        self._orphans = orphans
        return {nid: m.handle for nid, m in self._members.items() if nid in seen}

    # ------------------------------------------------------------ protocol: reads

    def offerings(self, group_id: str) -> Sequence[Offering]:
        """The group's one offering: its size in its location (see the module docstring). Raises NotFound."""
        g = self._group(group_id)
        zone = g.group.zone or (str(getattr(g.location, "id", "")) if g.location is not None else "")
        return [
            Offering(
                instance_type=g.group.instance_type,
                zone=zone,
                capacity_type=g.group.capacity_type,
                price_per_hour=self._price(g),
                available=not self._cooling(g),
            )
        ]

    def _price(self, g: _Group) -> float:
        if g.spec.price_per_hour is not None:
            return float(g.spec.price_per_hour)
        if self._prices is not None:
            found = self._prices(g.group.instance_type, g.group.region, g.group.capacity_type)
            if found is not None:
                return float(found)
        driver_price = getattr(g.size, "price", None)
        if g.group.capacity_type is not CapacityType.SPOT and isinstance(driver_price, int | float):
            return float(driver_price)
        return 0.0

    def _cooling(self, g: _Group) -> bool:
        return g.capacity_until is not None and self._clock() < g.capacity_until

    # ------------------------------------------------------------ protocol: writes

    def set_target(self, group_id: str, size: int, *, key: str) -> None:
        """Wake warm nodes, create or destroy nodes so the group has `size` serving nodes (see Provider.set_target).

        Raises NotFound, InvalidTarget, InsufficientCapacity (also while the
        group's capacity cooldown runs), QuotaExceeded, CredentialsError,
        BackendUnavailable. A create that fails part-way keeps what it made
        (see the module docstring).
        """
        g = self._resizing(group_id, size, key)
        if g is None:
            return
        serving = self._role(group_id, SERVING)
        if size > len(serving) and self._cooling(g):
            raise InsufficientCapacity(f"{group_id}: the cloud had no capacity for it; cooling down until "
                                       f"{g.capacity_until.isoformat() if g.capacity_until else ''}")
        try:
            if size > len(serving):
                for m in sorted(self._role(group_id, WARM), key=lambda m: (m.created_at, m.id))[: size - len(serving)]:
                    self._start(m)
                self._create(g, "set_target", key, size, SERVING)
            elif size < len(serving):
                for m in _victims(serving, self._nodes)[: len(serving) - size]:
                    self._destroy(m)
        finally:
            g.desired = len(self._role(group_id, SERVING))
        self._keys.add(("set_target", key))

    def set_warm_pool(self, group_id: str, size: int, state: WarmState, *, key: str) -> None:
        """Keep `size` stopped nodes beyond the target (see Provider.set_warm_pool and the module docstring).

        Raises NotFound, InvalidTarget (negative), NotSupported (no stop/start
        in the driver, a Spot group, a state other than stopped),
        InsufficientCapacity, QuotaExceeded, CredentialsError, BackendUnavailable.
        """
        g = self._warming(group_id, size)
        if not self._warm_pools:
            why = "the driver cannot stop and start nodes" if not self.stop_start else "warm pools are turned off"
            raise NotSupported(f"{group_id}: no warm pool on {self.name}: {why}")
        if g.group.capacity_type is CapacityType.SPOT:
            raise NotSupported(f"{group_id}: Spot nodes cannot be kept stopped in a warm pool")
        if state is not WarmState.STOPPED:
            raise NotSupported(f"{group_id}: libcloud warm pools keep nodes stopped; {state.value} is not supported")
        if ("set_warm_pool", key) in self._keys:
            return
        pool = self._role(group_id, PREPARING) + self._role(group_id, WARM)
        if size > len(pool):
            if self._cooling(g):
                raise InsufficientCapacity(f"{group_id}: the cloud had no capacity for it; cooling down")
            self._create(g, "set_warm_pool", key, size, PREPARING)
        else:
            extra = sorted(pool, key=lambda m: (m.role != PREPARING, -m.created_at.timestamp(), m.id))
            for m in extra[: len(pool) - size]:
                self._destroy(m)
        g.warm = (size, state)
        self._keys.add(("set_warm_pool", key))

    def terminate(self, node_ids: Sequence[NodeId], *, key: str) -> None:
        """Destroy exactly these nodes (see Provider.terminate). Raises NotFound after doing the others."""
        if ("terminate", key) in self._keys:
            return
        ids = list(dict.fromkeys(node_ids))
        unknown = [i for i in ids if i not in self._members and i not in self._orphans]
        if unknown and any(i not in self._gone for i in unknown):
            self._list()  # a node created elsewhere, or since the last refresh
        missing: list[NodeId] = []
        for nid in ids:
            m = self._members.get(nid) or self._orphans.get(nid)
            if m is None:
                missing.append(nid)
                continue
            if m.destroying:
                continue  # already terminating: a no-op
            self._destroy(m)
            if m.group_id in self._groups:
                self._groups[m.group_id].desired = len(self._role(m.group_id, SERVING))
        self._keys.add(("terminate", key))
        if missing:
            raise NotFound(f"not found or already terminated: {', '.join(missing)}")

    # ------------------------------------------------------------ driver calls

    def _create(self, g: _Group, what: str, key: str, size: int, role: str) -> None:
        """Create the nodes named for (`what`, `key`) that are missing, until the group has `size` in `role`s."""
        gid = g.group.id
        roles = (PREPARING, WARM) if role == PREPARING else (SERVING,)
        mine = node_name(self.cluster, gid, what, key, 0).removesuffix("0")
        have = [m for m in self._members.values() if m.group_id == gid and m.role in roles and not m.destroying]
        others = sum(1 for m in have if not m.name.startswith(mine))
        existing = {m.name for m in have}
        for i in range(max(0, size - others)):
            name = node_name(self.cluster, gid, what, key, i)
            if name not in existing:  # else made by an earlier try of this key: done
                self._create_one(g, name, key, role)

    def _create_one(self, g: _Group, name: str, key: str, role: str) -> None:
        gid = g.group.id
        kwargs: dict[str, Any] = {"name": name, "size": g.size, "image": g.image}
        if g.location is not None:
            kwargs["location"] = g.location
        if self._metadata_arg and self._takes(self._metadata_arg):
            kwargs[self._metadata_arg] = {CLUSTER_KEY: self.cluster, GROUP_KEY: gid}
        if "ex_clienttoken" in self._create_params:
            kwargs["ex_clienttoken"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"burst:{key}:{name}"))
        kwargs.update(g.spec.create_args)
        found: list[Any] = []

        def look_again() -> None:
            found[:] = [h for h in self._list().values() if str(h.name) == name]

        def create() -> Any:
            if found:
                return found[0]  # the earlier attempt did create it; its response was lost
            return self.driver.create_node(**kwargs)

        try:
            handle = self._run("create_node", create, before_retry=look_again)
        except InsufficientCapacity:
            g.capacity_until = self._clock() + self._cooldown
            raise
        if isinstance(handle, list):  # a driver that returns every node of a multi-launch
            handle = handle[0]
        nid = str(handle.id)
        now = self._clock()
        member = self._members.get(nid) or _Member(nid, name, gid, role, handle, now)
        member.handle, member.role = handle, role
        self._members[nid] = member
        self._gone.discard(nid)
        self._mark(member, NodeState.REQUESTED, None)

    def _takes(self, keyword: str) -> bool:
        return keyword in self._create_params or "**" in self._create_params

    def _destroy(self, m: _Member) -> None:
        def gone_already() -> None:
            listed = self._list()
            if m.id not in listed:
                raise _AlreadyGone()

        try:
            self._run("destroy_node", lambda: self.driver.destroy_node(m.handle), before_retry=gone_already)
        except _AlreadyGone:
            pass
        except NotFound:
            pass  # gone already: what destroy wanted
        m.destroying = True
        if m.id in self._nodes:
            self._mark(m, NodeState.TERMINATING, None)

    def _start(self, m: _Member) -> None:
        fn = self._method("start_node", "ex_start_node")
        self._run("start_node", lambda: fn(m.handle))
        m.role, m.waking = SERVING, True
        self._mark(m, NodeState.WAKING, None)

    def _stop(self, m: _Member) -> None:
        fn = self._method("stop_node", "ex_stop_node")
        self._run("stop_node", lambda: fn(m.handle))

    def _method(self, standard: str, extension: str) -> Callable[[Any], Any]:
        cls = type(self.driver)
        own = getattr(cls, standard, None)
        if own is not None and own is not getattr(NodeDriver, standard, None):
            return getattr(self.driver, standard)  # type: ignore[no-any-return]
        return getattr(self.driver, extension)  # type: ignore[no-any-return]

    # ------------------------------------------------------------ refresh

    def refresh(self) -> None:
        """List the nodes; prepare pool nodes; notice lost and failed nodes (see the module docstring).

        Raises CredentialsError, BackendUnavailable (the provider is unhealthy this tick).
        """
        self._refresh(initial=False)

    def _refresh(self, *, initial: bool) -> None:
        listed = self._list(initial=initial)
        now = self._clock()
        for nid, m in list(self._members.items()):
            handle = listed.get(nid)
            if handle is not None:
                self._observe(m, handle, now)
            elif m.destroying:
                self._forget(m)  # destroyed and no longer listed: gone
            elif m.listed or now - m.created_at >= self._grace:
                self._lost(m, now)
            # else: created, not listed yet (eventual consistency): it stays requested
        for m in self._orphans.values():
            self._orphan_node(m)
        for nid in [n for n in self._nodes if n not in self._members and n not in self._orphans]:
            del self._nodes[nid]

    def _observe(self, m: _Member, handle: Any, now: datetime) -> None:
        state = handle.state
        if m.destroying:
            self._mark(m, NodeState.TERMINATING, None)
            return
        if m.role == PREPARING:
            if state == LcState.RUNNING:
                try:
                    self._stop(m)
                except ProviderError as exc:
                    log.warning("could not stop a warm-pool node", extra={"node": m.id, "error": str(exc)})
            if state in STOPPED_STATES:
                m.role = WARM
                self._mark(m, NodeState.WARM, WarmState.STOPPED)
            else:
                self._mark(m, NodeState.BOOTING, None)
            return
        if m.role == WARM:
            self._mark(m, NodeState.WARM if state in STOPPED_STATES else NodeState.BOOTING,
                           WarmState.STOPPED if state in STOPPED_STATES else None)
            return
        if state == LcState.RUNNING:
            m.waking = False
            self._mark(m, NodeState.READY, None)
        elif state == LcState.ERROR:
            self._mark(m, NodeState.FAILED, None)
            if not m.failed_reported:
                m.failed_reported = True
                self._events.append(ProviderEvent(EventKind.LAUNCH_FAILED, now, m.group_id, m.id,
                                                  detail=f"the driver lists {m.name} in state error"))
        elif state in STOPPED_STATES or state == LcState.STOPPING:
            self._mark(m, NodeState.WAKING if m.waking else NodeState.DRAINING, None)
        elif state in BOOTING_STATES or m.id not in self._nodes:
            self._mark(m, NodeState.WAKING if m.waking else NodeState.BOOTING, None)
        # other states (unknown, migrating, updating): the node keeps the state it had

    def _lost(self, m: _Member, now: datetime) -> None:
        self._forget(m)
        if m.role == SERVING and m.group_id in self._groups:
            g = self._groups[m.group_id]
            g.desired = len(self._role(m.group_id, SERVING))
        self._events.append(ProviderEvent(EventKind.NODE_LOST, now, m.group_id, m.id,
                                          detail=f"{m.name} is no longer listed and burst did not destroy it"))

    def _forget(self, m: _Member) -> None:
        self._members.pop(m.id, None)
        self._nodes.pop(m.id, None)
        self._gone.add(m.id)

    def _tags(self, m: _Member) -> dict[str, str]:
        tags = metadata_of(m.handle)
        tags[CLUSTER_TAG] = self.cluster
        tags[GROUP_TAG] = m.group_id
        return tags

    def _orphan_node(self, m: _Member) -> None:
        state = NodeState.READY if m.handle.state == LcState.RUNNING else NodeState.BOOTING
        self.observe(m.id, m.group_id, NodeState.TERMINATING if m.destroying else state, None, self._tags(m),
                     created=m.created_at)

    def _mark(self, m: _Member, state: NodeState, warm: WarmState | None) -> None:
        """Record what a member is now, as the shared lifecycle walks it."""
        self.observe(m.id, m.group_id, state, warm, self._tags(m))

    # ------------------------------------------------------------ events

    def poll_events(self) -> Sequence[ProviderEvent]:
        """NODE_LOST and LAUNCH_FAILED events noticed by refreshes since the last poll, oldest first."""
        out, self._events = self._events, []
        return sorted(out, key=lambda e: e.at)

    # ------------------------------------------------------------ helpers

    def _role(self, group_id: str, role: str) -> list[_Member]:
        return [m for m in self._members.values() if m.group_id == group_id and m.role == role and not m.destroying]


class _AlreadyGone(ProviderError):
    """A destroy retried after a lost response found the node gone: done."""


_SUFFIX = re.compile(r"[0-9a-f]{8}-[0-9]+")


def _parameters(fn: Any) -> frozenset[str]:
    """The keyword names `fn` takes ("**" among them when it takes any)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return frozenset({"**"})
    return frozenset("**" if p.kind is inspect.Parameter.VAR_KEYWORD else p.name for p in params)


def _pick(items: Sequence[Any], wanted: str) -> Any:
    """The item whose id (else name) is `wanted`, or None."""
    for attr in ("id", "name"):
        for item in items:
            if str(getattr(item, attr, "")) == wanted:
                return item
    return None


def _ids(items: Sequence[Any]) -> str:
    return ", ".join(sorted(str(getattr(i, "id", "")) for i in items)[:20])


def metadata_of(handle: Any) -> dict[str, str]:
    """The string metadata a driver's node carries: EC2/Azure `tags`, OpenStack `metadata`, GCE `labels`/items."""
    extra = getattr(handle, "extra", None) or {}
    out: dict[str, str] = {}
    for key in ("labels", "metadata", "tags"):
        value = extra.get(key)
        if isinstance(value, Mapping):
            items = value.get("items")
            if isinstance(items, list):  # GCE instance metadata: {"items": [{"key": k, "value": v}]}
                out.update({str(i.get("key")): str(i.get("value")) for i in items if isinstance(i, Mapping)})
            else:
                out.update({str(k): str(v) for k, v in value.items() if isinstance(v, str | int | float)})
    return out


def _victims(serving: Sequence[_Member], nodes: Mapping[NodeId, Node]) -> list[_Member]:
    """Scale-in order: failed, then booting (not yet ready), then the newest ready nodes."""
    def rank(m: _Member) -> tuple[int, float, str]:
        node = nodes.get(m.id)
        state = node.state if node is not None else NodeState.REQUESTED
        order = 0 if state is NodeState.FAILED else 1 if state is not NodeState.READY else 2
        return (order, -m.created_at.timestamp(), m.id)

    return sorted(serving, key=rank)



__all__ = [
    "CLUSTER_KEY",
    "GROUP_KEY",
    "GroupSpec",
    "LibcloudConfigError",
    "LibcloudProvider",
    "metadata_of",
    "node_name",
    "supports_stop_start",
]
