"""Owned GPU hosts behind the `Provider` protocol: the racks burst.yaml's `provider: onprem` groups name.

What is racked is declared, not discovered: an **inventory file** lists each
group's hosts (`load_inventory`), so a group's `max_size` is its host count and
can never be exceeded. burst switches hosts on and off; it never buys or gives
back hardware.

* **Target.** A group's target (`group_state()`) is the number of hosts burst
  holds powered on and in service (BOOTING, WAKING, READY, DRAINING).
  `set_target` powers hosts on (powered-off ones of a power-saving group first,
  then in inventory order) or off (not yet ready ones first, newest first) to
  reach the size, running the configured `power_on` / `power_off` command
  once per host. A host that failed or was lost is not powered on again until
  its agent heartbeats or burst powers it off (terminate); hosts that failed
  fewer times are powered on first. Asking for more hosts than can be powered
  on raises QuotaExceeded.
* **Power commands.** argv lists, never a shell, with `{host}` (the host's
  address, else its name), `{node}` (its name) and `{group}` substituted,
  e.g. `["ipmitool", "-H", "{host}", "chassis", "power", "on"]` or
  `["scontrol", "power", "up", "{node}"]`. A command that exits non-zero,
  cannot start or runs past its timeout raises InsufficientCapacity (power on)
  or PowerCommandFailed (power off), with its stderr in the message; hosts
  switched before it stay switched and the key is not consumed. Without
  commands the provider is **declared only**: on/off changes burst's view.
* **Node states.** With a heartbeat source (the node agents' last reports, by
  node id): a powered-on host is BOOTING (WAKING when it was a powered-off warm
  node) until a heartbeat newer than its power-on, then READY; past
  `resume_timeout_s` without one it is FAILED with a LAUNCH_FAILED event. A
  READY host whose last heartbeat is older than `heartbeat_timeout_s` is lost:
  INTERRUPTED, out of the target, with one NODE_LOST event. A host not
  powered on by burst whose agent heartbeats after burst last switched it is
  taken as on (READY). Without a heartbeat source a host is READY as declared:
  the hosts on at start at once, the ones powered on later after the group's
  boot latency (wake latency for a powered-off warm node).
* **Powered off.** A powered-off host is listed as a warm node in state
  `powered_off`: in a group with `power_saving` every host not on is, the pool
  the planner wakes from and powers idle nodes off into; in other groups a
  host is listed from its first power-on. Once listed a host is never dropped
  (burst's store takes a node id that vanished as terminated for good), so a
  host powered off is not "gone" as a cloud node is.
* **Terminate** is a power-off (owned hardware is never given back): a serving,
  failed or lost host is powered off and leaves the target; a powered-off warm
  host is already off (no-op). Ids not listed raise NotFound.

The clock and the heartbeats are injected; nothing runs in the background:
states move on `refresh()`.
"""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from burst.model import (
    CapacityType,
    EventKind,
    GroupId,
    Node,
    NodeGroup,
    NodeId,
    NodeState,
    Offering,
    ProviderEvent,
    Transition,
    WarmState,
)
from providers.base import (
    Clock,
    GroupState,
    InsufficientCapacity,
    InvalidTarget,
    NotFound,
    NotSupported,
    ProviderError,
    QuotaExceeded,
)
from providers.lifecycle import find_group
from providers.onprem.inventory import ONPREM_PROVIDER

Heartbeats = Callable[[], Mapping[NodeId, datetime]]
"""Returns the last heartbeat instant of every node agent that has reported, by node id."""

Runner = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]
"""Runs one argv with a timeout (seconds); injected only to observe calls, `run_command` by default."""

CLUSTER_TAG = "burst:cluster"
GROUP_TAG = "burst:group"
HOST_TAG = "burst:host"

SERVING = frozenset({NodeState.BOOTING, NodeState.WAKING, NodeState.READY, NodeState.DRAINING})
_NOT_YET_READY = frozenset({NodeState.BOOTING, NodeState.WAKING})

