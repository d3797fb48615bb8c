"""`burst init`, `burst config` and `burst policy`: start a config of your own, and check configs and policies
before a daemon runs them."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import click

INIT_HEADER = """\
# Your burst config, written by `burst init` from the quickstart: it runs as is (`burst run --config {file}`).
#
# As written, everything is simulated: the "sim" provider stands in for an on-prem rack and two cloud node
# groups, and jobs come from burst's seeded SYNTHETIC generator, not from a real workload. To make it yours:
# list your node groups (provider aws, gcp, libcloud or onprem, with their sections), replace
# `workload.synthetic` with your job source, set `clock: real`, and edit the tenants' policies in
# {policies}/ (one TENANT.yaml each). `burst config validate {file}` checks it all; `burst config schema`
# prints every key. State is kept in `state_path` (default burst.db beside this file).
#
"""


@click.command("init")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def init_cmd(directory: Path) -> None:
    """Write a working burst.yaml and its policy directory into DIRECTORY: the quickstart's simulated groups,
    tenants and synthetic workload, commented, ready for `burst run --config DIRECTORY/burst.yaml`.

    Refuses (exit 1, nothing written) when DIRECTORY already holds a burst.yaml or a policies directory.
    """
    from burst.runtime import quickstart_config_path

    source = quickstart_config_path()
    target, policies = directory / "burst.yaml", directory / "policies"
    taken = [p for p in (target, policies) if p.exists()]
    if taken:
        raise click.ClickException(f"{taken[0]} already exists; burst init writes into a directory without a "
                                   "burst.yaml or policies/ (nothing was written)")
    body = source.read_text()
    body = body[body.index("\ncluster:") + 1:] if "\ncluster:" in body else body  # the quickstart's own header goes
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source.parent / "policies", policies)
    target.write_text(INIT_HEADER.format(file=target, policies="policies") + body)
    click.echo(f"wrote {target} and {policies}/ ({len(list(policies.glob('*.yaml')))} tenant policies); run it with "
               f"`burst run --config {target}`")


@click.group("config")
def config_group() -> None:
    """burst.yaml: validate a file, print the schema of every key."""


@config_group.command("validate")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print {file, valid, errors, node_groups, tenants}.")
def config_validate(file: Path, as_json: bool) -> None:
    """Validate FILE as a burst.yaml and the tenant policies it names: every FILE:LINE error, exit 1 on any.

    The checks a daemon makes before it starts (keys and values, node groups and their prices, the policy
    directory), without opening its state store or any provider.
    """
    from burst.catalog import UnknownInstanceType
    from burst.runtime import ConfigError, validate_config
    from policies import PolicyValidationError, load_config, validate_policy_dir

    errors: list[str] = []
    groups, tenants = 0, 0
    try:
        config = load_config(file)
        validate_config(config, file)
        groups = len(config.node_groups_model())
        policy_errors = validate_policy_dir(config.policies_path())
        errors += [str(e) for e in policy_errors]
        if not policy_errors:
            from policies import load_policy_dir

            tenants = len(load_policy_dir(config.policies_path()))
    except PolicyValidationError as exc:
        errors += [str(e) for e in exc.errors]
    except (ConfigError, UnknownInstanceType, ValueError) as exc:
        errors.append(f"{file}: {exc}")
    if as_json:
        click.echo(json.dumps({"file": str(file), "valid": not errors, "errors": errors, "node_groups": groups,
                               "tenants": tenants}, indent=2))
    else:
        for line in errors:
            click.echo(line, err=True)
        if not errors:
            click.echo(f"{file}: valid ({groups} node group(s), {tenants} tenant(s))")
    if errors:
        sys.exit(1)


@config_group.command("schema")
def config_schema() -> None:
    """Print the JSON Schema of burst.yaml (every key, its type, default and description)."""
    from policies import config_json_schema

    click.echo(json.dumps(config_json_schema(), indent=2, sort_keys=True))


@click.group("policy")
def policy_group() -> None:
    """Tenant policy files: validate them, print their schema."""


@policy_group.command("validate")
@click.argument("directory", type=click.Path(path_type=Path))
def policy_validate(directory: Path) -> None:
    """Validate every tenant policy file in DIRECTORY; one FILE:LINE error per line, non-zero on any.

    A directory with no tenant file (*.yaml, *.yml) and an empty file are errors too.
    """
    from policies import policy_files, validate_policy_dir

    errors = validate_policy_dir(directory)
    for err in errors:
        click.echo(str(err), err=True)
    if errors:
        sys.exit(1)
    count = len(policy_files(directory))
    if not count:
        click.echo(f"{directory}:1: -: no tenant policy file (TENANT.yaml or TENANT.yml) to validate", err=True)
        sys.exit(1)
    click.echo(f"{directory}: {count} tenant policy file(s) valid")


@policy_group.command("schema")
def policy_schema() -> None:
    """Print the JSON Schema of a tenant policy file."""
    from policies import policy_json_schema

    click.echo(json.dumps(policy_json_schema(), indent=2, sort_keys=True))


__all__ = ["config_group", "init_cmd", "policy_group"]
