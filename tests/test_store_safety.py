"""No silent fresh start, one writer per store, a broken store that says so: the real CLI, SQLite files, a real
daemon process and a real PostgreSQL server."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from builders import T0, job
from click.testing import CliRunner, Result

from burst.api.server import start_api
from burst.cli import main
from burst.runtime import build_runtime, load_run_config
from burst.state import Store
from burst.store_lock import StoreHeld, hold_writer, lock_path
from policies import BurstConfig


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def listing(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` and its bytes (what a command must leave as it was), but the writer lock's file,
    which a start creates once and never removes (burst.store_lock)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


@pytest.fixture
def crashed(tmp_path: Path) -> Path:
    """A state file killed before its first checkpoint, then found at 0 bytes: all of it is in the -wal."""
    path = tmp_path / "burst.db"
    code = (
        "import os, sys\n"
        "from builders import T0, job\n"
        "from burst.state import Store\n"
        f"store = Store.open({str(path)!r})\n"
        "for i in range(108):\n"
        "    store.add_job(job(f'j{i}'), at=T0)\n"
        "os._exit(0)  # as kill -9 leaves it: no checkpoint, no close\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    wal = path.with_name("burst.db-wal")
    assert wal.stat().st_size > 0
    path.write_bytes(b"")
    return path


def test_an_empty_file_with_its_log_beside_it_is_refused_and_no_command_touches_either(crashed: Path) -> None:
    # Opening it, even read-only, was what let SQLite throw the log away: `burst jobs` exited 0 with 0 jobs.
    wal = crashed.with_name("burst.db-wal")
    log = wal.read_bytes()
    for args in (["jobs", "--state", str(crashed)], ["explain", "j1", "--state", str(crashed)],
                 ["usage", "--state", str(crashed)], ["run", "--quiet", "--duration", "1h", "--state", str(crashed)]):
        result = cli(*args)
        assert result.exit_code == 1, (args, result.output)
        [line] = result.output.strip().splitlines()
        assert "is empty (0 bytes) but its write-ahead log burst.db-wal" in line and "--fresh" in line, line
        assert crashed.stat().st_size == 0 and wal.read_bytes() == log, args


def test_fresh_moves_the_empty_file_and_its_log_aside_whole(crashed: Path) -> None:
    log = crashed.with_name("burst.db-wal").read_bytes()
    result = cli("run", "--quiet", "--duration", "1h", "--state", str(crashed), "--fresh")
    assert result.exit_code == 0, result.output
    [aside] = crashed.parent.glob("burst.db.damaged-*-wal")
    assert aside.read_bytes() == log


@pytest.mark.parametrize("left", ["its write-ahead log", "its backups"])
def test_a_missing_file_with_an_earlier_ones_log_or_backups_beside_it_is_not_a_fresh_start(
    tmp_path: Path, left: str
) -> None:
    path = tmp_path / "burst.db"
    assert cli("run", "--quiet", "--duration", "2h", "--state", str(path)).exit_code == 0
    if left == "its write-ahead log":
        shutil.rmtree(path.with_name("burst.db.backups"))
        path.with_name("burst.db-wal").write_bytes(b"\0" * 4096)
    path.unlink()
    before = listing(tmp_path)
    result = cli("run", "--quiet", "--duration", "1h", "--state", str(path))
    assert result.exit_code == 1, result.output
    [line] = result.output.strip().splitlines()
    assert f"{path}: state file is missing but" in line and "--fresh" in line, line
    assert not path.exists() and listing(tmp_path) == before
    assert cli("run", "--quiet", "--duration", "1h", "--state", str(path), "--fresh").exit_code == 0
    assert path.exists()


@pytest.fixture
def quickstart_state(tmp_path: Path) -> Path:
    path = tmp_path / "burst.db"
    assert cli("run", "--quiet", "--duration", "2h", "--state", str(path)).exit_code == 0
    return path


def test_read_only_commands_create_checkpoint_and_delete_nothing(quickstart_state: Path, tmp_path: Path) -> None:
    before = listing(tmp_path)
    [some] = [j.id for j in Store.open(quickstart_state, read_only=True).jobs()[:1]]
    for args in (["jobs", "--json"], ["explain", some], ["usage", "--json"], ["plan", "--json"]):
        result = cli(*args, "--state", str(quickstart_state))
        assert result.exit_code == 0, (args, result.output)
        assert listing(tmp_path) == before, f"burst {args[0]} changed the state directory"


def test_plan_and_jobs_on_a_config_with_no_state_yet_create_no_state_file(tmp_path: Path) -> None:
    config = tmp_path / "burst.yaml"
    config.write_text(Path("burst/data/quickstart/burst.yaml").read_text())
    shutil.copytree("burst/data/quickstart/policies", tmp_path / "policies")
    assert cli("plan", "--config", str(config), "--json").exit_code == 0
    result = cli("jobs", "--config", str(config))
    assert result.exit_code == 1 and "no state file" in result.output
    assert not (tmp_path / "burst.db").exists() and not list(tmp_path.glob("burst.db*"))


def test_a_start_that_fails_writes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "burst.yaml"
    config.write_text(Path("burst/data/quickstart/burst.yaml").read_text()
                      + "api:\n  agent_tokens: bad-tokens.yaml\n")  # refused after the store is opened
    (tmp_path / "bad-tokens.yaml").write_text("- not a mapping of node id to token\n")
    shutil.copytree("burst/data/quickstart/policies", tmp_path / "policies")
    result = cli("run", "--quiet", "--duration", "1h", "--config", str(config))
    assert result.exit_code == 1 and "agent_tokens" in result.output, result.output
    assert not [p for p in tmp_path.glob("burst.db*") if p.suffix != ".lock"], "no state file, log or index"
    good = tmp_path / "good.db"
    assert cli("run", "--quiet", "--duration", "1h", "--state", str(good)).exit_code == 0
    kept = good.read_bytes()
    result = cli("run", "--quiet", "--duration", "1h", "--config", str(config), "--state", str(good), "--fresh")
    assert result.exit_code == 1, result.output
    assert good.read_bytes() == kept and not list(tmp_path.glob("good.db.damaged-*")), "--fresh undone"


def has_jobs(path: Path) -> bool:
    """Whether the store at `path` is migrated and holds jobs yet (a daemon starting may be half way)."""
    try:
        with Store.open(path, read_only=True) as store:
            return bool(store.job_counts())
    except Exception:
        return False


@pytest.fixture
def running_daemon(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A real `burst run` process on the quickstart, running until stopped, and its state file."""
    path = tmp_path / "burst.db"
    proc = subprocess.Popen([sys.executable, "-c", "from burst.cli import main; main()", "run", "--quiet", "--state",
                             str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while str(proc.pid) not in (lock_path(path).read_text() if lock_path(path).exists() else ""):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr and proc.stderr.read()
        time.sleep(0.05)
    while not has_jobs(path):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    yield proc, path
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)


def test_a_second_daemon_on_a_held_store_is_refused_naming_the_holder(running_daemon) -> None:
    # Two daemons on one file both ran and both acted (680 ticks side by side, 3,731 requeues).
    proc, path = running_daemon
    result = cli("run", "--quiet", "--duration", "1h", "--state", str(path))
    assert result.exit_code == 1, result.output
    [line] = result.output.strip().splitlines()
    assert f"PID {proc.pid} on host {socket.gethostname()}" in line and "leader election" in line, line
    assert proc.poll() is None, "the holder runs on"
    assert cli("jobs", "--json", "--state", str(path)).exit_code == 0, "reads work beside the daemon"


def test_with_leader_election_a_second_daemon_is_a_standby_not_refused(tmp_path: Path) -> None:
    config = load_run_config(None)
    def elected(holder: str) -> BurstConfig:
        return config.model_copy(update={"leader": config.leader.model_copy(update={"enabled": True,
                                                                                  "holder": holder})})

    first = build_runtime(elected("a"), state_path=tmp_path / "burst.db")
    try:
        first.run(until=first.now() + timedelta(minutes=5), realtime=False)
        second = build_runtime(elected("b"), state_path=tmp_path / "burst.db")
        try:
            reports = []
            second.run(until=second.now() + timedelta(minutes=5), realtime=False, on_tick=reports.append)
            assert reports and all(r.standby for r in reports)
        finally:
            second.close()
        with pytest.raises(StoreHeld, match="stop that daemon first, or turn leader election on"):
            build_runtime(config, state_path=tmp_path / "burst.db")  # without election: not beside them
    finally:
        first.close()
    alone = build_runtime(config, state_path=tmp_path / "burst.db")
    try:
        with pytest.raises(StoreHeld, match="which runs without leader election"):
            build_runtime(elected("c"), state_path=tmp_path / "burst.db")
    finally:
        alone.close()


def test_a_postgresql_store_has_one_writer_without_leader_election(pg_url: str) -> None:
    held = hold_writer(pg_url, "host-a:1234")
    try:
        with pytest.raises(StoreHeld, match="PID 1234 on host host-a"):
            hold_writer(pg_url, "host-b:99")
        with pytest.raises(StoreHeld, match="PID 1234 on host host-a"):
            build_runtime(load_run_config(None), state_path=pg_url)
    finally:
        held.release()
    second = hold_writer(pg_url, "host-b:99")
    try:
        assert second.check() is None
    finally:
        second.release()


def test_a_writer_whose_session_was_lost_takes_the_lock_again_or_names_the_new_holder(pg_url: str) -> None:
    import psycopg

    held = hold_writer(pg_url, "host-a:1")
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                      ("burst run host-a:1",))
        assert held.check() is None, "the lock was free: taken again"
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                      ("burst run host-a:1",))
        other = hold_writer(pg_url, "host-b:2")
        try:
            who = held.check()
            assert who is not None and "PID 2 on host host-b" in who
        finally:
            other.release()
            held.release()


