"""The actuator: the only code that carries out actions, journaling every intent around its execution.

`EXECUTORS` says who executes each `ActionKind`: a provider (scale, terminate,
warm pools) or the job source (place, checkpoint, evict, reclaim, requeue).
It covers every kind (checked at import and by a test over the enum), so a new
kind cannot be logged as applied and run by nobody.

Every action goes the same way: the leader fence is checked, the intent is
written to the journal, marked `sent` just before the call, and `confirmed`
or `failed` (with the provider's typed error on the `Outcome`) after it. A
provider action's intent is `planned` first; a plan's job actions, applied
to the store or memory queue in the same process, are journaled `sent`
together (one transaction) before the first is applied, and confirmed
together after the last (one more), so a tick writes two journal
transactions for its job actions however many it has. The
idempotency key is the plan id plus what the action does (`Action.key`),
written to the journal before the call, so a resend after a restart carries
the same key and the provider ignores the duplicate.

On start, `recover()` settles every unconfirmed intent before anything new is
planned: an intent never sent is dropped (the next plan recomputes it from
observed state); a sent provider intent is checked against what the provider
reports (group target, node presence) and resent with its journaled key if it
did not take. Group sizes are absolute, so a resend cannot double a launch. A
sent job intent is not resent: the job's state is the truth the next plan
starts from.

`collect_garbage()` finds what no plan would: nodes tagged with this cluster
that the store does not know and no group target explains (orphans, after a
grace period), and nodes stuck requested, booting or waking past that state's
`NODE_STATE_TIMEOUT_S` (the lifecycle table's limits: 600 s, 1,200 s, 600 s); both are
terminated through the same journaled path, under plan id `gc` (the stuck
node's jobs are requeued by the job source, since the node is no longer ready).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from burst.lease import Deposed
from burst.model import NODE_STATE_TIMEOUT_S, Action, ActionKind, Node, NodeId, NodeState, Plan, WarmState
from burst.state import IntentStatus, MetaKey, Store
from providers.base import NotFound, Provider, ProviderError

log = logging.getLogger("burst.actuator")

CLUSTER_TAG = "burst:cluster"
GC_PLAN_ID = "gc"
"""The plan id garbage collection journals its terminations under."""


class Executor(StrEnum):
    """Who carries out an action."""

    PROVIDER = "provider"
    JOB_SOURCE = "job source"


EXECUTORS: Mapping[ActionKind, Executor] = {
    ActionKind.SCALE_UP: Executor.PROVIDER,
    ActionKind.SCALE_DOWN: Executor.PROVIDER,
    ActionKind.TERMINATE_NODES: Executor.PROVIDER,
    ActionKind.SET_WARM_POOL: Executor.PROVIDER,
    ActionKind.PLACE_JOB: Executor.JOB_SOURCE,
    ActionKind.REQUEST_CHECKPOINT: Executor.JOB_SOURCE,
    ActionKind.EVICT_JOB: Executor.JOB_SOURCE,
    ActionKind.RECLAIM_JOB: Executor.JOB_SOURCE,
    ActionKind.REQUEUE_JOB: Executor.JOB_SOURCE,
}
"""Who executes each kind of action: every `ActionKind` has exactly one entry."""

if set(EXECUTORS) != set(ActionKind):  # pragma: no cover
    raise AssertionError(f"no executor for {sorted(set(ActionKind) - set(EXECUTORS))}")

JobApplier = Callable[[Action], None]
"""Applies one job action of the plan being executed (the controller binds its job source and the tick)."""


class InjectedCrash(BaseException):
    """Raised by a fault hook to stop the actuator dead, as a killed process would (tests only)."""


FaultHook = Callable[[str, Action], None]
"""Called with ("sent" | "called", action) around each provider call; tests raise InjectedCrash from it."""


class NotSent(ProviderError):
    """The action was not sent: its group's provider is down this tick."""


@dataclass
class Outcome:
    """What happened to one action: `error` is the typed error it failed with (None when it succeeded),
    `detail` the same in words for logs and the decision log."""

    action: Action
    key: str
    ok: bool
    detail: str = ""
    error: ProviderError | None = None


@dataclass
class GcReport:
    """What garbage collection terminated, and why."""

    orphans: list[NodeId] = field(default_factory=list)
    stuck: list[NodeId] = field(default_factory=list)


