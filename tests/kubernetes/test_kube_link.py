"""The checkpoint channel as the loop's agent link: a plan's checkpoint request annotates the job's pod, a drain
that starts while that request is open waits for its ack instead of asking again, and a plan's eviction of a
job that cannot checkpoint evicts at once."""

from __future__ import annotations

from datetime import timedelta

from apiserver import ApiServer
from builders import T0
from conftest import gpu_pod, k8s_node, namespace

from burst.model import Action, ActionKind
from burst.workloads.kubernetes import KubernetesJobSource, KubernetesLink
from providers.kubernetes.cluster import KubeCluster
from providers.kubernetes.drain import Drainer, rfc3339


def link(server: ApiServer, cluster: KubeCluster, **pod: object) -> tuple[KubernetesLink, Drainer, object]:
    server.put("namespaces", namespace("ml"))
    server.put("nodes", k8s_node("n1", "sim:///node-1", gpus=8))
    server.put("pods", gpu_pod("p", node="n1", **pod))  # type: ignore[arg-type]
    drainer = Drainer(cluster, checkpoint_grace_s=120)
    source = KubernetesJobSource(cluster, drainer)
    (job,), _ = source.observe(T0, {})
    return KubernetesLink(source, drainer), drainer, job


def test_a_plans_checkpoint_request_is_answered_once_even_when_a_drain_follows(server: ApiServer, cluster: KubeCluster) -> None:
    channel, drainer, job = link(server, cluster, annotations={"burst.dev/fault-tolerant": "true",
                                                               "burst.dev/checkpoint-duration": "40s"})
    ask = Action(kind=ActionKind.REQUEST_CHECKPOINT, target="ml/p", reason="spot notice", step="checkpoint_on_notice",
                 id="plan-7/3")
    channel.forward(ask, job, T0)  # type: ignore[arg-type]
    annotations = server.get("pods", "p", "ml")["metadata"]["annotations"]
    assert annotations["burst.dev/checkpoint-request"] == "plan-7/3"
    assert annotations["burst.dev/checkpoint-deadline"] == rfc3339(T0 + timedelta(seconds=80))  # twice its checkpoint
    drainer.drain_node("n1", T0 + timedelta(seconds=5), deadline=T0 + timedelta(seconds=120), reason="spot")
    report = drainer.step(T0 + timedelta(seconds=5))
    assert report.requested == [] and report.evicted == []  # the open request is the one to answer
    assert server.get("pods", "p", "ml")["metadata"]["annotations"]["burst.dev/checkpoint-request"] == "plan-7/3"
    server.patch("pods", "p", {"metadata": {"annotations": {"burst.dev/checkpoint-ack": "plan-7/3"}}}, "ml")
    cluster.sync()
    report = drainer.step(T0 + timedelta(seconds=20))
    assert report.acked == [("ml", "p")] and report.evicted == [("ml", "p")]
    assert [p for p, _ in server.patch_types if p == "pods"] == ["pods"]  # one checkpoint request written, not two


def test_a_plans_eviction_of_a_job_that_cannot_checkpoint_is_immediate(server: ApiServer, cluster: KubeCluster) -> None:
    channel, drainer, job = link(server, cluster)
    evict = Action(kind=ActionKind.EVICT_JOB, target="ml/p", reason="priority preemption", step="preempt")
    channel.forward(evict, job, T0)  # type: ignore[arg-type]
    channel.sync(T0)
    assert channel.last_step.evicted == [("ml", "p")] and channel.last_step.requested == []
    assert server.evictions == [("ml", "p", 201)]
