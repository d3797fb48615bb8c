"""A simulated cloud behind the `Provider` protocol, for the quickstart, the simulator and tests.

`SimProvider` behaves like an Auto Scaling group per node group, driven by an
injected clock and a seed, so every run is reproducible:

* **Targets.** `set_target` records the desired size at once (like ASG
  DesiredCapacity, `group_state()` is immediately consistent); the group then
  converges: growing takes warm nodes first (WARM -> WAKING -> READY after the
  group's wake latency), then launches new nodes (REQUESTED -> BOOTING at once,
  READY after `boot_latency_s`). Shrinking removes the newest nodes first, not
  yet ready ones before ready ones, or returns them to the warm pool when it
  reuses nodes on scale-in and has room. `terminate` of a serving node also
  returns it to the pool when it is ready (healthy), while the pool holds
  fewer than its size; a node still booting or stuck is terminated.
* **Warm pools.** `set_warm_pool` keeps `size` nodes in WARM beyond the target,
  prepared by booting them (BOOTING -> WARM). A warm pool retains up to
  max(size, group.warm_pool.max_prepared) nodes (nodes returned on scale-in
  fill the difference). Like AWS: no warm pools on Spot groups, and GPU
  families (instance types starting "p" or "g") cannot hibernate. Changing the
  pool's state applies to newly prepared nodes; nodes already warm keep theirs.
  Warm nodes hold their capacity: waking one never fails for capacity.
* **Eventual consistency.** A node is missing from `nodes()` until
  `list_delay_s` after it was created.
* **Time.** Nothing runs in the background: every public method first advances
  the internal state to `clock()`, processing each scheduled change at its own
  instant. `next_event_at()` says when the next one is due, so an event-driven
  simulator can jump its clock there.
* **Spot.** With a hazard `h` per hour, a node that becomes READY draws an
  exponential time to interruption; at that instant an INTERRUPTION event is
  emitted with `deadline = at + interruption_notice_s`; at the deadline the node
  goes READY -> INTERRUPTED -> TERMINATING and, as an ASG keeps desired
  capacity, a replacement is launched. The k-th time a node of a group becomes
  READY takes the k-th draw of a stream seeded by `seed` and the group id, not
  the node id: runs with the same seed and groups that launch, cancel or
  replace different nodes face the same reclaim luck (common random numbers),
  so comparing two scaling strategies measures the strategies, not their draws.
* **Faults.** `inject_error` (one-shot, counted or persistent, optionally per
  group), `fail_offering` (per offering, until cleared), `fail_boots` (the next
  launches fail while booting), `stall_boots` (the next launches never finish booting), `set_capacity` (stock runs out),
  `inject_interruption` and `launch_untracked` (an orphan for GC tests).
* **Records.** `calls` lists every mutating call; `cost_usd()` and
  `node_seconds()` integrate what the nodes cost over time.

The lifecycle table has no edge from REQUESTED/BOOTING/WAKING to TERMINATING,
so a node removed before it is ready goes through FAILED first.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeAlias

from burst.model import (
    LIVE_NODE_STATES,
    CapacityType,
    EventKind,
    GroupId,
    Node,
    NodeGroup,
    NodeId,
    NodeState,
    Offering,
    ProviderEvent,
    Tier,
    WarmState,
)
from providers.base import (
    Clock,
    GroupState,
    InsufficientCapacity,
    InvalidTarget,
    NotFound,
    NotSupported,
)
from providers.lifecycle import find_group
from providers.sim_clock import DEFAULT_START, Call, ManualClock

DEFAULT_WAKE_LATENCY_S: Mapping[WarmState, float] = {
    WarmState.STOPPED: 60.0,
    WarmState.RUNNING: 5.0,
    WarmState.HIBERNATED: 30.0,
    WarmState.POWERED_OFF: 180.0,
}
"""Seconds from WARM(state) to READY when a group does not set `warm_wake_latency_s`."""

PROTOCOL_METHODS = frozenset(
    {
        "node_groups",
        "offerings",
        "nodes",
        "group_state",
        "set_target",
        "set_warm_pool",
        "terminate",
        "poll_events",
        "refresh",
    }
)
"""Method names `inject_error` accepts."""

_Apply: TypeAlias = Callable[[], None]

_STANDBY_WARM_STATES = frozenset({WarmState.STOPPED, WarmState.HIBERNATED, WarmState.POWERED_OFF})
_NOT_YET_READY = frozenset({NodeState.REQUESTED, NodeState.BOOTING, NodeState.WAKING})

# What a node serves: part of the group's target, its warm pool, or nothing burst asked for.
_SERVE = "serve"
_WARM = "warm"
_UNTRACKED = "untracked"

# Timer kinds, each at most once per node.
_T_VISIBLE = "visible"
_T_BOOT = "boot"
_T_WAKE = "wake"
_T_TERMINATE = "terminate"
_T_NOTICE = "notice"
_T_DEADLINE = "deadline"


@dataclass
class _Injection:
    method: str
    error: Exception
    remaining: int  # -1: until clear_errors()
    group_id: str | None


@dataclass
class _SimNode:
    """The sim's mutable record around one immutable model `Node`."""

    node: Node
    seq: int
    purpose: str
    visible_at: datetime
    timers: dict[str, tuple[datetime, int]] = field(default_factory=dict)
    fail_boot: bool = False

    @property
    def group_id(self) -> GroupId:
        return self.node.group_id

    @property
    def state(self) -> NodeState:
        return self.node.state


