"""Services' replicas on Kubernetes: burst sets a Deployment's replicas, or keeps placeholder pods as its capacity.

A Deployment annotated `burst.dev/service: NAME` runs service NAME of the
tenant its namespace belongs to (the namespace's tenant label, else its
name: `KubeCluster.tenant_of`, as for GPU pods). Its annotation
`burst.dev/service-mode` says who owns its replica count:

* `replicas` (the default): burst does. `scale` sets `spec.replicas`
  through the Deployment's scale subresource, only when it differs. A
  Deployment that a HorizontalPodAutoscaler (autoscaling/v2) or a KEDA
  ScaledObject targets is refused in this mode: two owners of one count
  fight, so burst makes no call and holds.
* `capacity`: an HPA (or KEDA, or a person) does. burst keeps the GPUs for
  the replicas it plans beyond the Deployment's as **placeholder pods**:
  pause containers asking the service's `gpus_per_replica` GPUs each, with
  the pod template's nodeSelector, tolerations and affinity, at the
  PriorityClass `burst-placeholder` (value -10, below every workload; never
  the global default; `preemptionPolicy: Never`), created if missing. The
  kube-scheduler preempts them as soon as a real pod needs their GPUs, so a
  replica the HPA adds starts on a node that is already up (the Cluster
  Autoscaler's overprovisioning, sized by burst's forecast). `scale` keeps
  max(0, planned - the Deployment's spec.replicas) of them, creating the
  missing ones and deleting the surplus (pending ones first, newest first).

In both modes `counts` reads the Deployment: ready = `status.readyReplicas`,
starting = `spec.replicas` (else `status.replicas`) less ready.

Placeholders are jobs of their tenant, on purpose: a pending placeholder is
GPU demand the planner provisions a node for, and a bound one holds its
node's GPUs (a node it holds is not idle). They are marked so they are never
taken for batch work: each carries `burst.dev/job-id:
svc:TENANT/NAME:placeholder:NAMESPACE/POD`, so the job source gives it an id
in the services' namespace (`burst.workloads.replicas.is_replica` is true
for it), and `burst.dev/gpu-model` names the service's GPU model.

A service refused (no annotated Deployment in its tenant's namespaces, more
than one, an unknown mode, an autoscaler in mode `replicas`, a placeholder
PriorityClass that would outrank workloads, a failed call) raises
`ReplicasRefused`; the service loop holds it and goes on. A Deployment
annotated with a name its tenant's policy does not declare is left alone
and reported by `undeclared`.

Deployments come from the cluster cache (list, then watch), synced at the
start of each tick with the pods and nodes; the autoscalers are listed at
most once a tick, and only when a service in mode `replicas` is counted.
A Deployment scaled up gets its pods from its ReplicaSet, which the job
source sees on a later tick; the placeholders `scale` creates or deletes are
added to or taken from the tick's jobs at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from burst.model import Job, Service
from burst.workloads.replicas import REPLICA_PREFIX, ReplicaCounts, ReplicasRefused
from providers.base import ProviderError
from providers.kubernetes import names
from providers.kubernetes.cluster import KubeCluster, Obj
from providers.kubernetes.scaling import ScalingApi

MODES = ("replicas", "capacity")
PLACEHOLDER_CLASS = "burst-placeholder"
PLACEHOLDER_PRIORITY = -10
"""Below every workload: pods without a PriorityClass run at 0."""
PAUSE_IMAGE = "registry.k8s.io/pause:3.9"
COPIED_FROM_TEMPLATE = ("nodeSelector", "tolerations", "affinity")
"""What a placeholder takes from the Deployment's pod template, so it holds a GPU where a replica would land."""


