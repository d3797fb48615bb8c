"""What the reconcile loop remembers from one tick to the next, kept in the store.

The loop is level triggered, but a few facts cannot be observed again on the
next tick: a group's launch-failure or interruption cooldown, an interruption
notice whose message was already taken off the cloud's queue, a rebalance
recommendation, events read between ticks and not yet applied, the targets and
warm pools a provider last reported (what the loop acts on while it is down),
completed jobs' run times (what the planner expects runs from), the learnt
interruption rates and when demand was last sampled. `ControllerMemory` holds
them; `load` reads them from the store and `save` writes what changed, inside
the tick's record transaction, so a restart, or a standby taking over, resumes
with the memory of the last tick that was recorded.

Events are the exception to "written with the tick": they are written as soon
as they are read (`keep_events`), because reading took them off the cloud's
queue; the recorded tick that applied them clears them, and a tick that died
before that leaves them for the next one (applying one twice changes nothing:
a notice or a cooldown is set, not added).

Each section is its own row (`Store.memory`), written only when it changed.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from burst import codec
from burst.model import EventKind, GroupId, Job, NodeId, ProviderEvent, TenantName, WarmState
from burst.planner.runtime_estimate import HISTORY_PER_TENANT, RuntimeHistory
from burst.planner.spot_rates import InterruptionObservations
from burst.state import Store

NOTICE_GRACE_S = 600.0
"""An interruption notice is forgotten this long after its deadline even if the node is still listed."""


@dataclass(frozen=True)
class Cooldown:
    """A group the planner passes over until `until`, and why."""

    until: datetime
    why: str


@dataclass
class Exposure:
    """The spot node-hours count's last instant and the ready spot nodes per group then (`spot_rates`)."""

    at: datetime | None = None
    ready_spot: dict[GroupId, int] = field(default_factory=dict)


class ControllerMemory:
    """The reconcile loop's cross-tick memory (see the module doc); the loop decides, this keeps."""

    def __init__(self) -> None:
        self.cooldowns: dict[GroupId, Cooldown] = {}
        self.notices: dict[NodeId, datetime] = {}  # interruption deadline per node still listed
        self.rebalances: dict[NodeId, datetime] = {}  # rebalance recommendation's time per node still listed
        self.events: dict[str, list[ProviderEvent]] = {}  # per provider: read, not yet applied by a recorded tick
        self.targets: dict[GroupId, int] = {}  # each group's target as its provider last reported it
        self.pools: dict[GroupId, tuple[int, WarmState]] = {}  # each group's warm pool as last reported
        self.runtimes = RuntimeHistory()
        self.interruptions = InterruptionObservations()
        self.exposure = Exposure()
        self.demand_at: datetime | None = None  # when demand was last sampled
        self._runtime_seq: dict[TenantName, int] = {}
        self._new_runtimes: list[tuple[str, int, float]] = []
        self._interruptions_due = False
        self._applied: set[str] = set()  # providers whose events this tick applied
        self._saved: dict[str, Any] = {}  # each section as last written (compared, not re-encoded, each tick)

    # ------------------------------------------------------------ load and save

    @classmethod
    def load(cls, store: Store) -> ControllerMemory:
        """The memory as the store last recorded it (empty for a new store; an unreadable section is empty)."""
        memory = cls()
        rows = store.memory()
        for name, decode in _DECODERS.items():
            text = rows.get(name)
            if text is None:
                continue
            try:
                decode(memory, json.loads(text))
            except (ValueError, TypeError, KeyError, AttributeError):  # CodecError is a ValueError
                continue  # a section this burst cannot read starts empty rather than stopping the loop
        memory.interruptions = InterruptionObservations.from_json(rows.get("interruptions"))
        for tenant, rows_ in store.runtimes().items():
            for seq, seconds in rows_:
                memory.runtimes.add(tenant, seconds)
                memory._runtime_seq[tenant] = seq
        memory._saved = memory._sections()
        return memory

    def save(self, store: Store) -> None:
        """Write the sections that changed since the last save, and new run times (call inside the tick's
        record transaction; after a rollback call `unsaved`)."""
        for name in self._applied:
            self.events.pop(name, None)
        self._applied = set()
        current = self._sections()
        changed = {name: value for name, value in current.items() if self._saved.get(name) != value}
        if self._interruptions_due:
            changed["interruptions"] = current["interruptions"]
            changed["exposure"] = current["exposure"]
        if changed:
            store.put_memory({name: _ENCODERS[name](self) for name in changed})
        if self._new_runtimes:
            store.record_runtimes(self._new_runtimes, keep=self.runtimes.per_tenant)
        self._saved.update(changed)
        self._new_runtimes = []
        self._interruptions_due = False

    def unsaved(self) -> None:
        """The last save was rolled back: write every section again next time."""
        self._saved = {}
        self._interruptions_due = True

    def keep_events(self, store: Store, provider: str, events: Iterable[ProviderEvent]) -> list[ProviderEvent]:
        """Add events just read from `provider`, write them at once (reading took them off its queue), and
        return every event of the provider not yet applied, oldest first."""
        new = list(events)
        if new:
            self.events.setdefault(provider, []).extend(new)
            store.put_memory({"events": _ENCODERS["events"](self)})
            self._saved["events"] = {k: list(v) for k, v in self.events.items() if v}
        return list(self.events.get(provider, ()))

    def applied(self, provider: str) -> None:
        """This tick applies `provider`'s kept events: its save forgets them."""
        self._applied.add(provider)

    def note_events(self, events: Iterable[ProviderEvent], listed: Collection[NodeId], now: datetime) -> None:
        """Keep each interruption notice's deadline while its node is listed and the deadline is recent, and each
        rebalance recommendation's time while its node is listed."""
        notices, rebalances = self.notices, self.rebalances
        for e in events:
            if e.kind is EventKind.INTERRUPTION and e.node_id is not None and e.deadline is not None:
                notices[e.node_id] = e.deadline
            elif e.kind is EventKind.REBALANCE and e.node_id is not None:
                rebalances[e.node_id] = e.at
        stale = now - timedelta(seconds=NOTICE_GRACE_S)
        for node_id in [n for n, at in notices.items() if n not in listed or at < stale]:
            del notices[node_id]
        for node_id in [n for n in rebalances if n not in listed]:
            del rebalances[node_id]

    # ------------------------------------------------------------ cooldowns

    def start_cooldown(self, group_id: GroupId, until: datetime, why: str) -> None:
        """Pass `group_id` over until `until` (a running cooldown that ends later stands)."""
        current = self.cooldowns.get(group_id)
        if current is None or until > current.until:
            self.cooldowns[group_id] = Cooldown(until, why)

    def unavailable(self, now: datetime) -> dict[GroupId, str]:
        """Groups cooling down at `now`, with why and until when."""
        return {gid: f"{c.why}; until {c.until:%H:%M}" for gid, c in sorted(self.cooldowns.items()) if c.until > now}

    def cooldown_ends(self, now: datetime) -> list[datetime]:
        """When the cooldowns still running at `now` end."""
        return [c.until for c in self.cooldowns.values() if c.until > now]

    # ------------------------------------------------------------ run times and interruption rates

    def record_runtime(self, job: Job) -> None:
        """Remember a completed job's run time (the work it did, over every run)."""
        self.runtimes.record(job)
        seq = self._runtime_seq.get(job.tenant, 0) + 1
        self._runtime_seq[job.tenant] = seq
        self._new_runtimes.append((job.tenant, seq, job.work_done_s))

    def learnt(self, observations: InterruptionObservations) -> None:
        """Take new interruption observations; they are written at the next save."""
        self.interruptions = observations
        self._interruptions_due = True

    # ------------------------------------------------------------ sections

    def _sections(self) -> dict[str, Any]:
        """Each section's value, comparable with the last written (copies: the live ones change in place)."""
        return {
            "cooldowns": dict(self.cooldowns),
            "notices": dict(self.notices),
            "rebalances": dict(self.rebalances),
            "events": {k: list(v) for k, v in self.events.items() if v},  # as keep_events writes it
            "targets": dict(self.targets),
            "pools": dict(self.pools),
            "demand": self.demand_at,
            # written only when learnt (at the loop's pace, see burst.reconcile): never "changed" by comparison
            "interruptions": None,
            "exposure": None,
        }


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def _dt(text: Any) -> datetime:
    if not isinstance(text, str):
        raise TypeError(f"expected an ISO time, got {type(text).__name__}")
    return datetime.fromisoformat(text)


