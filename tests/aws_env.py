"""What the AWS tests share: a real moto server process, the groups the Terraform module would create,
an EventBridge-shaped SQS feed, and a fault-injecting HTTP proxy in front of moto.

moto's limits that the tests work around (each test that meets one says so):

* Auto Scaling instances are InService as soon as the desired capacity is
  set: there is no boot time to wait for.
* It keeps a warm pool's settings (put/describe_warm_pool) but never creates
  warm-pool instances, and it does not reject a warm pool on a Spot or
  mixed-instances group (burst checks that itself).
* complete_lifecycle_action and record_lifecycle_action_heartbeat are not
  implemented: the server answers HTTP 500 (those calls are tested with
  botocore's Stubber).
* terminate_instance_in_auto_scaling_group of an unknown or terminated
  instance is an HTTP 500, not AWS's ValidationError (the provider reads
  membership first, so it never sends one).
* set_desired_capacity above MaxSize is accepted (the provider checks bounds).
* describe_scaling_activities returns nothing, and there is no Pricing API
  (the price script is tested with Stubber).
* Spot prices from describe_spot_price_history are a fixed placeholder.
"""

from __future__ import annotations

import http.client
import http.server
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

REGION = "us-east-1"
AMI = "ami-12c6146b"  # one of moto's built-in images
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MotoServer:
    """`python -m moto.server` in its own process on 127.0.0.1."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, **FAKE_CREDENTIALS}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/moto-api/", timeout=2).read()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.1)

    def reset(self) -> None:
        """Forget every resource (POST /moto-api/reset)."""
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/moto-api/reset", method="POST"), timeout=10).read()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


_server: MotoServer | None = None
_lock = threading.Lock()


def moto_server() -> MotoServer:
    """The one moto server of this test process (started on first use, stopped at exit)."""
    global _server
    with _lock:
        if _server is None:
            import atexit

            _server = MotoServer()
            atexit.register(_server.stop)
        return _server


@contextmanager
def fake_credentials() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in FAKE_CREDENTIALS}
    os.environ.update(FAKE_CREDENTIALS)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def client(service: str, url: str) -> Any:
    import boto3

    return boto3.session.Session().client(service, region_name=REGION, endpoint_url=url)


@dataclass(frozen=True)
class GroupDef:
    """An Auto Scaling group as the Terraform node-group module creates it."""

    name: str
    capacity_type: str  # on_demand | spot
    instance_types: tuple[str, ...] = ("p4d.24xlarge",)
    gpu_model: str = "A100"
    min_size: int = 0
    max_size: int = 4
    desired: int = 0
    zones: tuple[str, ...] = ("us-east-1a",)
    boot_latency_s: float | None = None


ON_DEMAND = GroupDef("od-a100", "on_demand")
SPOT = GroupDef("spot-a100", "spot", instance_types=("p4d.24xlarge", "p4de.24xlarge"), zones=("us-east-1a", "us-east-1b"))


def create_groups(url: str, cluster: str, groups: tuple[GroupDef, ...] = (ON_DEMAND, SPOT)) -> None:
    """Launch templates and ASGs tagged with burst's discovery tags (propagated to instances)."""
    ec2, asg = client("ec2", url), client("autoscaling", url)
    for g in groups:
        lt = f"lt-{g.name}"
        ec2.create_launch_template(
            LaunchTemplateName=lt,
            LaunchTemplateData={
                "ImageId": AMI,
                "InstanceType": g.instance_types[0],
                "TagSpecifications": [{"ResourceType": "instance", "Tags": [{"Key": "burst:cluster", "Value": cluster}]}],
            },
            TagSpecifications=[{"ResourceType": "launch-template", "Tags": [{"Key": "burst:cluster", "Value": cluster}]}],
        )
        tags = {"burst:cluster": cluster, "burst:tier": "elastic", "burst:capacity-type": g.capacity_type,
                "burst:gpu-model": g.gpu_model, "burst:group": g.name}
        if g.boot_latency_s is not None:
            tags["burst:boot-latency"] = str(g.boot_latency_s)
        params: dict[str, Any] = {
            "AutoScalingGroupName": g.name,
            "MinSize": g.min_size,
            "MaxSize": g.max_size,
            "DesiredCapacity": g.desired,
            "AvailabilityZones": list(g.zones),
            "Tags": [
                {"Key": k, "Value": v, "PropagateAtLaunch": True, "ResourceId": g.name, "ResourceType": "auto-scaling-group"}
                for k, v in tags.items()
            ],
        }
        spec = {"LaunchTemplateName": lt, "Version": "$Latest"}
        if g.capacity_type == "spot":
            params["MixedInstancesPolicy"] = {
                "LaunchTemplate": {"LaunchTemplateSpecification": spec,
                                   "Overrides": [{"InstanceType": t} for t in g.instance_types]},
                "InstancesDistribution": {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 0,
                                          "SpotAllocationStrategy": "price-capacity-optimized"},
            }
        else:
            params["LaunchTemplate"] = spec
        asg.create_auto_scaling_group(**params)