@dataclass(frozen=True)
class ServiceDeployment:
    """A Deployment annotated as a service's, as burst reads it."""

    namespace: str
    name: str
    tenant: str
    service: str
    mode: str
    replicas: int  # spec.replicas (else status.replicas)
    ready: int
    obj: Obj = field(repr=False, compare=False)

    @property
    def where(self) -> str:
        """The Deployment as holds name it: NAMESPACE/NAME."""
        return f"{self.namespace}/{self.name}"

    @property
    def counts(self) -> ReplicaCounts:
        """Ready replicas, and the rest of `spec.replicas` as starting (never negative)."""
        return ReplicaCounts(ready=self.ready, starting=max(0, self.replicas - self.ready))


def service_deployment(deployment: Obj, tenant_of: Callable[[str], str]) -> ServiceDeployment | None:
    """The Deployment as a service's (None when it is not annotated `burst.dev/service`)."""
    meta = deployment["metadata"]
    annotations = meta.get("annotations") or {}
    service = annotations.get(names.SERVICE)
    if not service:
        return None
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    replicas = spec.get("replicas")
    return ServiceDeployment(
        namespace=meta["namespace"], name=meta["name"], tenant=tenant_of(meta["namespace"]), service=str(service),
        mode=str(annotations.get(names.SERVICE_MODE) or "replicas"),
        replicas=int(replicas if replicas is not None else status.get("replicas") or 0),
        ready=int(status.get("readyReplicas") or 0), obj=deployment)


def scaled_by(target: ServiceDeployment, autoscalers: Sequence[Obj], scaled_objects: Sequence[Obj]) -> str | None:
    """The autoscaler that owns the Deployment's replica count, named (None when none targets it)."""
    for kind, objs in (("HorizontalPodAutoscaler", autoscalers), ("KEDA ScaledObject", scaled_objects)):
        for obj in objs:
            meta, ref = obj["metadata"], (obj.get("spec") or {}).get("scaleTargetRef") or {}
            if (meta.get("namespace") == target.namespace and ref.get("name") == target.name
                    and ref.get("kind", "Deployment") == "Deployment"):
                return f"{kind} {meta['namespace']}/{meta['name']}"
    return None


def placeholder_job_id(service: Service, namespace: str, pod: str) -> str:
    """The job id a placeholder pod carries (`burst.dev/job-id`): in the services' namespace, never batch."""
    return f"{REPLICA_PREFIX}:{service.tenant}/{service.name}:placeholder:{namespace}/{pod}"


def placeholder_pod(target: ServiceDeployment, service: Service, name: str) -> Obj:
    """A pod that holds one replica's GPUs for `service` where the Deployment's pods would land, until a real
    pod preempts it (module doc)."""
    template = ((target.obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    spec: Obj = {
        "priorityClassName": PLACEHOLDER_CLASS,
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [{"name": "pause", "image": PAUSE_IMAGE,
                        "resources": {"limits": {names.GPU_RESOURCE: str(service.gpus_per_replica)}}}],
    }
    spec.update({key: template[key] for key in COPIED_FROM_TEMPLATE if template.get(key)})
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": target.name,
             "uid": target.obj["metadata"].get("uid", "")}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": target.namespace, "labels": {names.PLACEHOLDER: service.name},
                     "annotations": {names.JOB_ID: placeholder_job_id(service, target.namespace, name),
                                     names.GPU_MODEL: service.gpu_model},
                     "ownerReferences": [owner]},  # gone with the Deployment
        "spec": spec,
    }


def placeholder_name(target: ServiceDeployment, index: int) -> str:
    """The index-th placeholder's pod name: fixed, so a create resent after a lost answer makes no second pod."""
    return f"burst-placeholder-{target.name[:80]}-{index}"


def release_order(pods: Sequence[Obj]) -> list[Obj]:
    """Which placeholders go first when fewer are needed: those not bound to a node, then bound ones; newest
    first in each."""
    newest = sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "", reverse=True)
    return sorted(newest, key=lambda p: bool((p.get("spec") or {}).get("nodeName")))  # stable: newest first kept


@dataclass
class _TickView:
    """What one tick read: the services' Deployments, and (when a mode-replicas service needed them) the
    autoscalers."""

    at: datetime
    deployments: dict[tuple[str, str], list[ServiceDeployment]]
    autoscalers: tuple[list[Obj], list[Obj]] | None = None