# What burst knows of a host's power and service, besides its listed node.
_OFF = "off"  # powered off by burst (or never on): listed WARM(powered_off) in a power-saving group
_ON = "on"  # powered on and in service (the node is BOOTING, WAKING, READY or DRAINING)
_FAILED = "failed"  # did not heartbeat within the resume timeout: listed FAILED
_OUT = "out"  # lost (heartbeats stopped): listed INTERRUPTED


class InventoryError(ValueError):
    """An inventory file that cannot be used (one line naming the file, the key and the fix)."""


class PowerCommandFailed(ProviderError):
    """A power-off command failed: the host may still be on. The caller retries on a later tick."""


@dataclass(frozen=True)
class Host:
    """One racked machine: its node id (the agent's), the address power commands reach it by, its GPUs."""

    name: NodeId
    address: str = ""
    gpus: int | None = None  # None: the group's gpus_per_node

    @property
    def target(self) -> str:
        """What `{host}` means in a power command: the address, else the name."""
        return self.address or self.name


def load_inventory(path: Path) -> dict[GroupId, tuple[Host, ...]]:
    """Read an inventory file: `groups: {<group id>: {hosts: [<name> | {name, address, gpus}]}}`.

    Raises InventoryError naming the file and the key for anything malformed
    (a missing file, a host listed twice, in one group or across groups).
    """
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise InventoryError(f"{path}: cannot read the inventory: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise InventoryError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("groups"), dict) or not doc["groups"]:
        raise InventoryError(f"{path}: needs a groups: mapping of node group id to its hosts")
    unknown = sorted(set(doc) - {"groups"})
    if unknown:
        raise InventoryError(f"{path}: unknown key(s) {', '.join(unknown)}; only groups: is read")
    out: dict[GroupId, tuple[Host, ...]] = {}
    seen: dict[str, str] = {}
    for gid, body in doc["groups"].items():
        where = f"{path}: groups.{gid}"
        if not isinstance(body, dict) or not isinstance(body.get("hosts"), list) or not body["hosts"]:
            raise InventoryError(f"{where}: needs hosts:, a list of at least one host")
        extra = sorted(set(body) - {"hosts"})
        if extra:
            raise InventoryError(f"{where}: unknown key(s) {', '.join(map(str, extra))}; only hosts: is read")
        hosts = []
        for i, raw in enumerate(body["hosts"]):
            host = _host(raw, f"{where}.hosts.{i}")
            if host.name in seen:
                raise InventoryError(f"{where}.hosts.{i}: host {host.name} is already listed in group {seen[host.name]}")
            seen[host.name] = str(gid)
            hosts.append(host)
        out[str(gid)] = tuple(hosts)
    return out


def _host(raw: Any, where: str) -> Host:
    if isinstance(raw, str) and raw.strip():
        return Host(raw.strip())
    if not isinstance(raw, dict):
        raise InventoryError(f"{where}: a host is a name or a mapping with name (and address, gpus)")
    extra = sorted(set(raw) - {"name", "address", "gpus"})
    if extra:
        raise InventoryError(f"{where}: unknown key(s) {', '.join(map(str, extra))}; a host has name, address, gpus")
    name, address, gpus = raw.get("name"), raw.get("address", ""), raw.get("gpus")
    if not isinstance(name, str) or not name.strip():
        raise InventoryError(f"{where}.name: required, the host's node id (the one its agent reports)")
    if not isinstance(address, str):
        raise InventoryError(f"{where}.address: must be a string (a host name or IP the power commands reach)")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1):
        raise InventoryError(f"{where}.gpus: must be a whole number >= 1")
    return Host(name.strip(), address.strip(), gpus)


