"""NVML discovery on scripted nodes (the real pynvml functions patched, see nvml_fixtures), and the real
no-NVML path on this GPU-less machine."""

from __future__ import annotations

import json

import pynvml
import pytest
from click.testing import CliRunner

from burst.cli import main
from burst.model import CapacityType, GpuHealth, GpuLink, GpuShape, NodeGroup, Tier
from providers.onprem.discovery import discover
from providers.onprem.health import judge
from providers.onprem.readings import GpuReading

from .nvml_fixtures import NOT_SUPPORTED, Error, dgx1, dgx_a100

RACK = NodeGroup(id="rack1", provider="onprem", region="dc1", tier=Tier.STEADY, capacity_type=CapacityType.ONPREM,
                 shape=GpuShape("A100", 8, 80.0), instance_type="dgx-a100", min_size=1, max_size=1)


def test_dgx_a100_every_pair_is_nvlink_through_the_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    dgx_a100(monkeypatch)
    found = discover("dgx-1")
    assert found.nvml_available and found.source == "nvml" and found.node is not None
    assert [g.uuid for g in found.node.gpus] == [f"GPU-a100-{i}" for i in range(8)]
    assert {g.model for g in found.node.gpus} == {"A100"} and {g.memory_mib for g in found.node.gpus} == {81920}
    assert all(g.health is GpuHealth.HEALTHY for g in found.node.gpus)
    assert found.node.link("GPU-a100-0", "GPU-a100-7") is GpuLink.NVLINK
    pair = next(p for p in found.pairs if (p.a, p.b) == ("GPU-a100-0", "GPU-a100-5"))
    assert pair.via_switch and pair.nvlinks == 12 and pair.label == "NV12"
    assert found.readings[5].numa_node == 1 and found.readings[0].pci_bus_id == "00000000:07:00.0"
    assert "8 GPU(s) on dgx-1, driver 550.54.15: 8 healthy" in found.status


def test_dgx1_cube_mesh_mixes_nvlink_and_pcie_levels(monkeypatch: pytest.MonkeyPatch) -> None:
    dgx1(monkeypatch)
    node = discover("dgx1").node
    assert node is not None
    link = lambda a, b: node.link(f"GPU-v100-{a}", f"GPU-v100-{b}")  # noqa: E731
    assert link(0, 1) is GpuLink.NVLINK and link(0, 4) is GpuLink.NVLINK and link(3, 7) is GpuLink.NVLINK
    assert link(0, 5) is GpuLink.SYSTEM and link(1, 6) is GpuLink.SYSTEM  # no NVLink, across sockets
    assert {g.model for g in node.gpus} == {"V100"} and all(not g.mig_enabled for g in node.gpus)


def test_one_thermally_throttling_busy_gpu_is_degraded_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    hot = {"reasons": pynvml.nvmlClocksEventReasonHwThermalSlowdown, "util": 97, "sm": 810, "temp": 88}
    dgx_a100(monkeypatch, g3=hot)
    found = discover("n")
    assert found.node is not None
    verdicts = {g.index: (g.health, g.health_reason) for g in found.node.gpus}
    assert verdicts[3][0] is GpuHealth.DEGRADED
    assert "thermal" in verdicts[3][1].lower() and "sm clock 810/1410 MHz under 97% load" in verdicts[3][1]
    assert all(h is GpuHealth.HEALTHY for i, (h, _) in verdicts.items() if i != 3)


def test_a_lost_gpu_is_unhealthy_and_discovery_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    dgx_a100(monkeypatch, g2={"lost": True})
    found = discover("n")
    assert found.node is not None and len(found.node.gpus) == 8
    lost = found.node.gpus[2]
    assert lost.health is GpuHealth.UNHEALTHY and "fell off the bus" in lost.health_reason
    assert sum(g.health is GpuHealth.HEALTHY for g in found.node.gpus) == 7
    assert all(lost.uuid not in (p.a, p.b) for p in found.pairs)  # no topology for a GPU that is gone
    assert "1 unhealthy" in found.status


def test_memory_errors_make_a_gpu_unhealthy(monkeypatch: pytest.MonkeyPatch) -> None:
    dgx_a100(monkeypatch, g0={"ecc_volatile": 3}, g1={"remapped": (0, 1, 1, 0)},
             g4={"retired_pending": pynvml.NVML_FEATURE_ENABLED})
    node = discover("n").node
    assert node is not None
    reasons = {g.index: g.health_reason for g in node.gpus if g.health is GpuHealth.UNHEALTHY}
    assert set(reasons) == {0, 1, 4}
    assert "3 volatile uncorrected ECC error(s)" in reasons[0]
    assert "row remap pending" in reasons[1] and "retired pages pending" in reasons[4]


