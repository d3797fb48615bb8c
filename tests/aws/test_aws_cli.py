"""`burst run` end to end on a config whose node groups are discovered in an AWS API emulator (moto)."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_env import client
from click.testing import CliRunner

from burst.cli import main

from .conftest import CLUSTER, Aws

CONFIG = """
cluster: {cluster}
clock: sim
clock_speed: 100000
sim_start: 2026-03-02T09:00:00Z
loop_interval: 1m
policies_dir: policies
state_path: burst.db
forecasting:
  enabled: false
aws:
  region: us-east-1
  endpoint_url: {url}
  events_queue_url: {queue}
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

POLICY = """
tenant: research
priority: 10
spot:
  allowed: false
"""


@pytest.mark.slow
def test_burst_run_discovers_aws_groups_and_scales_them(aws: Aws, tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "research.yaml").write_text(POLICY)
    config = tmp_path / "burst.yaml"
    config.write_text(CONFIG.format(cluster=CLUSTER, url=aws.url, queue=aws.queue_url))
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--duration", "20m"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"burst: cluster {CLUSTER};")
    assert any(" scale_up od-a100 -> " in line for line in lines), result.output
    assert "0 failed" in lines[-1], lines[-1]
    asg = client("autoscaling", aws.url).describe_auto_scaling_groups(AutoScalingGroupNames=["od-a100"])
    assert asg["AutoScalingGroups"][0]["DesiredCapacity"] >= 1
    assert len(asg["AutoScalingGroups"][0]["Instances"]) == asg["AutoScalingGroups"][0]["DesiredCapacity"]


def test_burst_run_says_clearly_when_no_aws_groups_are_found(aws: Aws, tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    config = tmp_path / "burst.yaml"
    config.write_text(CONFIG.format(cluster="nobody", url=aws.url, queue=aws.queue_url))
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--duration", "5m"])
    assert result.exit_code != 0
    assert "aws: no node groups found: tag Auto Scaling groups with burst:cluster nobody" in result.output


def test_the_runtime_completes_the_terraform_modules_lifecycle_hooks_unless_told_not_to(aws: Aws, tmp_path: Path) -> None:
    from burst.runtime import build_runtime, load_run_config

    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "research.yaml").write_text(POLICY)
    config = tmp_path / "burst.yaml"
    text = CONFIG.format(cluster=CLUSTER, url=aws.url, queue=aws.queue_url)
    for extra, hooks in (("", ("burst-launch", "burst-terminate")), ("  launch_hook: null\n  terminate_hook: mine\n", (None, "mine"))):
        config.write_text(text.replace("aws:\n", "aws:\n" + extra))
        runtime = build_runtime(load_run_config(config), ephemeral=True)
        try:
            provider = runtime.providers["aws"]
            assert (provider._launch_hook, provider._terminate_hook) == hooks  # type: ignore[attr-defined]
        finally:
            runtime.close()
