"""Services on Kubernetes (burst/workloads/kube_replicas.py) over the real client and the local API server: a
Deployment annotated burst.dev/service scaled through its scale subresource (mode replicas) or given placeholder
pods as GPU capacity (mode capacity), the refusals the service loop turns into holds, and the loop's tick (alone,
and in the daemon built from burst.yaml) reaching a Deployment's spec.replicas."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from apiserver import ApiServer
from builders import T0, group
from conftest import Prices, namespace

from burst.model import Job, JobState, Policy, Service
from burst.runtime import build_runtime
from burst.service_forecasts import ServiceForecasts
from burst.service_loop import ServiceLoop, ServiceTick
from burst.workloads.kube_replicas import KubeReplicas
from burst.workloads.kubernetes import KubernetesJobSource
from burst.workloads.replicas import ReplicaCounts, ReplicasRefused, is_replica
from policies.config import BurstConfig
from providers.kubernetes.cluster import KubeCluster, connect
from providers.kubernetes.drain import Drainer

CHAT = Service(tenant="prod", name="chat", gpu_model="A100", gpus_per_replica=2, max_replicas=40,
               ready_within_s=300.0, unserved_request_cost_usd=0.001, requests_per_s=4.0, min_replicas=1)
SCALE = ("patch", "apps", "deployments/scale")
TEMPLATE_NODE_SELECTOR = {"burst.dev/gpu-model": "A100", "pool": "inference"}
TEMPLATE_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def deployment(name: str, *, service: str | None = "chat", mode: str | None = None, ns: str = "serving",
               replicas: int = 1, ready: int = 0) -> dict[str, Any]:
    annotations = {"burst.dev/service": service} if service else {}
    if mode:
        annotations["burst.dev/service-mode"] = mode
    pod_spec = {"nodeSelector": TEMPLATE_NODE_SELECTOR, "tolerations": TEMPLATE_TOLERATIONS,
                "containers": [{"name": "vllm", "image": "vllm:1",
                                "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}},
            "status": {"replicas": replicas, "readyReplicas": ready}}


def autoscaler(kind: str, name: str, target: str, ns: str = "serving") -> dict[str, Any]:
    if kind == "horizontalpodautoscalers":
        return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                         "minReplicas": 1, "maxReplicas": 10}}
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": name, "namespace": ns},
            "spec": {"scaleTargetRef": {"name": target}}}  # KEDA's kind defaults to Deployment


class FixedRate:
    """A rate source that always reads `rps`, with no history."""

    def __init__(self, rps: float) -> None:
        self.rps = rps

    def rate(self, service: Service, now: datetime) -> float:
        return self.rps

    def history(self, service: Service, start: datetime, end: datetime, step_s: float) -> list[tuple[datetime, float]]:
        return []


def connected(server: ApiServer) -> tuple[KubeCluster, KubeReplicas]:
    server.put("namespaces", namespace("serving", tenant="prod"))
    cluster = KubeCluster(connect(host=server.url))
    backend = KubeReplicas(cluster)
    cluster.sync()
    return cluster, backend


def loop_tick(loop: ServiceLoop, cluster: KubeCluster, now: datetime, *services: Service) -> ServiceTick:
    cluster.sync()  # the daemon's tick syncs the cache first (KubernetesNodes.refresh)
    policies = {"prod": Policy(tenant="prod", priority=10, services=services or (CHAT,))}
    return loop.tick(now, [], policies, [group("cloud", max_size=8)], Prices(), {})


def service_loop(backend: KubeReplicas, rps: float) -> ServiceLoop:
    rates = FixedRate(rps)
    return ServiceLoop(rates, backend, ServiceForecasts(rates, background=False), undeclared=backend.undeclared)


def observed(cluster: KubeCluster) -> list[Job]:
    """The service's replica jobs the daemon's job source sees after a sync, as its tick passes them to `scale`."""
    cluster.sync()
    seen, _ = KubernetesJobSource(cluster, Drainer(cluster)).observe(T0, {})
    return sorted((j for j in seen if is_replica(j)), key=lambda j: j.id)


def placeholders(server: ApiServer) -> list[dict[str, Any]]:
    return [p for p in server.items("pods") if "burst.dev/placeholder" in p["metadata"].get("labels", {})]


def test_mode_replicas_sets_spec_replicas_through_the_scale_subresource_and_counts_from_status(
        server: ApiServer) -> None:
    server.absent.add("scaledobjects")  # no KEDA in this cluster: none owns the Deployment
    server.put("deployments", deployment("chat-vllm", replicas=3, ready=2))
    cluster, backend = connected(server)
    assert backend.counts(CHAT, [], T0) == ReplicaCounts(ready=2, starting=1)
    assert backend.scale(CHAT, 5, [], T0) == []
    assert server.get("deployments", "chat-vllm", "serving")["spec"]["replicas"] == 5
    assert server.calls.count(SCALE) == 1 and ("update", "apps", "deployments") not in server.calls
    # The next tick reads 5 from the watch: the same count sends nothing.
    cluster.sync()
    later = T0.replace(minute=1)
    assert backend.counts(CHAT, [], later) == ReplicaCounts(ready=2, starting=3)
    backend.scale(CHAT, 5, [], later)
    assert server.calls.count(SCALE) == 1
    # More ready than asked for (a scale-in under way): nothing starting, never a negative count.
    server.patch("deployments", "chat-vllm", {"spec": {"replicas": 1}, "status": {"readyReplicas": 3}}, "serving")
    cluster.sync()
    assert backend.counts(CHAT, [], T0.replace(minute=2)) == ReplicaCounts(ready=3, starting=0)


@pytest.mark.parametrize(("kind", "owner"), [("horizontalpodautoscalers", "HorizontalPodAutoscaler serving/chat"),
                                             ("scaledobjects", "KEDA ScaledObject serving/chat")])
def test_an_autoscaled_deployment_in_mode_replicas_is_held_and_never_scaled(server: ApiServer, kind: str,
                                                                           owner: str) -> None:
    server.put("deployments", deployment("chat-vllm", replicas=2, ready=2))
    server.put(kind, autoscaler(kind, "chat", "chat-vllm"))
    cluster, backend = connected(server)
    tick = loop_tick(service_loop(backend, 20.0), cluster, T0)
    (hold,) = [h for h in tick.holds if h.subject == "service:prod/chat"]
    assert f"Deployment serving/chat-vllm is scaled by {owner}" in hold.reason
    assert "burst.dev/service-mode: capacity" in hold.reason
    (status,) = tick.statuses
    assert (status.ready, status.starting, status.error) == (2, 0, hold.reason)
    assert SCALE not in server.calls
    assert server.get("deployments", "chat-vllm", "serving")["spec"]["replicas"] == 2
    with pytest.raises(ReplicasRefused, match="is scaled by"):
        backend.scale(CHAT, 9, [], T0)
    assert SCALE not in server.calls


def test_mode_capacity_keeps_placeholder_pods_beside_the_deployment_and_releases_them(server: ApiServer) -> None:
    server.put("deployments", deployment("chat-vllm", mode="capacity", replicas=2, ready=2))
    server.put("horizontalpodautoscalers", autoscaler("horizontalpodautoscalers", "chat", "chat-vllm"))
    cluster, backend = connected(server)
    assert backend.counts(CHAT, [], T0) == ReplicaCounts(ready=2, starting=0)  # an HPA is fine in this mode
    jobs = backend.scale(CHAT, 5, [], T0)
    made = server.get("priorityclasses", "burst-placeholder")
    assert (made["value"], made["globalDefault"], made["preemptionPolicy"]) == (-10, False, "Never")
    pods = placeholders(server)
    assert len(pods) == 3  # 5 planned, 2 run by the Deployment
    for pod in pods:
        spec = pod["spec"]
        assert spec["nodeSelector"] == TEMPLATE_NODE_SELECTOR and spec["tolerations"] == TEMPLATE_TOLERATIONS
        (container,) = spec["containers"]
        assert container["image"] == "registry.k8s.io/pause:3.9"
        assert container["resources"]["limits"] == {"nvidia.com/gpu": "2"}
        assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == ("burst-placeholder", -10,
                                                                                           "Never")
        assert pod["metadata"]["labels"] == {"burst.dev/placeholder": "chat"}
        assert pod["metadata"]["ownerReferences"][0]["name"] == "chat-vllm"
    # The planner sees their demand at once, and the job source reads them alike: a tenant's pending GPUs, marked
    # as a service's capacity (never batch work), at the placeholder priority.
    assert sorted((j.id, j.gpus, j.priority, j.state) for j in jobs) == sorted(
        (f"svc:prod/chat:placeholder:serving/{p['metadata']['name']}", 2, -10, JobState.PENDING) for p in pods)
    seen, _ = KubernetesJobSource(cluster, Drainer(cluster)).observe(T0, {})
    assert sorted((j.id, j.tenant, j.gpus, j.gpu_model, j.priority) for j in seen) == sorted(
        (j.id, "prod", 2, "A100", -10) for j in jobs)
    assert all(is_replica(j) for j in seen)
    # A later tick at the same need: no pod made, the PriorityClass not asked for again.
    cluster.sync()
    assert backend.scale(CHAT, 5, jobs, T0.replace(minute=1)) == jobs
    assert len(placeholders(server)) == 3
    assert [c for c in server.calls if c[2] == "priorityclasses"] == [("get", "scheduling.k8s.io", "priorityclasses"),
                                                                      ("create", "scheduling.k8s.io", "priorityclasses")]
    # The scheduler binds one; the need falls to 3: the two pending ones go first.
    bound = pods[0]["metadata"]["name"]
    server.patch("pods", bound, {"spec": {"nodeName": "gpu-node-1"}}, "serving")
    cluster.sync()
    left = backend.scale(CHAT, 3, jobs, T0.replace(minute=2))
    assert [p["metadata"]["name"] for p in placeholders(server)] == [bound]
    assert [j.id for j in left] == [f"svc:prod/chat:placeholder:serving/{bound}"]
    # The HPA scales the Deployment to 4 (its pods preempt the placeholders): none is needed any more.
    server.patch("deployments", "chat-vllm", {"spec": {"replicas": 4}}, "serving")
    cluster.sync()
    assert backend.scale(CHAT, 3, left, T0.replace(minute=3)) == []
    assert placeholders(server) == [] and SCALE not in server.calls


def test_placeholders_deleted_as_preemption_would_are_made_again_only_as_far_as_the_need_still_goes(
        server: ApiServer) -> None:
    server.put("deployments", deployment("chat-vllm", mode="capacity", replicas=2, ready=2))
    cluster, backend = connected(server)
    jobs = backend.scale(CHAT, 5, [], T0)
    first = sorted(p["metadata"]["name"] for p in placeholders(server))
    assert len(first) == 3  # 5 needed, 2 run by the Deployment
    # The autoscaler adds a pod; the scheduler preempts two placeholders for it and deletes them.
    for name in first[:2]:
        server.remove("pods", name, "serving")
    server.put("deployments", deployment("chat-vllm", mode="capacity", replicas=3, ready=3))
    jobs = observed(cluster)  # what the daemon's tick passes: the placeholders its job source still sees
    assert [j.id for j in jobs] == [f"svc:prod/chat:placeholder:serving/{first[2]}"]
    jobs = backend.scale(CHAT, 5, jobs, T0.replace(minute=1))
    now = sorted(p["metadata"]["name"] for p in placeholders(server))
    assert len(now) == 2 and first[2] in now, "5 needed, 3 run: the one left and one made again, not three"
    assert sorted(j.id for j in jobs) == sorted(f"svc:prod/chat:placeholder:serving/{n}" for n in now)
    # Both deleted again while the forecast's need falls to the 3 the Deployment runs: none is made again.
    for name in now:
        server.remove("pods", name, "serving")
    assert backend.scale(CHAT, 3, observed(cluster), T0.replace(minute=2)) == []
    assert placeholders(server) == []
    # The need rises to 6 again: exactly the 3 beyond the Deployment's pods.
    assert len(backend.scale(CHAT, 6, observed(cluster), T0.replace(minute=3))) == 3
    assert len(placeholders(server)) == 3


def test_a_placeholder_class_that_would_outrank_workloads_is_refused(server: ApiServer) -> None:
    server.put("priorityclasses", {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                   "metadata": {"name": "burst-placeholder"}, "value": 1000})
    server.put("deployments", deployment("chat-vllm", mode="capacity", replicas=1, ready=1))
    _, backend = connected(server)
    with pytest.raises(ReplicasRefused, match="PriorityClass burst-placeholder has value 1000"):
        backend.scale(CHAT, 3, [], T0)
    assert placeholders(server) == [] and ("create", "", "pods") not in server.calls


def test_a_placeholder_class_deleted_behind_burst_is_a_hold_then_made_again(server: ApiServer) -> None:
    server.put("deployments", deployment("chat-vllm", mode="capacity", replicas=1, ready=1))
    cluster, backend = connected(server)
    backend.scale(CHAT, 2, [], T0)
    assert len(placeholders(server)) == 1
    server.remove("priorityclasses", "burst-placeholder")
    cluster.sync()
    with pytest.raises(ReplicasRefused, match="403 Forbidden.*no PriorityClass with name burst-placeholder"):
        backend.scale(CHAT, 3, [], T0.replace(minute=1))
    cluster.sync()
    jobs = backend.scale(CHAT, 3, [], T0.replace(minute=2))
    assert server.get("priorityclasses", "burst-placeholder")["value"] == -10
    assert len(placeholders(server)) == 2 and len(jobs) == 1


def test_undeclared_names_and_services_without_a_deployment_are_held_and_left_alone(server: ApiServer) -> None:
    server.put("deployments", deployment("chat-vllm", replicas=1))
    server.put("deployments", deployment("ghost-vllm", service="ghost", replicas=1))
    server.put("deployments", deployment("web", service=None, replicas=1))
    cluster, backend = connected(server)
    search = Service(tenant="prod", name="search", gpu_model="A100", max_replicas=4, ready_within_s=300.0,
                     unserved_request_cost_usd=0.001, requests_per_s=4.0)
    tick = loop_tick(service_loop(backend, 20.0), cluster, T0, CHAT, search)
    holds = {h.subject: h.reason for h in tick.holds}
    assert holds["service:prod/ghost"] == ("Deployment serving/ghost-vllm annotated burst.dev/service: ghost, but "
                                          "tenant prod's policy declares no service ghost: burst leaves it alone")
    assert holds["service:prod/search"] == ("no Deployment annotated burst.dev/service: search in tenant prod's "
                                           "namespaces")
    assert "service:prod/chat" not in holds and set(holds) == {"service:prod/ghost", "service:prod/search"}
    assert server.calls.count(SCALE) == 1  # chat's, only
    assert server.get("deployments", "ghost-vllm", "serving")["spec"]["replicas"] == 1
    assert server.get("deployments", "chat-vllm", "serving")["spec"]["replicas"] > 1


def test_the_service_loops_tick_scales_the_deployment_up_to_the_rates_replicas(server: ApiServer) -> None:
    server.put("deployments", deployment("chat-vllm", replicas=1, ready=1))
    cluster, backend = connected(server)
    loop = service_loop(backend, 20.0)
    tick = loop_tick(loop, cluster, T0)
    (status,) = tick.statuses
    assert (status.ready, status.starting, status.observed_rps, status.error) == (1, 0, 20.0, None)
    assert status.desired >= 8  # ceil(20 req/s / (4 req/s x 0.7)), and any standby the decision keeps
    assert server.get("deployments", "chat-vllm", "serving")["spec"]["replicas"] == status.desired
    assert [r[1] for r in tick.rows] == ["scale_service_up"]
    # The Deployment controller starts them; the next tick counts them and sends nothing.
    server.patch("deployments", "chat-vllm", {"status": {"replicas": status.desired, "readyReplicas": 3}}, "serving")
    again = loop_tick(loop, cluster, T0.replace(minute=1))
    (after,) = again.statuses
    assert (after.ready, after.starting, after.desired) == (3, status.desired - 3, status.desired)
    assert server.calls.count(SCALE) == 1 and again.rows == []


def test_a_refused_service_keeps_its_jobs_and_others_go_on(server: ApiServer) -> None:
    """A refusal is one service's hold: the tick's jobs pass through untouched."""
    server.put("deployments", deployment("chat-vllm", mode="sideways", replicas=1))
    cluster, backend = connected(server)
    job = Job(id="serving/train-0", tenant="prod", gpus=8, submitted_at=T0)
    cluster.sync()
    tick = service_loop(backend, 20.0).tick(T0, [job], {"prod": Policy(tenant="prod", priority=10, services=(CHAT,))},
                                            [group("cloud")], Prices(), {})
    assert tick.jobs == [job]
    (hold,) = tick.holds
    assert hold.reason == "Deployment serving/chat-vllm: burst.dev/service-mode is 'sideways'; use replicas or capacity"


RUNTIME_CONFIG = """
cluster: k8s
clock: sim
sim_start: 2026-03-02T12:00:00Z
node_groups:
  - {id: cloud-a100, provider: sim, region: us-east-1, tier: elastic, capacity_type: on_demand,
     instance_type: p4d.24xlarge, gpu_model: A100, gpus_per_node: 8, max_size: 4, boot_latency: 5m}
