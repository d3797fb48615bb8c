"""`build_runtime` and `burst run` with libcloud node groups: libcloud's EC2 driver against moto (through the
namespace-fixing proxy of tests/libcloud/ec2_env.py), and the errors a libcloud config can have."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from aws_env import client, fake_credentials, moto_server
from click.testing import CliRunner
from ec2_env import AMI, Ec2Proxy, ec2_endpoint

from burst.cli import main
from burst.runtime import ConfigError, build_runtime
from policies import load_config
from providers.libcloud import LibcloudProvider

CONFIG = """
cluster: lctest
clock: sim
clock_speed: 100000
sim_start: 2026-03-02T09:00:00Z
loop_interval: 1m
policies_dir: policies
state_path: burst.db
forecasting:
  enabled: false
node_groups:
  - id: lc-a100
    provider: libcloud
    region: us-east-1
    zone: us-east-1a
    tier: elastic
    capacity_type: on_demand
    instance_type: p4d.24xlarge
    gpu_model: A100
    gpus_per_node: 8
    max_size: 4
    boot_latency: 1m
{libcloud}
workload:
  synthetic:
    seed: 3
    base_jobs_per_hour: 40
    daily_amplitude: 0.0
    peak_hour: 14
    burst_probability: 0.0
    burst_factor: 1
    burst_hours: 1
    burst_window: [9, 11]
    tenants:
      research: {{share: 1.0, gpus: [8], mean_duration: 1h}}
"""

LIBCLOUD = """
libcloud:
  driver: ec2
  key_env: LC_TEST_KEY
  secret_env: LC_TEST_SECRET
  driver_args: {{host: 127.0.0.1, port: {port}, secure: false, region: us-east-1, signature_version: "4"}}
  groups:
    {group}: {{size: p4d.24xlarge, image: {ami}}}
"""

POLICY = """
tenant: research
priority: 10
spot:
  allowed: false
"""


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Ec2Proxy]:
    monkeypatch.setenv("LC_TEST_KEY", "testing")
    monkeypatch.setenv("LC_TEST_SECRET", "testing")
    with ec2_endpoint() as proxy:
        yield proxy


def write(tmp_path: Path, libcloud: str) -> Path:
    (tmp_path / "policies").mkdir(exist_ok=True)
    (tmp_path / "policies" / "research.yaml").write_text(POLICY)
    path = tmp_path / "burst.yaml"
    path.write_text(CONFIG.format(libcloud=libcloud))
    return path


def section(port: int, group: str = "lc-a100") -> str:
    return LIBCLOUD.format(port=port, group=group, ami=AMI)


def test_build_runtime_builds_the_libcloud_provider(endpoint: Ec2Proxy, tmp_path: Path) -> None:
    runtime = build_runtime(load_config(write(tmp_path, section(endpoint.port))))
    try:
        provider = runtime.providers["libcloud"]
        assert isinstance(provider, LibcloudProvider)
        assert [g.id for g in provider.node_groups()] == ["lc-a100"]
        assert [o.price_per_hour for o in provider.offerings("lc-a100")] == [runtime.catalog.find(
            "aws", "p4d.24xlarge", "us-east-1").on_demand_usd_per_hour]  # the catalog's row for the type
    finally:
        runtime.close()


@pytest.mark.slow
def test_burst_run_scales_a_libcloud_group(endpoint: Ec2Proxy, tmp_path: Path) -> None:
    config = write(tmp_path, section(endpoint.port))
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--duration", "20m"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert any(" scale_up lc-a100 -> " in line for line in result.output.splitlines()), result.output
    assert "0 failed" in result.output.splitlines()[-1]
    with fake_credentials():
        reservations = client("ec2", moto_server().url).describe_instances()["Reservations"]
    live = [i for r in reservations for i in r["Instances"] if i["State"]["Name"] != "terminated"]
    assert live and all({"Key": "burst-group", "Value": "lc-a100"} in i["Tags"] for i in live)
    assert endpoint.calls("RunInstances") == len(live) + endpoint.calls("TerminateInstances")


def test_libcloud_groups_need_the_libcloud_section(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="provider libcloud needs a libcloud: section"):
        build_runtime(load_config(write(tmp_path, "")), ephemeral=True)


def test_every_libcloud_group_needs_a_size_and_image(endpoint: Ec2Proxy, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"libcloud.groups: no size and image for node group\(s\) lc-a100"):
        build_runtime(load_config(write(tmp_path, section(endpoint.port, group="other"))), ephemeral=True)


def test_a_missing_credential_variable_is_named(endpoint: Ec2Proxy, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LC_TEST_SECRET")
    with pytest.raises(ConfigError, match="libcloud.secret_env: environment variable LC_TEST_SECRET is not set"):
        build_runtime(load_config(write(tmp_path, section(endpoint.port))), ephemeral=True)


def test_an_unknown_driver_or_size_is_a_config_error(endpoint: Ec2Proxy, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'nosuchcloud' is not a libcloud compute driver"):
        build_runtime(load_config(write(tmp_path, section(endpoint.port).replace("driver: ec2", "driver: nosuchcloud"))),
                      ephemeral=True)
    with pytest.raises(ConfigError, match="size 'p9.huge' is not one the driver lists"):
        build_runtime(load_config(write(tmp_path, section(endpoint.port).replace("size: p4d.24xlarge", "size: p9.huge"))),
                      ephemeral=True)


@pytest.mark.parametrize(
    ("driver", "args", "expected"),
    [
        ("azure_arm", {"tenant_id": "t-1", "subscription_id": "s-1"}, {"tenant_id": "t-1", "subscription_id": "s-1"}),
        ("gce", {"project": "p-1"}, {"user_id": "the-key", "key": "the-secret"}),
    ],
)
def test_credentials_reach_the_driver_constructor_by_its_parameter_names(
    driver: str, args: dict[str, str], expected: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import inspect

    from libcloud.compute.providers import get_driver

    from providers.libcloud import connect

    seen: dict[str, object] = {}
    cls = get_driver(driver)
    real = inspect.signature(cls.__init__)

    def record(self: object, *a: object, **kw: object) -> None:  # what the real constructor would be given
        seen.update(real.bind(self, *a, **kw).arguments)

    record.__signature__ = real  # type: ignore[attr-defined]
    monkeypatch.setattr(cls, "__init__", record)
    connect(driver, key_env="K", secret_env="S", args=args, environ={"K": "the-key", "S": "the-secret"})
    assert {k: seen[k] for k in expected} == expected
    if driver == "azure_arm":
        assert (seen["key"], seen["secret"]) == ("the-key", "the-secret")
