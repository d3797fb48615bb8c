"""build_runtime with a gcp section (the provider against the local Compute API), the clear ConfigErrors without
one, and `burst run` end to end scaling a discovered managed instance group."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from gcp_env import PROJECT, ZONES, compute_server, create_groups

from burst.cli import main
from burst.runtime import ConfigError, build_runtime
from policies import BurstConfig
from providers.sim import ManualClock

from .conftest import CLUSTER, Gcp

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
gcp:
  project: {project}
  region: us-central1
  endpoint: {url}
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

POLICY = "tenant: research\npriority: 10\nspot:\n  allowed: false\n"

GROUP = {"id": "od-a100", "provider": "gcp", "region": "us-central1", "zone": ZONES[0], "tier": "elastic",
         "capacity_type": "on_demand", "instance_type": "a2-highgpu-8g", "gpu_model": "A100", "gpus_per_node": 8,
         "max_size": 2}


def config(tmp_path: Path, **doc: object) -> BurstConfig:
    (tmp_path / "policies").mkdir(exist_ok=True)
    return BurstConfig.model_validate({"cluster": CLUSTER, "forecasting": {"enabled": False}, **doc}).with_base_dir(tmp_path)


def test_build_runtime_discovers_gcp_groups(gcp: Gcp, tmp_path: Path) -> None:
    rt = build_runtime(config(tmp_path, gcp={"project": PROJECT, "zones": list(ZONES), "endpoint": gcp.url}))
    try:
        assert {g.id for g in rt.providers["gcp"].node_groups()} == {"od-a100", "spot-a100"}
        assert rt.catalog.group_price(rt.providers["gcp"].node_groups()[0]) > 0
    finally:
        rt.close()


def test_build_runtime_builds_listed_gcp_groups(gcp: Gcp, tmp_path: Path) -> None:
    rt = build_runtime(config(tmp_path, node_groups=[GROUP],
                              gcp={"project": PROJECT, "zones": [ZONES[0]], "endpoint": gcp.url}))
    try:
        (g,) = rt.providers["gcp"].node_groups()
        assert (g.id, g.max_size, g.zone) == ("od-a100", 2, ZONES[0])
    finally:
        rt.close()


def test_gcp_groups_without_a_gcp_section_or_zones_are_clear_config_errors(gcp: Gcp, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="provider gcp needs a gcp: section with its project and zones"):
        build_runtime(config(tmp_path, node_groups=[GROUP]))
    with pytest.raises(ConfigError, match="gcp: gcp: give zones or a region"):
        build_runtime(config(tmp_path, gcp={"project": PROJECT, "endpoint": gcp.url}))
    with pytest.raises(ConfigError, match="gcp: no node groups found: label managed instance groups' templates"):
        build_runtime(config(tmp_path, cluster="nobody", gcp={"project": PROJECT, "zones": [ZONES[0]], "endpoint": gcp.url}))


@pytest.mark.slow
def test_burst_run_discovers_gcp_groups_and_scales_them(tmp_path: Path) -> None:
    """The daemon's simulated clock is not the server's, so this server boots and deletes VMs at once."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "research.yaml").write_text(POLICY)
    path = tmp_path / "burst.yaml"
    with compute_server(ManualClock(), boot_s=0.0, delete_s=0.0) as server:
        create_groups(server, CLUSTER)
        path.write_text(CONFIG.format(cluster=CLUSTER, project=PROJECT, url=server.url))
        result = CliRunner().invoke(main, ["run", "--config", str(path), "--duration", "20m"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert any(" scale_up od-a100 -> " in line for line in lines), result.output
        assert "0 failed" in lines[-1] and "jobs placed 0" not in lines[-1], lines[-1]
        mig = server.migs[(ZONES[0], "od-a100")]
        live = [v for v in server.members(ZONES[0], "od-a100") if v.status == "RUNNING"]
        assert mig["targetSize"] >= 1 and len(live) == mig["targetSize"]
