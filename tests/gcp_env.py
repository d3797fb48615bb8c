"""A local Compute Engine API for the GCP tests: a threaded HTTP server on 127.0.0.1 (random port) answering the
methods burst calls, in the Compute API's REST/JSON shapes, so google-cloud-compute's real client (REST
transport) talks real HTTP to it.

What it does, as the Compute API does:

* Zonal managed instance groups created from global instance templates; the
  group reconciles toward `targetSize` (and its standby pool toward
  `targetStoppedSize`) on the test's clock: new VMs are PROVISIONING for
  `boot_s`, standby VMs then stop (TERMINATED), a standby VM started into
  service is STAGING for `wake_s`, a deleted VM is STOPPING for `delete_s`
  and then gone. listManagedInstances shows each VM's `currentAction`,
  `instanceStatus` and `lastAttempt` errors.
* Every mutating call returns an operation that goes PENDING -> RUNNING ->
  DONE, one step per `zoneOperations.get`/`wait`; its effect is applied when
  the request is accepted. A `requestId` seen before returns the first
  request's operation and applies nothing again; a requestId that is not a
  UUID, an unknown query parameter and an unknown body field are HTTP 400.
* Spot preemption (`preempt`): the VM goes STOPPING for 30 s, then
  TERMINATED, and a `compute.instances.preempted` zone operation is recorded.
* Faults (`Faults`): 429/503 answers per method, a 503 after the request was
  applied (a lost response), ZONE_RESOURCE_POOL_EXHAUSTED on resize in a
  zone (the operation fails) or on creation (the resize is accepted and each
  VM's creation fails, shown in `lastAttempt`), and 401 for every call.

What it does not do: regional groups, autoscalers, MIG autohealing (a
preempted Spot VM stays TERMINATED), instance templates' other properties.
Every request is logged (`log`) with its method id (the REST discovery id).
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

PROJECT = "burst-test"
REGION = "us-central1"
ZONES = ("us-central1-a", "us-central1-b")
API = "https://www.googleapis.com/compute/v1"
PACIFIC = timezone(timedelta(hours=-8))

LIST_PARAMS = frozenset({"filter", "maxResults", "orderBy", "pageToken", "returnPartialSuccess"})
ROUTES: list[tuple[str, str, str, frozenset[str]]] = [
    ("GET", r"zones/(?P<zone>[^/]+)/instanceGroupManagers", "compute.instanceGroupManagers.list", LIST_PARAMS),
    ("GET", r"zones/(?P<zone>[^/]+)/instanceGroupManagers/(?P<mig>[^/]+)", "compute.instanceGroupManagers.get", frozenset()),
    ("PATCH", r"zones/(?P<zone>[^/]+)/instanceGroupManagers/(?P<mig>[^/]+)", "compute.instanceGroupManagers.patch",
     frozenset({"requestId"})),
    ("POST", r"zones/(?P<zone>[^/]+)/instanceGroupManagers/(?P<mig>[^/]+)/resize", "compute.instanceGroupManagers.resize",
     frozenset({"size", "requestId"})),
    ("POST", r"zones/(?P<zone>[^/]+)/instanceGroupManagers/(?P<mig>[^/]+)/deleteInstances",
     "compute.instanceGroupManagers.deleteInstances", frozenset({"requestId"})),
    ("POST", r"zones/(?P<zone>[^/]+)/instanceGroupManagers/(?P<mig>[^/]+)/listManagedInstances",
     "compute.instanceGroupManagers.listManagedInstances", LIST_PARAMS),
    ("GET", r"global/instanceTemplates/(?P<template>[^/]+)", "compute.instanceTemplates.get", frozenset()),
    ("GET", r"zones/(?P<zone>[^/]+)/instances", "compute.instances.list", LIST_PARAMS),
    ("DELETE", r"zones/(?P<zone>[^/]+)/instances/(?P<instance>[^/]+)", "compute.instances.delete", frozenset({"requestId"})),
    ("GET", r"zones/(?P<zone>[^/]+)/operations", "compute.zoneOperations.list", LIST_PARAMS),
    ("GET", r"zones/(?P<zone>[^/]+)/operations/(?P<op>[^/]+)", "compute.zoneOperations.get", frozenset()),
    ("POST", r"zones/(?P<zone>[^/]+)/operations/(?P<op>[^/]+)/wait", "compute.zoneOperations.wait", frozenset()),
    ("GET", r"regions/(?P<region>[^/]+)", "compute.regions.get", frozenset()),
]
BODIES: dict[str, dict[str, Any]] = {
    "compute.instanceGroupManagers.deleteInstances": {"instances": None, "skipInstancesOnValidationError": None},
    "compute.instanceGroupManagers.patch": {
        "standbyPolicy": {"initialDelaySec": None, "mode": None}, "targetStoppedSize": None,
        "targetSuspendedSize": None, "targetSize": None, "description": None,
    },
}
"""The request body fields each method accepts (anything else is a 400, as the real API answers)."""


class ApiError(Exception):
    def __init__(self, code: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.code, self.message, self.reason = code, message, reason


INJECTED = {
    403: ("Required '{method}' permission for 'projects/{project}'", "forbidden"),
    429: ("Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service "
          "'compute.googleapis.com'", "rateLimitExceeded"),
    500: ("Internal error. Please try again or contact Google Support.", "backendError"),
    503: ("Internal error. Please try again or contact Google Support.", "backendError"),
}
"""What an injected error answers, per HTTP status: message and reason, as the Compute API words them."""

STATUS_NAMES = {403: "PERMISSION_DENIED", 400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
                503: "UNAVAILABLE"}


def error_body(code: int, message: str, reason: str) -> bytes:
    """A Compute API error in Google's JSON error shape."""
    return json.dumps({"error": {"code": code, "message": message, "status": STATUS_NAMES.get(code, "UNKNOWN"),
                                 "errors": [{"message": message, "domain": "global", "reason": reason}]}}).encode()


