"""A small Kubernetes API server for the tests: just the calls burst makes, over real HTTP on 127.0.0.1.

kmock 0.8 was evaluated first and does not fit: its list responses carry a
placeholder resourceVersion, it has no label or field selectors, it merges
patches as plain dicts (no strategic merge of keyed lists), it has no
eviction subresource or PodDisruptionBudget check, updates never conflict on
a stale resourceVersion (only a second create does), and a watch neither
starts from a resourceVersion nor answers 410 Gone. Extending it through its
reactions would mean re-implementing all of that on top of it, so this
server implements the calls in `API_CALLS` and nothing else.

What it does like a real API server: every write bumps one global
resourceVersion; lists return it; a watch from resourceVersion R replays the
events after R that match its selectors (an object leaving a field
selector's set is a DELETED event), or answers an ERROR event with code 410
when R is older than the compacted history; PUT with a stale
resourceVersion is 409; a create of an existing name is 409; PATCH applies a
strategic merge patch (maps merge, null deletes, lists with a patch merge key
merge by it: containers by `name`, conditions by `type`; any other list, such
as `spec.taints`, which core/v1 declares atomic, is replaced whole), is 409
when the patch carries a `metadata.resourceVersion` that is not the current
one, and refuses other patch types with 415; an eviction is refused with 429
while a matching PodDisruptionBudget allows no disruption. A Deployment's
scale subresource takes a strategic merge patch of its Scale
(`spec.replicas`), writes the Deployment's `spec.replicas` and answers the
autoscaling/v1 Scale. A pod created with a `priorityClassName` gets its
`spec.priority` and `preemptionPolicy` from that PriorityClass, and is
refused with 403 when there is none (the Priority admission plugin). A
resource in `absent` answers 404, as a custom resource whose CRD is not
installed does.

A test can run a one-shot `before_answer` hook between deciding a GET and
answering it, so another writer's request lands in between (a race made
deterministic).

Where it is simpler: a watch ends once it has sent what it has (a real one
stays open until `timeoutSeconds`); an eviction or delete removes the pod at
once (no grace period); PodDisruptionBudgets have their `disruptionsAllowed`
set by the test, as the disruption controller would, and an eviction takes
one.

Every request is recorded as (verb, API group, resource) — the RBAC test
compares those with the ClusterRole — and every patch with its content type.
The cluster's other actors (the scheduler binding a pod, the kubelet
reporting a node, the Job controller recreating a pod) are the test itself,
through `put`, `patch` and `remove`, which emit watch events like API writes.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

Obj = dict[str, Any]

SMP = "application/strategic-merge-patch+json"

API_CALLS = frozenset({
    # (verb, API group, resource or resource/subresource)
    ("list", "", "namespaces"),
    ("list", "", "nodes"),
    ("watch", "", "nodes"),
    ("patch", "", "nodes"),  # labels, taints, cordon (strategic merge)
    ("delete", "", "nodes"),  # the instance is gone
    ("list", "", "pods"),
    ("watch", "", "pods"),
    ("patch", "", "pods"),  # checkpoint request annotations (strategic merge)
    ("create", "", "pods"),  # services' placeholder pods
    ("delete", "", "pods"),  # placeholders no longer needed; a pod a PDB blocked past the retry budget
    ("create", "", "pods/eviction"),
    ("list", "apps", "deployments"),  # services' Deployments (list, then watch)
    ("watch", "apps", "deployments"),
    ("patch", "apps", "deployments/scale"),  # a service's replicas, in mode replicas
    ("list", "autoscaling", "horizontalpodautoscalers"),  # who else owns a Deployment's replicas
    ("list", "keda.sh", "scaledobjects"),
    ("get", "scheduling.k8s.io", "priorityclasses"),  # the placeholders' class, made when missing
    ("create", "scheduling.k8s.io", "priorityclasses"),
    ("get", "coordination.k8s.io", "leases"),
    ("create", "coordination.k8s.io", "leases"),
    ("update", "coordination.k8s.io", "leases"),
})
"""Every call burst sends to the API server; PATCH is always a strategic merge patch (`SMP`)."""

# resource -> (API group, namespaced)
RESOURCES = {
    "namespaces": ("", False),
    "nodes": ("", False),
    "pods": ("", True),
    "poddisruptionbudgets": ("policy", True),
    "leases": ("coordination.k8s.io", True),
    "deployments": ("apps", True),
    "horizontalpodautoscalers": ("autoscaling", True),
    "scaledobjects": ("keda.sh", True),
    "priorityclasses": ("scheduling.k8s.io", False),
}
KINDS = {"namespaces": "Namespace", "nodes": "Node", "pods": "Pod", "poddisruptionbudgets": "PodDisruptionBudget",
         "leases": "Lease", "deployments": "Deployment", "horizontalpodautoscalers": "HorizontalPodAutoscaler",
         "scaledobjects": "ScaledObject", "priorityclasses": "PriorityClass"}
MERGE_KEYS = {("spec", "containers"): "name", ("status", "conditions"): "type"}
"""The lists a strategic merge patch merges, by their patchMergeKey in core/v1; every other list is replaced."""

_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[a-z0-9.]+)/v[0-9a-z]+)"
    r"(?:/namespaces/(?P<ns>[^/]+)(?=/))?/(?P<resource>[a-z]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[a-z]+))?$"
)


class Conflict(Exception):
    pass


class Forbidden(Exception):
    pass


class ApiServer:
    """The in-memory cluster state and its HTTP front (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.objects: dict[tuple[str, str, str], Obj] = {}  # (resource, namespace, name) -> object
        self.rv = 100
        self.events: list[tuple[int, str, str, Obj, Obj | None]] = []  # (rv, resource, type, object, before)
        self.compacted_to = 0  # watches from a resourceVersion below this get 410
        self.calls: list[tuple[str, str, str]] = []
        self.patch_types: list[tuple[str, str]] = []  # (resource, content type)
        self.evictions: list[tuple[str, str, int]] = []  # (namespace, name, status code answered)
        self.absent: set[str] = set()  # resources answered 404, as a CRD not installed
        self.before_answer: dict[tuple[str, str], Callable[[], None]] = {}
        """One-shot: run after a (verb, resource) request is decided and before it is answered (a racing writer)."""
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.http.daemon_threads = True
        self._thread = threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.http.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> ApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    # ------------------------------------------------------------ the store (also the test's hands)

    def _bump(self, resource: str, kind: str, obj: Obj, before: Obj | None) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.events.append((self.rv, resource, kind, copy.deepcopy(obj), copy.deepcopy(before)))

    def put(self, resource: str, obj: Obj) -> Obj:
        """Create or replace an object as another actor would (no conflict check)."""
        with self.lock:
            meta = obj.setdefault("metadata", {})
            key = (resource, meta.get("namespace", ""), meta["name"])
            before = self.objects.get(key)
            meta.setdefault("uid", f"uid-{resource}-{meta['name']}")
            meta.setdefault("creationTimestamp", datetime(2026, 3, 2, tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
            obj = copy.deepcopy(obj)
            self.objects[key] = obj
            self._bump(resource, "MODIFIED" if before else "ADDED", obj, before)
            return copy.deepcopy(obj)

    def get(self, resource: str, name: str, namespace: str = "") -> Obj | None:
        with self.lock:
            found = self.objects.get((resource, namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def patch(self, resource: str, name: str, patch: Obj, namespace: str = "") -> Obj:
        """Apply a strategic merge patch as another actor would."""
        with self.lock:
            key = (resource, namespace, name)
            before = self.objects[key]
            after = strategic_merge(before, patch, ())
            self.objects[key] = after
            self._bump(resource, "MODIFIED", after, before)
            return copy.deepcopy(after)

    def remove(self, resource: str, name: str, namespace: str = "") -> None:
        with self.lock:
            obj = self.objects.pop((resource, namespace, name))
            self._bump(resource, "DELETED", obj, None)

    def compact(self) -> None:
        """Forget the event history: a watch from any earlier resourceVersion now gets 410 Gone."""
        with self.lock:
            self.compacted_to = self.rv + 1
            self.events.clear()

    def items(self, resource: str) -> list[Obj]:
        with self.lock:
            return [copy.deepcopy(o) for (r, _, _), o in sorted(self.objects.items()) if r == resource]

    # ------------------------------------------------------------ API semantics

    def list(self, resource: str, ns: str | None, query: dict[str, str]) -> Obj:
        with self.lock:
            items = [copy.deepcopy(o) for (r, n, _), o in sorted(self.objects.items())
                     if r == resource and (ns is None or n == ns) and selected(o, query)]
            return {"kind": KINDS[resource] + "List", "apiVersion": "v1",
                    "metadata": {"resourceVersion": str(self.rv)}, "items": items}

    def watch(self, resource: str, ns: str | None, query: dict[str, str]) -> Iterator[Obj]:
        since = int(query.get("resourceVersion") or 0)
        with self.lock:
            if since < self.compacted_to - 1:
                yield {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                   "message": f"too old resource version: {since}",
                                                   "reason": "Expired", "code": 410}}
                return
            events = [e for e in self.events if e[0] > since and e[1] == resource]
        for _, _, kind, obj, before in events:
            if ns is not None and obj["metadata"].get("namespace") != ns:
                continue
            now_in, was_in = selected(obj, query), before is not None and selected(before, query)
            if kind == "MODIFIED" and now_in != was_in:
                kind = "ADDED" if now_in else "DELETED"
            elif not now_in:
                continue
            yield {"type": kind, "object": obj}

    def create(self, resource: str, ns: str, body: Obj) -> Obj:
        with self.lock:
            meta = body.setdefault("metadata", {})
            if RESOURCES[resource][1]:
                meta["namespace"] = ns
            if (resource, ns, meta.get("name", "")) in self.objects:
                raise Conflict(f'{resource} "{meta.get("name")}" already exists')
            if resource == "pods":
                self._admit_pod(body)
            return self.put(resource, body)

    def _admit_pod(self, pod: Obj) -> None:
        """The Priority admission plugin: the pod's class gives its priority; an unknown class is refused."""
        pod.setdefault("status", {"phase": "Pending"})
        spec = pod.setdefault("spec", {})
        name = spec.get("priorityClassName")
        if not name:
            return
        found = self.objects.get(("priorityclasses", "", name))
        if found is None:
            raise Forbidden(f'pods "{pod["metadata"].get("name")}" is forbidden: no PriorityClass with name {name} '
                            "was found")
        spec["priority"] = found["value"]
        spec["preemptionPolicy"] = found.get("preemptionPolicy", "PreemptLowerPriority")

    def scale(self, ns: str, name: str, patch: Obj) -> Obj | None:
        """A strategic merge patch of a Deployment's Scale: its `spec.replicas` written to the Deployment; the
        Scale after (None when there is no such Deployment)."""
        with self.lock:
            if ("deployments", ns, name) not in self.objects:
                return None
            replicas = (patch.get("spec") or {}).get("replicas")
            after = self.patch("deployments", name, {"spec": {"replicas": replicas}} if replicas is not None else {},
                               ns)
            return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                    "metadata": {k: after["metadata"][k] for k in ("name", "namespace", "resourceVersion", "uid")},
                    "spec": {"replicas": after["spec"].get("replicas", 0)},
                    "status": {"replicas": after.get("status", {}).get("replicas", 0)}}

    def update(self, resource: str, ns: str, name: str, body: Obj) -> Obj:
        with self.lock:
            current = self.objects.get((resource, ns, name))
            if current is None:
                raise KeyError(name)
            sent = body.get("metadata", {}).get("resourceVersion")
            if sent != current["metadata"]["resourceVersion"]:
                raise Conflict(f"the object has been modified (sent resourceVersion {sent}, "
                               f"current {current['metadata']['resourceVersion']})")
            body["metadata"]["namespace"] = ns
            return self.put(resource, body)

    def evict(self, ns: str, name: str) -> tuple[int, Obj]:
        with self.lock:
            pod = self.objects.get(("pods", ns, name))
            if pod is None:
                return 404, status(404, "NotFound", f'pods "{name}" not found')
            for (r, n, _), pdb in self.objects.items():
                if r == "poddisruptionbudgets" and n == ns and label_match(pod, pdb["spec"].get("selector", {})):
                    if pdb.get("status", {}).get("disruptionsAllowed", 0) <= 0:
                        self.evictions.append((ns, name, 429))
                        return 429, status(429, "TooManyRequests",
                                           "Cannot evict pod as it would violate the pod's disruption budget.")
                    pdb["status"]["disruptionsAllowed"] -= 1
            self.evictions.append((ns, name, 201))
            self.remove("pods", name, ns)
            return 201, status(201, "", "", success=True)


def status(code: int, reason: str, message: str, *, success: bool = False) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "status": "Success" if success else "Failure",
            "reason": reason, "message": message, "code": code}


def strategic_merge(target: Any, patch: Any, path: tuple[str, ...]) -> Any:
    """A strategic merge patch of the fields burst patches: maps merge, null deletes, keyed lists merge, other
    lists are replaced."""
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target)
    for key, value in patch.items():
        here = (*path, key)
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list) and here in MERGE_KEYS and isinstance(out.get(key), list):
            merge_key = MERGE_KEYS[here]
            merged = {item[merge_key]: item for item in out[key]}
            for item in value:
                if item.get("$patch") == "delete":
                    merged.pop(item[merge_key], None)
                else:
                    merged[item[merge_key]] = strategic_merge(merged.get(item[merge_key], {}), item, here)
            out[key] = list(merged.values())
        else:
            out[key] = strategic_merge(out.get(key), value, here)
    return out


