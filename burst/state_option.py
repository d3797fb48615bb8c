"""The ``--state`` option's type (a SQLite file path, or a ``postgresql://`` URL kept as written), and how a
command opens the store it names."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from burst.store_pg import parse_location

if TYPE_CHECKING:
    from burst.state import Store


class StateLocation(click.ParamType):  # type: ignore[type-arg]
    """Decides what a ``--state`` value names: a URL naming a PostgreSQL server stays text, else it is a path."""

    name = "PATH|URL"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path | str:
        if isinstance(value, Path):
            return value
        text = str(value)
        if not text.strip():
            self.fail("must not be empty", param, ctx)
        location = parse_location(text)
        if isinstance(location, Path) and location.is_dir():
            self.fail(f"{text} is a directory; give the state file inside it", param, ctx)
        return location


def open_for_command(path: Path | str, *, read_only: bool) -> Store:
    """The store at `path` for a command, or a ClickException saying in one line why not: a damaged, missing or
    unwritable file, an unreachable server, or a schema only `burst run` upgrades.

    `read_only` (every command that only reads: jobs, explain, usage, cost) never creates, truncates,
    checkpoints or deletes the file or its write-ahead log, so it is safe beside a running daemon and on a
    store left by a crash.
    """
    from burst.state import MissingStore, SchemaTooNew, SchemaTooOld, Store
    from burst.store_files import DamagedStore
    from burst.store_pg import StoreUnavailable

    try:
        return Store.open(path, read_only=read_only)
    except (DamagedStore, StoreUnavailable, MissingStore, SchemaTooOld, SchemaTooNew) as exc:
        raise click.ClickException(str(exc)) from None


__all__ = ["StateLocation", "open_for_command"]