@dataclass
class Faults:
    """What the server injects. `errors`: method id -> HTTP statuses answered (one per call) before handling."""

    errors: dict[str, list[int]] = field(default_factory=dict)
    lose_after_apply: dict[str, int] = field(default_factory=dict)  # method id -> count: applied, then a 503
    stockout_zones: set[str] = field(default_factory=set)  # resize up fails: ZONE_RESOURCE_POOL_EXHAUSTED
    stockout_creation_zones: set[str] = field(default_factory=set)  # resize accepted, every creation fails
    unauthorized: bool = False


@dataclass
class Vm:
    name: str
    id: int
    zone: str
    mig: str | None
    labels: dict[str, str]
    spot: bool
    machine_type: str
    created: datetime
    status: str = "PROVISIONING"
    action: str = "CREATING"
    standby: bool = False
    until: datetime | None = None  # when the current transition ends
    gone_at: datetime | None = None
    errors: list[dict[str, str]] = field(default_factory=list)
    exists: bool = True  # False: a creation that keeps failing (no VM yet)

    def url(self, project: str) -> str:
        return f"{API}/projects/{project}/zones/{self.zone}/instances/{self.name}"


class ComputeServer:
    """The local Compute API (see the module docstring). `clock` is the test's clock."""

    def __init__(self, clock: Callable[[], datetime], *, project: str = PROJECT, boot_s: float = 60.0,
                 wake_s: float = 20.0, delete_s: float = 10.0, page_size: int = 500) -> None:
        self.clock = clock
        self.project = project
        self.boot_s, self.wake_s, self.delete_s = boot_s, wake_s, delete_s
        self.page_size = page_size
        self.faults = Faults()
        self.templates: dict[str, dict[str, Any]] = {}
        self.migs: dict[tuple[str, str], dict[str, Any]] = {}
        self.vms: dict[tuple[str, str], Vm] = {}
        self.operations: dict[tuple[str, str], dict[str, Any]] = {}
        self.request_ids: dict[str, tuple[str, str]] = {}  # requestId -> (zone, operation name)
        self.log: list[tuple[str, dict[str, str], Any, int]] = []  # (method id, query, body, HTTP status)
        self._ids = 1000
        self.created: list[str] = []  # every VM a group ever created, in order
        self._lock = threading.RLock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            wbufsize = 1 << 16  # one write per response (no delayed-ACK stall between headers and body)
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server._handle(self)

            do_POST = do_PATCH = do_DELETE = do_GET

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        self.thread = threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    # ---------------------------------------------------------------- setup (what Terraform would create)

    def add_template(self, name: str, machine_type: str, *, labels: dict[str, str], accelerators: tuple[tuple[str, int], ...] = (),
                     spot: bool = False) -> None:
        props: dict[str, Any] = {"machineType": machine_type, "labels": dict(labels),
                                 "scheduling": {"provisioningModel": "SPOT" if spot else "STANDARD",
                                                "onHostMaintenance": "TERMINATE", "automaticRestart": not spot}}
        if spot:
            props["scheduling"]["instanceTerminationAction"] = "STOP"
        if accelerators:
            props["guestAccelerators"] = [{"acceleratorType": t, "acceleratorCount": n} for t, n in accelerators]
        self.templates[name] = {"kind": "compute#instanceTemplate", "id": str(self._next_id()), "name": name,
                                "selfLink": f"{API}/projects/{self.project}/global/instanceTemplates/{name}",
                                "creationTimestamp": self._stamp(), "properties": props}

    def add_mig(self, zone: str, name: str, template: str, *, target_size: int = 0) -> None:
        self.migs[(zone, name)] = {
            "kind": "compute#instanceGroupManager", "id": str(self._next_id()), "name": name,
            "zone": f"{API}/projects/{self.project}/zones/{zone}", "baseInstanceName": name,
            "instanceTemplate": f"{API}/projects/{self.project}/global/instanceTemplates/{template}",
            "targetSize": target_size, "targetStoppedSize": 0, "targetSuspendedSize": 0,
            "selfLink": f"{API}/projects/{self.project}/zones/{zone}/instanceGroupManagers/{name}",
            "creationTimestamp": self._stamp(),
        }

    def add_vm(self, zone: str, name: str, *, labels: dict[str, str], machine_type: str = "a2-highgpu-8g") -> None:
        """A VM no group owns (what a crashed tool might leave behind), running."""
        self.vms[(zone, name)] = Vm(name, self._next_id(), zone, None, dict(labels), False, machine_type,
                                    self.clock(), status="RUNNING", action="NONE")

    def preempt(self, name: str) -> dict[str, Any]:
        """Preempt a Spot VM: STOPPING for 30 s, then TERMINATED; records the compute.instances.preempted operation."""
        with self._lock:
            vm = next(v for v in self.vms.values() if v.name == name)
            now = self.clock()
            vm.status, vm.action, vm.until = "STOPPING", "NONE", now + timedelta(seconds=30)
            op = self._operation(vm.zone, "compute.instances.preempted", vm.url(self.project), status="DONE",
                                 user="system", name=f"systemevent-{int(now.timestamp() * 1000)}-{uuid.uuid4().hex[:20]}")
            op["statusMessage"] = "Instance was preempted."
            return op

    def members(self, zone: str, mig: str) -> list[Vm]:
        with self._lock:
            self._settle()
            return [v for v in self.vms.values() if v.zone == zone and v.mig == mig]

    def calls(self, method: str) -> list[tuple[dict[str, str], Any, int]]:
        return [(q, b, s) for m, q, b, s in self.log if m == method]

    # ---------------------------------------------------------------- HTTP

    def _handle(self, req: http.server.BaseHTTPRequestHandler) -> None:
        length = int(req.headers.get("Content-Length", 0) or 0)
        raw = req.rfile.read(length) if length else b""
        parsed = urllib.parse.urlsplit(req.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(parsed.query, keep_blank_values=True).items()}
        method, groups = self._route(req.command, parsed.path)
        body: Any = None
        status, payload = 200, b""
        try:
            if method is None:
                raise ApiError(404, f"The requested URL {parsed.path} was not found on this server.", "notFound")
            if self.faults.unauthorized:
                raise ApiError(401, "Request is missing required authentication credential.", "required")
            queued = self.faults.errors.get(method)
            if queued:
                code = queued.pop(0)
                message, reason = INJECTED.get(code, INJECTED[503])
                raise ApiError(code, message.format(method=method, project=self.project), reason)
            body = json.loads(raw) if raw else None
            self._validate(method, query, body)
            with self._lock:
                self._settle()
                result = getattr(self, "_" + method.split(".", 1)[1].replace(".", "_"))(query=query, body=body, **groups)
                self._settle()
            if self.faults.lose_after_apply.get(method, 0) > 0:
                self.faults.lose_after_apply[method] -= 1
                raise ApiError(503, "Internal error. Please try again.", "backendError")
            payload = json.dumps(result).encode()
        except ApiError as err:
            status, payload = err.code, error_body(err.code, err.message, err.reason)
        self.log.append((method or req.path, query, body, status))
        req.send_response(status)
        req.send_header("Content-Type", "application/json; charset=UTF-8")
        req.send_header("Content-Length", str(len(payload)))
        req.end_headers()
        req.wfile.write(payload)

    def _route(self, verb: str, path: str) -> tuple[str | None, dict[str, str]]:
        prefix = f"/compute/v1/projects/{self.project}/"
        if not path.startswith(prefix):
            return None, {}
        rest = path[len(prefix):]
        for route_verb, pattern, method, _ in ROUTES:
            m = re.fullmatch(pattern, rest)
            if m and route_verb == verb:
                return method, m.groupdict()
        return None, {}

    def _validate(self, method: str, query: dict[str, str], body: Any) -> None:
        allowed = next(params for _, _, m, params in ROUTES if m == method)
        for name in query:
            if name not in allowed and not name.startswith("$"):
                raise ApiError(400, f"Invalid JSON payload received. Unknown name \"{name}\": Cannot bind query parameter. "
                               f"Field '{name}' could not be found in request message.", "invalid")
        if "requestId" in query:
            value = query["requestId"]
            try:
                ok = str(uuid.UUID(value)) == value.lower() and uuid.UUID(value).int != 0
            except ValueError:
                ok = False
            if not ok:
                raise ApiError(400, f"Invalid value for field 'requestId': '{value}'. "
                               "The request id must be a valid UUID (not the nil UUID).", "invalid")
        if body is not None:
            _check_fields(body, BODIES.get(method, {}), "resource")

    # ---------------------------------------------------------------- methods

    def _instanceGroupManagers_list(self, *, zone: str, query: dict[str, str], body: Any) -> dict[str, Any]:
        items = [self._mig_json(z, n) for (z, n) in sorted(self.migs) if z == zone]
        return self._page("compute#instanceGroupManagerList", items, query)

    def _instanceGroupManagers_get(self, *, zone: str, mig: str, query: dict[str, str], body: Any) -> dict[str, Any]:
        return self._mig_json(zone, self._mig(zone, mig)["name"])

    def _instanceGroupManagers_resize(self, *, zone: str, mig: str, query: dict[str, str], body: Any) -> dict[str, Any]:
        m = self._mig(zone, mig)
        if "size" not in query:
            raise ApiError(400, "Required field 'size' not specified", "required")
        size = int(query["size"])
        if size < 0:
            raise ApiError(400, f"Invalid value for field 'size': '{size}'. Must be greater than or equal to 0", "invalid")
        return self._mutate(query, zone, "compute.instanceGroupManagers.resize", m["selfLink"],
                            lambda: self._resize(zone, m, size))

    def _resize(self, zone: str, m: dict[str, Any], size: int) -> list[dict[str, str]]:
        if size > m["targetSize"] and zone in self.faults.stockout_zones:
            return [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": (
                f"The zone 'projects/{self.project}/zones/{zone}' does not have enough resources available to "
                "fulfill the request. Try a different zone, or try again later.")}]
        m["targetSize"] = size
        return []

    def _instanceGroupManagers_patch(self, *, zone: str, mig: str, query: dict[str, str], body: Any) -> dict[str, Any]:
        m = self._mig(zone, mig)

        def apply() -> list[dict[str, str]]:
            for k in ("targetStoppedSize", "targetSuspendedSize", "targetSize"):
                if k in body:
                    m[k] = int(body[k])
            if "standbyPolicy" in body:
                m["standbyPolicy"] = dict(body["standbyPolicy"])
            return []

        return self._mutate(query, zone, "compute.instanceGroupManagers.patch", m["selfLink"], apply)

    def _instanceGroupManagers_deleteInstances(self, *, zone: str, mig: str, query: dict[str, str], body: Any) -> dict[str, Any]:
        m = self._mig(zone, mig)
        names = [u.rstrip("/").rsplit("/", 1)[-1] for u in (body or {}).get("instances", [])]
        skip = bool((body or {}).get("skipInstancesOnValidationError"))

        def apply() -> list[dict[str, str]]:
            for name in names:
                vm = self.vms.get((zone, name))
                if vm is None or vm.mig != m["name"]:
                    if skip:
                        continue
                    raise ApiError(400, f"The resource '{name}' is not a member of the group", "invalid")
                if vm.action == "DELETING":
                    continue
                if vm.standby:
                    m["targetStoppedSize"] = max(0, m["targetStoppedSize"] - 1)
                else:
                    m["targetSize"] = max(0, m["targetSize"] - 1)
                self._delete(vm)
            return []

        return self._mutate(query, zone, "compute.instanceGroupManagers.deleteInstances", m["selfLink"], apply)

    def _instanceGroupManagers_listManagedInstances(self, *, zone: str, mig: str, query: dict[str, str],
                                                    body: Any) -> dict[str, Any]:
        m = self._mig(zone, mig)
        rows = []
        for vm in sorted((v for v in self.vms.values() if v.zone == zone and v.mig == m["name"]), key=lambda v: v.name):
            row: dict[str, Any] = {"instance": vm.url(self.project), "name": vm.name, "currentAction": vm.action,
                                   "id": str(vm.id)}
            if vm.exists:
                row["instanceStatus"] = vm.status
            if vm.errors:
                row["lastAttempt"] = {"errors": {"errors": list(vm.errors)}}
            rows.append(row)
        page = self._page("", rows, query, key="managedInstances")
        page.pop("kind", None)
        return page

    def _instanceTemplates_get(self, *, template: str, query: dict[str, str], body: Any) -> dict[str, Any]:
        if template not in self.templates:
            raise ApiError(404, f"The resource 'projects/{self.project}/global/instanceTemplates/{template}' was not found",
                           "notFound")
        return self.templates[template]

    def _instances_list(self, *, zone: str, query: dict[str, str], body: Any) -> dict[str, Any]:
        wanted = _label_filter(query.get("filter", ""))
        items = [self._vm_json(v) for v in sorted(self.vms.values(), key=lambda v: v.name)
                 if v.zone == zone and v.exists and all(v.labels.get(k) == val for k, val in wanted.items())]
        return self._page("compute#instanceList", items, query)

    def _instances_delete(self, *, zone: str, instance: str, query: dict[str, str], body: Any) -> dict[str, Any]:
        vm = self.vms.get((zone, instance))
        if vm is None or not vm.exists:
            if query.get("requestId") in self.request_ids:
                return self._mutate(query, zone, "compute.instances.delete", "", list)
            raise ApiError(404, f"The resource 'projects/{self.project}/zones/{zone}/instances/{instance}' was not found",
                           "notFound")
        return self._mutate(query, zone, "compute.instances.delete", vm.url(self.project), lambda: self._delete(vm) or [])

    def _zoneOperations_list(self, *, zone: str, query: dict[str, str], body: Any) -> dict[str, Any]:
        m = re.fullmatch(r'\s*operationType\s*=\s*"?([^"]+)"?\s*', query.get("filter", ""))
        items = [dict(op) for (z, _), op in self.operations.items()
                 if z == zone and (m is None or op["operationType"] == m.group(1))]
        return self._page("compute#operationList", items, query)

    def _zoneOperations_get(self, *, zone: str, op: str, query: dict[str, str], body: Any) -> dict[str, Any]:
        found = self.operations.get((zone, op))
        if found is None:
            raise ApiError(404, f"The resource 'projects/{self.project}/zones/{zone}/operations/{op}' was not found", "notFound")
        if found["status"] != "DONE":
            found["status"] = "RUNNING" if found["status"] == "PENDING" else "DONE"
            found.setdefault("startTime", self._stamp())
            if found["status"] == "DONE":
                found["progress"] = 100
                found["endTime"] = self._stamp()
                if found.pop("_errors", None):
                    found["error"] = {"errors": found.pop("_pending_errors")}
                    found["httpErrorStatusCode"] = 400
                    found["httpErrorMessage"] = "BAD REQUEST"
        return {k: v for k, v in found.items() if not k.startswith("_")}

    _zoneOperations_wait = _zoneOperations_get

    def _regions_get(self, *, region: str, query: dict[str, str], body: Any) -> dict[str, Any]:
        zones = sorted({z for z, _ in self.migs} | set(ZONES))
        return {"kind": "compute#region", "name": region, "status": "UP",
                "zones": [f"{API}/projects/{self.project}/zones/{z}" for z in zones if z.startswith(region + "-")]}

    # ---------------------------------------------------------------- internals

    def _mutate(self, query: dict[str, str], zone: str, kind: str, target: str,
                apply: Callable[[], list[dict[str, str]]]) -> dict[str, Any]:
        rid = query.get("requestId")
        if rid and rid in self.request_ids:
            z, name = self.request_ids[rid]
            return {k: v for k, v in self.operations[(z, name)].items() if not k.startswith("_")}
        errors = apply()
        op = self._operation(zone, kind, target)
        if errors:
            op["_errors"] = True
            op["_pending_errors"] = errors
        if rid:
            self.request_ids[rid] = (zone, op["name"])
        return {k: v for k, v in op.items() if not k.startswith("_")}

    def _operation(self, zone: str, kind: str, target: str, *, status: str = "PENDING", user: str = "burst@test",
                   name: str | None = None) -> dict[str, Any]:
        name = name or f"operation-{int(self.clock().timestamp() * 1000)}-{uuid.uuid4().hex[:12]}"
        op = {"kind": "compute#operation", "id": str(self._next_id()), "name": name, "operationType": kind,
              "zone": f"{API}/projects/{self.project}/zones/{zone}", "targetLink": target, "status": status,
              "user": user, "progress": 100 if status == "DONE" else 0, "insertTime": self._stamp(),
              "selfLink": f"{API}/projects/{self.project}/zones/{zone}/operations/{name}"}
        self.operations[(zone, name)] = op
        return op

    def _settle(self) -> None:
        """Move every VM along its transition and reconcile every group toward its target sizes (on the clock)."""
        now = self.clock()
        for key, vm in list(self.vms.items()):
            if vm.gone_at is not None and now >= vm.gone_at:
                del self.vms[key]
            elif vm.until is not None and now >= vm.until and vm.action != "DELETING":
                vm.until = None
                vm.status, vm.action = ("TERMINATED" if vm.standby or vm.status == "STOPPING" else "RUNNING"), "NONE"
        for (zone, name), m in self.migs.items():
            live = [v for v in self.vms.values() if v.zone == zone and v.mig == name and v.action != "DELETING"]
            serving = [v for v in live if not v.standby]
            standby = sorted((v for v in live if v.standby), key=lambda v: (v.status != "TERMINATED", v.name))
            while len(serving) < m["targetSize"]:
                if standby:
                    vm = standby.pop(0)
                    vm.standby, vm.status, vm.action = False, "STAGING", "STARTING"
                    vm.until = now + timedelta(seconds=self.wake_s)
                    serving.append(vm)
                else:
                    serving.append(self._create(zone, m, standby=False))
            for vm in sorted(serving, key=lambda v: v.name, reverse=True)[: max(0, len(serving) - m["targetSize"])]:
                self._delete(vm)
            while len(standby) < m["targetStoppedSize"]:
                standby.append(self._create(zone, m, standby=True))
            for vm in sorted(standby, key=lambda v: v.name, reverse=True)[: max(0, len(standby) - m["targetStoppedSize"])]:
                self._delete(vm)

    def _create(self, zone: str, m: dict[str, Any], *, standby: bool) -> Vm:
        template = self.templates[m["instanceTemplate"].rsplit("/", 1)[-1]]["properties"]
        n = self._next_id()
        vm = Vm(f"{m['baseInstanceName']}-{n:04x}", n, zone, m["name"], dict(template.get("labels", {})),
                template["scheduling"]["provisioningModel"] == "SPOT", template["machineType"], self.clock(),
                standby=standby, until=self.clock() + timedelta(seconds=self.boot_s))
        if zone in self.faults.stockout_creation_zones:
            vm.exists, vm.status, vm.until = False, "", None
            vm.errors = [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": (
                f"The zone 'projects/{self.project}/zones/{zone}' does not have enough resources available to fulfill "
                "the request. Try a different zone, or try again later.")}]
        self.vms[(zone, vm.name)] = vm
        self.created.append(vm.name)
        return vm

    def _delete(self, vm: Vm) -> None:
        vm.action, vm.status = "DELETING", ("STOPPING" if vm.exists else "")
        vm.gone_at = self.clock() + timedelta(seconds=self.delete_s if vm.exists else 0)

    def _mig(self, zone: str, name: str) -> dict[str, Any]:
        m = self.migs.get((zone, name))
        if m is None:
            raise ApiError(404, f"The resource 'projects/{self.project}/zones/{zone}/instanceGroupManagers/{name}' "
                           "was not found", "notFound")
        return m

    def _mig_json(self, zone: str, name: str) -> dict[str, Any]:
        m = dict(self.migs[(zone, name)])
        vms = [v for v in self.vms.values() if v.zone == zone and v.mig == name]
        m["currentActions"] = {a.lower(): sum(1 for v in vms if v.action == a)
                               for a in ("CREATING", "DELETING", "STARTING", "NONE")}
        m["status"] = {"isStable": all(v.action == "NONE" for v in vms)}
        return m

    def _vm_json(self, vm: Vm) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "compute#instance", "id": str(vm.id), "name": vm.name, "status": vm.status,
            "zone": f"{API}/projects/{self.project}/zones/{vm.zone}", "labels": dict(vm.labels),
            "machineType": f"{API}/projects/{self.project}/zones/{vm.zone}/machineTypes/{vm.machine_type}",
            "creationTimestamp": vm.created.astimezone(PACIFIC).isoformat(timespec="milliseconds"),
            "scheduling": {"provisioningModel": "SPOT" if vm.spot else "STANDARD"},
            "selfLink": vm.url(self.project),
        }
        if vm.mig:
            out["metadata"] = {"items": [{"key": "created-by", "value": (
                f"projects/{self.project}/zones/{vm.zone}/instanceGroupManagers/{vm.mig}")}]}
        return out

    def _page(self, kind: str, items: list[dict[str, Any]], query: dict[str, str], *, key: str = "items") -> dict[str, Any]:
        size = min(self.page_size, int(query.get("maxResults") or self.page_size))
        start = int(query.get("pageToken") or 0)
        out: dict[str, Any] = {"kind": kind, key: items[start:start + size]}
        if start + size < len(items):
            out["nextPageToken"] = str(start + size)
        return out

    def _stamp(self) -> str:
        return self.clock().astimezone(PACIFIC).isoformat(timespec="milliseconds")

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids


