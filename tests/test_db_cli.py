"""`burst db status` and `burst db upgrade [--dry-run]` on real stores: an older one is reported and upgraded
(the dry run writes nothing), a newer one and a missing one are refused in one line (a newer one by `burst run`
too)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from burst.cli import main
from burst.state import LATEST_VERSION, MIGRATIONS, SchemaTooOld, Store
from burst.store_pg import pg_ddl


def burst(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.stdout, result.stderr


def file_version(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def test_status_lists_the_migrations_an_older_store_lacks_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "burst.db"
    Store.open(path, target_version=2).close()
    before = path.read_bytes()
    code, out, err = burst("db", "status", "--state", str(path), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["schema_version"], doc["latest_version"]) == (2, LATEST_VERSION)
    assert [p["version"] for p in doc["pending"]] == list(range(3, LATEST_VERSION + 1))
    assert doc["pending"][0]["description"] == MIGRATIONS[2].description
    assert path.read_bytes() == before and file_version(path) == 2
    code, out, err = burst("db", "status", "--state", str(path))
    assert code == 0, err
    assert f"schema version 2; this burst's is {LATEST_VERSION}" in out and f"  3: {MIGRATIONS[2].description}" in out
    with pytest.raises(SchemaTooOld):  # every other read-only open still refuses the older schema
        Store.open(path, read_only=True)


def test_dry_run_prints_the_statements_and_leaves_the_version_then_upgrade_applies_them(tmp_path: Path) -> None:
    path = tmp_path / "burst.db"
    Store.open(path, target_version=3).close()
    code, out, err = burst("db", "upgrade", "--dry-run", "--state", str(path))
    assert code == 0, err
    for migration in MIGRATIONS[3:]:
        assert f"-- {migration.version}: {migration.description}" in out
        assert all(statement in out for statement in migration.statements)
    assert "job_losses" not in out, "migration 3 is already applied: it is not shown"
    code, out, err = burst("db", "upgrade", "--dry-run", "--json", "--state", str(path))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["dry_run"] and doc["schema_version"] == 3
    assert [(p["version"], p["statements"]) for p in doc["pending"]] == [
        (m.version, list(m.statements)) for m in MIGRATIONS[3:]]
    assert file_version(path) == 3, "a dry run writes nothing"

    code, out, err = burst("db", "upgrade", "--state", str(path), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["from_version"], doc["schema_version"]) == (3, LATEST_VERSION)
    assert [a["version"] for a in doc["applied"]] == list(range(4, LATEST_VERSION + 1))
    assert file_version(path) == LATEST_VERSION
    with Store.open(path, read_only=True) as store:  # the upgraded store reads as any current one
        assert store.schema_version == LATEST_VERSION
    code, out, err = burst("db", "upgrade", "--state", str(path))
    assert code == 0, err
    assert "up to date, nothing to apply" in out


def test_a_store_newer_than_this_burst_is_one_line_and_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "burst.db"
    Store.open(path).close()
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    raw.close()
    for args in (("status",), ("upgrade", "--dry-run"), ("upgrade",)):
        code, out, err = burst("db", *args, "--state", str(path))
        assert code == 1, (args, out)
        assert err.strip().splitlines() == [
            f"Error: {path}: schema version {LATEST_VERSION + 1} is newer than this burst supports "
            f"({LATEST_VERSION}); upgrade burst"], args
    code, _, err = burst("run", "--state", str(path), "--duration", "1h", "--quiet")  # an older daemon
    assert code == 1
    assert err.strip().splitlines()[-1].endswith(f"({LATEST_VERSION}); upgrade burst"), err
    assert "Traceback" not in err
    assert file_version(path) == LATEST_VERSION + 1


def test_a_missing_store_is_one_line_and_nothing_is_created(tmp_path: Path) -> None:
    path = tmp_path / "none" / "burst.db"
    for args in (("status",), ("upgrade", "--dry-run"), ("upgrade",)):
        code, _, err = burst("db", *args, "--state", str(path))
        assert code == 1, args
        assert err.strip().splitlines() == [f"Error: {path}: no state file here (`burst run` creates it)"], args
    assert not path.parent.exists()


def test_dry_run_on_postgresql_shows_the_statements_as_postgresql_runs_them(pg_url: str) -> None:
    Store.open(pg_url, target_version=2).close()
    code, out, err = burst("db", "upgrade", "--dry-run", "--json", "--state", pg_url)
    assert code == 0, err
    doc = json.loads(out)
    assert [(p["version"], p["statements"]) for p in doc["pending"]] == [
        (m.version, [pg_ddl(s) for s in m.statements]) for m in MIGRATIONS[2:]]
    assert any('TEXT COLLATE "C"' in s for p in doc["pending"] for s in p["statements"])
    with Store.open(pg_url, read_only=True, older_schema=True) as store:
        assert store.schema_version == 2
    code, out, err = burst("db", "upgrade", "--state", pg_url, "--json")
    assert code == 0, err
    assert json.loads(out)["schema_version"] == LATEST_VERSION
    with Store.open(pg_url, read_only=True) as store:
        assert store.schema_version == LATEST_VERSION
