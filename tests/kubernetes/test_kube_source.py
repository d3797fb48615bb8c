"""The pod cache and the job source over the real client: list then watch from the resourceVersion, relist after
410 Gone, the field selector drops finished pods, and GPU pods become pending and running jobs."""

from __future__ import annotations

from datetime import UTC, datetime

from apiserver import ApiServer
from conftest import gpu_pod, k8s_node, namespace

from burst.model import JobState
from burst.wakeup import WakeReason
from burst.workloads.kubernetes import KubernetesJobSource, PodWatch
from providers.kubernetes.cluster import KubeCluster
from providers.kubernetes.drain import Drainer

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def test_watch_resumes_from_the_resource_version_and_relists_after_410(server: ApiServer, cluster: KubeCluster) -> None:
    server.put("pods", gpu_pod("a"))
    cluster.sync()
    assert [p["metadata"]["name"] for p in cluster.pods()] == ["a"]
    assert cluster.relists("pods") == 1
    server.put("pods", gpu_pod("b"))
    server.patch("pods", "a", {"metadata": {"annotations": {"burst.dev/last-checkpoint": "2026-03-02T11:30:00Z"}}}, "ml")
    cluster.sync()
    assert cluster.relists("pods") == 1  # a watch, not a list
    assert sorted(p["metadata"]["name"] for p in cluster.pods()) == ["a", "b"]
    assert cluster.pod("ml", "a")["metadata"]["annotations"]["burst.dev/last-checkpoint"] == "2026-03-02T11:30:00Z"
    watches = [c for c in server.calls if c == ("watch", "", "pods")]
    assert len(watches) == 1
    # The history is compacted while pod b goes and c arrives: the next watch gets 410 and burst relists.
    server.remove("pods", "b", "ml")
    server.put("pods", gpu_pod("c"))
    server.compact()
    cluster.sync()
    assert cluster.relists("pods") == 2
    assert sorted(p["metadata"]["name"] for p in cluster.pods()) == ["a", "c"]
    server.put("pods", gpu_pod("d"))
    cluster.sync()
    assert sorted(p["metadata"]["name"] for p in cluster.pods()) == ["a", "c", "d"]
    assert cluster.relists("pods") == 2


def test_a_finished_pod_leaves_the_cache_through_the_field_selector(server: ApiServer, cluster: KubeCluster) -> None:
    server.put("pods", gpu_pod("done", node="n1"))
    server.put("pods", dict(gpu_pod("old", node="n1"), status={"phase": "Succeeded"}))
    cluster.sync()
    assert [p["metadata"]["name"] for p in cluster.pods()] == ["done"]
    server.patch("pods", "done", {"status": {"phase": "Succeeded"}}, "ml")
    cluster.sync()
    assert cluster.pods() == []


def test_gpu_pods_become_jobs_with_tenant_annotations_and_node_ids(server: ApiServer, cluster: KubeCluster) -> None:
    server.put("namespaces", namespace("ml", tenant="research"))
    server.put("namespaces", namespace("web"))
    server.put("nodes", k8s_node("ip-10-0-0-1", "aws:///us-east-1a/i-0abc", gpus=8))
    server.put("pods", gpu_pod("wait", gpus=4, annotations={
        "burst.dev/fault-tolerant": "true", "burst.dev/checkpoint-interval": "10m",
        "burst.dev/checkpoint-duration": "45s"}))
    server.put("pods", gpu_pod("run", gpus=8, node="ip-10-0-0-1", owner_job="train", started="2026-03-02T11:10:00Z",
                               annotations={"burst.dev/last-checkpoint": "2026-03-02T11:50:00Z"}))
    server.put("pods", gpu_pod("cpu-only", ns="web", gpus=0))
    source = KubernetesJobSource(cluster, Drainer(cluster))
    jobs, events = source.observe(NOW, {})
    by_id = {j.id: j for j in jobs}
    assert sorted(by_id) == ["ml/train", "ml/wait"]
    wait, run = by_id["ml/wait"], by_id["ml/train"]
    assert (wait.state, wait.gpus, wait.tenant, wait.fault_tolerant) == (JobState.PENDING, 4, "research", True)
    assert (wait.checkpoint_interval_s, wait.checkpoint_duration_s) == (600.0, 45.0)
    assert (run.state, run.node_ids, run.fault_tolerant) == (JobState.RUNNING, ("i-0abc",), False)
    assert run.started_at == datetime(2026, 3, 2, 11, 10, tzinfo=UTC)
    assert run.last_checkpoint_at == datetime(2026, 3, 2, 11, 50, tzinfo=UTC)
    assert [j.id for j in events.started] == ["ml/train"]
    # The same pods a tick later: nothing started or ended.
    _, again = source.observe(NOW, {})
    assert (again.started, again.completed, again.requeued) == ([], [], [])
    # The running pod finishes (it leaves the watch's selection): its job completed.
    server.patch("pods", "run", {"status": {"phase": "Succeeded"}}, "ml")
    jobs, done = source.observe(NOW, {})
    assert [j.id for j in done.completed] == ["ml/train"] and [j.id for j in jobs] == ["ml/wait"]


def test_a_pod_outside_the_bounds_is_left_out_of_the_plans_and_reported_once(server: ApiServer,
                                                                             cluster: KubeCluster) -> None:
    server.put("namespaces", namespace("ml", tenant="research"))
    server.put("pods", gpu_pod("fine", gpus=8))
    server.put("pods", gpu_pod("huge", gpus=100_000))
    server.put("pods", gpu_pod("odd", gpus=1, annotations={"burst.dev/gpu-model": "x" * 100_000}))
    source = KubernetesJobSource(cluster, Drainer(cluster))
    jobs, events = source.observe(NOW, {})
    assert [j.id for j in jobs] == ["ml/fine"]
    assert [(jid, why.split(":")[0]) for jid, _, why in events.failed] == [("ml/huge", "gpus"), ("ml/odd", "gpu_model")]
    jobs, again = source.observe(NOW, {})
    assert [j.id for j in jobs] == ["ml/fine"] and again.failed == []


def test_the_pod_watch_wakes_the_loop_on_new_and_gone_gpu_pods_and_ready_nodes(server: ApiServer,
                                                                                  cluster: KubeCluster) -> None:
    server.put("pods", gpu_pod("old", node="n1"))
    server.put("nodes", k8s_node("n1", "aws:///us-east-1a/i-0001", gpus=8))
    cluster.sync()
    watch = PodWatch(cluster)
    watch.reset(NOW)
    assert watch.poll(NOW) == [], "nothing changed since the tick"
    server.put("pods", gpu_pod("new"))
    server.put("pods", dict(gpu_pod("web", gpus=0)))  # no GPUs: not a job
    assert [e.reason for e in watch.poll(NOW)] == [WakeReason.JOB_SUBMITTED]
    server.remove("pods", "old", "ml")
    server.put("nodes", k8s_node("n2", "aws:///us-east-1a/i-0002", gpus=8))
    assert sorted(e.reason for e in watch.poll(NOW)) == [WakeReason.JOB_FINISHED, WakeReason.NODE_READY]
    server.put("nodes", k8s_node("n1", "aws:///us-east-1a/i-0001", gpus=8, ready=False))
    assert [e.reason for e in watch.poll(NOW)] == [WakeReason.NODE_LOST]
