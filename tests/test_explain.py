"""`burst explain`: the decision log read back about a job, a node and a group, after a real quickstart run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from burst.cli import main


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("explain") / "burst.db"
    result = CliRunner().invoke(main, ["run", "--duration", "6h", "--quiet", "--state", str(path)])
    assert result.exit_code == 0, result.output
    return path


def explain(state: Path, *args: str) -> list[dict[str, object]]:
    result = CliRunner().invoke(main, ["explain", *args, "--state", str(state), "--json", "--limit", "500"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


def test_a_job_a_node_and_a_group_each_have_their_reasons(state: Path) -> None:
    jobs = json.loads(CliRunner().invoke(main, ["jobs", "--state", str(state), "--json"]).output)
    placed = next(j for j in jobs if j["node_ids"])
    about_job = explain(state, placed["id"])
    places = [d for d in about_job if d["kind"] == "place_job"]
    assert places and all(d["subject"] == placed["id"] for d in places)
    assert "free GPU(s) on" in str(places[-1]["reason"])

    node = places[-1]["data"]["node_ids"][0]  # type: ignore[index]
    about_node = explain(state, node)
    assert any(d["kind"] == "place_job" and node in d["data"]["node_ids"] for d in about_node)  # type: ignore[index,operator]

    about_group = explain(state, "cloud-a100-od")
    assert any(d["kind"] == "scale_up" for d in about_group)
    assert all(d["subject"] in ("cloud-a100-od", "group:cloud-a100-od") for d in about_group)


def test_unknown_names_say_so_and_a_missing_state_file_is_one_clear_error(state: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["explain", "no-such-thing", "--state", str(state)])
    assert result.exit_code == 0 and "no decision about no-such-thing" in result.output
    missing = CliRunner().invoke(main, ["explain", "x", "--state", str(tmp_path / "none.db")])
    assert missing.exit_code != 0 and "no state file" in missing.output