def test_a_store_that_sqlite_opens_read_only_is_refused_at_start(quickstart_state: Path) -> None:
    # One header byte (the file format's write version) made every tick fail, 22 of them, and the run exit 0.
    for backup in quickstart_state.with_name("burst.db.backups").iterdir():
        backup.unlink()
    with quickstart_state.open("r+b") as f:
        f.seek(18)
        f.write(bytes([3]))
    before = quickstart_state.read_bytes()
    result = cli("run", "--quiet", "--duration", "1h", "--state", str(quickstart_state))
    assert result.exit_code == 1, result.output
    [line] = result.output.strip().splitlines()
    assert "state file cannot be written (attempt to write a readonly database)" in line, line
    assert quickstart_state.read_bytes() == before


def test_ticks_failing_past_the_limit_turn_readiness_false_and_end_the_run(tmp_path: Path) -> None:
    config = load_run_config(None).model_copy(update={"loop_max_failing": 300.0})
    runtime = build_runtime(config, state_path=tmp_path / "burst.db")
    api = start_api(runtime, "127.0.0.1:0", tokens_dir=tmp_path / "tokens")
    try:
        good = runtime.run(until=runtime.now() + timedelta(minutes=10), realtime=False)
        assert good.gave_up is None and httpx.get(f"{api.url}/readyz").status_code == 200
        runtime.store.close()  # every tick from here fails: the store is gone from under the loop
        start = runtime.now()
        stats = runtime.run(until=start + timedelta(hours=2), realtime=False)
        assert stats.gave_up is not None and "every tick failed for" in stats.gave_up
        assert timedelta(seconds=300) < runtime.now() - start <= timedelta(seconds=300 + 2 * config.loop_interval)
        ready = httpx.get(f"{api.url}/readyz")
        assert ready.status_code == 503 and ready.json()["ready"] is False
    finally:
        api.stop()
        runtime.close()