def test_unsupported_fields_are_none_and_other_errors_are_collected(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = dgx_a100(monkeypatch)
    gpus[0].ecc_volatile = NOT_SUPPORTED
    gpus[0].remapped = NOT_SUPPORTED
    gpus[0].numa = NOT_SUPPORTED
    gpus[1].temp = Error(pynvml.NVML_ERROR_UNKNOWN)
    found = discover("n")
    r0, r1 = found.readings[0], found.readings[1]
    assert r0.ecc_volatile_uncorrected is None and r0.remapped_rows_pending is None and r0.numa_node is None
    assert r0.errors == ()  # not supported is not an error
    assert r1.temperature_c is None and any(e.startswith("temperature:") for e in r1.errors)
    assert found.node is not None and found.node.gpus[0].health is GpuHealth.HEALTHY
    assert "reading(s) failed" in found.status


def test_without_nvml_the_static_inventory_serves_in_one_clear_line() -> None:
    found = discover("rack1-node", groups=[RACK])  # the real pynvml on this machine: no driver
    assert not found.nvml_available and found.source == "static"
    assert found.status.startswith("NVML unavailable: ") and "\n" not in found.status
    assert found.node is not None and len(found.node.gpus) == 8
    assert {g.model for g in found.node.gpus} == {"A100"} and {g.memory_mib for g in found.node.gpus} == {81920}
    assert discover("rack1-node", groups=[RACK]).node == found.node  # synthetic UUIDs are stable
    none = discover("x")
    assert none.source == "none" and none.node is None and "no static inventory" in none.status


def test_burst_gpus_prints_the_line_and_json_without_nvml(tmp_path) -> None:
    config = tmp_path / "burst.yaml"
    config.write_text(
        "policies_dir: p\nnode_groups:\n"
        "  - {id: rack1, provider: onprem, region: dc1, tier: steady, capacity_type: onprem, instance_type: dgx-a100,\n"
        "     gpu_model: A100, gpus_per_node: 8, gpu_memory_gib: 80, min_size: 1, max_size: 1}\n"
    )
    text = CliRunner().invoke(main, ["gpus", "--config", str(config), "--node-id", "n1"])
    assert text.exit_code == 0, text.output
    assert "NVML unavailable" in text.output and "static" in text.output
    out = CliRunner().invoke(main, ["gpus", "--config", str(config), "--node-id", "n1", "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["nvml_available"] is False and len(doc["gpus"]) == 8 and doc["gpus"][0]["health"] == "healthy"


def test_burst_gpus_shows_a_dash_for_what_the_static_inventory_does_not_measure(tmp_path) -> None:
    config = tmp_path / "burst.yaml"
    config.write_text(
        "policies_dir: p\nnode_groups:\n"
        "  - {id: rack1, provider: onprem, region: dc1, tier: steady, capacity_type: onprem, instance_type: dgx-a100,\n"
        "     gpu_model: A100, gpus_per_node: 8, min_size: 1, max_size: 1}\n"
    )
    text = CliRunner().invoke(main, ["gpus", "--config", str(config), "--node-id", "n1"])
    assert text.exit_code == 0, text.output
    rows = [line for line in text.output.splitlines() if "STATIC-" in line]
    assert len(rows) == 8
    for row in rows:
        cells = [c.strip() for c in row.strip("│ ").split("│")]
        assert cells[2] == "A100" and cells[3:] == ["-"] * 7, cells  # memory, readings and health: not measured
    assert "not measured" in text.output and "healthy" not in text.output


def test_burst_gpus_table_and_topology_on_a_scripted_node(monkeypatch: pytest.MonkeyPatch) -> None:
    dgx1(monkeypatch)
    out = CliRunner().invoke(main, ["gpus", "--node-id", "dgx1"])
    assert out.exit_code == 0, out.output
    assert "V100" in out.output and "NV" in out.output and "SYS" in out.output
    doc = json.loads(CliRunner().invoke(main, ["gpus", "--node-id", "dgx1", "--json"]).output)
    links = {(p["a"], p["b"]): p["link"] for p in doc["topology"]}
    assert links[("GPU-v100-0", "GPU-v100-4")] == "nvlink" and links[("GPU-v100-0", "GPU-v100-5")] == "system"


@pytest.mark.parametrize(
    ("reading", "health", "words"),
    [
        (GpuReading(0, "u"), GpuHealth.HEALTHY, ""),
        (GpuReading(0, "u", lost=True), GpuHealth.UNHEALTHY, "fell off the bus"),
        (GpuReading(0, "u", remap_failure=True), GpuHealth.UNHEALTHY, "row remapping failed"),
        (GpuReading(0, "u", sm_clock_mhz=700, sm_clock_max_mhz=1410, gpu_util_pct=90), GpuHealth.DEGRADED, "sm clock"),
        (GpuReading(0, "u", sm_clock_mhz=700, sm_clock_max_mhz=1410, gpu_util_pct=5), GpuHealth.HEALTHY, ""),
        (GpuReading(0, "u", clock_event_reasons=int(pynvml.nvmlClocksEventReasonSwPowerCap), gpu_util_pct=95,
                    power_w=399.0, power_limit_w=400.0), GpuHealth.DEGRADED, "399/400 W"),
        (GpuReading(0, "u", temperature_c=90), GpuHealth.DEGRADED, "temperature 90 C"),
    ],
)
def test_judge(reading: GpuReading, health: GpuHealth, words: str) -> None:
    verdict, reason = judge(reading)
    assert verdict is health and words in reason