def _field(obj: Obj, dotted: str) -> str:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part, {}) if isinstance(value, dict) else {}
    return value if isinstance(value, str) else ""


def selected(obj: Obj, query: dict[str, str]) -> bool:
    """Whether `obj` is in the set of the query's labelSelector and fieldSelector (equality-based only)."""
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, query.get("labelSelector", "").split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            ok = labels.get(k) != v
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            ok = labels.get(k) == v
        elif term.startswith("!"):
            ok = term[1:] not in labels
        else:
            ok = term in labels
        if not ok:
            return False
    for term in filter(None, query.get("fieldSelector", "").split(",")):
        negate = "!=" in term
        k, v = term.split("!=" if negate else "=", 1)
        if (_field(obj, k) == v.lstrip("=")) == negate:
            return False
    return True


def label_match(obj: Obj, selector: Obj) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _handler(server: ApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall

        def log_message(self, *args: object) -> None:
            pass

        def _send(self, code: int, body: Obj) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self) -> tuple[str, str | None, str, str | None, str | None, dict[str, str]] | None:
            url = urlparse(self.path)
            m = _PATH.match(url.path)
            if m is None or m["resource"] not in RESOURCES:
                self._send(404, status(404, "NotFound", f"no route {url.path}"))
                return None
            if m["resource"] in server.absent:
                verb = {"GET": "get" if m["name"] else "list", "POST": "create", "PUT": "update", "PATCH": "patch",
                        "DELETE": "delete"}[self.command]
                self._record(verb, m["group"] or "", m["resource"])
                self._send(404, status(404, "NotFound", "the server could not find the requested resource"))
                return None
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            return m["group"] or "", m["ns"], m["resource"], m["name"], m["sub"], query

        def _body(self) -> Obj:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"{}") if length else {}

        def _record(self, verb: str, group: str, resource: str) -> None:
            with server.lock:
                server.calls.append((verb, group, resource))

        def do_GET(self) -> None:  # noqa: N802
            route = self._route()
            if route is None:
                return
            group, ns, resource, name, _, query = route
            if name is not None:
                self._record("get", group, resource)
                obj = server.get(resource, name, ns or "")
                hook = server.before_answer.pop(("get", resource), None)
                if hook is not None:
                    hook()
                if obj is None:
                    self._send(404, status(404, "NotFound", f'{resource} "{name}" not found'))
                else:
                    self._send(200, obj)
                return
            if query.get("watch") in ("true", "1"):
                self._record("watch", group, resource)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in server.watch(resource, ns, query):
                    self.wfile.write(json.dumps(event).encode() + b"\n")
                self.wfile.flush()
                self.close_connection = True
                return
            self._record("list", group, resource)
            self._send(200, server.list(resource, ns, query))

        def do_POST(self) -> None:  # noqa: N802
            route = self._route()
            if route is None:
                return
            group, ns, resource, name, sub, _ = route
            body = self._body()
            if resource == "pods" and sub == "eviction" and name is not None:
                self._record("create", group, "pods/eviction")
                self._send(*server.evict(ns or "", name))
                return
            self._record("create", group, resource)
            try:
                self._send(201, server.create(resource, ns or "", body))
            except Conflict as exc:
                self._send(409, status(409, "AlreadyExists", str(exc)))
            except Forbidden as exc:
                self._send(403, status(403, "Forbidden", str(exc)))

        def do_PUT(self) -> None:  # noqa: N802
            route = self._route()
            if route is None:
                return
            group, ns, resource, name, _, _ = route
            self._record("update", group, resource)
            try:
                self._send(200, server.update(resource, ns or "", name or "", self._body()))
            except Conflict as exc:
                self._send(409, status(409, "Conflict", str(exc)))
            except KeyError:
                self._send(404, status(404, "NotFound", f'{resource} "{name}" not found'))

        def do_PATCH(self) -> None:  # noqa: N802
            route = self._route()
            if route is None:
                return
            group, ns, resource, name, sub, _ = route
            self._record("patch", group, f"{resource}/{sub}" if sub else resource)
            kind = self.headers.get("Content-Type", "")
            with server.lock:
                server.patch_types.append((resource, kind))
            body = self._body()
            if kind != SMP:
                self._send(415, status(415, "UnsupportedMediaType", f"this server takes only {SMP}, got {kind}"))
                return
            if resource == "deployments" and sub == "scale":
                scale = server.scale(ns or "", name or "", body)
                if scale is None:
                    self._send(404, status(404, "NotFound", f'deployments.apps "{name}" not found'))
                else:
                    self._send(200, scale)
                return
            with server.lock:
                current = server.get(resource, name or "", ns or "")
                if current is None:
                    self._send(404, status(404, "NotFound", f'{resource} "{name}" not found'))
                    return
                sent = (body.get("metadata") or {}).get("resourceVersion")
                if sent is not None and sent != current["metadata"]["resourceVersion"]:
                    self._send(409, status(409, "Conflict", f"the object has been modified (sent resourceVersion "
                                                            f"{sent}, current {current['metadata']['resourceVersion']})"))
                    return
                answer = server.patch(resource, name or "", body, ns or "")
            self._send(200, answer)

        def do_DELETE(self) -> None:  # noqa: N802
            route = self._route()
            if route is None:
                return
            group, ns, resource, name, _, _ = route
            self._record("delete", group, resource)
            self._body()
            obj = server.get(resource, name or "", ns or "")
            if obj is None:
                self._send(404, status(404, "NotFound", f'{resource} "{name}" not found'))
                return
            server.remove(resource, name or "", ns or "")
            self._send(200, obj)

    return Handler
