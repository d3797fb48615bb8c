"""Kubernetes pods as burst's jobs, and the checkpoint channel over pod annotations.

`KubernetesJobSource` (a `JobSource`) reads the pods of the cluster cache
(`providers.kubernetes.cluster`, list-then-watch): a pod asking for
`nvidia.com/gpu` (requests or limits, init containers included) is a job;
not yet bound to a node it is pending demand, bound it is running on the
node its Node's providerID names. The tenant is the namespace's tenant
label (`tenant_label`, default `burst.dev/tenant`), else the namespace. The
pod's annotations (`providers/kubernetes/names.py`) say whether it is fault
tolerant and how it checkpoints.

A job's id is its `burst.dev/job-id` annotation, else its owning Job's
`namespace/name` (with the completion index of an indexed Job), else the
pod's `namespace/name`; so the pod a Job controller creates after an
eviction is the same job, pending again, and resumes from the checkpoint
the evicted pod acknowledged. A running job whose pod burst evicted is
reported requeued (with the work lost since its last checkpoint); one whose
pod went away otherwise completed.

Placement is the kube-scheduler's: a plan's `place_job` changes nothing here
(the pod binds when the node it waits for reports its GPUs). The plan's
checkpoint requests and evictions reach the pods through `KubernetesLink`,
the Kubernetes side of the checkpoint channel that the on-prem agent link
(`burst.agent`) implements over HTTP: its `forward` annotates or evicts, its
`sync` advances the waits each tick (see `providers.kubernetes.drain`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from burst import progress
from burst.bounds import job_problem
from burst.model import Action, ActionKind, Job, JobState, Node, NodeGpus, NodeId
from burst.wakeup import WakeEvent, WakeReason
from burst.workloads.base import JobEvents
from policies.durations import parse_duration
from providers.base import Provider
from providers.kubernetes import names
from providers.kubernetes.cluster import KubeCluster, Obj, connect
from providers.kubernetes.drain import Drainer, Escalation, PodKey, fault_tolerant
from providers.kubernetes.lease import KubernetesLease
from providers.kubernetes.nodes import KubernetesNodes, instance_id, is_ready

log = logging.getLogger(__name__)

INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
RUNNING = (JobState.RUNNING, JobState.CHECKPOINTING)


def requested_gpus(pod: Obj) -> int:
    """GPUs the pod asks for: the containers' sum, or the largest init container's if larger."""
    def gpus(container: Obj) -> int:
        res = container.get("resources") or {}
        raw = (res.get("limits") or {}).get(names.GPU_RESOURCE) or (res.get("requests") or {}).get(names.GPU_RESOURCE)
        try:
            return int(str(raw)) if raw is not None else 0
        except ValueError:
            return 0
    spec = pod.get("spec") or {}
    main = sum(gpus(c) for c in spec.get("containers") or [])
    init = max((gpus(c) for c in spec.get("initContainers") or []), default=0)
    return max(main, init)


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _seconds(annotations: Mapping[str, str], key: str, pod: str) -> float | None:
    if key not in annotations:
        return None
    try:
        return parse_duration(annotations[key])
    except ValueError as exc:
        log.warning("ignoring a bad annotation", extra={"pod": pod, "annotation": key, "error": str(exc)})
        return None


def job_id(pod: Obj) -> str:
    """The job a pod runs (see the module docstring)."""
    meta = pod["metadata"]
    explicit = (meta.get("annotations") or {}).get(names.JOB_ID)
    if explicit:
        return str(explicit)
    for owner in meta.get("ownerReferences") or []:
        if owner.get("kind") == "Job" and owner.get("controller", True):
            index = (meta.get("labels") or {}).get(INDEX_LABEL)
            return f"{meta['namespace']}/{owner['name']}" + (f"/{index}" if index is not None else "")
    return f"{meta['namespace']}/{meta['name']}"


@dataclass
class _Seen:
    job: Job
    pod: PodKey


class KubernetesJobSource:
    """GPU pods as jobs (see the module docstring). With `sync`, each observation syncs the cluster cache
    first (set it False when `KubernetesNodes.refresh` syncs it earlier in the same tick)."""

    def __init__(self, cluster: KubeCluster, drainer: Drainer, *, sync: bool = True) -> None:
        self.cluster = cluster
        self.drainer = drainer
        self.sync = sync
        self._seen: dict[str, _Seen] = {}
        self._banked: dict[str, Job] = {}  # requeued jobs waiting for their next pod: work and checkpoint kept
        self._refused: set[str] = set()  # pods outside burst.bounds, left out of the plans (reported once)

    def node_ids(self) -> dict[str, NodeId]:
        """Kubernetes node name -> burst node id (the providerID's instance id, else the node's name)."""
        return {n["metadata"]["name"]: instance_id(n) or n["metadata"]["name"] for n in self.cluster.nodes()}

    def pods_of(self, job: str) -> list[PodKey]:
        """The pods of a job as last observed."""
        seen = self._seen.get(job)
        return [seen.pod] if seen is not None else []

    def _jobs(self) -> dict[str, tuple[Job, PodKey]]:
        node_ids = self.node_ids()
        counted: dict[str, int] = {}
        pods = [p for p in self.cluster.pods() if requested_gpus(p) > 0 and not p["metadata"].get("deletionTimestamp")]
        for pod in pods:
            counted[job_id(pod)] = counted.get(job_id(pod), 0) + 1
        out: dict[str, tuple[Job, PodKey]] = {}
        for pod in pods:
            meta = pod["metadata"]
            jid = job_id(pod) if counted[job_id(pod)] == 1 else f"{meta['namespace']}/{meta['name']}"
            out[jid] = (self._job(jid, pod, node_ids), (meta["namespace"], meta["name"]))
        return out

    def _job(self, jid: str, pod: Obj, node_ids: Mapping[str, NodeId]) -> Job:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        annotations: dict[str, str] = meta.get("annotations") or {}
        where = f"{meta['namespace']}/{meta['name']}"
        node_name = spec.get("nodeName")
        submitted = parse_time(meta.get("creationTimestamp")) or datetime.now(UTC)
        banked = self._banked.get(jid)
        last = parse_time(annotations.get(names.LAST_CHECKPOINT))
        if banked is not None and banked.last_checkpoint_at is not None and (last is None or last < banked.last_checkpoint_at):
            last = banked.last_checkpoint_at
        job = Job(
            id=jid,
            tenant=self.cluster.tenant_of(meta["namespace"]),
            gpus=requested_gpus(pod),
            submitted_at=banked.submitted_at if banked is not None else submitted,
            gpu_model=annotations.get(names.GPU_MODEL) or (spec.get("nodeSelector") or {}).get(names.GPU_MODEL),
            priority=spec.get("priority"),
            fault_tolerant=fault_tolerant(pod),
            checkpoint_interval_s=_seconds(annotations, names.CHECKPOINT_INTERVAL, where),
            checkpoint_duration_s=_seconds(annotations, names.CHECKPOINT_DURATION, where),
            last_checkpoint_at=last,
            work_done_s=banked.work_done_s if banked is not None else 0.0,
        )
        if not node_name:
            return job
        started = parse_time(status.get("startTime")) or submitted
        seen = self._seen.get(jid)
        if seen is not None and seen.job.state in RUNNING and seen.job.started_at is not None:
            started = seen.job.started_at
        return dataclasses.replace(job, state=JobState.RUNNING, started_at=started,
                                   node_ids=(node_ids.get(node_name, node_name),))

    def observe(self, now: datetime, nodes: Mapping[NodeId, Node]) -> tuple[Sequence[Job], JobEvents]:
        """The GPU pods now, and what changed since the last observation (see the module docstring)."""
        if self.sync:
            self.cluster.sync()
        current = self._jobs()
        events = JobEvents()
        for jid, seen in self._seen.items():
            after = current.get(jid)
            was_running = seen.job.state in RUNNING
            if after is not None and after[1] == seen.pod:
                continue
            if was_running and (after is not None or seen.pod in self.drainer.removed):
                job = seen.job
                acked = self.drainer.acked.pop(seen.pod, None)
                if acked is not None and job.fault_tolerant:  # an acknowledged checkpoint is complete when acked
                    job = dataclasses.replace(job, last_checkpoint_at=acked, checkpoint_duration_s=None)
                back, lost = progress.requeue(job, now)
                self._banked[jid] = back
                events.requeued.append((back, lost))
                events.lost_nodes[jid] = job.node_ids
            elif after is None and was_running:
                events.completed.append(progress.complete(seen.job, now))
        active: list[Job] = []
        refused: set[str] = set()
        for jid, (job, _pod) in sorted(current.items()):
            problem = job_problem(job)
            if problem is not None:  # a pod burst cannot reason about: Kubernetes keeps it, burst does not plan it
                refused.add(jid)
                if jid not in self._refused:
                    events.failed.append((jid, job.tenant, problem))
                continue
            before = self._seen.get(jid)
            if job.state in RUNNING and (before is None or before.job.state not in RUNNING):
                events.started.append(job)
            if job.state in RUNNING:
                self._banked.pop(jid, None)
            active.append(job)
        self._seen = {jid: _Seen(job, pod) for jid, (job, pod) in current.items() if jid not in refused}
        self._refused = refused
        return active, events

    def peek(self, now: datetime, nodes: Mapping[NodeId, Node]) -> Sequence[Job]:
        """The GPU pods as last synced, changing nothing."""
        return [job for _, (job, _) in sorted(self._jobs().items())]

    def apply(self, action: Action, now: datetime) -> None:
        """Nothing: the kube-scheduler places pods, and `KubernetesLink.forward` carries the rest to them."""


MIN_CHECKPOINT_DEADLINE_S = 60.0
STOPPING = (ActionKind.EVICT_JOB, ActionKind.REQUEUE_JOB, ActionKind.RECLAIM_JOB)


class KubernetesLink:
    """The checkpoint channel over pod annotations, as the reconcile loop's agent link (`AgentLink`)."""

    def __init__(self, source: KubernetesJobSource, drainer: Drainer) -> None:
        self.source = source
        self.drainer = drainer
        self.last_step: Any = None

    def node_gpus(self) -> Mapping[NodeId, NodeGpus]:
        """None: on Kubernetes the device plugin and kube-scheduler bind GPUs, not burst."""
        return {}

    def sync(self, now: datetime) -> None:
        """Advance checkpoint waits and evictions (acks read from the pods, PDB refusals retried)."""
        self.last_step = self.drainer.step(now)

    def forward(self, action: Action, before: Job | None, now: datetime) -> None:
        """A plan's checkpoint request annotates the job's pods; an eviction, requeue or reclaim
        checkpoints (fault-tolerant pods) then evicts them."""
        if before is None:
            return
        pods = self.source.pods_of(before.id)
        if action.kind is ActionKind.REQUEST_CHECKPOINT:
            wait = max(MIN_CHECKPOINT_DEADLINE_S, 2 * (before.checkpoint_duration_s or 0.0))
            for pod in pods:
                if not self.drainer.handles(pod):
                    self.drainer.request_checkpoint(pod, action.id or f"{before.id}@{now:%Y%m%dT%H%M%S}",
                                                    now + timedelta(seconds=wait))
        elif action.kind in STOPPING:
            self.drainer.evict(pods, now, reason=action.reason)




