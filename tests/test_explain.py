"""`burst explain`: the decision log read back about a job, a node and a group, after a real quickstart run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from burst.cli import main
from burst.state import Store


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
    for as_json in ([], ["--json"]):  # not found exits 1, as kubectl does
        result = CliRunner().invoke(main, ["explain", "no-such-thing", "--state", str(state), *as_json])
        assert result.exit_code == 1 and "no decision about no-such-thing" in result.stderr
    missing = CliRunner().invoke(main, ["explain", "x", "--state", str(tmp_path / "none.db")])
    assert missing.exit_code != 0 and "no state file" in missing.output


def test_a_job_left_unplanned_shows_the_hold_about_it(state: Path) -> None:
    with Store.open(state) as store:
        holds = [d for d in store.decisions(limit=None) if d.kind == "hold" and d.data.get("job_ids")]
    assert holds, "the burst leaves some jobs unplanned while the cloud groups are at max_size"
    hold = holds[0]
    job_id = hold.data["job_ids"][0]
    assert hold.subject.startswith("tenant:")
    about_job = explain(state, job_id)
    assert any(d["kind"] == "hold" and d["reason"] == hold.reason and d["subject"] == hold.subject for d in about_job)
    text = CliRunner().invoke(main, ["explain", job_id, "--state", str(state), "--limit", "500"], env={"COLUMNS": "250"})
    assert text.exit_code == 0 and "not planned" in text.stdout


def test_an_unchanged_hold_is_one_row_with_its_first_and_last_plan(state: Path) -> None:
    with Store.open(state) as store:
        holds = [d for d in store.decisions(limit=None) if d.kind == "hold"]
    assert any(d.seen > 1 for d in holds), "the cooldown holds repeat unchanged over several ticks"
    for d in holds:
        assert d.last_at is not None and d.last_at >= d.at
    keys = [(d.subject, d.reason, json.dumps(d.data, sort_keys=True), d.last_at) for d in holds]
    assert len(keys) == len(set(keys))
