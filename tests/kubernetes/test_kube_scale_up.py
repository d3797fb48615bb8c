"""Pending GPU pods buy capacity once: the new node is upcoming capacity until it reports nvidia.com/gpu, and
burst labels it, taints it when spot, and keeps hot-pool nodes cordoned until they are drawn."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from apiserver import ApiServer
from builders import T0, group
from conftest import gpu_pod, k8s_node, namespace
from kube_rig import rig

from burst.model import ActionKind, CapacityType, JobState, NodeState, WarmPoolSettings, WarmState
from providers.kubernetes.cluster import KubeCluster
from providers.sim import ManualClock

GPU = dataclasses.replace(group("gpu", max_size=4), boot_latency_s=120.0)
SPOT = dataclasses.replace(group("gpu-spot", capacity_type=CapacityType.SPOT, max_size=4), boot_latency_s=60.0)


def test_pending_pods_scale_up_once_while_the_node_comes_up(server: ApiServer, cluster: KubeCluster, tmp_path: Path) -> None:
    server.put("namespaces", namespace("ml", tenant="research"))
    server.put("pods", gpu_pod("train-0", gpus=8))
    r = rig(server, cluster, [GPU], ManualClock(T0), tmp_path / "s.db")
    scale_ups = []

    def tick(seconds: float = 0.0) -> None:
        report = r.tick(seconds)
        scale_ups.extend(report.plan.of_kind(ActionKind.SCALE_UP))
        return report

    tick()
    assert [(a.target, a.size) for a in scale_ups] == [("gpu", 1)]
    (node_id,) = r.sim.nodes()
    for _ in range(3):  # booting in the cloud
        tick(30)
    report = tick(60)  # the cloud says ready; no Node has joined yet
    assert r.sim.nodes()[node_id].state is NodeState.READY
    assert {n.id: n.state for n in report.snapshot.nodes} == {node_id: NodeState.BOOTING}
    # The Node joins, Ready, but the device plugin has not reported GPUs yet: still upcoming capacity.
    server.put("nodes", k8s_node("ip-10-0-0-7", f"sim:///us-east-1a/{node_id}", gpus=None))
    for _ in range(4):
        report = tick(30)
        assert {n.id: n.state for n in report.snapshot.nodes} == {node_id: NodeState.BOOTING}
    labels = server.get("nodes", "ip-10-0-0-7")["metadata"]["labels"]
    assert labels == {"burst.dev/tier": "elastic", "burst.dev/capacity-type": "on_demand", "burst.dev/node-group": "gpu"}
    assert "taints" not in server.get("nodes", "ip-10-0-0-7")["spec"]  # on-demand: no spot taint
    # nvidia.com/gpu appears: the node is ready with its 8 GPUs, and the pod binds there.
    server.patch("nodes", "ip-10-0-0-7", {"status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    report = tick(30)
    assert [(n.id, n.state, n.gpus) for n in report.snapshot.nodes] == [(node_id, NodeState.READY, 8)]
    server.patch("pods", "train-0", {"spec": {"nodeName": "ip-10-0-0-7"},
                                     "status": {"phase": "Running", "startTime": "2026-03-02T12:05:00Z"}}, "ml")
    report = tick(30)
    (job,) = report.snapshot.jobs
    assert (job.id, job.state, job.node_ids) == ("ml/train-0", JobState.RUNNING, (node_id,))
    assert [(a.target, a.size) for a in scale_ups] == [("gpu", 1)]
    assert r.sim.group_state("gpu").target == 1


def test_a_node_reporting_zero_gpus_is_not_ready_capacity(server: ApiServer, cluster: KubeCluster, tmp_path: Path) -> None:
    """allocatable nvidia.com/gpu: 0 (the device plugin's first report) is still booting, not a ready node with none."""
    server.put("namespaces", namespace("ml"))
    server.put("pods", gpu_pod("train-0", gpus=8))
    server.put("pods", gpu_pod("train-1", gpus=8))
    r = rig(server, cluster, [GPU], ManualClock(T0), tmp_path / "s.db")
    first = r.tick()
    assert [a.size for a in first.plan.of_kind(ActionKind.SCALE_UP)] == [2]
    for i, node_id in enumerate(sorted(r.sim.nodes())):
        server.put("nodes", k8s_node(f"n{i}", f"sim:///{node_id}", gpus=0))
    r.tick(150)
    for _ in range(5):
        report = r.tick(30)
        assert report.plan.of_kind(ActionKind.SCALE_UP) == []
        assert {n.state for n in report.snapshot.nodes} == {NodeState.BOOTING}
    assert r.sim.group_state("gpu").target == 2


def test_spot_nodes_are_tainted_and_hot_pool_nodes_stay_cordoned_until_drawn(
        server: ApiServer, cluster: KubeCluster, tmp_path: Path) -> None:
    pooled = dataclasses.replace(GPU, warm_pool=WarmPoolSettings(min_size=1, state=WarmState.RUNNING),
                                 warm_wake_latency_s={WarmState.RUNNING: 10.0})
    server.put("namespaces", namespace("ml"))
    r = rig(server, cluster, [pooled, SPOT], ManualClock(T0), tmp_path / "s.db", initial={"gpu-spot": 1})
    r.tick(200)  # the pool's node boots and goes warm
    warm = [n for n in r.sim.all_nodes("gpu") if n.state is NodeState.WARM]
    (spot_id,) = [n.id for n in r.sim.all_nodes("gpu-spot")]
    assert len(warm) == 1
    server.put("nodes", k8s_node("warm-1", f"sim:///{warm[0].id}", gpus=8))
    server.put("nodes", k8s_node("spot-1", f"sim:///{spot_id}", gpus=8))
    r.tick(10)
    spot = server.get("nodes", "spot-1")
    assert spot["spec"]["taints"] == [{"key": "burst.dev/spot", "value": "true", "effect": "NoSchedule"}]
    assert spot["metadata"]["labels"]["burst.dev/capacity-type"] == "spot"
    assert server.get("nodes", "warm-1")["spec"]["unschedulable"] is True
    assert server.get("nodes", "warm-1")["metadata"]["annotations"]["burst.dev/cordoned-by"] == "hot-pool"
    r.tick(10)
    assert server.get("nodes", "warm-1")["spec"]["unschedulable"] is True
    # Demand for more than the spot node: burst draws the warm node, which is uncordoned once ready.
    server.put("pods", gpu_pod("big-0", gpus=8))
    server.put("pods", gpu_pod("big-1", gpus=8, node="spot-1"))
    for _ in range(4):
        r.tick(10)
    assert r.sim.node(warm[0].id).state is NodeState.READY
    node = server.get("nodes", "warm-1")
    assert "unschedulable" not in node["spec"] and "burst.dev/cordoned-by" not in node["metadata"].get("annotations", {})
