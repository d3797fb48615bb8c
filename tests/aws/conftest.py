"""Fixtures for the AWS provider tests: one real moto server process per session (see tests/aws_env.py for
what moto does not do), reset before every test, with fake credentials in the environment."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aws_env import (
    REGION,
    FaultProxy,
    MotoServer,
    create_groups,
    create_queue,
    fake_credentials,
    moto_server,
)

from burst.model import CapacityType
from providers.aws import AwsProvider, RetrySettings
from providers.sim import ManualClock

CLUSTER = "awstest"
FAST_RETRY = RetrySettings(attempts=4, initial_wait_s=0.005, max_wait_s=0.02)
PRICES = {  # burst/data/prices.csv's us-east-1 rows
    ("p4d.24xlarge", CapacityType.ON_DEMAND): 21.957642,
    ("p4d.24xlarge", CapacityType.SPOT): 2.4655,
    ("p4de.24xlarge", CapacityType.ON_DEMAND): 27.44705,
    ("p4de.24xlarge", CapacityType.SPOT): 8.6505,
}


@pytest.fixture(scope="session")
def moto() -> Iterator[MotoServer]:
    with fake_credentials():
        yield moto_server()


@dataclass
class Aws:
    """One test's AWS: the moto endpoint, its events queue, a clock, and the API actions providers called."""

    url: str
    queue_url: str
    clock: ManualClock
    actions: set[str] = field(default_factory=set)
    proxies: list[FaultProxy] = field(default_factory=list)

    def record(self, model: Any, **_: Any) -> None:
        """A botocore `before-parameter-build` hook: every API call, stubbed ones included (Stubber answers
        `before-call` first, so a `before-call` hook would miss those), as IAM's `service:Action`."""
        self.actions.add(f"{model.service_model.signing_name}:{model.name}")

    def session(self) -> Any:
        import boto3

        session = boto3.session.Session()
        session.events.register("before-parameter-build", self.record)
        return session

    def provider(self, *, url: str | None = None, **kw: Any) -> AwsProvider:
        """An AwsProvider on moto (or on `url`, a proxy), recording the API actions it calls."""
        kw.setdefault("retry", FAST_RETRY)
        kw.setdefault("sqs_wait_s", 0)
        kw.setdefault("events_queue_url", self.queue_url)
        kw.setdefault("prices", lambda itype, region, cap: PRICES.get((itype, cap)))
        kw.setdefault("session", self.session())
        return AwsProvider(cluster=CLUSTER, region=REGION, clock=self.clock, endpoint_url=url or self.url, **kw)

    def proxy(self) -> FaultProxy:
        p = FaultProxy(self.url, self.clock)
        self.proxies.append(p)
        return p


@pytest.fixture
def aws(moto: MotoServer) -> Iterator[Aws]:
    moto.reset()
    create_groups(moto.url, CLUSTER)
    env = Aws(url=moto.url, queue_url=create_queue(moto.url), clock=ManualClock())
    yield env
    for p in env.proxies:
        p.close()
