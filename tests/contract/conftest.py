"""Harnesses for the provider contract suite, and the fake clock tests share.

Each harness wraps one provider implementation with a clock the test drives.
A new backend (AWS against a moto server, GCP against a local Compute
endpoint) adds a factory to `HARNESSES`: a context manager that starts what it
needs, yields a `Harness` whose `group_id` is an on-demand elastic group with
min 0, max 4 and a 60 s boot, and whose `spot_group_id` is a Spot group, then
tears everything down. Every test in test_provider_contract.py then runs
against it.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from burst.model import CapacityType, GpuShape, NodeGroup, NodeId, Tier
from providers.base import Provider
from providers.sim import ManualClock, SimProvider

FakeClock = ManualClock
"""A clock with `now` and `advance(seconds)`; call it for the time. Other tests may import it from here."""

CLUSTER = "contract"


@dataclass
class Harness:
    """One provider under test, with the clock that drives it and what the suite needs to know about it."""

    name: str
    provider: Provider
    clock: FakeClock
    group_id: str  # on-demand elastic, min 0, max 4, boot 60 s
    spot_group_id: str
    supports_warm_pool: bool
    cluster: str = CLUSTER
    boot_latency_s: float = 60.0
    max_list_delay_s: float = 0.0  # the provider's documented bound on listing lag
    interrupt: Callable[[NodeId], None] | None = None  # how to make the backend interrupt a node, if it can
    skips: Mapping[str, str] = field(default_factory=dict)  # test name -> why it cannot apply to this backend

    def advance(self, seconds: float) -> None:
        """Move the clock on and refresh the provider (one tick)."""
        self.clock.advance(seconds)
        self.provider.refresh()

    def eventually(self, predicate: Callable[[], bool], *, within_s: float, step_s: float = 5.0) -> float:
        """Advance in steps until `predicate()` holds; return the seconds it took, fail past `within_s`."""
        waited = 0.0
        while not predicate():
            if waited >= within_s:
                pytest.fail(f"{self.name}: condition not met within {within_s} s")
            self.advance(step_s)
            waited += step_s
        return waited


HarnessFactory = Callable[[], AbstractContextManager[Harness]]


def _group(gid: str, capacity_type: CapacityType, instance_type: str) -> NodeGroup:
    return NodeGroup(
        id=gid,
        provider="sim",
        region="sim-region-1",
        tier=Tier.ELASTIC,
        capacity_type=capacity_type,
        shape=GpuShape("A100", 8),
        instance_type=instance_type,
        min_size=0,
        max_size=4,
        zone="sim-region-1a",
        boot_latency_s=60.0,
    )


@contextmanager
def sim_harness() -> Iterator[Harness]:
    """The simulated cloud, with a listing delay so eventual consistency is exercised."""
    clock = FakeClock()
    groups = [
        _group("od-a100", CapacityType.ON_DEMAND, "p4d.24xlarge"),
        _group("spot-a100", CapacityType.SPOT, "p4d.24xlarge"),
    ]
    provider = SimProvider(
        groups, clock=clock, cluster=CLUSTER, prices={"od-a100": 32.77, "spot-a100": 12.0}, list_delay_s=10.0
    )
    yield Harness(
        name="sim",
        provider=provider,
        clock=clock,
        group_id="od-a100",
        spot_group_id="spot-a100",
        supports_warm_pool=True,
        max_list_delay_s=10.0,
        interrupt=provider.inject_interruption,
    )


@contextmanager
def aws_harness() -> Iterator[Harness]:
    """AWS through boto3 against a real moto server process (tests/aws_env.py), groups tagged as Terraform tags them.

    What moto cannot do, declared rather than worked around in the suite:
    its Auto Scaling instances are InService at once (boot latency 0 s); the
    provider lists nodes as of its last refresh, one tick (the listing lag is
    one 1 s step); moto keeps warm-pool settings but never creates warm-pool
    instances, so the provider is built with warm pools off
    (supports_warm_pool=False, and set_warm_pool raises NotSupported; warm
    pool put/describe is tested in tests/aws). Interruptions arrive as
    EventBridge-shaped messages on an SQS queue, as in production.
    """
    from aws_env import (
        REGION,
        create_groups,
        create_queue,
        fake_credentials,
        moto_server,
        new_event_id,
        send_event,
    )

    from providers.aws import AwsProvider, RetrySettings
    from providers.aws.events import INTERRUPTION, event_body

    server = moto_server()
    server.reset()
    with fake_credentials():
        create_groups(server.url, CLUSTER)
        queue = create_queue(server.url)
        clock = FakeClock()
        provider = AwsProvider(
            cluster=CLUSTER,
            region=REGION,
            clock=clock,
            endpoint_url=server.url,
            events_queue_url=queue,
            warm_pools=False,
            sqs_wait_s=0,
            retry=RetrySettings(attempts=3, initial_wait_s=0.01, max_wait_s=0.05),
        )

        def interrupt(node_id: NodeId) -> None:
            send_event(server.url, queue, event_body(INTERRUPTION, node_id, clock(), event_id=new_event_id()))

        yield Harness(
            name="aws",
            provider=provider,
            clock=clock,
            group_id="od-a100",
            spot_group_id="spot-a100",
            supports_warm_pool=False,
            boot_latency_s=0.0,
            max_list_delay_s=1.0,
            interrupt=interrupt,
        )


def _libcloud_env() -> None:
    """Put tests/libcloud (its helpers; it is no package, so it cannot shadow libcloud) on the import path."""
    import sys
    from pathlib import Path

    path = str(Path(__file__).resolve().parents[1] / "libcloud")
    if path not in sys.path:
        sys.path.insert(0, path)


@contextmanager
def libcloud_dummy_harness() -> Iterator[Harness]:
    """The libcloud provider over libcloud's Dummy driver, extended with names, metadata, a 60 s boot and
    stop/start (tests/libcloud/dummy_env.py): the provider's generic logic. No interruption source."""
    _libcloud_env()
    from libcloud_env import dummy_provider

    clock = FakeClock()
    provider, _ = dummy_provider(clock, cluster=CLUSTER)
    yield Harness(
        name="libcloud-dummy",
        provider=provider,
        clock=clock,
        group_id="od-a100",
        spot_group_id="spot-a100",
        supports_warm_pool=True,
    )


