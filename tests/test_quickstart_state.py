"""The quickstart keeps its state in the per-user state directory, and every command reads it by default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from burst.cli import main
from burst.quickstart import quickstart_state_path
from burst.state import MetaKey, Store


def burst(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def last_tick() -> str:
    """The quickstart state's recorded last tick (events wake the loop between heartbeats, so not on a minute)."""
    with Store(quickstart_state_path()) as store:
        last = store.get_meta(MetaKey.LAST_TICK)
    assert last is not None
    return last


def test_run_keeps_the_quickstart_state_per_user_and_says_where(private_state_home: Path) -> None:
    code, out, err = burst("run", "--duration", "1h", "--quiet")
    assert code == 0, err
    state = private_state_home / "burst" / "quickstart" / "burst.db"
    assert state.exists()
    assert f"quickstart state in {state}" in err
    assert "until 2026-03-02T08:00:00+00:00" in out
    first_last_tick = last_tick()
    assert "2026-03-02T07:59:00+00:00" <= first_last_tick < "2026-03-02T08:00:00+00:00"
    code, out, err = burst("run", "--duration", "1h", "--quiet")
    assert code == 0, err
    assert "continuing the quickstart" in err and "burst run --fresh starts over" in err
    assert f"from {first_last_tick}" in out, "the second run continues from the first run's last tick"
    code, out, err = burst("run", "--duration", "1h", "--quiet", "--fresh")
    assert code == 0, err
    assert "starting the quickstart over" in err and "from 2026-03-02T07:00:00+00:00" in out
    assert [p.name.startswith("burst.db.damaged-") for p in state.parent.iterdir()].count(True) == 1, "moved aside"


def test_submit_jobs_explain_plan_and_usage_read_the_quickstart_state() -> None:
    code, out, err = burst("submit", "--tenant", "prod", "--gpus", "2", "--duration", "30m", "--id", "mine")
    assert code == 0, err
    assert burst("run", "--duration", "3h", "--quiet")[0] == 0
    code, out, err = burst("jobs", "--json")
    assert code == 0, err
    jobs = {j["id"]: j for j in json.loads(out)}
    assert jobs["mine"]["state"] == "succeeded" and len(jobs) > 1
    code, out, err = burst("explain", "cloud-a100-spot", "--json")
    assert code == 0, err
    assert json.loads(out), "the group's decisions from the run"
    code, out, err = burst("plan", "--json")
    assert code == 0, err
    at = json.loads(out)["at"]
    assert at == last_tick() and at.startswith("2026-03-02T09:59:"), "planned from the saved state's clock"
    code, out, err = burst("usage", "--json")
    assert code == 0, err
    usage = json.loads(out)
    assert usage["since"] == "2026-03-01T00:00:00+00:00", "the simulated month, not the wall-clock one"
    assert usage["tenants"]["prod"]["gpu_hours"] > 0


def test_commands_without_a_quickstart_state_say_how_to_make_one() -> None:
    for command in ("jobs", "usage"):
        code, _, err = burst(command)
        assert code == 1 and "no state file" in err and "burst run" in err, (command, err)


@pytest.mark.slow
def test_cost_projects_the_quickstart_from_its_saved_state() -> None:
    assert burst("run", "--duration", "3h", "--quiet")[0] == 0
    code, out, err = burst("cost", "--horizon", "2h", "--strategy", "burst-no-forecast", "--workers", "1", "--json")
    assert code == 0, err
    projection = json.loads(out)
    assert projection["horizon_h"] == 2 and projection["total_usd"]


def test_usage_names_units_and_gpu_models_with_the_state_file_alone(private_state_home: Path) -> None:
    assert burst("run", "--duration", "2h", "--quiet")[0] == 0
    state = private_state_home / "burst" / "quickstart" / "burst.db"
    code, out, err = burst("usage", "--state", str(state), "--json")
    assert code == 0, err
    assert {m for t in json.loads(out)["tenants"].values() for m in t["by_gpu_model"]} == {"A100"}
    result = CliRunner().invoke(main, ["usage"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if "tenant" in line)
    columns = [c.strip() for c in header.strip("┃ ").split("┃")]
    assert columns == ["tenant", "GPU-h", "USD", "steady GPU-h", "elastic_on_demand GPU-h", "elastic_spot GPU-h",
                       "hot_pool GPU-h", "by GPU model (GPU-h)"]
