"""`LeaderLease` on a coordination.k8s.io/v1 Lease: several controller replicas, one leader, fenced by epoch.

The Lease's `holderIdentity` is the leader, `renewTime + leaseDurationSeconds`
its expiry, and `leaseTransitions` (incremented on every takeover) the
**epoch**, burst's fencing token. Every write is a PUT carrying the
resourceVersion of the read it follows, so two replicas racing for the same
Lease cannot both win: the loser's PUT is 409 Conflict, and a 409 means the
lease is lost (`acquire` returns None). `check(epoch, now)` re-reads the
Lease: a different holder or epoch, or an expired renewal, raises `Deposed`,
so a leader that stalled past its lease and woke up makes no late writes; a
leader whose last renewal is older than its renew deadline (by default two
thirds of the lease, as client-go's) is deposed too, before the lease is free
for another replica.

Times come from the caller (`now`), as with `SqliteLease`; renewals are
written as that instant, so a fake clock drives failover in tests. Like
client-go's leader election, this trusts the replicas' clocks to agree to
well within the lease duration.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from burst.lease import DEFAULT_LEASE_S, Deposed, LeaseState

RENEW_DEADLINE_SHARE = 2 / 3
"""A leader that has not renewed within this share of the lease stops acting (client-go: 10 s of 15 s), so it
is out before a standby may take the lease over, with the rest as margin for clock skew."""
CONFLICT = 409
NOT_FOUND = 404


class KubernetesLease:
    """A leader lease in a Kubernetes Lease object (see the module docstring)."""

    def __init__(self, api: client.ApiClient, holder: str, *, name: str = "burst-controller",
                 namespace: str = "burst-system", duration_s: float = DEFAULT_LEASE_S,
                 renew_deadline_s: float | None = None) -> None:
        self.api: Any = client.CoordinationV1Api(api)  # Any: Leases go as dicts (MicroTime strings kept exact)
        self.holder = holder
        self.name = name
        self.namespace = namespace
        self.duration_s = max(1, round(duration_s))
        self.renew_deadline_s = RENEW_DEADLINE_SHARE * self.duration_s if renew_deadline_s is None else renew_deadline_s
        if not 0 < self.renew_deadline_s <= self.duration_s:
            raise ValueError(f"renew_deadline_s must be in (0, {self.duration_s}], got {self.renew_deadline_s}")
        self.conflicts = 0
        """How many writes lost a race (409): each one meant another replica wrote first."""

    def _read(self) -> dict[str, Any] | None:
        try:
            raw = self.api.read_namespaced_lease(self.name, self.namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == NOT_FOUND:
                return None
            raise
        lease: dict[str, Any] = json.loads(raw.data)
        return lease

    @staticmethod
    def _state(lease: dict[str, Any]) -> LeaseState:
        spec = lease.get("spec") or {}
        renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime")) or datetime.min.replace(tzinfo=UTC)
        expires = renewed + timedelta(seconds=spec.get("leaseDurationSeconds") or 0)
        return LeaseState(spec.get("holderIdentity") or "", int(spec.get("leaseTransitions") or 0), expires)

    def current(self) -> LeaseState | None:
        lease = self._read()
        return None if lease is None else self._state(lease)

    def acquire(self, now: datetime) -> int | None:
        """Create, renew or take over the Lease: its epoch while this replica leads, else None."""
        lease = self._read()
        if lease is None:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": {"holderIdentity": self.holder, "leaseDurationSeconds": self.duration_s,
                             "acquireTime": micro(now), "renewTime": micro(now), "leaseTransitions": 0}}
            return self._write("POST", f"{self._path}", body, 0)
        state = self._state(lease)
        mine = state.holder == self.holder
        live = bool(state.holder) and state.expires_at > now
        if live and not mine:
            return None
        spec = lease.setdefault("spec", {})
        epoch = state.epoch
        if not (live and mine):  # take over an expired or released lease: a new epoch
            epoch += 1
            spec.update(holderIdentity=self.holder, acquireTime=micro(now), leaseTransitions=epoch)
        spec.update(renewTime=micro(now), leaseDurationSeconds=self.duration_s)
        return self._write("PUT", f"{self._path}/{self.name}", lease, epoch)

    @property
    def _path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    def _write(self, method: str, path: str, body: dict[str, Any], epoch: int) -> int | None:
        """POST or PUT the Lease as JSON, as written: the client's typed methods would re-parse its MicroTimes
        into datetimes and write them back without the microseconds the API server's format requires."""
        api = self.api.api_client
        request = api.param_serialize(method=method, resource_path=path, body=body, auth_settings=["BearerToken"],
                                      header_params={"Content-Type": "application/json", "Accept": "application/json"})
        response = api.call_api(*request)
        response.read()
        if response.status == CONFLICT:  # another replica wrote since our read: it leads, not us
            self.conflicts += 1
            return None
        if not 200 <= response.status < 300:
            raise ApiException(http_resp=response, body=response.data.decode(errors="replace"))
        return epoch

    def check(self, epoch: int, now: datetime) -> None:
        state = self.current()
        if state is None or state.holder != self.holder or state.epoch != epoch:
            who = "nobody" if state is None or not state.holder else f"{state.holder} (epoch {state.epoch})"
            raise Deposed(f"{self.holder} lost the lease of epoch {epoch}: it is held by {who}")
        if state.expires_at <= now:
            raise Deposed(f"{self.holder}'s lease of epoch {epoch} expired at {state.expires_at.isoformat()}")
        renewed = state.expires_at - timedelta(seconds=self.duration_s)
        if (now - renewed).total_seconds() >= self.renew_deadline_s:
            raise Deposed(f"{self.holder} did not renew its lease of epoch {epoch} within its "
                          f"{self.renew_deadline_s:g} s renew deadline (last renewed {renewed.isoformat()})")

    def release(self) -> None:
        """Give the Lease up (holder cleared), so a standby takes it at once; nothing if another holds it."""
        lease = self._read()
        if lease is None or self._state(lease).holder != self.holder:
            return
        lease["spec"]["holderIdentity"] = ""
        self._write("PUT", f"{self._path}/{self.name}", lease, 0)


def micro(at: datetime) -> str:
    """A MicroTime as the API server writes it (RFC 3339, microseconds, UTC)."""
    return _aware(at).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _parse(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return _aware(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None


__all__ = ["KubernetesLease"]
