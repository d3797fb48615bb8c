"""The cluster as burst sees it: the API clients, and list-then-watch caches of pods, nodes and namespaces.

`connect()` builds the official client from the in-cluster service account
when burst runs in a pod, else from a kubeconfig (or an explicit API URL,
which the tests use). `KubeCluster.sync()` brings the caches up to date:
the first call lists each resource and keeps the list's resourceVersion;
every later call watches from the last resourceVersion seen and applies the
events; a watch answered with 410 Gone (the history was compacted) is
resumed by listing again. Objects are kept as plain dicts, as the API sends
them. Writes go through the small methods below, each one API call, so the
calls burst makes are all in this file (tests/kubernetes/apiserver.py lists them).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client, watch
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

from providers.base import CredentialsError
from providers.kubernetes.names import SMP

log = logging.getLogger(__name__)

Obj = dict[str, Any]
GONE = 410


def connect(*, kubeconfig: str | None = None, context: str | None = None, host: str | None = None) -> client.ApiClient:
    """An API client: `host` as given (no auth), else in-cluster config, else the kubeconfig. Raises CredentialsError."""
    if host is not None:
        cfg = client.Configuration()
        cfg.host = host
        return client.ApiClient(cfg)
    config: Any = kube_config
    try:
        if kubeconfig is None:
            try:
                config.load_incluster_config()
                return client.ApiClient()
            except config.ConfigException:
                pass
        made: client.ApiClient = config.new_client_from_config(config_file=kubeconfig, context=context)
        return made
    except (config.ConfigException, OSError) as exc:
        raise CredentialsError(f"kubernetes: no in-cluster service account and no usable kubeconfig ({exc})") from None


@dataclass
class _Cache:
    """One resource's objects by (namespace, name), and the resourceVersion they are current to."""

    lister: Callable[..., Any]
    selectors: Mapping[str, str] = field(default_factory=dict)
    objects: dict[tuple[str, str], Obj] = field(default_factory=dict)
    resource_version: str | None = None
    relists: int = 0


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata", {})
    return meta.get("namespace", ""), meta["name"]


