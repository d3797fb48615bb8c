"""Hostile policy files and burst.yaml: huge numbers, values that validate but would crash or stall the daemon,
and errors that must be one FILE:LINE line (the real loaders and the real CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from burst.cli import main
from burst.runtime import build_runtime, quickstart_config_path
from policies import PolicyValidationError, load_config, load_policy_file

QUICKSTART = quickstart_config_path().read_text()


def policy_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "batch.yaml"
    path.write_text(text)
    with pytest.raises(PolicyValidationError) as caught:
        load_policy_file(path)
    [error] = caught.value.errors
    return str(error)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("max_job_runtime: " + "9" * 400 + "\n", "max_job_runtime"),  # was OverflowError with a traceback
        ("max_job_runtime: '" + "9" * 400 + "'\n", "max_job_runtime"),  # was read as inf and accepted
        ("queue_wait_slo: '99999999999d'\n", "queue_wait_slo"),
        ("priority: 9223372036854775808\n", "priority"),  # 2**63, was accepted
        ("quota: {steady_gpus: 9223372036854775808}\n", "quota.steady_gpus"),
        ("fair_share_weight: " + "9" * 400 + "\n", "fair_share_weight"),
        ("budget: {usd_per_hour: 1.0e+30}\n", "budget.usd_per_hour"),
        ("allowed_regions: [" + ", ".join(["r"] * 1000) + "]\n", "allowed_regions"),
    ],
)
def test_huge_numbers_in_a_policy_are_one_located_error(tmp_path: Path, text: str, field: str) -> None:
    line = policy_error(tmp_path, text)
    assert line.startswith(f"{tmp_path / 'batch.yaml'}:1: {field}: "), line
    assert len(line) < len(str(tmp_path)) + 250, line  # values quoted cut short


def config_with(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "burst.yaml"
    path.write_text(text)
    (tmp_path / "policies").mkdir(exist_ok=True)
    for tenant in ("prod", "research", "batch"):
        (tmp_path / "policies" / f"{tenant}.yaml").write_text("priority: 0\n")
    return path


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("loop_interval: 1m", "loop_interval: 1000000000000", "loop_interval"),  # crashed the sim provider
        ("loop_interval: 1m", "loop_interval: 2h", "loop_interval"),
        ("sim_start: 2026-03-02T07:00:00Z", "sim_start: 1.5", "sim_start"),  # was read as 1970
        ("gpus_per_node: 8", "gpus_per_node: 100000000", "node_groups.0.gpus_per_node"),  # stalled the daemon
        ("max_size: 4", "max_size: 100000", "node_groups.0.max_size"),
        ("clock_speed: 7200", "clock_speed: 0.000001", "clock_speed"),
    ],
)
def test_config_values_that_would_crash_or_stall_are_refused_with_their_line(
    tmp_path: Path, old: str, new: str, field: str
) -> None:
    assert old in QUICKSTART
    path = config_with(tmp_path, QUICKSTART.replace(old, new, 1))
    with pytest.raises(PolicyValidationError) as caught:
        load_config(path)
    [error] = caught.value.errors
    line = QUICKSTART.replace(old, new, 1).splitlines().index(next(
        text for text in QUICKSTART.replace(old, new, 1).splitlines() if new in text)) + 1
    assert (error.file, error.line, error.field) == (str(path), line, field), error


def test_two_daemons_on_sim_clocks_never_lead_at_once(tmp_path: Path) -> None:
    # Each daemon advances its own sim clock: judged by them, a daemon whose clock ran ahead took the lease from a
    # live leader. The lease is judged on the wall clock they share instead.
    config_with(tmp_path, QUICKSTART)
    daemons = []
    for holder in ("a", "b"):
        path = tmp_path / f"{holder}.yaml"
        path.write_text(QUICKSTART + f"\nleader: {{enabled: true, lease: 10m, holder: {holder}}}\n")
        daemons.append(build_runtime(load_config(path), state_path=tmp_path / "s.db"))
    a, b = daemons
    try:
        assert a.sim_clock is not None and b.sim_clock is not None
        assert not a.controller.tick().standby
        b.sim_clock.advance(10 * 3600)  # b's own clock, ten simulated hours ahead
        assert b.controller.tick().standby, "a still leads"
        a.sim_clock.advance(60)
        assert not a.controller.tick().standby
        a.release_lease()
        assert not b.controller.tick().standby, "a gave the lease up: b leads at once"
        a.sim_clock.advance(60)
        assert a.controller.tick().standby
    finally:
        a.close()
        b.close()


def test_a_bad_synthetic_setting_is_one_located_line_with_its_value_cut(tmp_path: Path) -> None:
    # Synthetic-section errors had no FILE:LINE, and one echoed a 10,000-character value; a rate of 1e30 stalled.
    for old, new, field in [
        ("base_jobs_per_hour: 6", "base_jobs_per_hour: 1.0e+30", "workload.synthetic.base_jobs_per_hour"),
        ("burst_window: [9, 11]", "burst_window: '" + "x" * 10_000 + "'", "workload.synthetic.burst_window"),
        ("gpus: [4, 8], fault", "gpus: [4, 100000000], fault", "workload.synthetic.tenants.batch.gpus"),
    ]:
        assert old in QUICKSTART
        text = QUICKSTART.replace(old, new, 1)
        path = config_with(tmp_path, text)
        with pytest.raises(PolicyValidationError) as caught:
            build_runtime(load_config(path), state_path=tmp_path / "s.db", config_file=path)
        [error] = caught.value.errors
        line = next(i for i, t in enumerate(text.splitlines(), 1) if new in t)
        assert (error.file, error.line, error.field) == (str(path), line, field), error
        assert len(str(error)) < len(str(path)) + 250, "the value is quoted cut short"


@pytest.mark.parametrize("command", [["plan"], ["run", "--duration", "1m", "--quiet"], ["jobs"],
                                     ["submit", "--tenant", "prod", "--gpus", "1"], ["gpus"], ["explain", "x"],
                                     ["cost", "--from-store"], ["agent"]])
def test_every_command_reading_a_bad_config_prints_one_error_line(tmp_path: Path, command: list[str]) -> None:
    path = config_with(tmp_path, QUICKSTART.replace("loop_interval: 1m", "loop_interval: [1m]", 1))
    if command == ["agent"]:
        (tmp_path / "t").write_text("token\n")
        command = ["agent", "--controller", "http://127.0.0.1:9", "--token-file", str(tmp_path / "t"), "--ticks", "1"]
    result = CliRunner().invoke(main, [*command, "--config", str(path)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert f"{path}:" in result.output and "loop_interval" in result.output, result.output


@pytest.mark.parametrize(("args", "option"), [(["--gpus", "100000"], "--gpus"), (["--priority", str(2**63)], "--priority"),
                                               (["--duration", "99999999999d"], "--duration"),
                                               (["--gpu-model", "x" * 100_000], "--gpu-model")])
def test_burst_submit_applies_the_same_bounds(tmp_path: Path, args: list[str], option: str) -> None:
    result = CliRunner().invoke(main, ["submit", "--tenant", "prod", "--gpus", "1", *args,
                                       "--state", str(tmp_path / "s.db")])
    assert result.exit_code == 2 and option in result.output and "Traceback" not in result.output, result.output
    assert len(result.output) < 1000


def test_a_snapshot_with_a_job_out_of_bounds_is_refused_naming_it(tmp_path: Path) -> None:
    import json

    snapshot = json.loads((Path(__file__).parent.parent / "examples" / "snapshot.json").read_text())
    snapshot["jobs"][0]["duration_s"] = 1e15
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snapshot))
    result = CliRunner().invoke(main, ["plan", "--snapshot", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"{path}: job {snapshot['jobs'][0]['id']}: duration_s: " in result.output