class SimProvider:
    """A deterministic simulated cloud implementing `providers.base.Provider` (see the module docstring)."""

    def __init__(
        self,
        groups: Sequence[NodeGroup],
        *,
        clock: Clock,
        cluster: str = "burst",
        name: str = "sim",
        prices: Mapping[str, float] | None = None,
        standby_prices: Mapping[str, float] | None = None,
        list_delay_s: float = 0.0,
        capacity: Mapping[str, int] | None = None,
        spot_hazard_per_hour: Mapping[str, float] | None = None,
        interruption_notice_s: float = 120.0,
        seed: int = 0,
        initial: Mapping[str, int] | None = None,
        terminate_latency_s: float = 30.0,
    ) -> None:
        """Build the sim; groups are the node groups it manages; per-group maps are keyed by group id.

        `prices` is USD/hour per node (default 0), `standby_prices` USD/hour of
        a stopped/hibernated/powered-off warm node (default 0), `capacity` the
        most live nodes a group can have (default its max_size),
        `spot_hazard_per_hour` the interruption rate of a Spot group's READY
        nodes, `initial` how many READY nodes each group has at start (its
        target starts at max(initial, min_size)).
        """
        self.name = name
        self.cluster = cluster
        self._clock = clock
        self._seed = seed
        self._groups: dict[GroupId, NodeGroup] = {}
        for g in groups:
            if g.id in self._groups:
                raise ValueError(f"duplicate node group id {g.id!r}")
            self._groups[g.id] = g
        self._check_keys(prices=prices, standby_prices=standby_prices, capacity=capacity,
                         spot_hazard_per_hour=spot_hazard_per_hour, initial=initial)
        if list_delay_s < 0 or interruption_notice_s < 0 or terminate_latency_s < 0:
            raise ValueError("list_delay_s, interruption_notice_s and terminate_latency_s must be >= 0")
        self._prices = {gid: float((prices or {}).get(gid, 0.0)) for gid in self._groups}
        self._standby_prices = {gid: float((standby_prices or {}).get(gid, 0.0)) for gid in self._groups}
        self._capacity = {gid: int((capacity or {}).get(gid, g.max_size)) for gid, g in self._groups.items()}
        self._hazard = {gid: float((spot_hazard_per_hour or {}).get(gid, 0.0)) for gid in self._groups}
        self._list_delay = timedelta(seconds=list_delay_s)
        self._notice = timedelta(seconds=interruption_notice_s)
        self._terminate_latency = timedelta(seconds=terminate_latency_s)

        self._now = clock()
        self._records: dict[NodeId, _SimNode] = {}
        self._active: dict[NodeId, _SimNode] = {}  # not TERMINATED
        self._active_by_group: dict[GroupId, dict[NodeId, _SimNode]] = {gid: {} for gid in self._groups}
        self._counter: dict[GroupId, int] = dict.fromkeys(self._groups, 0)
        self._readied: dict[GroupId, int] = dict.fromkeys(self._groups, 0)  # READY transitions so far
        self._targets: dict[GroupId, int] = {}
        self._warm_size: dict[GroupId, int] = {
            gid: 0 if g.capacity_type is CapacityType.SPOT else g.warm_pool.min_size
            for gid, g in self._groups.items()
        }
        self._warm_state: dict[GroupId, WarmState] = {
            gid: g.warm_pool.state for gid, g in self._groups.items()
        }
        self._keys: set[tuple[str, str]] = set()
        self._events: list[ProviderEvent] = []
        self._heap: list[tuple[datetime, int, NodeId, str]] = []
        self._seq = 0
        self._injections: list[_Injection] = []
        self._offering_errors: dict[GroupId, Exception] = {}
        self._fail_boots: dict[GroupId, int] = dict.fromkeys(self._groups, 0)
        self._stall_boots: dict[GroupId, int] = dict.fromkeys(self._groups, 0)
        self._shortfall: dict[GroupId, int] = dict.fromkeys(self._groups, 0)
        self._warm_shortfall: dict[GroupId, int] = dict.fromkeys(self._groups, 0)
        self._start_meters()
        self.calls: list[Call] = []
        """Every mutating call received (set_target, set_warm_pool, terminate), in order."""
        self._start_groups(initial or {})

    def _check_keys(self, **maps: Mapping[str, object] | None) -> None:
        for label, mapping in maps.items():
            unknown = sorted(set(mapping or {}) - set(self._groups))
            if unknown:
                raise ValueError(f"{label}: unknown node group(s) {', '.join(unknown)}")

    def _start_meters(self) -> None:
        """Zero what `cost_usd` and `node_seconds` integrate, per group."""
        self._full_time: dict[GroupId, timedelta] = {gid: timedelta(0) for gid in self._groups}
        self._standby_time: dict[GroupId, timedelta] = {gid: timedelta(0) for gid in self._groups}
        self._n_full: dict[GroupId, int] = dict.fromkeys(self._groups, 0)
        self._n_standby: dict[GroupId, int] = dict.fromkeys(self._groups, 0)
        # Full-price node time split by phase: not yet ready (booting, waking) and ready.
        self._booting_time: dict[GroupId, timedelta] = {gid: timedelta(0) for gid in self._groups}
        self._ready_time: dict[GroupId, timedelta] = {gid: timedelta(0) for gid in self._groups}
        self._n_booting: dict[GroupId, int] = dict.fromkeys(self._groups, 0)
        self._n_ready: dict[GroupId, int] = dict.fromkeys(self._groups, 0)
        self._cost_mark: dict[GroupId, float] = dict.fromkeys(self._groups, 0.0)

    def _start_groups(self, initial: Mapping[str, int]) -> None:
        """Each group's `initial` READY nodes, and its target at max(initial, min_size)."""
        for gid, g in self._groups.items():
            count = int(initial.get(gid, 0))
            if not 0 <= count <= g.max_size:
                raise ValueError(f"initial[{gid!r}] = {count} is outside [0, {g.max_size}]")
            for _ in range(count):
                self._create(g, _SERVE, key="initial", visible_now=True, ready=True)
            self._targets[gid] = max(count, g.min_size)
            self._converge(g)

    # ------------------------------------------------------------ protocol

    def node_groups(self) -> Sequence[NodeGroup]:
        """The node groups given at construction, in that order."""
        self._check_injected("node_groups", ())
        self._sync()
        return list(self._groups.values())

    def offerings(self, group_id: str) -> Sequence[Offering]:
        """One offering per group: its instance type, zone, capacity type and price.

        `available` is False while `fail_offering` is in force for the group.
        Raises NotFound for an unknown group.
        """
        self._check_injected("offerings", (group_id,))
        self._sync()
        g = self._group(group_id)
        return [
            Offering(
                instance_type=g.instance_type,
                zone=g.zone,
                capacity_type=g.capacity_type,
                price_per_hour=self._prices[g.id],
                available=g.id not in self._offering_errors,
            )
        ]

    def nodes(self) -> Mapping[NodeId, Node]:
        """Every non-terminated node, warm ones included, that is at least `list_delay_s` old."""
        self._check_injected("nodes", ())
        self._sync()
        now = self._now
        return {nid: r.node for nid, r in self._active.items() if r.visible_at <= now}

    def group_state(self, group_id: str) -> GroupState:
        """The group's desired size (immediately consistent, like ASG DesiredCapacity) and its warm pool's
        requested size and state. Raises NotFound."""
        self._check_injected("group_state", (group_id,))
        self._sync()
        self._group(group_id)
        return GroupState(self._targets[group_id], self._warm_size[group_id], self._warm_state[group_id])

    def set_target(self, group_id: str, size: int, *, key: str) -> None:
        """Set the desired size; the group converges on it over later refreshes (warm nodes first).

        Idempotent by `key`. Raises NotFound, InvalidTarget (outside
        [min_size, max_size]), InsufficientCapacity (more than the group's
        capacity), or the `fail_offering` error when growing needs new
        launches; nothing is applied when it raises.
        """
        self._mutating(
            "set_target", (group_id, size), key, (group_id,), lambda: self._set_target(group_id, size, key)
        )

    def set_warm_pool(self, group_id: str, size: int, state: WarmState, *, key: str) -> None:
        """Keep `size` nodes prepared in WARM(`state`) beyond the target.

        Idempotent by `key`. Raises NotFound; InvalidTarget (negative size);
        NotSupported for Spot groups (as AWS: no warm pools on Spot or
        mixed-instance groups) and for HIBERNATED on GPU families that cannot
        hibernate (instance types starting "p" or "g"); the `fail_offering`
        error when growing needs new launches.
        """
        self._mutating(
            "set_warm_pool",
            (group_id, size, state),
            key,
            (group_id,),
            lambda: self._set_warm_pool(group_id, size, state, key),
        )

    def terminate(self, node_ids: Sequence[NodeId], *, key: str) -> None:
        """Terminate these nodes; each serving node also decrements its group's target (not below min_size).

        Terminating a warm node leaves the target alone (the pool refills);
        an untracked node never counted toward it. A node already terminating
        is a no-op. Idempotent by `key`. Raises NotFound, after terminating
        the others, for ids that are unknown or already terminated.
        """
        ids = tuple(node_ids)
        groups = {self._records[n].group_id for n in ids if n in self._records}
        self._mutating("terminate", (ids,), key, groups, lambda: self._terminate(ids, key))

    def poll_events(self) -> Sequence[ProviderEvent]:
        """Events since the last poll (interruption notices, launch failures), in order; each returned once."""
        self._check_injected("poll_events", ())
        self._sync()
        out, self._events = self._events, []
        return out

    def refresh(self) -> None:
        """Advance the simulated world to `clock()`."""
        self._check_injected("refresh", ())
        self._sync()

    # ------------------------------------------------------------ sim-only: inspection

    def node(self, node_id: NodeId) -> Node | None:
        """Any node the sim ever created, terminated ones included, ignoring the listing delay."""
        self._sync()
        rec = self._records.get(node_id)
        return rec.node if rec else None

    def all_nodes(self, group_id: str | None = None) -> list[Node]:
        """Every node ever created (optionally of one group), terminated included, oldest first."""
        self._sync()
        return [r.node for r in self._records.values() if group_id is None or r.group_id == group_id]

    def next_event_at(self) -> datetime | None:
        """When the sim next changes by itself (a boot or wake completes, a terminate finishes,
        an interruption notice or deadline, a node becomes visible); None if nothing is scheduled."""
        self._sync()
        self._drop_stale_timers()
        return self._heap[0][0] if self._heap else None

    def cost_usd(self) -> dict[GroupId, float]:
        """USD spent so far by each group's non-terminated nodes (full price; standby price when warm and
        stopped, hibernated or powered off; warm running nodes pay full price)."""
        self._sync()
        return {gid: self._cost(gid) for gid in self._groups}

    def cost_since_last_call(self) -> dict[GroupId, float]:
        """USD spent by each group since the previous call of this method (or since start)."""
        self._sync()
        out: dict[GroupId, float] = {}
        for gid in self._groups:
            total = self._cost(gid)
            out[gid] = total - self._cost_mark[gid]
            self._cost_mark[gid] = total
        return out

    def node_seconds(self) -> dict[GroupId, float]:
        """Seconds summed over each group's non-terminated nodes, in any state, so far."""
        self._sync()
        return {gid: (self._full_time[gid] + self._standby_time[gid]).total_seconds() for gid in self._groups}

    def usage_seconds(self) -> dict[GroupId, tuple[float, float]]:
        """Per group, node-seconds so far billed at full price and at the standby price (warm, stopped)."""
        self._sync()
        return {
            gid: (self._full_time[gid].total_seconds(), self._standby_time[gid].total_seconds()) for gid in self._groups
        }

    def full_price_phases(self) -> dict[GroupId, tuple[float, float]]:
        """Per group, node-seconds so far billed at full price while not yet ready (requested, booting,
        waking) and while ready; the rest of `usage_seconds`' full-price time is warm-running, draining,
        interrupted, failed or terminating."""
        self._sync()
        return {
            gid: (self._booting_time[gid].total_seconds(), self._ready_time[gid].total_seconds()) for gid in self._groups
        }

    # ------------------------------------------------------------ sim-only: fault injection

    def inject_error(
        self, method: str, error: Exception, *, times: int = 1, group_id: str | None = None
    ) -> None:
        """Make the next `times` calls of `method` (only those about `group_id`, if given) raise `error`
        before doing anything; `times=-1` keeps raising until `clear_errors()`."""
        if method not in PROTOCOL_METHODS:
            raise ValueError(
                f"inject_error: {method!r} is not a provider method ({', '.join(sorted(PROTOCOL_METHODS))})"
            )
        if times == 0 or times < -1:
            raise ValueError(f"inject_error: times must be >= 1 or -1, got {times}")
        if group_id is not None:
            self._group(group_id)
        self._injections.append(_Injection(method, error, times, group_id))

    def fail_offering(self, group_id: str, error: Exception) -> None:
        """Until cleared, growing `group_id` raises `error` and its launches fail (LAUNCH_FAILED events)."""
        self._group(group_id)
        self._offering_errors[group_id] = error

    def clear_offering(self, group_id: str) -> None:
        """Lift `fail_offering` for one group; the group retries its missing launches."""
        self._sync()
        if self._offering_errors.pop(group_id, None) is not None:
            self._converge(self._group(group_id))
            self._process_due()

    def clear_errors(self) -> None:
        """Drop every injected error and offering failure; groups retry their missing launches."""
        self._sync()
        self._injections.clear()
        failed = list(self._offering_errors)
        self._offering_errors.clear()
        for gid in failed:
            self._converge(self._groups[gid])
        self._process_due()

    def fail_boots(self, group_id: str, count: int = 1) -> None:
        """Make the next `count` nodes launched in `group_id` fail at the end of booting
        (BOOTING -> FAILED -> TERMINATING, a LAUNCH_FAILED event); the group launches replacements."""
        self._group(group_id)
        self._fail_boots[group_id] += count

    def stall_boots(self, group_id: str, count: int = 1) -> None:
        """Make the next `count` nodes launched in `group_id` hang in BOOTING until terminated
        (a node that never joins: the case the actuator's resume timeout is for)."""
        self._group(group_id)
        self._stall_boots[group_id] += count

    def set_capacity(self, group_id: str, capacity: int) -> None:
        """Change how many live nodes `group_id` can have (the cloud's stock); missing launches are retried."""
        self._sync()
        g = self._group(group_id)
        self._capacity[group_id] = capacity
        self._converge(g)
        self._process_due()

    def inject_interruption(self, node_id: NodeId, notice_s: float | None = None) -> None:
        """Interrupt a live node now, whatever its group: an INTERRUPTION event with deadline
        now + `notice_s` (default `interruption_notice_s`), then the node goes at the deadline. Raises NotFound."""
        self._sync()
        rec = self._active.get(node_id)
        if rec is None or rec.state not in LIVE_NODE_STATES:
            raise NotFound(f"node {node_id} is not live")
        notice = self._notice if notice_s is None else timedelta(seconds=notice_s)
        rec.timers.pop(_T_NOTICE, None)
        self._emit_interruption(rec, self._now, self._now + notice)
        self._process_due()

    def inject_rebalance(self, node_id: NodeId) -> None:
        """Emit a REBALANCE recommendation (elevated interruption risk, no deadline) for a live node. Raises NotFound."""
        self._sync()
        rec = self._active.get(node_id)
        if rec is None or rec.state not in LIVE_NODE_STATES:
            raise NotFound(f"node {node_id} is not live")
        self._events.append(
            ProviderEvent(
                EventKind.REBALANCE, self._now, rec.group_id, node_id, detail="rebalance recommendation"
            )
        )

    def launch_untracked(self, group_id: str) -> NodeId:
        """Create a READY node tagged with the cluster that burst never asked for (an orphan).

        It does not count toward the target, still costs money and capacity,
        and is listed after `list_delay_s` like any new node. Raises NotFound.
        """
        self._sync()
        g = self._group(group_id)
        rec = self._create(g, _UNTRACKED, key="untracked", ready=True)
        self._process_due()
        return rec.node.id

    # ------------------------------------------------------------ mutations

    def _mutating(
        self, method: str, args: tuple[object, ...], key: str, groups: Collection[str], apply: _Apply
    ) -> None:
        at = self._clock()
        try:
            self._check_injected(method, groups)
            self._sync()
            if (method, key) in self._keys:
                self.calls.append(Call(method, args, key, at, duplicate=True))
                return
            apply()
        except Exception as exc:
            self.calls.append(Call(method, args, key, at, error=exc))
            raise
        self.calls.append(Call(method, args, key, at))

    def _set_target(self, group_id: str, size: int, key: str) -> None:
        g = self._group(group_id)
        if not g.min_size <= size <= g.max_size:
            raise InvalidTarget(f"{group_id}: size {size} is outside [{g.min_size}, {g.max_size}]")
        available = self._capacity[group_id] - len(self._of(group_id, {_UNTRACKED}, LIVE_NODE_STATES))
        if size > available:
            raise InsufficientCapacity(
                f"{group_id}: {size} nodes asked, the group can get {max(available, 0)}"
            )
        serving = len(self._serving(group_id))
        claimable = len(self._of(group_id, {_WARM}, LIVE_NODE_STATES))
        if group_id in self._offering_errors and size > serving + claimable:
            raise self._offering_errors[group_id]
        self._keys.add(("set_target", key))
        self._targets[group_id] = size
        self._converge(g, key=key)
        self._process_due()

    def _set_warm_pool(self, group_id: str, size: int, state: WarmState, key: str) -> None:
        g = self._group(group_id)
        if size < 0:
            raise InvalidTarget(f"{group_id}: warm pool size {size} is negative")
        if g.capacity_type is CapacityType.SPOT:
            raise NotSupported(f"{group_id}: warm pools are not supported on Spot groups")
        if state is WarmState.HIBERNATED and g.instance_type.lower().startswith(("p", "g")):
            raise NotSupported(f"{group_id}: {g.instance_type} (a GPU family) cannot hibernate")
        warm = len(self._of(group_id, {_WARM}, LIVE_NODE_STATES))
        if group_id in self._offering_errors and size > warm:
            raise self._offering_errors[group_id]
        self._keys.add(("set_warm_pool", key))
        self._warm_size[group_id] = size
        self._warm_state[group_id] = state
        self._converge(g)
        self._process_due()

    def _terminate(self, ids: tuple[NodeId, ...], key: str) -> None:
        self._keys.add(("terminate", key))  # applied even when some ids are missing
        missing: list[NodeId] = []
        touched: dict[GroupId, NodeGroup] = {}
        for nid in ids:
            rec = self._active.get(nid)
            if rec is None:
                missing.append(nid)
                continue
            if rec.state in (NodeState.TERMINATING, NodeState.INTERRUPTED):
                continue
            g = self._groups[rec.group_id]
            if rec.purpose == _SERVE and rec.state in LIVE_NODE_STATES:
                self._targets[g.id] = max(self._targets[g.id] - 1, g.min_size)
            if rec.purpose == _SERVE and rec.state is NodeState.READY:
                # A pool below its size takes a healthy node; an on-prem rack parks (powers off) every node it
                # releases, up to its whole size: owned machines are switched off, never given back.
                keep = max(self._warm_size[g.id], g.warm_pool.max_prepared) if g.tier is Tier.STEADY else self._warm_size[g.id]
                self._park_or_terminate(g, rec, keep)
            else:
                self._begin_termination(rec)
            touched[g.id] = g
        for g in touched.values():
            self._converge(g)
        self._process_due()
        if missing:
            raise NotFound(f"not found or already terminated: {', '.join(missing)}")

    def _check_injected(self, method: str, groups: Collection[str]) -> None:
        for inj in self._injections:
            if inj.method == method and (inj.group_id is None or inj.group_id in groups):
                if inj.remaining > 0:
                    inj.remaining -= 1
                    if inj.remaining == 0:
                        self._injections.remove(inj)
                raise inj.error.with_traceback(None)

    # ------------------------------------------------------------ convergence (the ASG)

    def _converge(self, g: NodeGroup, *, key: str = "") -> None:
        """Bring the group's serving nodes to its target and its warm pool to its size, at `_now`."""
        target = self._targets[g.id]
        serving = self._serving(g.id)
        if len(serving) > target:
            self._scale_in(g, serving, len(serving) - target)
        short = target - len(serving)
        if short > 0:
            short = self._claim_warm(g, short)
        if short > 0:
            short = self._launch(g, short, _SERVE, key)
        if short > 0 and short != self._shortfall[g.id]:
            why = self._offering_errors.get(g.id)
            reason = str(why) if why is not None else f"capacity {self._capacity[g.id]} reached"
            self._events.append(
                ProviderEvent(
                    EventKind.LAUNCH_FAILED,
                    self._now,
                    g.id,
                    detail=f"{short} node(s) could not launch: {reason}",
                )
            )
        self._shortfall[g.id] = max(short, 0)

        warm = self._of(g.id, {_WARM}, LIVE_NODE_STATES)
        keep = max(self._warm_size[g.id], g.warm_pool.max_prepared)
        if len(warm) < self._warm_size[g.id]:
            missing = self._warm_size[g.id] - len(warm)
            if g.id in self._offering_errors:
                if missing != self._warm_shortfall[g.id]:
                    err = self._offering_errors[g.id]
                    self._events.append(
                        ProviderEvent(
                            EventKind.LAUNCH_FAILED,
                            self._now,
                            g.id,
                            detail=f"warm pool: {missing} node(s) could not launch: {err}",
                        )
                    )
                self._warm_shortfall[g.id] = missing
                return
            self._launch(g, missing, _WARM, key)  # limited by capacity, like an ASG's max prepared capacity
        self._warm_shortfall[g.id] = 0
        if len(warm) > keep:
            for rec in self._victims(warm)[: len(warm) - keep]:
                self._begin_termination(rec)

    def _scale_in(self, g: NodeGroup, serving: list[_SimNode], excess: int) -> None:
        keep_warm = max(self._warm_size[g.id], g.warm_pool.max_prepared)
        for rec in self._victims(serving)[:excess]:
            self._park_or_terminate(g, rec, keep_warm)

    def _park_or_terminate(self, g: NodeGroup, rec: _SimNode, keep_warm: int) -> None:
        """Return a node leaving service to the warm pool while it holds fewer than `keep_warm` (reuse on
        scale-in), else terminate it."""
        reuse = g.warm_pool.reuse_on_scale_in and g.capacity_type is not CapacityType.SPOT
        warm_now = len(self._of(g.id, {_WARM}, LIVE_NODE_STATES))
        if reuse and warm_now < keep_warm and rec.state in (NodeState.BOOTING, NodeState.READY, NodeState.DRAINING):
            rec.purpose = _WARM
            self._clear_interruption(rec)
            if rec.state is not NodeState.BOOTING:
                if rec.state is NodeState.READY:
                    self._set(rec, rec.node.transition(NodeState.DRAINING, self._now))
                self._set(rec, rec.node.transition(NodeState.WARM, self._now, warm_state=self._warm_state[g.id]))
        else:
            self._begin_termination(rec)

    def _claim_warm(self, g: NodeGroup, short: int) -> int:
        """Turn warm nodes into serving ones (WARM first, fastest to wake, oldest; then those still booting)."""
        warm = self._of(g.id, {_WARM}, LIVE_NODE_STATES)
        ready_warm = sorted(
            (r for r in warm if r.state is NodeState.WARM),
            key=lambda r: (self._wake_latency(g, r.node.warm_state), r.seq),
        )
        booting = sorted((r for r in warm if r.state is not NodeState.WARM), key=lambda r: r.seq)
        for rec in (ready_warm + booting)[:short]:
            rec.purpose = _SERVE
            short -= 1
            if rec.state is NodeState.WARM:
                latency = self._wake_latency(g, rec.node.warm_state)
                self._set(rec, rec.node.transition(NodeState.WAKING, self._now))
                self._schedule(rec, _T_WAKE, self._now + timedelta(seconds=latency))
        return short

    def _launch(self, g: NodeGroup, count: int, purpose: str, key: str) -> int:
        """Launch up to `count` new nodes; returns how many could not be launched."""
        if g.id in self._offering_errors:
            return count
        room = self._capacity[g.id] - sum(1 for r in self._active_by_group[g.id].values() if r.node.live)
        n = max(0, min(count, room))
        for _ in range(n):
            self._create(g, purpose, key=key)
        return count - n

    def _victims(self, recs: list[_SimNode]) -> list[_SimNode]:
        """Removal order: not yet ready before ready, newest first (like an ASG)."""
        return sorted(recs, key=lambda r: (r.state not in _NOT_YET_READY, -r.seq))

    # ------------------------------------------------------------ time

    def _sync(self) -> None:
        now = self._clock()
        self._process_due(max(now, self._now))

    def _process_due(self, until: datetime | None = None) -> None:
        """Process every scheduled change up to `until` (default: the current instant), each at its time."""
        until = self._now if until is None else until
        while True:
            self._drop_stale_timers()
            if not self._heap or self._heap[0][0] > until:
                break
            at, _, nid, kind = heapq.heappop(self._heap)
            self._integrate(at)
            rec = self._records[nid]
            del rec.timers[kind]
            self._fire(rec, kind)
        self._integrate(until)

    def _fire(self, rec: _SimNode, kind: str) -> None:
        g = self._groups[rec.group_id]
        if kind == _T_BOOT:
            if rec.fail_boot:
                self._set(rec, rec.node.transition(NodeState.FAILED, self._now))
                self._events.append(
                    ProviderEvent(
                        EventKind.LAUNCH_FAILED,
                        self._now,
                        g.id,
                        rec.node.id,
                        detail="node failed while booting",
                    )
                )
                self._begin_termination(rec)
                self._converge(g)
            elif rec.purpose == _WARM:
                self._set(
                    rec, rec.node.transition(NodeState.WARM, self._now, warm_state=self._warm_state[g.id])
                )
            else:
                self._set(rec, rec.node.transition(NodeState.READY, self._now))
                self._became_ready(rec)
        elif kind == _T_WAKE:
            self._set(rec, rec.node.transition(NodeState.READY, self._now))
            self._became_ready(rec)
        elif kind == _T_TERMINATE:
            self._set(rec, rec.node.transition(NodeState.TERMINATED, self._now))
            del self._active[rec.node.id]
            del self._active_by_group[rec.group_id][rec.node.id]
        elif kind == _T_NOTICE:
            self._emit_interruption(rec, self._now, self._now + self._notice)
        elif kind == _T_DEADLINE:
            if rec.state in (NodeState.READY, NodeState.DRAINING):
                self._set(rec, rec.node.transition(NodeState.INTERRUPTED, self._now))
            self._begin_termination(rec)
            self._converge(g)
        # _T_VISIBLE changes nothing but what nodes() lists.

    def _integrate(self, to: datetime) -> None:
        dt = to - self._now
        if dt > timedelta(0):
            for gid in self._groups:
                self._full_time[gid] += dt * self._n_full[gid]
                self._standby_time[gid] += dt * self._n_standby[gid]
                self._booting_time[gid] += dt * self._n_booting[gid]
                self._ready_time[gid] += dt * self._n_ready[gid]
        if to > self._now:
            self._now = to

    def _schedule(self, rec: _SimNode, kind: str, at: datetime) -> None:
        self._seq += 1
        rec.timers[kind] = (at, self._seq)
        heapq.heappush(self._heap, (at, self._seq, rec.node.id, kind))

    def _drop_stale_timers(self) -> None:
        while self._heap:
            at, seq, nid, kind = self._heap[0]
            if self._records[nid].timers.get(kind) == (at, seq):
                return
            heapq.heappop(self._heap)

    # ------------------------------------------------------------ node records

    def _create(
        self, g: NodeGroup, purpose: str, *, key: str, visible_now: bool = False, ready: bool = False
    ) -> _SimNode:
        """A new node, REQUESTED -> BOOTING now (READY at once with `ready`: pre-existing or out-of-band)."""
        self._counter[g.id] += 1
        nid = f"{g.id}-{self._counter[g.id]:05d}"
        node = Node.requested(
            nid,
            g.id,
            g.gpus_per_node,
            self._now,
            tags={"burst:cluster": self.cluster, "burst:group": g.id},
            key=key,
        )
        visible_at = self._now if visible_now else self._now + self._list_delay
        self._seq += 1
        rec = _SimNode(node=node, seq=self._seq, purpose=purpose, visible_at=visible_at)
        self._records[nid] = rec
        self._active[nid] = rec
        self._active_by_group[g.id][nid] = rec
        self._count(rec, +1)
        self._set(rec, node.transition(NodeState.BOOTING, self._now))
        if ready:
            self._set(rec, rec.node.transition(NodeState.READY, self._now))
            self._became_ready(rec)
        elif self._stall_boots[g.id] > 0 and purpose == _SERVE:
            self._stall_boots[g.id] -= 1
        else:
            if self._fail_boots[g.id] > 0:
                self._fail_boots[g.id] -= 1
                rec.fail_boot = True
            self._schedule(rec, _T_BOOT, self._now + timedelta(seconds=g.boot_latency_s))
        if visible_at > self._now:
            self._schedule(rec, _T_VISIBLE, visible_at)
        return rec

    def _set(self, rec: _SimNode, node: Node) -> None:
        """Replace a record's node (already moved by `Node.transition`), keeping the cost counters right."""
        self._count(rec, -1)
        rec.node = node
        self._count(rec, +1)

    def _count(self, rec: _SimNode, sign: int) -> None:
        state = rec.node.state
        if state is NodeState.TERMINATED:
            return
        if state is NodeState.WARM and rec.node.warm_state in _STANDBY_WARM_STATES:
            self._n_standby[rec.group_id] += sign
        else:
            self._n_full[rec.group_id] += sign
            if state is NodeState.READY:
                self._n_ready[rec.group_id] += sign
            elif state in _NOT_YET_READY:
                self._n_booting[rec.group_id] += sign

    def _became_ready(self, rec: _SimNode) -> None:
        g = self._groups[rec.group_id]
        self._readied[g.id] += 1
        hazard = self._hazard[g.id]
        if g.capacity_type is CapacityType.SPOT and hazard > 0:
            rng = random.Random(f"{self._seed}/{g.id}/{self._readied[g.id]}")
            hours = rng.expovariate(hazard)
            self._schedule(rec, _T_NOTICE, self._now + timedelta(hours=hours))

    def _emit_interruption(self, rec: _SimNode, at: datetime, deadline: datetime) -> None:
        self._events.append(
            ProviderEvent(
                EventKind.INTERRUPTION,
                at,
                rec.group_id,
                rec.node.id,
                deadline=deadline,
                detail="spot interruption",
            )
        )
        self._schedule(rec, _T_DEADLINE, deadline)

    def _clear_interruption(self, rec: _SimNode) -> None:
        rec.timers.pop(_T_NOTICE, None)
        rec.timers.pop(_T_DEADLINE, None)

    def _begin_termination(self, rec: _SimNode) -> None:
        """Move a node to TERMINATING along the edges the table allows (via FAILED or DRAINING where needed)."""
        if rec.state in (NodeState.TERMINATING, NodeState.TERMINATED):
            return
        for kind in (_T_BOOT, _T_WAKE):
            rec.timers.pop(kind, None)
        self._clear_interruption(rec)
        if rec.state in _NOT_YET_READY:
            self._set(rec, rec.node.transition(NodeState.FAILED, self._now))
        elif rec.state is NodeState.READY:
            self._set(rec, rec.node.transition(NodeState.DRAINING, self._now))
        self._set(rec, rec.node.transition(NodeState.TERMINATING, self._now))
        self._schedule(rec, _T_TERMINATE, self._now + self._terminate_latency)

    # ------------------------------------------------------------ helpers

    def _group(self, group_id: str) -> NodeGroup:
        return find_group(self._groups, group_id)

    def _of(self, group_id: str, purposes: Collection[str], states: Collection[NodeState]) -> list[_SimNode]:
        return [
            r for r in self._active_by_group[group_id].values() if r.purpose in purposes and r.state in states
        ]

    def _serving(self, group_id: str) -> list[_SimNode]:
        return self._of(group_id, {_SERVE}, LIVE_NODE_STATES)

    def _wake_latency(self, g: NodeGroup, state: WarmState | None) -> float:
        state = state or WarmState.STOPPED
        return float(g.warm_wake_latency_s.get(state, DEFAULT_WAKE_LATENCY_S[state]))

    def _cost(self, gid: GroupId) -> float:
        full = self._prices[gid] * self._full_time[gid].total_seconds() / 3600.0
        standby = self._standby_prices[gid] * self._standby_time[gid].total_seconds() / 3600.0
        return full + standby

__all__ = ["DEFAULT_START", "Call", "ManualClock", "SimProvider"]
