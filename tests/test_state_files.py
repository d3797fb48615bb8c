"""The state file on disk: a damaged one is refused with one line and never silently replaced, --fresh starts
over on purpose, backups are taken online and restore, and files are private (the real CLI and SQLite)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from builders import T0, job
from click.testing import CliRunner, Result

from burst.api.tokens import load_api_tokens
from burst.cli import main
from burst.state import DamagedStore, Store


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["run", "--quiet", *args])


@pytest.fixture
def good_store(tmp_path: Path) -> Path:
    """A state file the quickstart daemon wrote for 3 simulated hours (jobs, nodes, ledgers), and its backups."""
    path = tmp_path / "burst.db"
    result = run("--duration", "3h", "--state", str(path))
    assert result.exit_code == 0, result.output
    return path


def damage(path: Path, kind: str) -> None:
    data = path.read_bytes()
    if kind == "zeroed":
        path.write_bytes(b"")
    elif kind == "truncated":
        path.write_bytes(data[: len(data) // 3])
    elif kind == "garbage header":
        path.write_bytes(os.urandom(100) + data[100:])
    elif kind == "text file":
        path.write_text("this is not a database\n" * 100)
    elif kind == "garbage in later pages":
        page = 4096
        path.write_bytes(data[: 2 * page] + os.urandom(len(data) - 2 * page))
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


@pytest.mark.parametrize("kind", ["zeroed", "truncated", "garbage header", "text file", "garbage in later pages"])
def test_a_damaged_state_file_is_refused_with_one_line_and_left_as_it_is(good_store: Path, kind: str) -> None:
    # A zeroed file used to start fresh without a word (the clock back at sim_start); the others gave a raw
    # sqlite3.DatabaseError traceback, or (garbage in later pages) a daemon whose every tick failed.
    for backup in good_store.with_name(good_store.name + ".backups").iterdir():
        backup.unlink()
    damage(good_store, kind)
    before = good_store.read_bytes()
    result = run("--duration", "1h", "--state", str(good_store))
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"Error: {good_store}: state file ") and "--fresh" in line and "no backup exists" in line
    assert good_store.read_bytes() == before, "never replaced"
    with pytest.raises(DamagedStore):
        Store.open(good_store)


def test_the_refusal_names_the_last_backup_and_restoring_it_works(good_store: Path) -> None:
    backups = sorted(good_store.with_name(good_store.name + ".backups").glob("*.db"))
    assert len(backups) == 3, "one an hour, the newest 3 kept"
    with Store.open(good_store) as store:
        jobs = {j.id for j in store.jobs()}
    damage(good_store, "zeroed")
    result = run("--duration", "1h", "--state", str(good_store))
    assert result.exit_code == 1 and f"cp {backups[-1]} {good_store}" in result.output, result.output
    shutil.copyfile(backups[-1], good_store)
    with Store.open(good_store) as store:
        restored = {j.id for j in store.jobs()}
    assert restored and restored <= jobs
    assert run("--duration", "1h", "--state", str(good_store)).exit_code == 0


def test_fresh_moves_the_damaged_file_aside_and_starts_over(good_store: Path) -> None:
    damage(good_store, "garbage header")
    before = good_store.read_bytes()
    result = run("--duration", "1h", "--state", str(good_store), "--fresh")
    assert result.exit_code == 0, result.output
    [aside] = good_store.parent.glob("burst.db.damaged-*")
    assert aside.read_bytes() == before
    with Store.open(good_store) as store:
        assert store.jobs()


def test_state_files_backups_and_token_dirs_are_private(tmp_path: Path) -> None:
    os.umask(0o022)
    path = tmp_path / "state" / "burst.db"
    with Store.open(path) as store:
        store.add_job(job("j", command=("secret",)), at=T0)
        backup = store.backup(T0)
        for p in (path, path.with_name("burst.db-wal"), path.with_name("burst.db-shm"), backup):
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    assert stat.S_IMODE(backup.parent.stat().st_mode) == 0o700
    loose = tmp_path / "loose.db"
    loose.touch(mode=0o644)
    loose.write_bytes(path.read_bytes())
    Store.open(loose).close()
    assert stat.S_IMODE(loose.stat().st_mode) == 0o600, "an existing file is tightened too"
    tokens = tmp_path / "tokens"
    tokens.mkdir(mode=0o755)
    load_api_tokens(tokens, ["prod"])
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o700
    load_api_tokens(tmp_path / "new-tokens", ["prod"])
    assert stat.S_IMODE((tmp_path / "new-tokens").stat().st_mode) == 0o700


def test_a_backup_is_a_consistent_copy_taken_while_the_store_is_open(tmp_path: Path) -> None:
    path = tmp_path / "burst.db"
    with Store.open(path) as store:
        for i in range(50):
            store.add_job(job(f"j{i}"), at=T0)
        first = store.backup(T0)
        store.add_job(job("later"), at=T0)
        with Store.open(first) as copy:
            assert len(copy.jobs()) == 50
        made = [store.backup(T0.replace(minute=m), keep=2) for m in range(1, 4)]
    kept = sorted(first.parent.glob("*.db"))
    assert kept == made[-2:]
