"""The burst CLI, run as a subprocess exactly as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
FIX = Path(__file__).parent / "fixtures" / "policies"


def burst(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burst.cli", *args], capture_output=True, text=True, cwd=ROOT)


def test_policy_validate_good_and_bad() -> None:
    assert burst("policy", "validate", str(FIX / "good")).returncode == 0
    bad = burst("policy", "validate", str(FIX / "bad"))
    assert bad.returncode == 1
    lines = bad.stderr.strip().splitlines()
    assert len(lines) >= 4
    assert all(":" in ln.split(" ")[0] for ln in lines)
    assert any("unknown_key" in ln for ln in lines) and any("other_tenant" in ln for ln in lines)


def test_policy_schema_is_json() -> None:
    out = burst("policy", "schema")
    assert out.returncode == 0 and "properties" in json.loads(out.stdout)


def test_plan_snapshot_json() -> None:
    out = burst("plan", "--snapshot", "examples/snapshot.json", "--at", "2026-03-02T12:00:00+00:00", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    kinds = [(a["kind"], a["target"], a.get("count")) for a in data["actions"]]
    assert kinds == [("place_job", "j0", 8), ("place_job", "j1", 8), ("scale_up", "aws-p4d-od", 2)]
    assert all(a["reason"] for a in data["actions"])


def test_version() -> None:
    out = burst("--version")
    assert out.returncode == 0 and "0.1.0" in out.stdout


def test_import_burst_loads_no_cloud_sdk() -> None:
    code = (
        "import sys, burst, burst.cli, burst.planner, burst.catalog, burst.actuator, providers.sim, policies;"
        "bad=[m for m in sys.modules if m.split('.')[0] in ('boto3','botocore','libcloud','pynvml','kubernetes','prophet')"
        " or m.startswith('google.cloud')]; print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


def test_policy_validate_refuses_an_empty_directory_and_an_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "none"
    empty.mkdir()
    out = burst("policy", "validate", str(empty))
    assert out.returncode == 1 and "no tenant policy file" in out.stderr
    blank = tmp_path / "blank"
    blank.mkdir()
    (blank / "team.yaml").write_text("")
    out = burst("policy", "validate", str(blank))
    assert out.returncode == 1 and f"{blank / 'team.yaml'}:1: -: empty policy file" in out.stderr
    (blank / "team.yaml").write_text("{}\n")
    out = burst("policy", "validate", str(blank))
    assert out.returncode == 0 and "1 tenant policy file(s) valid" in out.stdout


def test_plan_says_whether_a_count_is_nodes_or_gpus() -> None:
    out = burst("plan", "--snapshot", "examples/snapshot.json", "--at", "2026-03-02T12:00:00+00:00", "--json")
    units = [(a["kind"], a["count"], a["count_unit"]) for a in json.loads(out.stdout)["actions"]]
    assert units == [("place_job", 8, "gpus"), ("place_job", 8, "gpus"), ("scale_up", 2, "nodes")]
    text = subprocess.run([sys.executable, "-m", "burst.cli", "plan", "--snapshot", "examples/snapshot.json", "--at",
                           "2026-03-02T12:00:00+00:00"], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "COLUMNS": "200"}).stdout
    header = next(line for line in text.splitlines() if "kind" in line)
    assert [c.strip() for c in header.split("┃")[1:-1]][:5] == ["", "kind", "target", "nodes", "GPUs"]
    rows = {cells[2]: cells[3:5] for line in text.splitlines() if "│" in line
            for cells in [[c.strip() for c in line.split("│")[1:-1]]]}
    assert rows["j0"] == ["", "8"] and rows["aws-p4d-od"] == ["2", ""]
