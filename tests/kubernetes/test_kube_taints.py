"""The spot taint joins a node's other taints: a strategic merge patch replaces `spec.taints` whole (core/v1
declares it atomic), so burst sends the node's taints with its own, and a taint added after burst read the
node makes the patch conflict rather than disappear."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from apiserver import SMP, ApiServer, strategic_merge
from builders import T0, group
from conftest import k8s_node, namespace
from kube_rig import Rig, rig
from kubernetes.client.exceptions import ApiException

from burst.model import CapacityType
from providers.kubernetes.cluster import KubeCluster
from providers.sim import ManualClock

SPOT = dataclasses.replace(group("gpu-spot", capacity_type=CapacityType.SPOT, max_size=4), boot_latency_s=60.0)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
SPOT_TAINT = {"key": "burst.dev/spot", "value": "true", "effect": "NoSchedule"}
MAINTENANCE = {"key": "example.com/maintenance", "effect": "NoSchedule"}


def spot_node(server: ApiServer, cluster: KubeCluster, tmp_path: Path, taints: list[dict[str, str]]) -> Rig:
    server.put("namespaces", namespace("ml"))
    r = rig(server, cluster, [SPOT], ManualClock(T0), tmp_path / "s.db", initial={"gpu-spot": 1})
    r.tick(200)  # the spot instance is up
    (spot_id,) = [n.id for n in r.sim.all_nodes("gpu-spot")]
    node = k8s_node("spot-1", f"sim:///{spot_id}", gpus=8)
    node["spec"]["taints"] = taints
    server.put("nodes", node)
    return r


def test_the_server_replaces_taints_whole_and_merges_keyed_lists() -> None:
    node = {"spec": {"taints": [GPU_TAINT]}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    patched = strategic_merge(node, {"spec": {"taints": [SPOT_TAINT]},
                                     "status": {"conditions": [{"type": "Ready", "status": "True"}]}}, ())
    assert patched["spec"]["taints"] == [SPOT_TAINT]
    assert patched["status"]["conditions"] == [{"type": "Ready", "status": "True"}]


def test_the_server_refuses_a_patch_read_at_an_older_resource_version(server: ApiServer, cluster: KubeCluster) -> None:
    server.put("nodes", k8s_node("n1", "sim:///i-1"))
    read = server.get("nodes", "n1")["metadata"]["resourceVersion"]
    server.patch("nodes", "n1", {"metadata": {"labels": {"team": "a"}}})
    with pytest.raises(ApiException) as refused:
        cluster.core.patch_node("n1", {"metadata": {"resourceVersion": read}, "spec": {"taints": []}},
                                _content_type=SMP)
    assert refused.value.status == 409
    assert server.get("nodes", "n1")["metadata"]["labels"] == {"team": "a"}


def test_a_spot_node_keeps_its_taints_when_burst_adds_the_spot_taint(
        server: ApiServer, cluster: KubeCluster, tmp_path: Path) -> None:
    r = spot_node(server, cluster, tmp_path, [GPU_TAINT])
    r.tick(10)
    assert server.get("nodes", "spot-1")["spec"]["taints"] == [GPU_TAINT, SPOT_TAINT]
    patches = len(server.patch_types)
    r.tick(10)
    assert server.get("nodes", "spot-1")["spec"]["taints"] == [GPU_TAINT, SPOT_TAINT]
    assert len(server.patch_types) == patches  # already tainted: nothing sent


def test_a_taint_added_after_burst_read_the_node_survives(
        server: ApiServer, cluster: KubeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = spot_node(server, cluster, tmp_path, [GPU_TAINT])
    sync = cluster.sync

    def sync_then_another_writer_taints() -> None:
        sync()
        monkeypatch.setattr(cluster, "sync", sync)
        server.patch("nodes", "spot-1", {"spec": {"taints": [GPU_TAINT, MAINTENANCE]}})

    monkeypatch.setattr(cluster, "sync", sync_then_another_writer_taints)
    r.tick(10)  # burst's patch carries the resourceVersion it read: refused, nothing lost
    assert server.get("nodes", "spot-1")["spec"]["taints"] == [GPU_TAINT, MAINTENANCE]
    r.tick(10)
    assert server.get("nodes", "spot-1")["spec"]["taints"] == [GPU_TAINT, MAINTENANCE, SPOT_TAINT]
