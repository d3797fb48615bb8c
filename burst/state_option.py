"""The ``--state`` option's type: a SQLite file path, or a ``postgresql://`` URL kept as written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from burst.store_pg import parse_location


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


__all__ = ["StateLocation"]
