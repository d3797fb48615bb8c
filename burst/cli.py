"""The `burst` command line."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

import burst


@click.group()
@click.version_option(burst.__version__, prog_name="burst")
def main() -> None:
    """burst: hybrid-cloud elastic burst controller for GPU fleets."""


@main.group()
def policy() -> None:
    """Tenant policy files: validate them, print their schema."""


@policy.command("validate")
@click.argument("directory", type=click.Path(path_type=Path))
def policy_validate(directory: Path) -> None:
    """Validate every tenant policy file in DIRECTORY; one FILE:LINE error per line, non-zero on any."""
    from policies import validate_policy_dir

    errors = validate_policy_dir(directory)
    for err in errors:
        click.echo(str(err), err=True)
    if errors:
        sys.exit(1)
    click.echo(f"{directory}: policies valid")


@policy.command("schema")
def policy_schema() -> None:
    """Print the JSON Schema of a tenant policy file."""
    from policies import policy_json_schema

    click.echo(json.dumps(policy_json_schema(), indent=2, sort_keys=True))


@main.command("plan")
@click.option("--snapshot", "snapshot_path", type=click.Path(exists=True, path_type=Path), required=True,
              help="Snapshot JSON (groups, nodes, jobs, targets) to plan from.")
@click.option("--policies", "policies_dir", type=click.Path(path_type=Path), default=None,
              help="Directory of tenant policy files (default: every tenant gets the default policy).")
@click.option("--at", "at", default=None, help="Plan as of this ISO instant (default: now, UTC).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as one JSON object.")
def plan_cmd(snapshot_path: Path, policies_dir: Path | None, at: str | None, as_json: bool) -> None:
    """One dry-run plan from a snapshot file, printed diff-style with each action's reason."""
    from burst.catalog import Catalog
    from burst.codec import CodecError, snapshot_from_json
    from burst.planner import PlanIds, plan
    from policies import PolicyValidationError, load_policy_dir

    try:
        snap = snapshot_from_json(json.loads(snapshot_path.read_text()))
    except (CodecError, ValueError) as exc:
        raise click.ClickException(f"{snapshot_path}: {exc}") from None
    pols = {}
    if policies_dir is not None:
        try:
            pols = load_policy_dir(policies_dir)
        except PolicyValidationError as exc:
            raise click.ClickException("\n".join(str(e) for e in exc.errors)) from None
    now = datetime.fromisoformat(at) if at else datetime.now(UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    try:
        result = plan(snap, [], pols, Catalog.load(), now=now, ids=PlanIds(f"plan-{now:%Y%m%dT%H%M%S}"))
    except LookupError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
        return
    console = Console()
    table = Table(title=f"plan {result.id} at {result.at.isoformat()}")
    for col in ("", "kind", "target", "count", "reason"):
        table.add_column(col)
    signs = {"scale_up": "+", "place_job": "+", "scale_down": "-", "terminate_nodes": "-", "reclaim_job": "-"}
    for a in result.actions:
        table.add_row(signs.get(a.kind.value, "~"), a.kind.value, a.target, "" if a.count is None else str(a.count), a.reason)
    for h in result.holds:
        table.add_row("=", "hold", h.subject, "", h.reason)
    console.print(table)
    console.print(f"{len(result.actions)} action(s), {len(result.holds)} hold(s)")


if __name__ == "__main__":
    main()
