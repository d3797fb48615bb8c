"""What several `burst` commands share: reading an instant, a duration and a config from the command line, each
turned into one clear usage error."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from burst.state_option import StateLocation

if TYPE_CHECKING:
    from policies import BurstConfig

CONFIG_OPTION = click.option(
    "--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
    help="burst.yaml to run (default: the embedded quickstart).",
)
STATE_OPTION = click.option(
    "--state", "state", type=StateLocation(), default=None,
    help="The state store: a SQLite file, or a postgresql://user@host:port/database URL (default: the config's "
         "state_path; the quickstart's is in the per-user state directory, see burst run).",
)


def store_path(config_path: Path | None, state: Path | str | None) -> Path | str:
    """The state store a command reads: `--state`, else the config's `state_path`, else the quickstart's."""
    from burst.quickstart import state_path_for

    if state is None and config_path is not None:
        return load_config_option(config_path).state_file()
    return state_path_for(None, state)


def parse_at(at: str) -> datetime:
    """The instant `--at` gives (UTC when it names no offset), or a usage error saying what an instant looks like."""
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        raise click.BadParameter(f"{at!r} is not an ISO 8601 instant, e.g. 2026-03-02T10:30:00Z", param_hint="--at") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def parse_duration_option(value: str, hint: str) -> float:
    """The seconds a duration option (`hint`, e.g. --duration) gives, or a usage error naming the option."""
    from policies import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from None


def load_config_option(config_path: Path | None) -> BurstConfig:
    """The config at `config_path` (the quickstart's when None), or a ClickException with its FILE:LINE errors."""
    from burst.runtime import load_run_config
    from policies import PolicyValidationError

    try:
        return load_run_config(config_path)
    except PolicyValidationError as exc:
        raise click.ClickException("\n".join(str(e) for e in exc.errors)) from None


__all__ = ["load_config_option", "parse_at", "parse_duration_option"]