@contextmanager
def libcloud_ec2_harness() -> Iterator[Harness]:
    """The libcloud provider over libcloud's own EC2 driver, on HTTP to a moto server on 127.0.0.1
    (tests/libcloud/ec2_env.py). moto's instances run at once (boot 0 s), are listed from the next refresh
    (one 1 s step) and can be stopped and started, so warm pools work; libcloud has no interruption feed."""
    _libcloud_env()
    from libcloud_env import ec2_provider

    clock = FakeClock()
    with ec2_provider(clock, cluster=CLUSTER) as setup:
        yield Harness(
            name="libcloud-ec2",
            provider=setup.provider,
            clock=clock,
            group_id="od-a100",
            spot_group_id="spot-a100",
            supports_warm_pool=True,
            boot_latency_s=0.0,
            max_list_delay_s=1.0,
        )


@contextmanager
def gcp_harness() -> Iterator[Harness]:
    """GCP through google-cloud-compute (REST transport) against the local Compute API (tests/gcp_env.py).

    Zonal MIGs built from templates carrying burst's discovery labels (and
    burst-max-size); the server boots VMs in 60 s and deletes them in 10 s on this
    clock; the provider lists VMs as of its last refresh (one 1 s step).
    Standby pools are real (stopped VMs beyond the target). Preemptions are
    `compute.instances.preempted` zone operations, as in production.
    """
    from gcp_env import PROJECT, ZONES, compute_server, create_groups

    from providers.gcp import GcpProvider, RetrySettings

    clock = FakeClock()
    with compute_server(clock) as server:
        create_groups(server, CLUSTER)
        provider = GcpProvider(
            cluster=CLUSTER,
            project=PROJECT,
            zones=ZONES[:1],
            clock=clock,
            endpoint=server.url,
            default_boot_latency_s=60.0,
            retry=RetrySettings(attempts=3, initial_wait_s=0.01, max_wait_s=0.05),
        )

        def interrupt(node_id: NodeId) -> None:
            server.preempt(node_id)

        yield Harness(
            name="gcp",
            provider=provider,
            clock=clock,
            group_id="od-a100",
            spot_group_id="spot-a100",
            supports_warm_pool=True,
            max_list_delay_s=1.0,
            interrupt=interrupt,
        )