class Actuator:
    """Carries out plans against providers by group id, journaling in `store`."""

    def __init__(
        self,
        providers: Mapping[str, Provider],
        store: Store,
        *,
        cluster: str,
        clock: Callable[[], datetime],
        orphan_grace_s: float = 600.0,
        state_timeouts_s: Mapping[NodeState, float | None] = NODE_STATE_TIMEOUT_S,
        fault: FaultHook | None = None,
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.clock = clock
        self.orphan_grace_s = orphan_grace_s
        self.state_timeouts_s = state_timeouts_s
        self.fault = fault
        self.fence: Callable[[], None] | None = None  # raises Deposed once this daemon lost the leader lease
        self.by_group: dict[str, Provider] = {}
        for provider in providers.values():
            for group in provider.node_groups():
                self.by_group[group.id] = provider
        self.providers = dict(providers)
        self._first_seen_cache: dict[str, str] | None = None

    # ------------------------------------------------------------ plans

    def execute(
        self, plan: Plan, *, apply_job: JobApplier | None = None, skip: Mapping[str, str] | None = None
    ) -> list[Outcome]:
        """Carry out every action of `plan` by its executor (`EXECUTORS`) and say what happened to each.

        Job actions go first, in plan order (they change only jobs, and a node must not be terminated
        before the jobs leaving it are moved), then provider actions, in plan order. Job actions are
        applied by `apply_job`; without one, a plan with job actions is refused (ValueError) before anything
        is done. Actions on a group in `skip` (its provider is down) are not sent: their outcome fails
        with `NotSent` and the reason. The plan and each action applied are logged at INFO with their ids.
        """
        log.info("plan", extra={"plan_id": plan.id, "actions": len(plan.actions), "holds": len(plan.holds)})
        jobs = [a for a in plan.actions if EXECUTORS[a.kind] is Executor.JOB_SOURCE]
        if jobs and apply_job is None:
            raise ValueError(f"plan {plan.id} has job actions and no job source to apply them")
        out = self._apply_jobs(plan.id, jobs, apply_job) if jobs else []
        for a in plan.actions:
            if EXECUTORS[a.kind] is not Executor.PROVIDER:
                continue
            if skip and a.target in skip:
                error = NotSent(f"not sent: {skip[a.target]}")
                log.warning("action not sent", extra={"plan_id": plan.id, "action_id": a.id, "detail": str(error)})
                out.append(Outcome(a, self.idempotency_key(plan.id, a), False, str(error), error))
                continue
            outcome = self._send(plan.id, a)
            if outcome.ok:
                _log_applied(plan.id, a, by=Executor.PROVIDER)
            out.append(outcome)
        return out

    def _apply_jobs(self, plan_id: str, actions: Sequence[Action], apply_job: JobApplier | None) -> list[Outcome]:
        """Journal a plan's job actions as sent (one transaction), apply them in order, each behind the leader
        fence, and confirm them (one more). An exception marks the action it came from failed, and those not
        reached failed as not applied, and goes on up; `Deposed` goes on up with nothing written. A crash
        before the confirmation leaves them sent, which `recover` settles as failed."""
        assert apply_job is not None
        keys = [self.idempotency_key(plan_id, a) for a in actions]
        self._fenced()
        now = self.clock()
        ids = self.store.record_intents(
            [(key, plan_id, a.to_json()) for key, a in zip(keys, actions, strict=True)], now, status=IntentStatus.SENT)
        applied = 0
        try:
            for action in actions:
                self._fenced()
                apply_job(action)
                applied += 1
        except Deposed:
            raise  # no write may follow: the new leader's recovery settles these intents (still sent) as failed
        except BaseException as exc:
            with self.store.transaction():
                self.store.mark_intents(ids[:applied], IntentStatus.CONFIRMED, self.clock())
                self.store.mark_intents(ids[applied:applied + 1], IntentStatus.FAILED, self.clock(),
                                        f"{type(exc).__name__}: {exc}")
                self.store.mark_intents(ids[applied + 1:], IntentStatus.FAILED, self.clock(),
                                        "not applied: an earlier job action failed")
            raise
        self.store.mark_intents(ids, IntentStatus.CONFIRMED, self.clock())
        for action in actions:
            _log_applied(plan_id, action, by=Executor.JOB_SOURCE)
        return [Outcome(a, key, True) for a, key in zip(actions, keys, strict=True)]

    def _fenced(self) -> None:
        """Raise `burst.lease.Deposed` if this daemon no longer leads (no journal write or call may follow)."""
        if self.fence is not None:
            self.fence()

    def idempotency_key(self, plan_id: str, action: Action) -> str:
        """The key a provider sees for `action`: cluster, plan and what the action does."""
        return f"{self.cluster}:{plan_id}:{action.key}"

    def _send(self, plan_id: str, action: Action, provider: Provider | None = None) -> Outcome:
        """Journal a provider action, call the provider (`provider`, else the one of the action's group),
        and record the outcome."""
        key = self.idempotency_key(plan_id, action)
        now = self.clock()
        self._fenced()
        intent_id = self.store.record_intent(key, plan_id, action.to_json(), now)
        self.store.mark_intent(intent_id, IntentStatus.SENT, now)
        if self.fault:
            self.fault("sent", action)
        self._fenced()
        try:
            self._call(action, key, provider)
        except ProviderError as exc:
            detail = f"{type(exc).__name__}: {exc}"
            self.store.mark_intent(intent_id, IntentStatus.FAILED, self.clock(), detail)
            log.warning("action failed", extra={"plan_id": plan_id, "action_id": action.id, "detail": detail})
            return Outcome(action, key, False, detail, exc)
        if self.fault:
            self.fault("called", action)
        self.store.mark_intent(intent_id, IntentStatus.CONFIRMED, self.clock())
        if action.size is not None:
            self.store.set_target(action.target, action.size, key, self.clock())
        return Outcome(action, key, True)

    def _call(self, action: Action, key: str, provider: Provider | None = None) -> None:
        provider = provider or self.by_group.get(action.target)
        if provider is None:
            raise NotFound(f"no provider manages group {action.target}")
        if action.kind is ActionKind.SCALE_UP:
            assert action.size is not None
            provider.set_target(action.target, action.size, key=key)
        elif action.kind in (ActionKind.SCALE_DOWN, ActionKind.TERMINATE_NODES):
            self._terminate(provider, action.node_ids, key)
        elif action.kind is ActionKind.SET_WARM_POOL:
            assert action.count is not None and action.warm_state is not None
            provider.set_warm_pool(action.target, action.count, action.warm_state, key=key)

    @staticmethod
    def _terminate(provider: Provider, node_ids: Sequence[NodeId], key: str) -> None:
        """Terminate, treating NotFound as done: terminate is retried until the node is gone."""
        try:
            provider.terminate(node_ids, key=key)
        except NotFound:
            pass

    # ------------------------------------------------------------ recovery

    def recover(self) -> list[Outcome]:
        """Settle every unconfirmed intent against what providers report (run before the first plan)."""
        self._first_seen_cache = None  # another leader may have written it meanwhile
        outcomes = []
        for intent in self.store.unconfirmed_intents():
            now = self.clock()
            if intent.status is IntentStatus.PLANNED:
                self.store.mark_intent(intent.id, IntentStatus.FAILED, now, "never sent before a restart")
                continue
            action = _action_from_json(intent.action)
            if EXECUTORS[action.kind] is Executor.JOB_SOURCE:
                self.store.mark_intent(intent.id, IntentStatus.FAILED, now,
                                       "not resent after a restart: the next plan starts from the job's state")
                continue
            try:
                if not self._took_effect(action):
                    self._call(action, intent.key)
            except ProviderError as exc:
                self.store.mark_intent(intent.id, IntentStatus.FAILED, now, f"on recovery: {type(exc).__name__}: {exc}")
                outcomes.append(Outcome(action, intent.key, False, str(exc), exc))
                continue
            self.store.mark_intent(intent.id, IntentStatus.CONFIRMED, now, "confirmed on recovery")
            if action.size is not None:
                self.store.set_target(action.target, action.size, intent.key, now)
            outcomes.append(Outcome(action, intent.key, True, "recovered"))
        return outcomes

    def _took_effect(self, action: Action) -> bool:
        provider = self.by_group.get(action.target)
        if provider is None:
            raise NotFound(f"no provider manages group {action.target}")
        if action.kind is ActionKind.SCALE_UP:
            return provider.group_state(action.target).target == action.size
        if action.kind in (ActionKind.SCALE_DOWN, ActionKind.TERMINATE_NODES):
            listed = provider.nodes()
            gone = {NodeState.TERMINATING, NodeState.TERMINATED}
            if action.kind is ActionKind.SCALE_DOWN:
                gone.add(NodeState.WARM)  # scaled in into a warm pool below its size (reuse on scale-in)
            return all(n not in listed or listed[n].state in gone for n in action.node_ids)
        return False

    # ------------------------------------------------------------ garbage collection

    def collect_garbage(self, observed: Mapping[NodeId, Node], targets: Mapping[str, int]) -> GcReport:
        """Terminate orphans (tagged, unknown, unexplained, past the grace) and nodes stuck booting."""
        now = self.clock()
        report = GcReport()
        known = self.store.node_ids()
        first_seen = self._first_seen()
        seen_before = dict(first_seen)
        adopted, unexplained = sort_unknown(observed, known, targets, cluster=self.cluster, managed=self.by_group)
        for node in adopted:
            first_seen.pop(node.id, None)
        for node in unexplained:
            seen = first_seen.setdefault(node.id, now.isoformat())
            if (now - datetime.fromisoformat(seen)).total_seconds() >= self.orphan_grace_s:
                report.orphans.append(node.id)
        self.store.put_nodes(adopted, at=now)
        starting = (NodeState.REQUESTED, NodeState.BOOTING, NodeState.WAKING)
        orphans = report.orphans
        for node in observed.values():
            if node.state in starting and node.id not in orphans and node.is_stuck(now, self.state_timeouts_s):
                report.stuck.append(node.id)
        for reason, ids in (("orphan", report.orphans), ("stuck", report.stuck)):
            for node_id in ids:
                node = observed[node_id]
                provider = self.by_group.get(node.group_id) or next(iter(self.providers.values()))
                action = Action(
                    kind=ActionKind.TERMINATE_NODES,
                    target=node.group_id,
                    node_ids=(node_id,),
                    step="gc",
                    reason=f"{reason}: {node_id}",
                )
                self._send(GC_PLAN_ID, action, provider)
                first_seen.pop(node_id, None)
                log.info("garbage collected node", extra={"node": node_id, "why": reason})
        if first_seen != seen_before:
            self._save_first_seen(first_seen)
        return report

    def _first_seen(self) -> dict[str, str]:
        """When each unexplained node was first seen: read from the store once (again after `recover`), then kept."""
        if self._first_seen_cache is None:
            raw = self.store.get_meta(MetaKey.GC_FIRST_SEEN)
            self._first_seen_cache = dict(json.loads(raw)) if raw else {}
        return dict(self._first_seen_cache)

    def _save_first_seen(self, first_seen: dict[str, str]) -> None:
        self.store.set_meta(MetaKey.GC_FIRST_SEEN, json.dumps(first_seen, sort_keys=True))
        self._first_seen_cache = dict(first_seen)


def sort_unknown(
    observed: Mapping[NodeId, Node],
    known: Collection[NodeId],
    targets: Mapping[str, int],
    *,
    cluster: str,
    managed: Collection[str],
) -> tuple[list[Node], list[Node]]:
    """Split this cluster's live nodes unknown to the store into (adopted, unexplained).

    An unknown node is adopted when it is warm (pools are sized by the
    provider) or its group's target has room for it beyond the known live
    nodes (a launch whose listing arrived after a restart); the oldest are
    adopted first. The rest are orphan candidates.
    """
    # Not `observed.keys() - known`: a set difference walks `known`, every node the store ever held.
    if all(node_id in known for node_id in observed):
        return [], []
    by_group: dict[str, list[Node]] = {}
    for node in observed.values():
        if node.tags.get(CLUSTER_TAG) != cluster or not node.live:
            continue
        by_group.setdefault(node.group_id, []).append(node)
    adopted: list[Node] = []
    unexplained: list[Node] = []
    for group_id, nodes in by_group.items():
        live_known = [n for n in nodes if n.id in known and n.state is not NodeState.WARM]
        unknown = sorted((n for n in nodes if n.id not in known), key=lambda n: (n.created_at, n.id))
        room = max(0, targets.get(group_id, 0) - len(live_known)) if group_id in managed else 0
        for node in unknown:
            if node.state is NodeState.WARM or room > 0:
                if node.state is not NodeState.WARM:
                    room -= 1
                adopted.append(node)
            else:
                unexplained.append(node)
    return adopted, unexplained


def _log_applied(plan_id: str, action: Action, *, by: Executor) -> None:
    if log.isEnabledFor(logging.INFO):
        log.info("action applied", extra={"plan_id": plan_id, "action_id": action.id, "kind": action.kind.value,
                                          "target": action.target, "reason": action.reason, "by": by.value})


def _action_from_json(data: Mapping[str, Any]) -> Action:
    return Action(
        kind=ActionKind(data["kind"]),
        target=str(data["target"]),
        reason=str(data.get("reason", "")),
        step=str(data.get("step", "")),
        count=data.get("count"),
        size=data.get("size"),
        node_ids=tuple(data.get("node_ids", ())),
        tenant=data.get("tenant"),
        warm_state=WarmState(data["warm_state"]) if data.get("warm_state") else None,
        id=str(data.get("id", "")),
    )
