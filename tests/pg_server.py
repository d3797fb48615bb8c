"""A real PostgreSQL server for the tests: Debian's binaries, a temporary data directory, 127.0.0.1, a free port.

`initdb` refuses to run as root, and CI runs as root: then the server runs as
the unprivileged `postgres` user through `runuser`. The binaries come from
``/usr/lib/postgresql/*/bin`` (not on PATH on a clean machine). Where they are
missing the PostgreSQL tests skip, unless ``BURST_REQUIRE_POSTGRES=1`` (set by
`.ci/run`), which turns the skip into a failure.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REQUIRE_ENV = "BURST_REQUIRE_POSTGRES"
SUPERUSER = "burst"


def pg_bin_dir() -> Path | None:
    """The newest installed PostgreSQL's bin directory (Debian layout), or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    return found[-1].parent if found else None


def unavailable(reason: str) -> None:
    """Skip (or, where PostgreSQL is required, fail) the tests that need a server."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """A running server: its data directory, port, and a counter for fresh database names."""

    bin_dir: Path
    data_dir: Path
    port: int
    as_user: list[str]
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def fresh_database(self, prefix: str = "t") -> str:
        """Create an empty database; its URL."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
        return self.url(name)

    def stop(self) -> None:
        subprocess.run([*self.as_user, str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "immediate",
                        "stop"], capture_output=True, check=False)
        shutil.rmtree(self.data_dir, ignore_errors=True)


def start_server() -> PgServer:
    """initdb a temporary directory and start a server on 127.0.0.1 (trust auth, fsync off: test data only)."""
    bin_dir = pg_bin_dir()
    if bin_dir is None:
        unavailable("PostgreSQL is not installed (apt-get install postgresql)")
        raise AssertionError  # unreachable: unavailable() skips or fails
    data_dir = Path(tempfile.mkdtemp(prefix="burst-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(data_dir, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    init = subprocess.run([*as_user, str(bin_dir / "initdb"), "-D", str(data_dir), "-U", SUPERUSER, "--auth=trust",
                           "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"], capture_output=True, text=True)
    if init.returncode != 0:
        shutil.rmtree(data_dir, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {init.stderr.strip()}")
    for _ in range(5):
        port = _free_port()
        options = (f"-h 127.0.0.1 -p {port} -k {data_dir} -c fsync=off -c synchronous_commit=off "
                   "-c full_page_writes=off -c max_connections=200")
        started = subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data_dir), "-o", options,
                                  "-l", str(data_dir / "server.log"), "-w", "-t", "60", "start"],
                                 capture_output=True, text=True)
        if started.returncode == 0:
            return PgServer(bin_dir, data_dir, port, as_user)
    log = (data_dir / "server.log").read_text() if (data_dir / "server.log").exists() else ""
    shutil.rmtree(data_dir, ignore_errors=True)
    raise RuntimeError(f"postgres did not start: {started.stderr.strip()} {log[-2000:]}")