class KubeCluster:
    """Cached reads and single-call writes against one cluster's API (see the module docstring)."""

    def __init__(self, api: client.ApiClient, *, watch_timeout_s: int = 1,
                 pod_field_selector: str = "status.phase!=Succeeded,status.phase!=Failed",
                 tenant_label: str = "burst.dev/tenant") -> None:
        self.api = api
        self.core: Any = client.CoreV1Api(api)  # Any: `_preload_content=False` answers raw responses
        self.watch_timeout_s = watch_timeout_s
        self.tenant_label = tenant_label
        self._lock = threading.Lock()
        self._caches = {
            "pods": _Cache(self.core.list_pod_for_all_namespaces, {"field_selector": pod_field_selector}),
            "nodes": _Cache(self.core.list_node),
        }
        self._tenants: dict[str, str] = {}

    # ------------------------------------------------------------ reads

    def sync(self) -> None:
        """Bring the pod and node caches up to date (list first, then watch; relist after 410 Gone), and
        re-read the namespaces' tenant labels."""
        with self._lock:
            for cache in self._caches.values():
                self._sync(cache)
            raw = self.core.list_namespace(label_selector=self.tenant_label, _preload_content=False)
            self._tenants = {ns["metadata"]["name"]: ns["metadata"]["labels"][self.tenant_label]
                             for ns in json.loads(raw.data)["items"]}

    def _sync(self, cache: _Cache) -> None:
        if cache.resource_version is not None:
            try:
                self._watch(cache)
                return
            except ApiException as exc:
                if exc.status != GONE:
                    raise
                log.info("watch history compacted; relisting", extra={"resource_version": cache.resource_version})
        raw = cache.lister(_preload_content=False, **cache.selectors)
        listed = json.loads(raw.data)
        cache.objects = {_key(o): o for o in listed["items"]}
        cache.resource_version = listed["metadata"]["resourceVersion"]
        cache.relists += 1

    def _watch(self, cache: _Cache) -> None:
        watcher: Any = watch.Watch()  # type: ignore[no-untyped-call]
        stream = watcher.stream(cache.lister, resource_version=cache.resource_version,
                                      timeout_seconds=self.watch_timeout_s, allow_watch_bookmarks=True,
                                      **cache.selectors)
        for event in stream:
            obj = event["raw_object"]
            rv = obj.get("metadata", {}).get("resourceVersion")
            if event["type"] == "DELETED":
                cache.objects.pop(_key(obj), None)
            elif event["type"] in ("ADDED", "MODIFIED"):
                cache.objects[_key(obj)] = obj
            if rv:
                cache.resource_version = rv

    def pods(self) -> list[Obj]:
        """Pods not finished (as last synced)."""
        with self._lock:
            return list(self._caches["pods"].objects.values())

    def pod(self, namespace: str, name: str) -> Obj | None:
        with self._lock:
            return self._caches["pods"].objects.get((namespace, name))

    def nodes(self) -> list[Obj]:
        with self._lock:
            return list(self._caches["nodes"].objects.values())

    def node(self, name: str) -> Obj | None:
        with self._lock:
            return self._caches["nodes"].objects.get(("", name))

    def track_deployments(self) -> None:
        """Keep a list-then-watch cache of Deployments too, from the next `sync` on (services' replicas,
        `burst.workloads.kube_replicas`); without it burst never reads Deployments."""
        with self._lock:
            if "deployments" not in self._caches:
                apps: Any = client.AppsV1Api(self.api)
                self._caches["deployments"] = _Cache(apps.list_deployment_for_all_namespaces)

    def deployments(self) -> list[Obj]:
        """Deployments as last synced (none unless `track_deployments` was called)."""
        with self._lock:
            cache = self._caches.get("deployments")
            return list(cache.objects.values()) if cache is not None else []

    def tenant_of(self, namespace: str) -> str:
        """The namespace's tenant label, else the namespace's name."""
        return self._tenants.get(namespace, namespace)

    def relists(self, resource: str) -> int:
        """How many times `resource` was listed (1 after the first sync; more after each 410 Gone)."""
        return self._caches[resource].relists

    # ------------------------------------------------------------ writes (each one API call)

    def patch_node(self, name: str, patch: Obj) -> None:
        """Strategic merge patch of a node; the cache takes the answer at once."""
        answer = self.core.patch_node(name, patch, _content_type=SMP, _preload_content=False)
        self._store("nodes", json.loads(answer.data))

    def patch_pod(self, namespace: str, name: str, patch: Obj) -> None:
        answer = self.core.patch_namespaced_pod(name, namespace, patch, _content_type=SMP, _preload_content=False)
        self._store("pods", json.loads(answer.data))

    def delete_node(self, name: str) -> bool:
        """Delete the Node object; False if it was already gone."""
        try:
            self.core.delete_node(name)
        except ApiException as exc:
            if exc.status != 404:
                raise
            return False
        finally:
            self._forget("nodes", ("", name))
        return True

    def create_pod(self, namespace: str, pod: Obj) -> bool:
        """Create a pod; the cache takes the answer at once. False if one of that name already exists."""
        try:
            answer = self.core.create_namespaced_pod(namespace, pod, _preload_content=False)
        except ApiException as exc:
            if exc.status != 409:
                raise
            return False
        self._store("pods", json.loads(answer.data))
        return True

    def delete_pod(self, namespace: str, name: str) -> None:
        try:
            self.core.delete_namespaced_pod(name, namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
        self._forget("pods", (namespace, name))

    def evict_pod(self, namespace: str, name: str) -> int:
        """POST the pod's policy/v1 Eviction: 201 evicted (or 404 already gone), 429 a PodDisruptionBudget
        forbids it now. Other errors raise."""
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
        try:
            self.core.create_namespaced_pod_eviction(name, namespace, body)
        except ApiException as exc:
            if exc.status not in (404, 429):
                raise
            if exc.status == 404:
                self._forget("pods", (namespace, name))
            return int(exc.status)
        self._forget("pods", (namespace, name))
        return 201

    def _store(self, resource: str, obj: Obj) -> None:
        with self._lock:
            self._caches[resource].objects[_key(obj)] = obj

    def _forget(self, resource: str, key: tuple[str, str]) -> None:
        with self._lock:
            self._caches[resource].objects.pop(key, None)


__all__ = ["ApiException", "KubeCluster", "connect"]
