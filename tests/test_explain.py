"""`burst explain`: the decision log read back about a job, a node and a group, after a real quickstart run."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from burst.cli import main
from burst.model import Job
from burst.state import Decision, JobLoss, Store
from burst.timeline import render_text, timeline


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


def test_the_timeline_of_a_job_starts_at_its_submission_and_runs_oldest_first(state: Path) -> None:
    jobs = json.loads(CliRunner().invoke(main, ["jobs", "--state", str(state), "--json"]).output)
    placed = next(j for j in jobs if j["node_ids"])
    result = CliRunner().invoke(main, ["explain", placed["id"], "--state", str(state), "--timeline", "--json"])
    assert result.exit_code == 0, result.output
    entries = json.loads(result.output)
    assert entries[0]["kind"] == "submitted" and entries[0]["subject"] == placed["id"]
    assert datetime.fromisoformat(entries[0]["at"]) == datetime.fromisoformat(placed["submitted_at"])
    stamps = [datetime.fromisoformat(e["at"]) for e in entries]
    assert stamps == sorted(stamps)
    assert any(e["kind"] == "place_job" and placed["node_ids"][0] in e["detail"] for e in entries)
    text = CliRunner().invoke(main, ["explain", placed["id"], "--state", str(state), "--timeline"])
    assert text.exit_code == 0
    lines = text.output.splitlines()
    assert lines[0].startswith(f"job {placed['id']}: ") and "oldest first" in lines[1]
    assert len(lines) == 2 + len(entries) and "* submitted" in lines[2] and "+ place_job" in text.output


def test_the_timeline_of_a_group_folds_a_counting_down_hold_into_one_line(state: Path) -> None:
    plain = explain(state, "cloud-a100-od")
    result = CliRunner().invoke(main, ["explain", "cloud-a100-od", "--state", str(state), "--timeline", "--json",
                                       "--limit", "500"])
    entries = json.loads(result.output)
    assert {e["kind"] for e in entries} >= {"scale_up", "scale_down", "hold"}
    assert sum(e["seen"] for e in entries) == sum(int(d["seen"]) for d in plain)  # every plan counted, once
    assert len(entries) < len(plain)  # the break-even countdown holds are folded
    for a, b in zip(entries, entries[1:], strict=False):
        assert datetime.fromisoformat(a["at"]) <= datetime.fromisoformat(b["at"])
        assert not (a["kind"] == b["kind"] == "hold" and a["subject"] == b["subject"]
                    and re.sub(r"[\d.]+", "#", a["detail"]) == re.sub(r"[\d.]+", "#", b["detail"]))


def test_timeline_entries_fold_only_the_same_hold_and_show_lost_runs() -> None:
    t0 = datetime(2026, 3, 2, 10, tzinfo=UTC)
    at = [t0 + timedelta(minutes=m) for m in range(6)]
    decisions = [
        Decision(1, at[0], "p1", "group:g", "hold", "kept: next due in 3.9 min", {}),
        Decision(2, at[1], "p2", "group:g", "hold", "kept: next due in 2.9 min", {}),
        Decision(3, at[2], "p3", "group:g", "hold", "at max_size", {}),
        Decision(4, at[3], "p4", "g", "scale_down", "idle", {}),
    ]
    job = Job(id="j", tenant="t", gpus=2, submitted_at=at[0] - timedelta(minutes=1))
    losses = [JobLoss(at[4], "j", "t", "interruption", 2.0, lost_gpu_s=3600.0, node_ids=("n1",))]
    entries = timeline(decisions, job, losses)
    assert [(e.kind, e.seen) for e in entries] == [("submitted", 1), ("hold", 2), ("hold", 1), ("scale_down", 1),
                                                   ("lost", 1)]
    assert entries[1].until == at[1] and entries[1].detail.endswith("2.9 min") and entries[1].at == at[0]
    assert entries[4].detail == "interruption on n1: 1.00 GPU-h of work lost since the last checkpoint"
    assert render_text(entries)[1].startswith("2026-03-02 10:00:00 = hold x2 to 10:01:00")
