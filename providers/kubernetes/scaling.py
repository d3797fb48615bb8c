"""The calls behind services' replicas on Kubernetes: a Deployment's scale subresource, who else scales it, and
the placeholder pods' PriorityClass.

Each method is one API call (`ensure_priority_class` one or two; pods go
through the cluster cache's writes, `KubeCluster.create_pod`), and maps
the client's failures onto burst's typed errors: 401 and 403 are
`CredentialsError` (the ClusterRole lacks the permission; the message names
the call), anything else that fails is `BackendUnavailable` (retried on a
later tick; every write here is absolute, so a resend is harmless). Reads
of HorizontalPodAutoscalers and KEDA ScaledObjects are plain lists, made at
most once per tick by their caller; a cluster without KEDA answers the
ScaledObject list with 404 and has none.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from providers.base import BackendUnavailable, CredentialsError
from providers.kubernetes.cluster import KubeCluster, Obj
from providers.kubernetes.names import SMP

T = TypeVar("T")
NOT_FOUND = 404
CONFLICT = 409
KEDA = ("keda.sh", "v1alpha1", "scaledobjects")


def _call(what: str, fn: Callable[[], T], *, tolerate: int | None = None) -> T | None:
    """Run one API call as `what`: its answer, None when it failed with status `tolerate`; else its typed error."""
    try:
        return fn()
    except ApiException as exc:
        if exc.status == tolerate:
            return None
        reason = f"kubernetes: {what}: {exc.status} {exc.reason}{_message(exc)}"
        if exc.status in (401, 403):  # RBAC (deploy/kubernetes grants what burst calls) or an admission refusal
            raise CredentialsError(reason) from None
        raise BackendUnavailable(reason) from None
    except (HTTPError, OSError) as exc:
        raise BackendUnavailable(f"kubernetes: {what}: {exc}") from None


def _message(exc: ApiException) -> str:
    """The API server's own words (its Status `message`), when it sent them."""
    try:
        message = json.loads(exc.body or "{}").get("message")
    except (ValueError, AttributeError):
        return ""
    return f": {message}" if message else ""


def _items(raw: Any) -> list[Obj]:
    return list(json.loads(raw.data)["items"]) if raw is not None else []


class ScalingApi:
    """Scale subresource writes, autoscaler reads and the placeholder PriorityClass (see the module docstring)."""

    def __init__(self, cluster: KubeCluster) -> None:
        self.cluster = cluster
        api = cluster.api
        self.apps: Any = client.AppsV1Api(api)  # Any: raw responses (`_preload_content=False`)
        self.autoscaling: Any = client.AutoscalingV2Api(api)
        self.scheduling: Any = client.SchedulingV1Api(api)
        self.custom: Any = client.CustomObjectsApi(api)

    def scale_deployment(self, namespace: str, name: str, replicas: int) -> None:
        """Set the Deployment's `spec.replicas` through its scale subresource (a strategic merge patch of the
        Scale: only the count changes, whatever else its owner edits meanwhile)."""
        body = {"spec": {"replicas": replicas}}
        _call(f"patch deployments/scale {namespace}/{name}", lambda: self.apps.patch_namespaced_deployment_scale(
            name, namespace, body, _content_type=SMP, _preload_content=False))

    def create_pod(self, namespace: str, pod: Obj) -> bool:
        """Create a pod (the cluster cache takes it at once); False if one of its name exists already."""
        return bool(_call(f"create pods {namespace}/{pod['metadata']['name']}",
                          lambda: self.cluster.create_pod(namespace, pod)))

    def delete_pod(self, namespace: str, name: str) -> None:
        """Delete a pod (gone already is fine)."""
        _call(f"delete pods {namespace}/{name}", lambda: self.cluster.delete_pod(namespace, name))

    def autoscalers(self) -> list[Obj]:
        """Every HorizontalPodAutoscaler (autoscaling/v2) in the cluster."""
        return _items(_call("list horizontalpodautoscalers", lambda: self.autoscaling
                            .list_horizontal_pod_autoscaler_for_all_namespaces(_preload_content=False)))

    def scaled_objects(self) -> list[Obj]:
        """Every KEDA ScaledObject in the cluster (none where the CRD is not installed: 404)."""
        return _items(_call("list scaledobjects.keda.sh", lambda: self.custom.list_cluster_custom_object(
            *KEDA, _preload_content=False), tolerate=NOT_FOUND))

    def ensure_priority_class(self, name: str, value: int, description: str) -> Obj:
        """The PriorityClass `name` as the cluster has it; created (`value`, never the global default, never
        preempting) when missing. An existing one is returned as it is, whatever its value."""
        raw = _call(f"get priorityclasses {name}", lambda: self.scheduling.read_priority_class(
            name, _preload_content=False), tolerate=NOT_FOUND)
        if raw is not None:
            found: Obj = json.loads(raw.data)
            return found
        body: Obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                     "value": value, "globalDefault": False, "preemptionPolicy": "Never", "description": description}
        raw = _call(f"create priorityclasses {name}", lambda: self.scheduling.create_priority_class(
            body, _preload_content=False), tolerate=CONFLICT)  # a conflict: another writer made it since the read
        made: Obj = json.loads(raw.data) if raw is not None else body
        return made


__all__ = ["ScalingApi"]
