"""Commands on a PostgreSQL state store: `--state postgresql://...` (and `state_path` in burst.yaml) run and read
the same controller state as a SQLite file, against a real server the tests start."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from burst.cli import main


def burst(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.stdout, result.stderr


def test_the_quickstart_on_postgresql_leaves_what_it_leaves_in_a_sqlite_file(pg_url: str, tmp_path: Path) -> None:
    sqlite = str(tmp_path / "burst.db")
    for state in (pg_url, sqlite):
        code, _, err = burst("submit", "--state", state, "--tenant", "prod", "--gpus", "2", "--duration", "30m",
                             "--id", "mine")
        assert code == 0, err
        code, out, err = burst("run", "--state", state, "--duration", "3h", "--quiet")
        assert code == 0, err
    assert f"state {pg_url}" in out.replace(sqlite, pg_url)  # the run names its store
    same: dict[str, list[object]] = {}
    for args in (("jobs", "--json"), ("usage", "--json"), ("explain", "cloud-a100-spot", "--json")):
        for state in (pg_url, sqlite):
            code, out, err = burst(*args, "--state", state)
            assert code == 0, err
            same.setdefault(args[0], []).append(json.loads(out))
    jobs, on_file = same["jobs"]
    assert {j["id"]: j["state"] for j in jobs} == {j["id"]: j["state"] for j in on_file}  # type: ignore[union-attr,index]
    assert {j["id"] for j in jobs} >= {"mine"}  # type: ignore[union-attr,index]
    assert same["usage"][0] == same["usage"][1], "the same run meters the same on both backends"
    assert same["usage"][0]["tenants"]["prod"]["gpu_hours"] > 0  # type: ignore[index]
    assert same["explain"][0] and same["explain"][0] == same["explain"][1]


def test_a_config_names_its_postgresql_store_in_state_path(pg_url: str, tmp_path: Path) -> None:
    from burst.runtime import quickstart_config_path

    text = quickstart_config_path().read_text()
    config = tmp_path / "burst.yaml"
    base = quickstart_config_path().parent
    config.write_text(text.replace("policies_dir: policies", f"policies_dir: {base / 'policies'}")
                      + f"\nstate_path: {pg_url}\n")
    code, _, err = burst("run", "--config", str(config), "--duration", "1h", "--quiet")
    assert code == 0, err
    assert not (tmp_path / "postgresql:").exists(), "a URL is never taken for a relative file name"
    code, out, err = burst("jobs", "--state", pg_url, "--json")
    assert code == 0, err
    assert json.loads(out), "the run's jobs are in the database the config names"


def test_an_unreachable_server_is_one_line_and_exit_1() -> None:
    code, _, err = burst("jobs", "--state", "postgresql://burst:hunter2@127.0.0.1:1/none")
    assert code == 1
    assert "postgresql://burst:***@127.0.0.1:1/none: cannot connect" in err and "hunter2" not in err