class _Rack:
    """Racked hosts as the onprem harness sees them: switched by a real power command that appends
    "on HOST" / "off HOST" to a log, each host's agent heartbeating `boot_s` after the power-on line was read."""

    def __init__(self, log: Path, clock: FakeClock, boot_s: float) -> None:
        self.log, self.clock, self.boot_s = log, clock, boot_s
        self._read = 0
        self._on_since: dict[str, datetime] = {}

    def heartbeats(self) -> dict[NodeId, datetime]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        for line in lines[self._read:]:
            verb, host = line.split()
            if verb == "on":
                self._on_since.setdefault(host, self.clock())
            else:
                self._on_since.pop(host, None)
        self._read = len(lines)
        now = self.clock()
        return {h: now for h, at in self._on_since.items() if (now - at).total_seconds() >= self.boot_s}


ONPREM_SKIPS = {
    "test_offerings_describe_the_group": "owned hosts are capacity type onprem, not on_demand or spot",
    "test_warm_pool_on_spot_is_not_supported": "owned hardware has no Spot capacity",
    **dict.fromkeys(
        ("test_repeated_key_is_applied_once", "test_terminate_decrements_target_and_the_node_goes",
         "test_terminate_unknown_is_not_found_after_terminating_the_rest"),
        "a racked host never leaves the listing: powered off it stays listed, warm powered_off "
        "(tests/onprem/test_provider.py covers scale-down and terminate)"),
}


@contextmanager
def onprem_harness() -> Iterator[Harness]:
    """Owned hosts from an inventory file, switched by a real power command (a script that logs its argv) and
    READY on their agents' heartbeats, 60 s after power on. Two racks of 4 hosts; owned hardware has no Spot,
    so `spot_group_id` is the second rack and the Spot-only tests are skipped; a powered-off host stays listed
    (warm powered_off), so the tests that expect a scaled-in node to vanish are skipped. No interruption source;
    no warm pool without power_saving."""
    from providers.onprem.provider import OnPremProvider, PowerCommands, load_inventory

    with tempfile.TemporaryDirectory(prefix="burst-onprem-") as tmp:
        root = Path(tmp)
        log = root / "power.log"
        script = root / "power"
        script.write_text(f'#!/bin/sh\necho "$1 $2" >> {log}\n')
        script.chmod(0o755)
        (root / "inventory.yaml").write_text(
            "groups:\n"
            "  rack-a:\n    hosts: [a-1, a-2, {name: a-3, address: 10.0.0.3}, {name: a-4, gpus: 8}]\n"
            "  rack-b:\n    hosts: [b-1, b-2, b-3, b-4]\n")
        clock = FakeClock()
        rack = _Rack(log, clock, boot_s=60.0)
        groups = [dataclasses.replace(_group(gid, CapacityType.ONPREM, "dgx-a100"), provider="onprem", tier=Tier.STEADY,
                                      region="dc1", zone="") for gid in ("rack-a", "rack-b")]
        provider = OnPremProvider(
            groups,
            load_inventory(root / "inventory.yaml"),
            clock=clock,
            cluster=CLUSTER,
            prices={"rack-a": 14.0, "rack-b": 14.0},
            commands=PowerCommands(power_on=(str(script), "on", "{node}"), power_off=(str(script), "off", "{node}")),
            heartbeats=rack.heartbeats,
        )
        yield Harness(
            name="onprem",
            provider=provider,
            clock=clock,
            group_id="rack-a",
            spot_group_id="rack-b",
            supports_warm_pool=False,
            skips=ONPREM_SKIPS,
        )


HARNESSES: list[tuple[str, HarnessFactory]] = [
    ("sim", sim_harness),
    ("aws", aws_harness),
    ("libcloud-dummy", libcloud_dummy_harness),
    ("libcloud-ec2", libcloud_ec2_harness),
    ("gcp", gcp_harness),
    ("onprem", onprem_harness),
]
"""Every provider the contract suite runs against: (id, factory)."""


@pytest.fixture(params=[factory for _, factory in HARNESSES], ids=[name for name, _ in HARNESSES])
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """Each registered provider in turn, fresh for every test."""
    factory: HarnessFactory = request.param
    with factory() as h:
        test = request.node.originalname
        if test in h.skips:
            pytest.skip(f"{h.name}: {h.skips[test]}")
        yield h
