"""Fixtures for the Kubernetes tests: a local API server per test (tests/kubernetes/apiserver.py), the real
`kubernetes` client pointed at it, and builders of the pods and nodes the tests put there.

Every request any server saw is collected in `SEEN`, so the RBAC test (run last) compares the
ClusterRole with what the whole suite used."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from apiserver import ApiServer

from providers.kubernetes.cluster import KubeCluster, connect

SEEN: set[tuple[str, str, str]] = set()
PATCH_TYPES: set[str] = set()
RBAC_TEST = "test_cluster_role_grants_exactly_the_calls_the_suite_made"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the RBAC comparison after every other test, whatever order the files were collected in."""
    items.sort(key=lambda item: item.name == RBAC_TEST)


@pytest.fixture
def server() -> Iterator[ApiServer]:
    api = ApiServer().start()
    try:
        yield api
    finally:
        api.stop()
        SEEN.update(api.calls)
        PATCH_TYPES.update(kind for _, kind in api.patch_types)


@pytest.fixture
def cluster(server: ApiServer) -> KubeCluster:
    return KubeCluster(connect(host=server.url))


def namespace(name: str, tenant: str | None = None) -> dict[str, Any]:
    labels = {"burst.dev/tenant": tenant} if tenant else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def gpu_pod(name: str, ns: str = "ml", *, gpus: int = 8, node: str | None = None, annotations: dict[str, str] | None = None,
            labels: dict[str, str] | None = None, owner_job: str | None = None, created: str = "2026-03-02T11:00:00Z",
            started: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "annotations": dict(annotations or {}),
                            "labels": dict(labels or {}), "creationTimestamp": created}
    if owner_job:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner_job, "uid": f"uid-{owner_job}",
                                    "controller": True}]
    spec: dict[str, Any] = {"containers": [{"name": "train", "image": "trainer:1",
                                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    status: dict[str, Any] = {"phase": "Pending"}
    if node:
        spec["nodeName"] = node
        status = {"phase": "Running", "startTime": started or created}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def k8s_node(name: str, provider_id: str, *, gpus: int | None = None, ready: bool = True) -> dict[str, Any]:
    allocatable = {"cpu": "96", "memory": "1Ti"}
    if gpus is not None:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
            "spec": {"providerID": provider_id},
            "status": {"allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


class Prices:
    def group_price(self, g: object) -> float:
        return 10.0

    def standby_price(self, g: object) -> float:
        return 0.0