def _dump(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


_ENCODERS: Mapping[str, Any] = {
    "cooldowns": lambda m: _dump({g: {"until": c.until.isoformat(), "why": c.why} for g, c in m.cooldowns.items()}),
    "notices": lambda m: _dump({n: at.isoformat() for n, at in m.notices.items()}),
    "rebalances": lambda m: _dump({n: at.isoformat() for n, at in m.rebalances.items()}),
    "events": lambda m: _dump({p: [codec.to_json(e) for e in evs] for p, evs in m.events.items() if evs}),
    "targets": lambda m: _dump(m.targets),
    "pools": lambda m: _dump({g: [size, state.value] for g, (size, state) in m.pools.items()}),
    "demand": lambda m: _dump({"at": _iso(m.demand_at)}),
    "interruptions": lambda m: m.interruptions.to_json(),
    "exposure": lambda m: _dump({"at": _iso(m.exposure.at), "ready_spot": m.exposure.ready_spot}),
}


def _load_cooldowns(m: ControllerMemory, data: Any) -> None:
    m.cooldowns = {str(g): Cooldown(_dt(c["until"]), str(c["why"])) for g, c in data.items()}


def _load_notices(m: ControllerMemory, data: Any) -> None:
    m.notices = {str(n): _dt(at) for n, at in data.items()}


def _load_rebalances(m: ControllerMemory, data: Any) -> None:
    m.rebalances = {str(n): _dt(at) for n, at in data.items()}


def _load_events(m: ControllerMemory, data: Any) -> None:
    m.events = {str(p): [codec.from_json(ProviderEvent, e) for e in evs] for p, evs in data.items()}


def _load_targets(m: ControllerMemory, data: Any) -> None:
    m.targets = {str(g): int(size) for g, size in data.items()}


def _load_pools(m: ControllerMemory, data: Any) -> None:
    m.pools = {str(g): (int(size), WarmState(state)) for g, (size, state) in data.items()}


def _load_demand(m: ControllerMemory, data: Any) -> None:
    m.demand_at = _dt(data["at"]) if data.get("at") is not None else None


def _load_exposure(m: ControllerMemory, data: Any) -> None:
    m.exposure = Exposure(_dt(data["at"]) if data.get("at") is not None else None,
                          {str(g): int(n) for g, n in data.get("ready_spot", {}).items()})


_DECODERS: Mapping[str, Any] = {
    "cooldowns": _load_cooldowns,
    "notices": _load_notices,
    "rebalances": _load_rebalances,
    "events": _load_events,
    "targets": _load_targets,
    "pools": _load_pools,
    "demand": _load_demand,
    "exposure": _load_exposure,
}

SECTIONS = tuple(_ENCODERS)
"""The memory's sections, one store row each."""

__all__ = ["HISTORY_PER_TENANT", "NOTICE_GRACE_S", "SECTIONS", "ControllerMemory", "Cooldown", "Exposure"]
