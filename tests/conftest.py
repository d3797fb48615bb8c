import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def private_state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test (and every process it starts) keeps the quickstart's per-user state in its own directory."""
    home = tmp_path_factory.mktemp("xdg-state")
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def pg_server():  # type: ignore[no-untyped-def]
    """One real PostgreSQL server for the whole run (see tests/pg_server.py); skipped where not installed."""
    from pg_server import start_server

    server = start_server()
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server) -> str:  # type: ignore[no-untyped-def]
    """A fresh, empty database on the test server: its postgresql:// URL."""
    return str(pg_server.fresh_database())


@pytest.fixture(params=["sqlite", "postgresql"])
def state_location(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path:
    """Where a store lives, once per backend: a SQLite file, or a fresh database on a real PostgreSQL server."""
    if request.param == "sqlite":
        return tmp_path / "state" / "burst.db"
    return str(request.getfixturevalue("pg_url"))