def test_the_recovery_hint_skips_a_damaged_backup(quickstart_state: Path) -> None:
    saved = sorted(quickstart_state.with_name("burst.db.backups").glob("*.db"), key=lambda p: p.stat().st_mtime_ns)
    assert len(saved) >= 2
    saved[-1].write_bytes(os.urandom(8192))  # the newest backup is damaged
    quickstart_state.write_bytes(b"")
    result = cli("run", "--quiet", "--duration", "1h", "--state", str(quickstart_state))
    assert result.exit_code == 1, result.output
    assert f"cp {saved[-2]} {quickstart_state}" in result.output and "1 newer backup(s) are damaged" in result.output
    assert str(saved[-1]) not in result.output


def test_backups_after_fresh_on_a_simulated_clock_are_kept_over_the_old_runs(quickstart_state: Path) -> None:
    # The new run's simulated clock starts again at sim_start, before the old run's copies: named by it, they
    # sorted oldest and were pruned at once (and the old copies' later times held the next backup off).
    folder = quickstart_state.with_name("burst.db.backups")
    old = set(folder.glob("*.db"))
    assert cli("run", "--quiet", "--duration", "1h", "--state", str(quickstart_state), "--fresh").exit_code == 0
    new = set(folder.glob("*.db")) - old
    assert new, "the fresh run's backup is kept"
    newest = max(folder.glob("*.db"), key=lambda p: p.stat().st_mtime_ns)
    assert newest in new and min(new) < min(old), "named earlier on the restarted clock, kept as the newest"