def create_queue(url: str, name: str = "burst-events") -> str:
    return str(client("sqs", url).create_queue(QueueName=name)["QueueUrl"])


def send_event(url: str, queue_url: str, body: str) -> None:
    client("sqs", url).send_message(QueueUrl=queue_url, MessageBody=body)


def launch_untracked(url: str, cluster: str) -> str:
    """An instance tagged with the cluster that no group owns (what a crashed tool might leave behind)."""
    r = client("ec2", url).run_instances(
        ImageId=AMI, MinCount=1, MaxCount=1, InstanceType="p4d.24xlarge",
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "burst:cluster", "Value": cluster}]}],
    )
    return str(r["Instances"][0]["InstanceId"])


def new_event_id() -> str:
    return str(uuid.uuid4())


# ---------------------------------------------------------------- fault proxy

AUTOSCALING_NS = "http://autoscaling.amazonaws.com/doc/2011-01-01/"


def query_error(service: str, code: str, message: str) -> bytes:
    """An error body in the AWS query protocol's shape for `service` (EC2's differs from the others')."""
    rid = str(uuid.uuid4())
    if service == "ec2":
        return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
                f"<Message>{message}</Message></Error></Errors><RequestID>{rid}</RequestID></Response>").encode()
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<ErrorResponse xmlns="{AUTOSCALING_NS}"><Error><Type>Sender</Type>'
            f"<Code>{code}</Code><Message>{message}</Message></Error><RequestId>{rid}</RequestId></ErrorResponse>").encode()


@dataclass
class Faults:
    """What the proxy injects; counts are decremented per matching call (-1: until cleared)."""

    throttle: dict[str, int] = field(default_factory=dict)  # action -> count (HTTP 400 Throttling)
    server_errors: dict[str, int] = field(default_factory=dict)  # action or "*" -> count (HTTP 500)
    lose: dict[str, int] = field(default_factory=dict)  # action -> count: forwarded, response dropped
    ice_groups: set[str] = field(default_factory=set)  # ASG names whose SetDesiredCapacity gets ICE
    ice_type: str = "p4d.24xlarge"
    hide_new_s: float = 0.0  # new instance ids are left out of Describe responses for this long
    auth_error: str | None = None  # every call gets this credentials error code


