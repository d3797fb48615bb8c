"""A controller over the sim cloud seen through the local API server: the real reconcile loop, the Kubernetes
job source, node handling and checkpoint channel, a fake clock."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from apiserver import ApiServer
from conftest import Prices

from burst.actuator import Actuator
from burst.model import NodeGroup
from burst.reconcile import Controller, TickReport
from burst.state import Store
from burst.workloads.kubernetes import KubernetesJobSource, KubernetesLink
from providers.kubernetes.cluster import KubeCluster
from providers.kubernetes.drain import Drainer, Escalation
from providers.kubernetes.nodes import KubernetesNodes
from providers.sim import ManualClock, SimProvider


@dataclass
class Rig:
    server: ApiServer
    cluster: KubeCluster
    sim: SimProvider
    nodes: KubernetesNodes
    source: KubernetesJobSource
    drainer: Drainer
    controller: Controller
    clock: ManualClock
    store: Store

    def tick(self, seconds: float = 0.0) -> TickReport:
        if seconds:
            self.clock.advance(seconds)
        return self.controller.tick()


def rig(server: ApiServer, cluster: KubeCluster, groups: list[NodeGroup], clock: ManualClock, path: Path, *,
        initial: dict[str, int] | None = None, pdb_retry_s: float = 300.0, on_pdb_timeout: Escalation = "wait",
        terminate_latency_s: float = 30.0) -> Rig:
    sim = SimProvider(groups, clock=clock, cluster="k8s", initial=initial or {}, terminate_latency_s=terminate_latency_s)
    drainer = Drainer(cluster, pdb_retry_s=pdb_retry_s, on_pdb_timeout=on_pdb_timeout)
    nodes = KubernetesNodes(sim, cluster, drainer, clock=clock)
    source = KubernetesJobSource(cluster, drainer, sync=False)
    store = Store.open(path)
    controller = Controller(providers={"sim": nodes}, source=source, store=store, policies=lambda: {}, prices=Prices(),
                            clock=clock, cluster="k8s", actuator=Actuator({"sim": nodes}, store, cluster="k8s", clock=clock),
                            agents=KubernetesLink(source, drainer))
    return Rig(server, cluster, sim, nodes, source, drainer, controller, clock, store)