class PodWatch:
    """The daemon's wake-up on Kubernetes (`burst.wakeup`): a GPU pod created (JOB_SUBMITTED) or gone
    (JOB_FINISHED), and a Node turned Ready (NODE_READY) or NotReady or gone (NODE_LOST), seen by syncing the
    cluster cache between ticks (a watch from the last resourceVersion)."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        self._pods: set[tuple[str, str]] = set()
        self._ready: set[str] = set()

    def _view(self) -> tuple[set[tuple[str, str]], set[str]]:
        pods = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.cluster.pods()
                if requested_gpus(p) > 0 and not p["metadata"].get("deletionTimestamp")}
        return pods, {n["metadata"]["name"] for n in self.cluster.nodes() if is_ready(n)}

    def reset(self, now: datetime) -> None:
        self._pods, self._ready = self._view()

    def poll(self, now: datetime) -> list[WakeEvent]:
        self.cluster.sync()
        pods, ready = self._view()
        out = [WakeEvent(WakeReason.JOB_SUBMITTED, now) for _ in pods - self._pods]
        out += [WakeEvent(WakeReason.JOB_FINISHED, now) for _ in self._pods - pods]
        out += [WakeEvent(WakeReason.NODE_READY, now) for _ in ready - self._ready]
        out += [WakeEvent(WakeReason.NODE_LOST, now) for _ in self._ready - ready]
        self._pods, self._ready = pods, ready
        return out


@dataclass(frozen=True)
class KubernetesSettings:
    """How to reach the cluster and how patiently to drain it (`workload.kubernetes` in burst.yaml)."""

    kubeconfig: str | None = None  # None: the in-cluster service account, else ~/.kube/config
    context: str | None = None
    api_url: str | None = None  # a plain-HTTP endpoint without auth (kubectl proxy)
    tenant_label: str = names.TENANT
    watch_timeout_s: float = 1.0
    checkpoint_grace_s: float = 120.0
    pdb_retry_s: float = 300.0
    on_pdb_timeout: Escalation = "wait"
    drain_timeout_s: float = 900.0


@dataclass
class KubernetesParts:
    """The pieces the runtime wires into a controller: one cluster cache shared by the job source, the
    checkpoint channel (agent link) and the node handling wrapped around each provider."""

    settings: KubernetesSettings
    api: Any
    cluster: KubeCluster
    drainer: Drainer
    source: KubernetesJobSource
    link: KubernetesLink
    pods: PodWatch
    _wrapped: int = 0

    def wrap(self, provider: Provider, clock: Callable[[], datetime]) -> Provider:
        """`provider` seen through the cluster's Nodes; the first wrapped provider syncs the cache each tick."""
        self._wrapped += 1
        return KubernetesNodes(provider, self.cluster, self.drainer, clock=clock, sync=self._wrapped == 1,
                               drain_timeout_s=self.settings.drain_timeout_s)

    def lease(self, holder: str, *, name: str, namespace: str, duration_s: float) -> KubernetesLease:
        return KubernetesLease(self.api, holder, name=name, namespace=namespace, duration_s=duration_s)


def kubernetes_parts(settings: KubernetesSettings, *, will_wrap: bool) -> KubernetesParts:
    """Connect (raises providers.base.CredentialsError) and build the parts; with `will_wrap`, the node
    wrapper syncs the cache at the start of each tick, else the job source does."""
    api = connect(kubeconfig=settings.kubeconfig, context=settings.context, host=settings.api_url)
    cluster = KubeCluster(api, watch_timeout_s=max(1, round(settings.watch_timeout_s)),
                          tenant_label=settings.tenant_label)
    drainer = Drainer(cluster, checkpoint_grace_s=settings.checkpoint_grace_s, pdb_retry_s=settings.pdb_retry_s,
                      on_pdb_timeout=settings.on_pdb_timeout)
    source = KubernetesJobSource(cluster, drainer, sync=not will_wrap)
    return KubernetesParts(settings, api, cluster, drainer, source, KubernetesLink(source, drainer), PodWatch(cluster))


__all__ = ["KubernetesJobSource", "KubernetesLink", "KubernetesParts", "KubernetesSettings", "PodWatch", "job_id",
           "kubernetes_parts", "requested_gpus"]