forecasting: {enabled: false}
rates:
  synthetic:
    seed: 7
    services:
      prod/chat: {base_rps: 20, amplitude: 0, noise: 0}
workload:
  kubernetes: {api_url: URL}
"""
POLICY = """
tenant: prod
priority: 100
services:
  - {name: chat, gpu_model: A100, gpus_per_replica: 2, requests_per_s: 4, min_replicas: 1, max_replicas: 24,
     ready_within: 5m, unserved_request_cost: 0.001}
"""


def test_the_daemon_with_workload_kubernetes_and_rates_scales_the_annotated_deployment(server: ApiServer,
                                                                                       tmp_path: Path) -> None:
    server.put("namespaces", namespace("serving", tenant="prod"))
    server.put("deployments", deployment("chat-vllm", replicas=1, ready=1))
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "prod.yaml").write_text(POLICY)
    config = BurstConfig.model_validate(yaml.safe_load(RUNTIME_CONFIG.replace("URL", server.url)))
    runtime = build_runtime(config.with_base_dir(tmp_path), state_path=tmp_path / "s.db")
    try:
        assert isinstance(runtime.controller.services.backend, KubeReplicas)  # type: ignore[union-attr]
        report = runtime.controller.tick()
        (status,) = report.services.statuses  # type: ignore[union-attr]
        assert (status.ready, status.observed_rps, status.error) == (1, 20.0, None)
        assert status.desired >= 8
        assert server.get("deployments", "chat-vllm", "serving")["spec"]["replicas"] == status.desired
        assert not [h for h in report.plan.holds if h.subject.startswith("service:")]
    finally:
        runtime.close()