def run_command(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run `argv` (no shell) with a timeout, capturing its output."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)


@dataclass(frozen=True)
class PowerCommands:
    """The argv templates that switch a host on and off (None: declared only, nothing is run)."""

    power_on: tuple[str, ...] | None = None
    power_off: tuple[str, ...] | None = None
    timeout_s: float = 60.0


@dataclass
class _Rec:
    host: Host
    group: NodeGroup
    status: str = _OFF
    node: Node | None = None
    switched_at: datetime | None = None  # when burst last powered it on or off, or changed its status
    ready_at: datetime | None = None  # declared only: when a powered-on host counts as READY
    seq: int = 0  # power-on order (newest first on scale-in)
    failures: int = 0  # resume timeouts so far: hosts that failed fewer times are powered on first
    tags: dict[str, str] = field(default_factory=dict)


class OnPremProvider:
    """Racked hosts switched by power commands, their state read from agent heartbeats (see the module docstring)."""

    def __init__(
        self,
        groups: Sequence[NodeGroup],
        inventory: Mapping[GroupId, Sequence[Host]],
        *,
        clock: Clock,
        cluster: str,
        prices: Mapping[GroupId, float],
        commands: PowerCommands = PowerCommands(),
        heartbeats: Heartbeats | None = None,
        heartbeat_timeout_s: float = 60.0,
        resume_timeout_s: float = 600.0,
        initial: Mapping[GroupId, int] | None = None,
        runner: Runner = run_command,
        name: str = ONPREM_PROVIDER,
    ) -> None:
        """`groups` are the onprem groups of burst.yaml; each needs hosts in `inventory`, which fixes its size.

        `initial` hosts of each group (default its min_size; inventory order)
        are taken as on at start. Raises InventoryError for a group without
        hosts, an inventory group burst.yaml does not define, or hosts whose
        GPU count differs from the group's.
        """
        self.name = name
        self._clock = clock
        self._cluster = cluster
        self._commands = commands
        self._heartbeats = heartbeats
        self._heartbeat_timeout_s = heartbeat_timeout_s
        self._resume_timeout_s = resume_timeout_s
        self._runner = runner
        self._prices = dict(prices)
        self._keys: set[tuple[str, str]] = set()
        self._events: list[ProviderEvent] = []
        self._warm_size: dict[GroupId, int] = {}
        self._seq = 0
        missing = [g.id for g in groups if not inventory.get(g.id)]
        if missing:
            raise InventoryError(f"no hosts in the inventory for onprem node group(s) {', '.join(missing)}")
        undefined = sorted(set(inventory) - {g.id for g in groups})
        if undefined:
            raise InventoryError(f"inventory group(s) {', '.join(undefined)} are not onprem node groups in burst.yaml")
        self._groups: dict[GroupId, NodeGroup] = {}
        self._recs: dict[NodeId, _Rec] = {}
        now = clock()
        for g in groups:
            hosts = tuple(inventory[g.id])
            wrong = [h.name for h in hosts if h.gpus is not None and h.gpus != g.gpus_per_node]
            if wrong:
                raise InventoryError(f"group {g.id}: host(s) {', '.join(wrong)} declare a GPU count other than the "
                                     f"group's gpus_per_node {g.gpus_per_node}; a group's hosts are identical")
            group = _racked(g, len(hosts))
            self._groups[g.id] = group
            self._warm_size[g.id] = 0
            on = min(len(hosts), (initial or {}).get(g.id, group.min_size))
            for i, host in enumerate(hosts):
                rec = _Rec(host, group, tags={CLUSTER_TAG: cluster, GROUP_TAG: g.id, HOST_TAG: host.target})
                self._recs[host.name] = rec
                if i < on:
                    self._power_up(rec, now, declared=True)
                else:
                    self._set_off(rec, now)

    # ------------------------------------------------------------ reads

    def node_groups(self) -> Sequence[NodeGroup]:
        """The onprem groups, each sized by its inventory (max_size = hosts racked)."""
        return tuple(self._groups.values())

    def offerings(self, group_id: str) -> Sequence[Offering]:
        """One offering per group: its machine type at the catalog's on-prem rate; unavailable when no host can
        be powered on. Raises NotFound."""
        g = self._group(group_id)
        room = any(r.status == _OFF for r in self._of(group_id))
        return (Offering(g.instance_type, g.zone, CapacityType.ONPREM, self._prices.get(group_id, 0.0),
                         available=room or self._powered_on(group_id) > 0),)

    def nodes(self) -> Mapping[NodeId, Node]:
        """Every listed host: serving, failed, and (power-saving groups) powered-off warm ones."""
        return {nid: r.node for nid, r in self._recs.items() if r.node is not None}

    def group_state(self, group_id: str) -> GroupState:
        """The group's hosts powered on and in service, and the warm-pool size last asked (0 if never),
        `powered_off`. Raises NotFound."""
        self._group(group_id)
        return GroupState(self._powered_on(group_id), self._warm_size[group_id], WarmState.POWERED_OFF)

    def poll_events(self) -> Sequence[ProviderEvent]:
        """LAUNCH_FAILED (no heartbeat within the resume timeout) and NODE_LOST (heartbeats stopped), drained."""
        events, self._events = self._events, []
        return events

    # ------------------------------------------------------------ mutations

    def set_target(self, group_id: str, size: int, *, key: str) -> None:
        """Power hosts on or off until `size` are on (see the module docstring). Synchronous power commands,
        asynchronous readiness (observed on later refreshes). Idempotent by `key`.

        Raises NotFound; InvalidTarget (outside [min_size, hosts racked]); QuotaExceeded (more than the hosts
        that can be powered on: failed or lost ones are not); InsufficientCapacity (a power-on command failed);
        PowerCommandFailed (a power-off command failed).
        """
        g = self._group(group_id)
        if size < g.min_size or size > g.max_size:
            raise InvalidTarget(f"{group_id}: size {size} is outside [{g.min_size}, {g.max_size}] "
                                f"({g.max_size} host(s) racked in the inventory)")
        if ("set_target", key) in self._keys:
            return
        now = self._clock()
        serving = [r for r in self._of(group_id) if r.status == _ON]
        if size > len(serving):
            off = sorted((r for r in self._of(group_id) if r.status == _OFF), key=lambda r: r.failures)
            want = size - len(serving)
            if want > len(off):
                out = [r.host.name for r in self._of(group_id) if r.status in (_FAILED, _OUT)]
                raise QuotaExceeded(
                    f"{group_id}: {size} host(s) asked for, {len(serving) + len(off)} can be on "
                    f"({g.max_size} racked; failed or lost until their agent heartbeats: {', '.join(out) or 'none'})")
            for rec in off[:want]:
                self._run(self._commands.power_on, rec, InsufficientCapacity, "power on")
                self._power_up(rec, now)
        else:
            victims = sorted(serving, key=lambda r: (r.node is not None and r.node.state not in _NOT_YET_READY, -r.seq))
            for rec in victims[: len(serving) - size]:
                self._power_down(rec, now)
        self._keys.add(("set_target", key))

    def set_warm_pool(self, group_id: str, size: int, state: WarmState, *, key: str) -> None:
        """Record the pool size of a power-saving group: its powered-off hosts are the pool, nothing is
        prepared (there is nothing to buy). Raises NotFound; InvalidTarget (negative); NotSupported (no
        power_saving, or a state other than powered_off)."""
        g = self._group(group_id)
        if size < 0:
            raise InvalidTarget(f"{group_id}: warm pool size {size} is negative")
        if g.power_saving is None:
            raise NotSupported(f"{group_id}: owned hosts have no warm pool without power_saving "
                               "(with it, powered-off hosts are the pool)")
        if state is not WarmState.POWERED_OFF:
            raise NotSupported(f"{group_id}: on-prem hosts are kept warm powered_off only, not {state.value}")
        if ("set_warm_pool", key) in self._keys:
            return
        self._warm_size[group_id] = size
        self._keys.add(("set_warm_pool", key))

    def terminate(self, node_ids: Sequence[NodeId], *, key: str) -> None:
        """Power these hosts off (owned hardware is never given back; see the module docstring).

        Idempotent by `key`. Raises NotFound for ids not listed, after powering off the others;
        PowerCommandFailed (a power-off command failed: the hosts before it are off).
        """
        if ("terminate", key) in self._keys:
            return
        now = self._clock()
        missing = []
        for nid in node_ids:
            rec = self._recs.get(nid)
            if rec is None or rec.node is None:
                missing.append(nid)
            elif rec.status == _ON:
                self._power_down(rec, now)
            elif rec.status in (_FAILED, _OUT):
                self._power_down(rec, now)
            # a powered-off warm host is already off
        self._keys.add(("terminate", key))
        if missing:
            raise NotFound(f"not listed (not racked, or powered off outside a power-saving group): {', '.join(missing)}")

    def refresh(self) -> None:
        """Move each host's state on from the clock and the heartbeats (see the module docstring)."""
        now = self._clock()
        seen = dict(self._heartbeats()) if self._heartbeats is not None else {}
        for rec in self._recs.values():
            beat = seen.get(rec.host.name)
            if rec.status == _ON and rec.node is not None:
                fresh = beat is not None and (rec.switched_at is None or beat >= rec.switched_at)
                self._refresh_on(rec, beat, fresh, now)
            elif beat is not None and (rec.switched_at is None or beat > rec.switched_at) \
                    and (now - beat).total_seconds() <= self._heartbeat_timeout_s:
                self._revive(rec, now)  # switched on outside burst, or back after a failure or a loss

    # ------------------------------------------------------------ internals

    def _refresh_on(self, rec: _Rec, beat: datetime | None, fresh: bool, now: datetime) -> None:
        node = rec.node
        assert node is not None
        if node.state in _NOT_YET_READY:
            if self._heartbeats is None:
                if rec.ready_at is not None and now >= rec.ready_at:
                    rec.node = node.transition(NodeState.READY, now)
            elif fresh:
                rec.node = node.transition(NodeState.READY, now)
            elif (now - node.entered_state_at).total_seconds() > self._resume_timeout_s:
                rec.node = node.transition(NodeState.FAILED, now)
                rec.status, rec.switched_at = _FAILED, now
                rec.failures += 1
                self._events.append(ProviderEvent(
                    EventKind.LAUNCH_FAILED, now, rec.group.id, rec.host.name,
                    detail=f"{rec.host.name}: no agent heartbeat within the {self._resume_timeout_s:g} s resume "
                    f"timeout after power on"))
        elif node.state is NodeState.READY and self._heartbeats is not None:
            last = beat if fresh else None
            since = last or node.entered_state_at
            if (now - since).total_seconds() > self._heartbeat_timeout_s:
                rec.node = node.transition(NodeState.INTERRUPTED, now)
                rec.status, rec.switched_at = _OUT, now
                self._events.append(ProviderEvent(
                    EventKind.NODE_LOST, now, rec.group.id, rec.host.name,
                    detail=f"{rec.host.name}: no agent heartbeat for {self._heartbeat_timeout_s:g} s "
                    f"(last {since.isoformat()})"))

    def _revive(self, rec: _Rec, now: datetime) -> None:
        """A host not on in burst's view whose agent heartbeats: READY and in service again."""
        self._seq += 1
        rec.seq = self._seq
        if rec.node is not None and rec.node.state is NodeState.WARM:
            rec.node = rec.node.transition(NodeState.WAKING, now).transition(NodeState.READY, now)
        else:
            rec.node = self._new_node(rec, now, NodeState.BOOTING).transition(NodeState.READY, now)
        rec.status, rec.switched_at, rec.ready_at = _ON, now, None

    def _power_up(self, rec: _Rec, now: datetime, *, declared: bool = False) -> None:
        g = rec.group
        self._seq += 1
        rec.seq = self._seq
        if rec.node is not None and rec.node.state is NodeState.WARM:
            rec.node = rec.node.transition(NodeState.WAKING, now)
            latency = g.warm_wake_latency_s.get(WarmState.POWERED_OFF, g.boot_latency_s)
        else:
            rec.node = self._new_node(rec, now, NodeState.BOOTING)
            latency = g.boot_latency_s
        rec.status, rec.switched_at = _ON, now
        rec.ready_at = now + timedelta(seconds=0.0 if declared else latency) if self._heartbeats is None else None
        if declared and self._heartbeats is None:
            rec.node = rec.node.transition(NodeState.READY, now)

    def _power_down(self, rec: _Rec, now: datetime) -> None:
        """Power a listed host off; it stays listed, warm powered_off (its id must never vanish and come back)."""
        self._run(self._commands.power_off, rec, PowerCommandFailed, "power off")
        node = rec.node
        assert node is not None
        if node.state is NodeState.READY:
            node = node.transition(NodeState.DRAINING, now)
        if node.state in (NodeState.DRAINING, NodeState.BOOTING):
            rec.node = node.transition(NodeState.WARM, now, warm_state=WarmState.POWERED_OFF)
            rec.status, rec.switched_at, rec.ready_at = _OFF, now, None
            return
        self._set_off(rec, now, listed=True)  # waking, failed or lost: a fresh powered-off record

    def _set_off(self, rec: _Rec, now: datetime, *, listed: bool = False) -> None:
        """Mark the host powered off: a fresh WARM(powered_off) node when listed (always in a power-saving group;
        elsewhere once it has been on), else unlisted."""
        rec.status, rec.switched_at, rec.ready_at = _OFF, now, None
        if listed or rec.group.power_saving is not None:
            rec.node = Node(id=rec.host.name, group_id=rec.group.id, state=NodeState.WARM,
                            gpus=rec.group.gpus_per_node, created_at=now, history=(Transition(NodeState.WARM, now),),
                            warm_state=WarmState.POWERED_OFF, tags=dict(rec.tags))
        else:
            rec.node = None

    def _new_node(self, rec: _Rec, now: datetime, state: NodeState) -> Node:
        return Node.requested(rec.host.name, rec.group.id, rec.group.gpus_per_node, now,
                              tags=dict(rec.tags)).transition(state, now)

    def _run(self, template: tuple[str, ...] | None, rec: _Rec, error: type[ProviderError], what: str) -> None:
        """Run a power command for `rec`'s host (nothing when declared only); raise `error` if it fails."""
        if template is None:
            return
        argv = [part.format(host=rec.host.target, node=rec.host.name, group=rec.group.id) for part in template]
        try:
            done = self._runner(argv, self._commands.timeout_s)
        except FileNotFoundError:
            raise error(f"{rec.host.name}: {what} command {argv[0]!r} not found") from None
        except subprocess.TimeoutExpired:
            raise error(f"{rec.host.name}: {what} command {argv[0]!r} ran past its "
                        f"{self._commands.timeout_s:g} s timeout") from None
        except OSError as exc:
            raise error(f"{rec.host.name}: {what} command {argv[0]!r} could not start: {exc}") from None
        if done.returncode != 0:
            stderr = (done.stderr or "").strip()[-500:] or "(no stderr)"
            raise error(f"{rec.host.name}: {what} command {argv[0]!r} exited {done.returncode}: {stderr}")

    def _group(self, group_id: str) -> NodeGroup:
        return find_group(self._groups, group_id)

    def _of(self, group_id: str) -> Iterable[_Rec]:
        return [r for r in self._recs.values() if r.group.id == group_id]

    def _powered_on(self, group_id: str) -> int:
        return sum(1 for r in self._of(group_id) if r.status == _ON)


def _racked(g: NodeGroup, hosts: int) -> NodeGroup:
    """`g` sized by its inventory: max_size is the hosts racked, min_size at most that."""
    group = dataclasses.replace(g, max_size=hosts, min_size=min(g.min_size, hosts))
    if group.power_saving is not None:
        group = dataclasses.replace(group, warm_pool=dataclasses.replace(group.warm_pool, max_prepared=hosts))
    return group
