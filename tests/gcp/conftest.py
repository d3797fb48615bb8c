"""Fixtures for the GCP provider tests: a local Compute API (tests/gcp_env.py) per test, on the test's clock,
with an on-demand and a Spot group labelled for discovery, and a way to build providers against it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from gcp_env import PROJECT, ZONES, ComputeServer, compute_server, create_groups

from burst.model import CapacityType
from providers.gcp import GcpProvider, RetrySettings
from providers.sim import ManualClock

CLUSTER = "gcptest"
FAST_RETRY = RetrySettings(attempts=4, initial_wait_s=0.005, max_wait_s=0.02)
PRICES = {  # burst/data/prices.csv's us-central1 rows
    ("a2-highgpu-8g", CapacityType.ON_DEMAND): 29.38708,
    ("a2-highgpu-8g", CapacityType.SPOT): 14.4308,
    ("n1-standard-8+1xT4", CapacityType.ON_DEMAND): 0.73,
    ("n1-standard-8+1xT4", CapacityType.SPOT): 0.27946,
}


@dataclass
class Gcp:
    """One test's GCP: the local Compute API and the clock it and the providers share."""

    server: ComputeServer
    clock: ManualClock

    @property
    def url(self) -> str:
        return self.server.url

    def provider(self, **kw: Any) -> GcpProvider:
        kw.setdefault("retry", FAST_RETRY)
        kw.setdefault("zones", ZONES)
        kw.setdefault("prices", lambda itype, region, cap: PRICES.get((itype, cap)))
        kw.setdefault("default_boot_latency_s", 60.0)
        return GcpProvider(cluster=CLUSTER, project=PROJECT, clock=self.clock, endpoint=self.server.url, **kw)

    def methods(self) -> set[str]:
        """The Compute API methods the server was asked for (the wire's truth)."""
        return {m for m, _, _, _ in self.server.log}


@pytest.fixture
def gcp() -> Iterator[Gcp]:
    clock = ManualClock()
    with compute_server(clock) as server:
        create_groups(server, CLUSTER)
        yield Gcp(server=server, clock=clock)