def test_a_read_only_store_refuses_writes_and_a_missing_one_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "burst.db"
    with Store.open(path) as store:
        store.add_job(job("a"), at=T0)
    with Store.open(path, read_only=True) as store:
        assert [j.id for j in store.jobs()] == ["a"]
        with pytest.raises(Exception, match="readonly"):
            store.add_job(job("b"), at=T0)
    with pytest.raises(FileNotFoundError):
        Store.open(tmp_path / "none.db", read_only=True)
    assert not (tmp_path / "none.db").exists()


def test_a_database_outage_is_one_line_per_failed_tick_and_the_daemon_recovers_on_its_own(
    pg_url: str, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    # A 12 s PostgreSQL outage gave 87 tracebacks before the daemon recovered.
    import psycopg

    database = pg_url.rsplit("/", 1)[1]
    runtime = build_runtime(load_run_config(None), state_path=pg_url)
    api = start_api(runtime, "127.0.0.1:0", tokens_dir=tmp_path / "tokens")
    try:
        assert runtime.run(until=runtime.now() + timedelta(minutes=5), realtime=False).errors == 0
        assert httpx.get(f"{api.url}/readyz").status_code == 200
        with psycopg.connect(pg_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (database,))
            caplog.clear()
            down = runtime.run(until=runtime.now() + timedelta(minutes=5), realtime=False)
            during = httpx.get(f"{api.url}/readyz")
            admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        assert during.status_code == 503 and during.json()["failing"] is True
        failed = [r for r in caplog.records if r.getMessage().startswith("tick failed")]
        assert down.errors > 0 and len(failed) == down.errors
        assert all(r.exc_info is None and "unavailable" in r.getMessage() for r in failed), failed[0].getMessage()
        up = runtime.run(until=runtime.now() + timedelta(minutes=5), realtime=False)
        assert up.errors == 0 and up.gave_up is None
        assert httpx.get(f"{api.url}/readyz").status_code == 200, "ready again once a tick succeeds"
    finally:
        api.stop()
        runtime.close()


def test_a_read_only_command_on_an_empty_postgresql_database_creates_no_schema(pg_url: str) -> None:
    result = cli("jobs", "--state", pg_url)
    assert result.exit_code == 1 and "no burst state in this database" in result.output, result.output
    import psycopg

    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('burst_schema')").fetchone() == (None,), "nothing was created"
    assert cli("submit", "--state", pg_url, "--tenant", "prod", "--gpus", "1").exit_code == 0, "a writer migrates it"
