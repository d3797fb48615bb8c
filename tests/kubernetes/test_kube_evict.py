"""Checkpoint-then-evict: a spot notice cordons the node and annotates its pods, the ack is honoured, the pod is
evicted through the Eviction API and its job requeued from the acknowledged checkpoint, the Node is deleted
once the instance is gone; a PodDisruptionBudget's 429 is retried within the budget, then policy decides."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from apiserver import ApiServer
from builders import T0, group
from conftest import gpu_pod, k8s_node, namespace
from kube_rig import Rig, rig

from burst.model import CapacityType, JobState
from providers.kubernetes.cluster import KubeCluster
from providers.kubernetes.drain import Drainer, rfc3339
from providers.sim import ManualClock

SPOT = dataclasses.replace(group("spot", capacity_type=CapacityType.SPOT, max_size=2), boot_latency_s=60.0)
STARTED = T0 - timedelta(minutes=20)
TRAINER = {"burst.dev/fault-tolerant": "true", "burst.dev/checkpoint-interval": "30m",
           "burst.dev/checkpoint-duration": "30s", "burst.dev/last-checkpoint": rfc3339(T0 - timedelta(minutes=15))}


@pytest.fixture
def spot(server: ApiServer, cluster: KubeCluster, tmp_path: Path) -> tuple[Rig, str]:
    server.put("namespaces", namespace("ml", tenant="research"))
    r = rig(server, cluster, [SPOT], ManualClock(T0), tmp_path / "s.db", initial={"spot": 1})
    (node_id,) = r.sim.nodes()
    server.put("nodes", k8s_node("spot-1", f"sim:///us-east-1a/{node_id}", gpus=8))
    server.put("pods", gpu_pod("train-abc", node="spot-1", owner_job="train", annotations=TRAINER,
                               started=rfc3339(STARTED)))
    report = r.tick()
    assert [(j.id, j.state) for j in report.snapshot.jobs] == [("ml/train", JobState.RUNNING)]
    return r, node_id


def test_spot_notice_checkpoints_then_evicts_and_the_job_is_requeued(spot: tuple[Rig, str], server: ApiServer) -> None:
    r, node_id = spot
    r.sim.inject_interruption(node_id, notice_s=120)
    deadline = r.clock() + timedelta(seconds=120)
    r.tick()
    node = server.get("nodes", "spot-1")
    assert node["spec"]["unschedulable"] is True and node["metadata"]["annotations"]["burst.dev/cordoned-by"] == "drain"
    annotations = server.get("pods", "train-abc", "ml")["metadata"]["annotations"]
    request = annotations["burst.dev/checkpoint-request"]
    assert annotations["burst.dev/checkpoint-deadline"] == rfc3339(deadline)
    r.tick(10)
    assert server.evictions == [] and server.get("pods", "train-abc", "ml") is not None  # waiting for the ack
    acked_at = r.clock() + timedelta(seconds=5)
    server.patch("pods", "train-abc", {"metadata": {"annotations": {
        "burst.dev/checkpoint-ack": request, "burst.dev/checkpoint-id": "ckpt-0042",
        "burst.dev/last-checkpoint": rfc3339(acked_at)}}}, "ml")
    report = r.tick(10)
    assert server.evictions == [("ml", "train-abc", 201)]
    assert r.clock() < deadline  # evicted on the ack, not at the deadline
    assert server.get("pods", "train-abc", "ml") is None
    ((back, lost),) = report.job_events.requeued
    assert back.id == "ml/train" and back.last_checkpoint_at == acked_at
    assert back.work_done_s == (acked_at - STARTED).total_seconds()
    assert lost == (r.clock() - acked_at).total_seconds()
    assert report.job_events.completed == []
    # The Job controller recreates the pod: the same job, pending, resuming from the acknowledged checkpoint.
    server.put("pods", gpu_pod("train-def", owner_job="train", annotations={
        k: v for k, v in TRAINER.items() if k != "burst.dev/last-checkpoint"}))
    report = r.tick(5)
    (job,) = report.snapshot.jobs
    assert (job.id, job.state, job.last_checkpoint_at) == ("ml/train", JobState.PENDING, acked_at)
    assert job.work_done_s == back.work_done_s
    assert report.job_events.requeued == []  # counted once, when the pod went
    # The instance goes at the deadline; once the cloud no longer lists it, its Node is deleted.
    for _ in range(6):
        r.tick(30)
    assert node_id not in r.sim.nodes()
    assert server.get("nodes", "spot-1") is None
    assert ("delete", "", "nodes") in server.calls


def test_without_an_ack_the_pod_is_evicted_at_the_deadline(spot: tuple[Rig, str], server: ApiServer) -> None:
    r, node_id = spot
    r.sim.inject_interruption(node_id, notice_s=60)
    deadline = r.clock() + timedelta(seconds=60)
    r.tick()
    while server.get("pods", "train-abc", "ml") is not None:
        assert r.clock() < deadline + timedelta(seconds=10), "not evicted by the deadline"
        r.tick(10)
    assert r.clock() >= deadline
    assert server.evictions == [("ml", "train-abc", 201)]


def pdb_pod(server: ApiServer, allowed: int) -> None:
    server.put("namespaces", namespace("serve"))
    server.put("nodes", k8s_node("n1", "sim:///n1", gpus=8))
    server.put("pods", gpu_pod("api-0", ns="serve", node="n1", labels={"app": "api"}))
    server.put("poddisruptionbudgets", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                        "metadata": {"name": "api", "namespace": "serve"},
                                        "spec": {"selector": {"matchLabels": {"app": "api"}}, "minAvailable": 1},
                                        "status": {"disruptionsAllowed": allowed}})


def test_a_pdb_blocks_the_eviction_until_it_allows_one(server: ApiServer, cluster: KubeCluster) -> None:
    pdb_pod(server, allowed=0)
    cluster.sync()
    drainer = Drainer(cluster, pdb_retry_s=300)
    drainer.drain_node("n1", T0, deadline=None, reason="scale-in")
    assert drainer.step(T0).blocked == [("serve", "api-0")]
    assert drainer.step(T0 + timedelta(seconds=60)).blocked == [("serve", "api-0")]
    assert not drainer.drained("n1")
    server.patch("poddisruptionbudgets", "api", {"status": {"disruptionsAllowed": 1}}, "serve")
    report = drainer.step(T0 + timedelta(seconds=120))
    assert report.evicted == [("serve", "api-0")] and report.blocked == []
    assert [code for _, _, code in server.evictions] == [429, 429, 201]
    assert drainer.drained("n1") and ("delete", "", "pods") not in server.calls


@pytest.mark.parametrize("policy", ["wait", "delete"])
def test_past_the_retry_budget_policy_decides(server: ApiServer, cluster: KubeCluster, policy: str) -> None:
    pdb_pod(server, allowed=0)
    cluster.sync()
    drainer = Drainer(cluster, pdb_retry_s=120, on_pdb_timeout=policy)  # type: ignore[arg-type]
    drainer.drain_node("n1", T0, deadline=None, reason="scale-in")
    assert drainer.step(T0).blocked and drainer.step(T0 + timedelta(seconds=60)).blocked
    report = drainer.step(T0 + timedelta(seconds=120))
    if policy == "delete":
        assert report.deleted == [("serve", "api-0")]
        assert server.get("pods", "api-0", "serve") is None and ("delete", "", "pods") in server.calls
    else:
        assert report.blocked == [("serve", "api-0")] and report.deleted == []
        assert drainer.step(T0 + timedelta(hours=1)).blocked == [("serve", "api-0")]
        assert server.get("pods", "api-0", "serve") is not None and ("delete", "", "pods") not in server.calls
    assert all(code == 429 for _, _, code in server.evictions)


def test_a_spot_deadline_caps_the_retry_budget(server: ApiServer, cluster: KubeCluster) -> None:
    """A PDB cannot keep a pod past its node's reclaim: with `delete`, it goes at the node's deadline."""
    pdb_pod(server, allowed=0)
    cluster.sync()
    drainer = Drainer(cluster, pdb_retry_s=3600, on_pdb_timeout="delete")
    drainer.drain_node("n1", T0, deadline=T0 + timedelta(seconds=90), reason="spot interruption")
    assert drainer.step(T0).blocked
    assert drainer.step(T0 + timedelta(seconds=60)).blocked
    assert drainer.step(T0 + timedelta(seconds=90)).deleted == [("serve", "api-0")]
