"""`LeaderLease` on a coordination.k8s.io/v1 Lease: several controller replicas, one leader, fenced by epoch.

The Lease's `holderIdentity` is the leader, `renewTime + leaseDurationSeconds`
its expiry, and `leaseTransitions` (incremented on every takeover) the
**epoch**, burst's fencing token. Every write is a PUT carrying the
resourceVersion of the read it follows, so two replicas racing for the same
Lease cannot both win: the loser's PUT is 409 Conflict, and a 409 means the
lease is lost (`acquire` returns None). `check(epoch, now)` re-reads the
Lease: a different holder or epoch, or an expired renewal, raises `Deposed`,
so a leader that stalled past its lease and woke up makes no late writes.

Times come from the caller (`now`), as with `SqliteLease`; renewals are
written as that instant, so a fake clock drives failover in tests. Like
client-go's leader election, this trusts the replicas' clocks to agree to
well within the lease duration.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from burst.lease import DEFAULT_LEASE_S, Deposed, LeaseState

CONFLICT = 409
NOT_FOUND = 404


class KubernetesLease:
    """A leader lease in a Kubernetes Lease object (see the module docstring)."""

    def __init__(self, api: client.ApiClient, holder: str, *, name: str = "burst-controller",
                 namespace: str = "burst-system", duration_s: float = DEFAULT_LEASE_S) -> None:
        self.api: Any = client.CoordinationV1Api(api)  # Any: MicroTimes are written as strings
        self.holder = holder
        self.name = name
        self.namespace = namespace
        self.duration_s = max(1, round(duration_s))
        self.conflicts = 0
        """How many writes lost a race (409): each one meant another replica wrote first."""

    def _read(self) -> Any | None:
        try:
            return self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status == NOT_FOUND:
                return None
            raise

    @staticmethod
    def _expires(lease: Any) -> datetime:
        spec = lease.spec
        renewed = spec.renew_time or spec.acquire_time or datetime.min.replace(tzinfo=UTC)
        return _aware(renewed) + timedelta(seconds=spec.lease_duration_seconds or 0)

    def current(self) -> LeaseState | None:
        lease = self._read()
        if lease is None or not lease.spec.holder_identity:
            return None if lease is None else LeaseState("", lease.spec.lease_transitions or 0, self._expires(lease))
        return LeaseState(lease.spec.holder_identity, lease.spec.lease_transitions or 0, self._expires(lease))

    def acquire(self, now: datetime) -> int | None:
        """Create, renew or take over the Lease: its epoch while this replica leads, else None."""
        lease = self._read()
        if lease is None:
            spec: Any = client.V1LeaseSpec
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
                spec=spec(holder_identity=self.holder, lease_duration_seconds=self.duration_s,
                                        acquire_time=micro(now), renew_time=micro(now), lease_transitions=0),
            )
            return self._write(lambda: self.api.create_namespaced_lease(self.namespace, body), 0)
        spec = lease.spec
        epoch = spec.lease_transitions or 0
        mine = spec.holder_identity == self.holder
        live = bool(spec.holder_identity) and self._expires(lease) > now
        if live and not mine:
            return None
        if not (live and mine):  # take over an expired or released lease: a new epoch
            epoch += 1
            spec.holder_identity = self.holder
            spec.acquire_time = now
            spec.lease_transitions = epoch
        spec.renew_time = micro(now)
        spec.acquire_time = micro(_aware(spec.acquire_time or now))
        spec.lease_duration_seconds = self.duration_s
        return self._write(lambda: self.api.replace_namespaced_lease(self.name, self.namespace, lease), epoch)

    def _write(self, call: Any, epoch: int) -> int | None:
        try:
            call()
        except ApiException as exc:
            if exc.status == CONFLICT:  # another replica wrote since our read: it leads, not us
                self.conflicts += 1
                return None
            raise
        return epoch

    def check(self, epoch: int, now: datetime) -> None:
        state = self.current()
        if state is None or state.holder != self.holder or state.epoch != epoch:
            who = "nobody" if state is None or not state.holder else f"{state.holder} (epoch {state.epoch})"
            raise Deposed(f"{self.holder} lost the lease of epoch {epoch}: it is held by {who}")
        if state.expires_at <= now:
            raise Deposed(f"{self.holder}'s lease of epoch {epoch} expired at {state.expires_at.isoformat()}")

    def release(self) -> None:
        """Give the Lease up (holder cleared), so a standby takes it at once; nothing if another holds it."""
        lease = self._read()
        if lease is None or lease.spec.holder_identity != self.holder:
            return
        lease.spec.holder_identity = ""
        lease.spec.acquire_time = micro(_aware(lease.spec.acquire_time or datetime.now(UTC)))
        lease.spec.renew_time = micro(_aware(lease.spec.renew_time or datetime.now(UTC)))
        self._write(lambda: self.api.replace_namespaced_lease(self.name, self.namespace, lease), 0)


def micro(at: datetime) -> str:
    """A MicroTime as the API server writes it (RFC 3339, microseconds, UTC)."""
    return _aware(at).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


__all__ = ["KubernetesLease"]
