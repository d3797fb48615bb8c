"""burst.yaml's workload.kubernetes and leader.kind kubernetes build a controller whose jobs are the cluster's
GPU pods, whose nodes are seen through the cluster, and whose leader holds a Lease; the shipped manifests load."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from apiserver import ApiServer
from conftest import gpu_pod, namespace
from kubernetes.client import ApiClient

from burst.model import ActionKind, JobState
from burst.runtime import ConfigError, build_runtime
from burst.workloads.kubernetes import KubernetesJobSource
from policies.config import BurstConfig
from providers.kubernetes.cluster import KubeCluster, connect
from providers.kubernetes.drain import Drainer

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
CONFIG = """
cluster: k8s
clock: sim
sim_start: 2026-03-02T12:00:00Z
loop_interval: 30s
node_groups:
  - {id: cloud-a100, provider: sim, region: us-east-1, tier: elastic, capacity_type: on_demand,
     instance_type: p4d.24xlarge, gpu_model: A100, gpus_per_node: 8, max_size: 4, boot_latency: 5m}
forecasting: {enabled: false}
workload:
  kubernetes: {api_url: URL, pdb_retry: 1m, on_pdb_timeout: delete}
leader: {enabled: true, kind: kubernetes, holder: replica-a, namespace: burst-system, lease: 20s}
"""


def config(tmp_path: Path, url: str) -> BurstConfig:
    (tmp_path / "policies").mkdir(exist_ok=True)
    return BurstConfig.model_validate(yaml.safe_load(CONFIG.replace("URL", url))).with_base_dir(tmp_path)


def test_the_runtime_runs_on_the_clusters_pods_under_a_lease(server: ApiServer, tmp_path: Path) -> None:
    server.put("namespaces", namespace("ml", tenant="research"))
    server.put("pods", gpu_pod("train-0", gpus=8))
    runtime = build_runtime(config(tmp_path, server.url), state_path=tmp_path / "s.db")
    try:
        assert isinstance(runtime.controller.source, KubernetesJobSource)
        assert runtime.controller.source.drainer.on_pdb_timeout == "delete"
        report = runtime.controller.tick()
        assert not report.standby
        assert [(j.id, j.tenant, j.state) for j in report.snapshot.jobs] == [("ml/train-0", "research", JobState.PENDING)]
        assert [a.size for a in report.plan.of_kind(ActionKind.SCALE_UP)] == [1]
        lease = server.get("leases", "burst-controller", "burst-system")
        assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseDurationSeconds"]) == ("replica-a", 20)
    finally:
        runtime.close()


def test_an_unreachable_kubeconfig_is_one_clear_config_error(tmp_path: Path) -> None:
    raw = yaml.safe_load(CONFIG.replace("URL", "x"))
    raw["workload"]["kubernetes"] = {"kubeconfig": "missing-kubeconfig"}
    (tmp_path / "policies").mkdir()
    with pytest.raises(ConfigError, match="^workload.kubernetes: "):
        build_runtime(BurstConfig.model_validate(raw).with_base_dir(tmp_path), state_path=tmp_path / "s.db")


def test_the_kubernetes_jobs_overlays_config_and_the_example_pod_load_and_validate(server: ApiServer) -> None:
    models = {"Namespace": "V1Namespace", "ConfigMap": "V1ConfigMap", "Pod": "V1Pod"}
    api = ApiClient()
    files = ("overlays/kubernetes-jobs/config.yaml", "example-pod.yaml")
    docs = [d for f in files for d in yaml.safe_load_all((DEPLOY / f).read_text()) if d]
    objs = {d["kind"] + "/" + d["metadata"]["name"]: api.deserialize(json.dumps(d), models[d["kind"]], "application/json")
            for d in docs}
    cfg = BurstConfig.model_validate(yaml.safe_load(objs["ConfigMap/burst-config"].data["burst.yaml"]))
    assert cfg.workload.kubernetes is not None and cfg.leader.kind == "kubernetes" and cfg.leader.enabled
    # The example pod, as burst reads it: a fault-tolerant 8-GPU job of tenant research.
    for d in docs[-2:]:
        server.put("namespaces" if d["kind"] == "Namespace" else "pods", d)
    cluster = KubeCluster(connect(host=server.url))
    jobs, _ = KubernetesJobSource(cluster, Drainer(cluster)).observe(datetime(2026, 3, 2, 12, tzinfo=UTC), {})
    (job,) = jobs
    assert (job.id, job.tenant, job.gpus, job.fault_tolerant, job.checkpoint_interval_s, job.checkpoint_duration_s) == (
        "research/train-llm-0", "research", 8, True, 600.0, 45.0)
