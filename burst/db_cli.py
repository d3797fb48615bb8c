"""`burst db`: the state store's schema version, the migrations this burst would apply to it, and applying them.

`burst run` migrates the store it opens; `burst db upgrade` applies the same
migrations (`burst.store.base.StoreBase._migrate`, each in its own
transaction under the write lock) without starting a daemon, and
`--dry-run` prints them, SQL included, writing nothing. `burst db status`
reads the version only: it never writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from burst.state_option import StateLocation
from burst.store.schema import LATEST_VERSION, MIGRATIONS, Migration
from burst.store_pg import is_url, pg_ddl, shown


def pending_migrations(version: int) -> list[Migration]:
    """The migrations a store at schema `version` lacks, oldest first (none when it is at or past this burst's)."""
    return [m for m in MIGRATIONS if m.version > version]


def migration_sql(migration: Migration, *, postgres: bool) -> list[str]:
    """`migration`'s statements as they run on the store: as written on SQLite, through `pg_ddl` on PostgreSQL."""
    return [pg_ddl(s) if postgres else s for s in migration.statements]


def _stored_version(path: Path | str) -> int:
    """The schema version of the store at `path`, read without writing and without refusing an older one: a
    missing, damaged or unreachable store, or a newer schema, is a ClickException of one line."""
    from burst.state import MissingStore, SchemaTooNew, Store
    from burst.store_files import DamagedStore
    from burst.store_pg import StoreUnavailable

    try:
        with Store.open(path, read_only=True, older_schema=True) as store:
            return store.schema_version
    except (DamagedStore, StoreUnavailable, MissingStore, SchemaTooNew) as exc:
        raise click.ClickException(str(exc)) from None


def _location(config_path: Path | None, state: Path | str | None) -> Path | str:
    from burst.quickstart import state_path_for

    return state_path_for(config_path, state)


def _describe(migration: Migration, *, postgres: bool, with_sql: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {"version": migration.version, "description": migration.description}
    if with_sql:
        doc["statements"] = migration_sql(migration, postgres=postgres)
    return doc


CONFIG_OPTION = click.option(
    "--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
    help="burst.yaml whose state_path names the store (default: the quickstart's).")
STATE_OPTION = click.option(
    "--state", "state", type=StateLocation(), default=None,
    help="The state store: a SQLite file or a postgresql:// URL (default: the config's state_path, or the "
         "quickstart's).")
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


@click.group("db")
def db_group() -> None:
    """The state store's schema: its version, the migrations pending, and applying them."""


@db_group.command("status")
@CONFIG_OPTION
@STATE_OPTION
@JSON_OPTION
def db_status(config_path: Path | None, state: Path | str | None, as_json: bool) -> None:
    """Print the store's schema version, this burst's latest, and the migrations pending (version and description).

    Writes nothing: an older store is read, not migrated. A missing store, or one newer than this burst, is one
    line and exit 1.
    """
    path = _location(config_path, state)
    version = _stored_version(path)
    pending = pending_migrations(version)
    if as_json:
        click.echo(json.dumps({"state": shown(path), "schema_version": version, "latest_version": LATEST_VERSION,
                               "pending": [_describe(m, postgres=False, with_sql=False) for m in pending]}, indent=2))
        return
    click.echo(f"{shown(path)}: schema version {version}; this burst's is {LATEST_VERSION}")
    if not pending:
        click.echo("up to date")
        return
    click.echo(f"{len(pending)} migration(s) pending (`burst db upgrade` or `burst run` applies them):")
    for m in pending:
        click.echo(f"  {m.version}: {m.description}")


@db_group.command("upgrade")
@CONFIG_OPTION
@STATE_OPTION
@click.option("--dry-run", is_flag=True, help="Print each pending migration and its SQL; write nothing.")
@JSON_OPTION
def db_upgrade(config_path: Path | None, state: Path | str | None, dry_run: bool, as_json: bool) -> None:
    """Apply the migrations the store lacks, as `burst run` does on start (safe beside a running daemon: each
    migration is applied once, under the store's write lock).

    --dry-run prints each pending migration's version, description and SQL statements as they would run on
    this store (PostgreSQL's as adapted for it) and writes nothing. A missing store is one line and exit 1
    (nothing is created: `burst run` creates a store); so is one newer than this burst.
    """
    from burst.state_option import open_for_command

    path = _location(config_path, state)
    before = _stored_version(path)
    pending = pending_migrations(before)
    postgres = is_url(path)
    if dry_run:
        if as_json:
            click.echo(json.dumps({"state": shown(path), "schema_version": before, "latest_version": LATEST_VERSION,
                                   "dry_run": True,
                                   "pending": [_describe(m, postgres=postgres, with_sql=True) for m in pending]},
                                  indent=2))
            return
        click.echo(f"{shown(path)}: schema version {before}; would apply {len(pending)} migration(s) "
                   f"to reach {LATEST_VERSION} (dry run: nothing written)")
        for m in pending:
            click.echo(f"-- {m.version}: {m.description}")
            for statement in migration_sql(m, postgres=postgres):
                click.echo(statement.rstrip() + ";")
        return
    if pending:
        open_for_command(path, read_only=False).close()  # the writer's open migrates, as `burst run`'s does
    after = _stored_version(path)
    applied = [m for m in MIGRATIONS if before < m.version <= after]
    if as_json:
        click.echo(json.dumps({"state": shown(path), "from_version": before, "schema_version": after,
                               "latest_version": LATEST_VERSION,
                               "applied": [_describe(m, postgres=postgres, with_sql=False) for m in applied]},
                              indent=2))
        return
    if not applied:
        click.echo(f"{shown(path)}: schema version {after}: up to date, nothing to apply")
        return
    click.echo(f"{shown(path)}: schema version {before} -> {after}")
    for m in applied:
        click.echo(f"  applied {m.version}: {m.description}")


__all__ = ["db_group", "migration_sql", "pending_migrations"]
