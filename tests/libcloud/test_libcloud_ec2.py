"""The libcloud provider over libcloud's own EC2 driver, on HTTP to a moto server on 127.0.0.1
(tests/libcloud/ec2_env.py puts a proxy in front of moto that fixes its XML namespace and injects faults)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aws_env import client, fake_credentials, moto_server
from ec2_env import ec2_driver, ec2_error
from libcloud_env import Ec2Setup, ec2_groups, ec2_provider, ec2_specs

from burst.model import NodeState, WarmState
from providers.base import CredentialsError, InsufficientCapacity, QuotaExceeded
from providers.libcloud import LibcloudProvider, node_name
from providers.sim import ManualClock

GID = "od-a100"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def ec2(clock: ManualClock) -> Iterator[Ec2Setup]:
    with ec2_provider(clock) as setup:
        yield setup


def instances(setup: Ec2Setup) -> dict[str, tuple[str, dict[str, str]]]:
    """What moto holds (read with boto3, not through the provider): id -> (state, tags), live ones."""
    out = {}
    with fake_credentials():
        reservations = client("ec2", moto_server().url).describe_instances()["Reservations"]
    for res in reservations:
        for i in res["Instances"]:
            if i["State"]["Name"] != "terminated":
                out[i["InstanceId"]] = (i["State"]["Name"], {t["Key"]: t["Value"] for t in i.get("Tags", [])})
    return out


def test_scale_up_and_down_by_run_and_terminate_instances(ec2: Ec2Setup) -> None:
    p = ec2.provider
    p.set_target(GID, 3, key="up")
    assert ec2.proxy.calls("RunInstances") == 3
    held = instances(ec2)
    assert sorted(tags["Name"] for _, tags in held.values()) == [
        node_name("contract", GID, "set_target", "up", i) for i in range(3)
    ]
    assert all(tags["burst-cluster"] == "contract" and tags["burst-group"] == GID for _, tags in held.values())
    p.refresh()
    assert sorted(n.state for n in p.nodes().values()) == [NodeState.READY] * 3
    p.set_target(GID, 1, key="down")
    assert ec2.proxy.calls("TerminateInstances") == 2 and p.group_state(GID).target == 1
    p.refresh()
    assert list(p.nodes()) == list(instances(ec2))


def test_a_lost_run_instances_reply_makes_no_duplicate(ec2: Ec2Setup) -> None:
    ec2.proxy.faults.lose["RunInstances"] = 1  # moto launches it; the driver never hears back
    ec2.provider.set_target(GID, 1, key="up")
    assert ec2.proxy.calls("RunInstances", "lost") == 1 and ec2.proxy.calls("RunInstances") == 0
    assert len(instances(ec2)) == 1  # moto ignores ClientToken: the name found on the re-list is what saved it
    assert ec2.provider.group_state(GID).target == 1


def test_the_same_key_after_a_restart_creates_nothing(ec2: Ec2Setup, clock: ManualClock) -> None:
    ec2.provider.set_target(GID, 2, key="up")
    restarted = LibcloudProvider(ec2_driver(ec2.proxy.port), ec2_groups(), ec2_specs(), cluster="contract",
                                 clock=clock)
    assert restarted.group_state(GID).target == 2  # found by its tags
    restarted.set_target(GID, 2, key="up")
    assert ec2.proxy.calls("RunInstances") == 2 and len(instances(ec2)) == 2


def test_warm_pool_by_stop_and_start_instances(ec2: Ec2Setup) -> None:
    p = ec2.provider
    p.set_warm_pool(GID, 1, WarmState.STOPPED, key="warm")
    p.refresh()  # running: stopped now
    assert ec2.proxy.calls("StopInstances") == 1
    p.refresh()
    (warm,) = p.nodes().values()
    assert warm.state is NodeState.WARM and [s for s, _ in instances(ec2).values()] == ["stopped"]
    p.set_target(GID, 1, key="up")
    assert ec2.proxy.calls("StartInstances") == 1 and ec2.proxy.calls("RunInstances") == 1
    p.refresh()
    assert p.nodes()[warm.id].state is NodeState.READY and p.group_state(GID).target == 1


def test_transient_failures_are_retried(ec2: Ec2Setup) -> None:
    ec2.proxy.faults.errors["RunInstances"] = (2, ec2_error("InternalError", "An internal error has occurred", 500))
    ec2.proxy.faults.errors["DescribeInstances"] = (1, ec2_error("RequestLimitExceeded", "Request limit exceeded."))
    ec2.provider.set_target(GID, 1, key="up")
    ec2.provider.refresh()
    assert ec2.proxy.calls("RunInstances", "error 500") == 2 and len(instances(ec2)) == 1
    assert [n.state for n in ec2.provider.nodes().values()] == [NodeState.READY]


def test_capacity_quota_and_credentials_errors(ec2: Ec2Setup) -> None:
    p = ec2.provider
    ec2.proxy.faults.errors["RunInstances"] = (1, ec2_error(
        "VcpuLimitExceeded", "You have requested more vCPU capacity than your current vCPU limit of 64 allows"))
    with pytest.raises(QuotaExceeded, match="VcpuLimitExceeded"):
        p.set_target(GID, 1, key="up")
    ec2.proxy.faults.errors["RunInstances"] = (1, ec2_error(
        "InsufficientInstanceCapacity", "We currently do not have sufficient p4d.24xlarge capacity"))
    with pytest.raises(InsufficientCapacity):
        p.set_target(GID, 1, key="up")
    assert [o.available for o in p.offerings(GID)] == [False]
    ec2.proxy.faults.errors["DescribeInstances"] = (1, ec2_error(
        "AuthFailure", "AWS was not able to validate the provided access credentials"))
    with pytest.raises(CredentialsError, match="AuthFailure"):
        p.refresh()
    assert instances(ec2) == {} and p.group_state(GID).target == 0