def _check_fields(value: Any, schema: dict[str, Any] | None, where: str) -> None:
    if schema is None or not isinstance(value, dict):
        return
    for name, sub in value.items():
        if name not in schema:
            raise ApiError(400, f"Invalid JSON payload received. Unknown name \"{name}\" at '{where}': Cannot find field.",
                           "invalid")
        _check_fields(sub, schema[name], f"{where}.{name}")


def _label_filter(text: str) -> dict[str, str]:
    return {k: v for k, v in re.findall(r'labels\.([a-z0-9_-]+)\s*=\s*"?([^"\s]*)"?', text)}


# -------------------------------------------------------------------- fixtures' building blocks

LABELS = {"burst-cluster": "", "burst-tier": "elastic", "burst-max-size": "4"}


def labels(cluster: str, capacity: str, gpu_model: str = "a100", **extra: str) -> dict[str, str]:
    """burst's discovery labels on a template (the Terraform module's, plus burst-max-size)."""
    return {**LABELS, "burst-cluster": cluster, "burst-capacity-type": capacity, "burst-gpu-model": gpu_model,
            **{k.replace("_", "-"): v for k, v in extra.items()}}


def create_groups(server: ComputeServer, cluster: str) -> None:
    """An on-demand and a Spot A100 group in zone a (a2-highgpu-8g), as the contract suite expects them."""
    server.add_template("od-a100-t", "a2-highgpu-8g", labels=labels(cluster, "on_demand"))
    server.add_template("spot-a100-t", "a2-highgpu-8g", labels=labels(cluster, "spot"), spot=True)
    server.add_mig(ZONES[0], "od-a100", "od-a100-t")
    server.add_mig(ZONES[0], "spot-a100", "spot-a100-t")


@contextmanager
def compute_server(clock: Callable[[], datetime], **kw: Any) -> Iterator[ComputeServer]:
    server = ComputeServer(clock, **kw)
    try:
        yield server
    finally:
        server.close()