class FaultProxy:
    """A threaded HTTP proxy on 127.0.0.1 in front of the moto server that injects `faults`.

    Time for hidden instances is `clock` (the test's clock), so "hidden for N
    seconds" is deterministic across ticks.
    """

    def __init__(self, upstream: str, clock: Callable[[], datetime]) -> None:
        self.upstream = upstream.removeprefix("http://")
        self.clock = clock
        self.faults = Faults()
        self.first_seen: dict[str, datetime] = {}
        self.log: list[tuple[str, str]] = []  # (action, what happened)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                proxy._handle(self)

            def do_GET(self) -> None:
                proxy._handle(self)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def count(self, what: str) -> int:
        return sum(1 for _, w in self.log if w == what)

    @staticmethod
    def _take(table: dict[str, int], action: str) -> bool:
        for key in (action, "*"):
            n = table.get(key, 0)
            if n != 0:
                if n > 0:
                    table[key] = n - 1
                return True
        return False

    def _handle(self, req: http.server.BaseHTTPRequestHandler) -> None:
        length = int(req.headers.get("Content-Length", 0) or 0)
        body = req.rfile.read(length) if length else b""
        service, action = _service_action(req.headers, body)
        f = self.faults
        if f.auth_error:
            self.log.append((action, "auth"))
            return _reply(req, 400, query_error(service, f.auth_error, "The security token included in the request is invalid."))
        if self._take(f.throttle, action):
            self.log.append((action, "throttle"))
            return _reply(req, 400, query_error(service, "Throttling", "Rate exceeded"))
        if self._take(f.server_errors, action):
            self.log.append((action, "500"))
            return _reply(req, 500, query_error(service, "InternalFailure", "We encountered an internal error."))
        if action == "SetDesiredCapacity" and f.ice_groups:
            form = urllib.parse.parse_qs(body.decode())
            if form.get("AutoScalingGroupName", [""])[0] in f.ice_groups:
                self.log.append((action, "ice"))
                return _reply(req, 400, query_error(
                    service, "InsufficientInstanceCapacity",
                    f"We currently do not have sufficient {f.ice_type} capacity in the Availability Zone you requested."))
        conn = http.client.HTTPConnection(self.upstream, timeout=30)
        headers = {k: v for k, v in req.headers.items() if k.lower() not in ("host", "connection", "content-length")}
        conn.request(req.command, req.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        if self._take(f.lose, action):
            self.log.append((action, "lost"))
            req.close_connection = True  # the call happened; the client never hears of it
            return None
        if f.hide_new_s > 0 and action in ("DescribeAutoScalingGroups", "DescribeInstances", "DescribeAutoScalingInstances"):
            data = self._hide(data)
        self.log.append((action, "ok"))
        out_headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in ("content-length", "connection", "transfer-encoding", "x-amz-crc32")]
        return _reply(req, resp.status, data, out_headers)

    def _hide(self, data: bytes) -> bytes:
        """Drop instances first listed less than `hide_new_s` ago from a Describe response."""
        try:
            root = ET.fromstring(data)
        except ET.ParseError:
            return data
        ns = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""
        if ns:
            ET.register_namespace("", ns)
        now = self.clock()
        changed = False
        for parent in list(root.iter()):
            for child in list(parent):
                iid = next((c.text for c in child if c.tag.split("}")[-1] in ("InstanceId", "instanceId")), None)
                if iid is None:
                    continue
                seen = self.first_seen.setdefault(iid, now)
                if (now - seen).total_seconds() < self.faults.hide_new_s:
                    parent.remove(child)
                    changed = True
        for parent in list(root.iter()):  # reservations left without instances
            for child in list(parent):
                if child.tag.split("}")[-1] == "item":
                    sets = [c for c in child if c.tag.split("}")[-1] == "instancesSet"]
                    if sets and len(sets[0]) == 0:
                        parent.remove(child)
        return ET.tostring(root, encoding="utf-8", xml_declaration=True) if changed else data


def _service_action(headers: Any, body: bytes) -> tuple[str, str]:
    auth = headers.get("Authorization", "")
    service = ""
    if "Credential=" in auth:
        scope = auth.split("Credential=")[1].split(",")[0].split("/")
        service = scope[3] if len(scope) > 3 else ""
    target = headers.get("X-Amz-Target")
    if target:
        return service, target.split(".")[-1]
    try:
        form = urllib.parse.parse_qs(body.decode())
        return service, form.get("Action", [""])[0]
    except UnicodeDecodeError:
        return service, ""


def _reply(req: http.server.BaseHTTPRequestHandler, status: int, body: bytes,
           headers: list[tuple[str, str]] | None = None) -> None:
    req.send_response(status)
    for k, v in headers or [("Content-Type", "text/xml")]:
        req.send_header(k, v)
    req.send_header("Content-Length", str(len(body)))
    req.end_headers()
    req.wfile.write(body)

