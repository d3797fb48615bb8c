"""Providers the libcloud tests and the contract suite share: over the Dummy driver, and over libcloud's EC2
driver talking HTTP to a moto server on 127.0.0.1 (through `ec2_env.Ec2Proxy`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from dummy_env import GPU_SIZE, GroupDriver, StopStartDriver
from ec2_env import AMI, REGION, Ec2Proxy, ec2_driver, ec2_endpoint

from burst.model import CapacityType, GpuShape, NodeGroup, Tier
from providers.libcloud import GroupSpec, LibcloudProvider, RetrySettings
from providers.sim import ManualClock

FAST_RETRY = RetrySettings(attempts=4, initial_wait_s=0.005, max_wait_s=0.02)
DUMMY_IMAGE = "ubuntu-22.04-cuda"
EC2_TYPE = "p4d.24xlarge"


def group(gid: str, capacity: CapacityType, instance_type: str, *, region: str, zone: str = "",
          max_size: int = 4, boot_s: float = 60.0, warm_min: int = 0) -> NodeGroup:
    from burst.model import WarmPoolSettings

    return NodeGroup(
        id=gid, provider="libcloud", region=region, tier=Tier.ELASTIC, capacity_type=capacity,
        shape=GpuShape("A100", 8, 40.0), instance_type=instance_type, min_size=0, max_size=max_size,
        zone=zone, boot_latency_s=boot_s, warm_pool=WarmPoolSettings(min_size=warm_min),
    )


def dummy_groups() -> list[NodeGroup]:
    return [
        group("od-a100", CapacityType.ON_DEMAND, GPU_SIZE.id, region="dummy"),
        group("spot-a100", CapacityType.SPOT, GPU_SIZE.id, region="dummy"),
    ]


def dummy_provider(clock: ManualClock, *, stop_start: bool = True, cluster: str = "contract",
                   driver: GroupDriver | None = None, groups: Sequence[NodeGroup] | None = None,
                   **kw: Any) -> tuple[LibcloudProvider, GroupDriver]:
    """A provider over a fresh (or the given) Dummy-based driver, 60 s boot."""
    drv = driver or (StopStartDriver(clock) if stop_start else GroupDriver(clock))
    gs = list(groups or dummy_groups())
    specs = {g.id: GroupSpec(size=GPU_SIZE.id, image=DUMMY_IMAGE) for g in gs}
    kw.setdefault("retry", FAST_RETRY)
    return LibcloudProvider(drv, gs, specs, cluster=cluster, clock=clock, **kw), drv


def ec2_groups() -> list[NodeGroup]:
    return [
        group("od-a100", CapacityType.ON_DEMAND, EC2_TYPE, region=REGION, zone="us-east-1a", boot_s=0.0),
        group("spot-a100", CapacityType.SPOT, EC2_TYPE, region=REGION, zone="us-east-1a", boot_s=0.0),
    ]


def ec2_specs() -> dict[str, GroupSpec]:
    return {
        "od-a100": GroupSpec(size=EC2_TYPE, image=AMI),
        "spot-a100": GroupSpec(size=EC2_TYPE, image=AMI, create_args={"ex_spot": True}),
    }


@dataclass
class Ec2Setup:
    provider: LibcloudProvider
    proxy: Ec2Proxy
    driver: Any


@contextmanager
def ec2_provider(clock: ManualClock, *, cluster: str = "contract", **kw: Any) -> Iterator[Ec2Setup]:
    """A provider over libcloud's EC2 driver against a freshly reset moto server (through the proxy)."""
    with ec2_endpoint() as proxy:
        driver = ec2_driver(proxy.port)
        kw.setdefault("retry", FAST_RETRY)
        provider = LibcloudProvider(driver, ec2_groups(), ec2_specs(), cluster=cluster, clock=clock, **kw)
        yield Ec2Setup(provider, proxy, driver)