class KubeReplicas:
    """Services' replicas as Deployments or placeholder pods (module doc); a `ReplicaBackend`."""

    runs_spot = False

    def __init__(self, cluster: KubeCluster, api: ScalingApi | None = None) -> None:
        self.cluster = cluster
        self.api = api if api is not None else ScalingApi(cluster)
        cluster.track_deployments()
        self._view: _TickView | None = None
        self._priority_class_ok = False

    # ------------------------------------------------------------ the ReplicaBackend

    def counts(self, service: Service, jobs: Sequence[Job], now: datetime) -> ReplicaCounts:
        """The Deployment's ready and starting replicas; refused (with them) in mode replicas when an autoscaler
        owns its count."""
        target = self._target(service, now)
        if target.mode == "replicas":
            self._refuse_if_autoscaled(target, now)
        return target.counts

    def scale(self, service: Service, replicas: int, jobs: Sequence[Job], now: datetime, spot: int = 0) -> list[Job]:
        """Mode replicas: set the Deployment's replicas to `replicas` (and delete placeholders left from mode
        capacity). Mode capacity: keep max(0, replicas - the Deployment's) placeholder pods. A Deployment's pods
        go where its own node selector sends them, so `spot` is not used (`runs_spot` is False)."""
        target = self._target(service, now)
        try:
            if target.mode == "replicas":
                self._refuse_if_autoscaled(target, now)
                out = self._release(service, self._placeholders(service), 0, jobs)
                if target.replicas != replicas:
                    self.api.scale_deployment(target.namespace, target.name, replicas)
                return out
            return self._hold_capacity(target, service, max(0, replicas - target.replicas), jobs, now)
        except ProviderError as exc:
            raise ReplicasRefused(f"{target.where}: {exc}", target.counts) from None

    # ------------------------------------------------------------ services without a policy

    def undeclared(self, declared: Set[tuple[str, str]], now: datetime) -> list[tuple[str, str, str]]:
        """Deployments annotated with a service name their tenant's policy does not declare, as (tenant, name,
        why): burst makes no call for them."""
        view = self._tick(now)
        return [(tenant, name, f"Deployment{'s' if len(found) > 1 else ''} {', '.join(d.where for d in found)} "
                               f"annotated {names.SERVICE}: {name}, but tenant {tenant}'s policy declares no service "
                               f"{name}: burst leaves {'them' if len(found) > 1 else 'it'} alone")
                for (tenant, name), found in sorted(view.deployments.items()) if (tenant, name) not in declared]

    # ------------------------------------------------------------ reads

    def _tick(self, now: datetime) -> _TickView:
        if self._view is None or self._view.at != now:
            found: dict[tuple[str, str], list[ServiceDeployment]] = {}
            for deployment in self.cluster.deployments():
                target = service_deployment(deployment, self.cluster.tenant_of)
                if target is not None:
                    found.setdefault((target.tenant, target.service), []).append(target)
            self._view = _TickView(now, {k: sorted(v, key=lambda d: d.where) for k, v in found.items()})
        return self._view

    def _target(self, service: Service, now: datetime) -> ServiceDeployment:
        found = self._tick(now).deployments.get((service.tenant, service.name), [])
        if not found:
            raise ReplicasRefused(f"no Deployment annotated {names.SERVICE}: {service.name} in tenant "
                                  f"{service.tenant}'s namespaces")
        if len(found) > 1:
            raise ReplicasRefused(f"{len(found)} Deployments are annotated {names.SERVICE}: {service.name} in tenant "
                                  f"{service.tenant}'s namespaces ({', '.join(d.where for d in found)}): burst "
                                  "scales one; remove the annotation from the others")
        (target,) = found
        if target.mode not in MODES:
            raise ReplicasRefused(f"Deployment {target.where}: {names.SERVICE_MODE} is {target.mode!r}; use "
                                  f"{' or '.join(MODES)}", target.counts)
        return target

    def _refuse_if_autoscaled(self, target: ServiceDeployment, now: datetime) -> None:
        view = self._tick(now)
        if view.autoscalers is None:
            try:
                view.autoscalers = (self.api.autoscalers(), self.api.scaled_objects())
            except ProviderError as exc:
                raise ReplicasRefused(f"{target.where}: {exc}", target.counts) from None
        owner = scaled_by(target, *view.autoscalers)
        if owner is not None:
            raise ReplicasRefused(
                f"Deployment {target.where} is scaled by {owner}: burst does not set its replicas in mode replicas "
                f"(annotate it {names.SERVICE_MODE}: capacity to have burst keep GPU capacity for it instead)",
                target.counts)

    def _placeholders(self, service: Service) -> list[Obj]:
        """The service's placeholder pods, in any of its tenant's namespaces, not being deleted."""
        return [p for p in self.cluster.pods()
                if (p["metadata"].get("labels") or {}).get(names.PLACEHOLDER) == service.name
                and self.cluster.tenant_of(p["metadata"]["namespace"]) == service.tenant
                and not p["metadata"].get("deletionTimestamp")]

    # ------------------------------------------------------------ writes

    def _hold_capacity(self, target: ServiceDeployment, service: Service, wanted: int, jobs: Sequence[Job],
                       now: datetime) -> list[Job]:
        """Create or delete placeholder pods until `wanted` hold GPUs beside the Deployment (those elsewhere, from
        an earlier namespace, go)."""
        mine = self._placeholders(service)
        here = [p for p in mine if p["metadata"]["namespace"] == target.namespace]
        out = self._release(service, [p for p in mine if p not in here], 0, jobs)
        if len(here) >= wanted:
            return self._release(service, here, wanted, out)
        self._ensure_priority_class(target)
        taken = {p["metadata"]["name"] for p in here}
        added: list[Job] = []
        index = 0
        while len(here) + len(added) < wanted:
            name = placeholder_name(target, index)
            index += 1
            if name in taken:
                continue
            try:
                self.api.create_pod(target.namespace, placeholder_pod(target, service, name))
            except ProviderError:
                self._priority_class_ok = False  # deleted since? the next tick looks again
                raise
            added.append(Job(id=placeholder_job_id(service, target.namespace, name), tenant=service.tenant,
                             gpus=service.gpus_per_replica, submitted_at=now, gpu_model=service.gpu_model,
                             priority=PLACEHOLDER_PRIORITY))
        return [*out, *added]

    def _release(self, service: Service, pods: Sequence[Obj], keep: int, jobs: Sequence[Job]) -> list[Job]:
        """Delete all but `keep` of `pods` (`release_order`); the jobs without theirs."""
        gone = release_order(pods)[: max(0, len(pods) - keep)]
        ids = set()
        for pod in gone:
            meta = pod["metadata"]
            self.api.delete_pod(meta["namespace"], meta["name"])
            ids.add(placeholder_job_id(service, meta["namespace"], meta["name"]))
        return [j for j in jobs if j.id not in ids]

    def _ensure_priority_class(self, target: ServiceDeployment) -> None:
        """Make the placeholders' PriorityClass once per process; refuse one that would outrank workloads."""
        if self._priority_class_ok:
            return
        found: Any = self.api.ensure_priority_class(
            PLACEHOLDER_CLASS, PLACEHOLDER_PRIORITY,
            "burst's placeholder pods: GPU capacity kept for services, preempted by any workload")
        value = found.get("value")
        if not isinstance(value, int) or value >= 0:
            raise ReplicasRefused(
                f"PriorityClass {PLACEHOLDER_CLASS} has value {value}: placeholders must rank below every workload "
                f"(pods without a class run at 0); delete it and burst makes it at {PLACEHOLDER_PRIORITY}",
                target.counts)
        self._priority_class_ok = True


__all__ = ["KubeReplicas", "ServiceDeployment", "placeholder_pod", "release_order", "scaled_by",
           "service_deployment"]
