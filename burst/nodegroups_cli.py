"""`burst nodegroups import`: the node groups of a `terraform output -json` file, merged into burst.yaml.

Every output whose value is a `burst_node_group` object (or holds some, in a
list or map), in DESIGN.md's handshake shape `{id, provider, region, zone(s),
tier, capacity_type, gpu_model, gpus_per_node, instance_types, min_size,
max_size, warm_pool}`, becomes a `node_groups` entry of burst.yaml, matched by
id: Terraform's fields replace the entry's, the entry's other settings
(boot_latency, scale_down_cooldown, a warm pool's max_age, ...) stay. The
`burst_controller` output gives the cluster, the aws section's
events_queue_url and, from its service account, the gcp section's project
(the gcp groups' zones are added to `gcp.zones`; a gcp group has one zone,
since burst manages zonal MIGs only). Outputs of any other shape are listed as ignored.

Finding the group objects inside outputs reuses the walker of
`providers.aws.discovery`, which reads the same files for `aws.terraform_outputs`.
Nothing is written unless every output is consistent and the merged document
passes burst.yaml's schema; the file is replaced atomically.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import yaml

from burst.model import CapacityType, Tier, WarmState

REQUIRED_FIELDS = (
    "id", "provider", "region", "tier", "capacity_type", "gpu_model", "gpus_per_node", "instance_types",
    "min_size", "max_size",
)
"""The burst_node_group fields every group must have (zone(s) and warm_pool are optional)."""

MANAGED_KEYS = frozenset(
    {"id", "provider", "region", "zone", "tier", "capacity_type", "instance_type", "gpu_model", "gpus_per_node",
     "min_size", "max_size"}
)
"""node_groups keys Terraform owns: an import sets them, or removes them when the output has none (zone)."""

WARM_POOL_KEYS = ("state", "min_size", "max_prepared", "reuse_on_scale_in")
CONTROLLER_OUTPUT = "burst_controller"


class TerraformOutputError(ValueError):
    """An output that is not a consistent burst_node_group (the message names the file, output and field)."""


@dataclass(frozen=True)
class ImportedGroup:
    """One node group found in an output: where it was, its burst.yaml entry, and its instance types."""

    output: str
    entry: Mapping[str, Any]
    instance_types: tuple[str, ...]
    zones: tuple[str, ...]


@dataclass
class Outputs:
    """What a `terraform output -json` file holds for burst."""

    groups: list[ImportedGroup] = field(default_factory=list)
    controller: Mapping[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)


def _providers() -> tuple[str, ...]:
    from burst.provider_registry import provider_names

    return tuple(provider_names())


def _whole(value: Any, where: str, name: str, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or float(value) != int(value):
        raise TerraformOutputError(f"{where}: field `{name}`: {value!r} is not a whole number")
    if int(value) < low:
        raise TerraformOutputError(f"{where}: field `{name}`: {int(value)} is below {low}")
    return int(value)


def _choice(value: Any, where: str, name: str, allowed: Sequence[str], what: str) -> str:
    if value not in allowed:
        raise TerraformOutputError(f"{where}: field `{name}`: unknown {what} {value!r} (one of {', '.join(allowed)})")
    return str(value)


def _warm_pool(value: Any, where: str, capacity: str) -> dict[str, Any] | None:
    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        raise TerraformOutputError(f"{where}: field `warm_pool`: expected an object or null, got {value!r}")
    if capacity == CapacityType.SPOT.value:
        raise TerraformOutputError(f"{where}: field `warm_pool`: spot groups have no warm pool (on_demand only)")
    unknown = sorted(set(value) - set(WARM_POOL_KEYS))
    if unknown:
        raise TerraformOutputError(f"{where}: field `warm_pool.{unknown[0]}`: unknown (use {', '.join(WARM_POOL_KEYS)})")
    pool: dict[str, Any] = {}
    if value.get("state") is not None:
        pool["state"] = _choice(value["state"], where, "warm_pool.state", [s.value for s in WarmState], "warm state")
    for key in ("min_size", "max_prepared"):
        if value.get(key) is not None:
            pool[key] = _whole(value[key], where, f"warm_pool.{key}", low=0)
    if value.get("reuse_on_scale_in") is not None:
        if not isinstance(value["reuse_on_scale_in"], bool):
            raise TerraformOutputError(f"{where}: field `warm_pool.reuse_on_scale_in`: expected true or false")
        pool["reuse_on_scale_in"] = value["reuse_on_scale_in"]
    return pool


def group_entry(doc: Mapping[str, Any], source: str, output: str) -> ImportedGroup:
    """The burst.yaml `node_groups` entry one burst_node_group object describes; raises TerraformOutputError."""
    where = f"{source}: output {output}"
    missing = [k for k in REQUIRED_FIELDS if doc.get(k) is None]
    if missing:
        raise TerraformOutputError(
            f"{where}: field `{missing[0]}` is missing (a burst_node_group has {', '.join(REQUIRED_FIELDS)})"
        )
    provider = _choice(doc["provider"], where, "provider", _providers(), "provider")
    tier = _choice(doc["tier"], where, "tier", [t.value for t in Tier], "tier")
    capacity = _choice(doc["capacity_type"], where, "capacity_type", [c.value for c in CapacityType], "capacity type")
    for name in ("id", "region", "gpu_model"):
        if not isinstance(doc[name], str) or not doc[name]:
            raise TerraformOutputError(f"{where}: field `{name}`: expected a non-empty string, got {doc[name]!r}")
    types = doc["instance_types"]
    if not isinstance(types, list) or not types or not all(isinstance(t, str) and t for t in types):
        raise TerraformOutputError(f"{where}: field `instance_types`: expected a non-empty list of strings, got {types!r}")
    zones_raw = doc.get("zones", doc.get("zone"))
    zones_raw = [] if zones_raw is None else [zones_raw] if isinstance(zones_raw, str) else zones_raw
    if not isinstance(zones_raw, list) or not all(isinstance(z, str) for z in zones_raw):
        raise TerraformOutputError(f"{where}: field `zones`: expected a list of strings, got {zones_raw!r}")
    if provider == "gcp" and len(zones_raw) > 1:
        raise TerraformOutputError(
            f"{where}: field `zones`: gcp group {doc['id']!r} spans {len(zones_raw)} zones ({', '.join(zones_raw)}) "
            "but burst manages zonal MIGs only; give the gcp-gpu-node-group module one zone (one group per zone)"
        )
    min_size = _whole(doc["min_size"], where, "min_size", low=0)
    max_size = _whole(doc["max_size"], where, "max_size", low=0)
    if min_size > max_size:
        raise TerraformOutputError(f"{where}: field `min_size`: {min_size} is above max_size {max_size}")
    entry: dict[str, Any] = {
        "id": doc["id"], "provider": provider, "region": doc["region"], "tier": tier, "capacity_type": capacity,
        "instance_type": types[0], "gpu_model": doc["gpu_model"],
        "gpus_per_node": _whole(doc["gpus_per_node"], where, "gpus_per_node", low=1),
        "min_size": min_size, "max_size": max_size,
    }
    if len(zones_raw) == 1:
        entry["zone"] = zones_raw[0]
    pool = _warm_pool(doc.get("warm_pool"), where, capacity)
    if pool is not None:
        entry["warm_pool"] = pool
    _check_schema(entry, where)
    return ImportedGroup(output=output, entry=entry, instance_types=tuple(types), zones=tuple(zones_raw))


def _check_schema(entry: Mapping[str, Any], where: str) -> None:
    """The entry as burst.yaml's schema sees it (tier/capacity/provider rules, names, pool bounds)."""
    from pydantic import ValidationError

    from policies.config import NodeGroupDoc

    try:
        NodeGroupDoc.model_validate(dict(entry))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "-"
        raise TerraformOutputError(f"{where}: field `{loc}`: {err['msg'].removeprefix('Value error, ')}") from None


def read_outputs(path: Path) -> Outputs:
    """The node groups and controller of a `terraform output -json` file; raises TerraformOutputError."""
    from providers.aws.discovery import node_group_objects  # the walker aws.terraform_outputs uses too

    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise TerraformOutputError(
            f"{path}: cannot read terraform outputs ({exc}); run `terraform output -json > {path}`"
        ) from None
    if not isinstance(doc, dict):
        raise TerraformOutputError(f"{path}: not a `terraform output -json` object (a mapping of output names)")
    found = Outputs()
    seen: dict[str, str] = {}
    for name, output in doc.items():
        where = f"{path}: output {name}"
        if not isinstance(output, dict) or "value" not in output:
            raise TerraformOutputError(f"{where}: not in `terraform output -json` shape (an object with a `value`)")
        value = output["value"]
        if name == CONTROLLER_OUTPUT:
            found.controller = _controller(value, where)
            continue
        objects = list(node_group_objects(value))
        if not objects:
            if isinstance(value, dict) and ("provider" in value or "instance_types" in value):
                missing = "id" if "id" not in value else "capacity_type"
                raise TerraformOutputError(f"{where}: field `{missing}` is missing (a burst_node_group has "
                                           f"{', '.join(REQUIRED_FIELDS)})")
            found.ignored.append(name)
            continue
        for i, obj in enumerate(objects):
            label = name if len(objects) == 1 and isinstance(value, dict) else f"{name}[{i}]"
            group = group_entry(obj, str(path), label)
            gid = str(group.entry["id"])
            if gid in seen:
                raise TerraformOutputError(
                    f"{path}: output {label}: field `id`: duplicate node group id {gid!r} (also output {seen[gid]})"
                )
            seen[gid] = label
            found.groups.append(group)
    return found


def _controller(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TerraformOutputError(f"{where}: expected an object {{cluster, events_queue_url, role_arn | service_account}}")
    if not isinstance(value.get("cluster"), str) or not value["cluster"]:
        raise TerraformOutputError(f"{where}: field `cluster` is missing")
    url = value.get("events_queue_url")
    if url is not None and (not isinstance(url, str) or not url):
        raise TerraformOutputError(f"{where}: field `events_queue_url`: expected a URL or null, got {url!r}")
    return dict(value)


def _merge_entry(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """`old` with Terraform's fields from `new` (keys in old's order); a warm pool keeps old's other settings."""
    merged: dict[str, Any] = {}
    for key, value in old.items():
        if key in MANAGED_KEYS or key == "warm_pool":
            if key in new:
                merged[key] = new[key]
        else:
            merged[key] = value
    for key, value in new.items():
        merged.setdefault(key, value)
    if "warm_pool" in new and isinstance(old.get("warm_pool"), dict):
        merged["warm_pool"] = {**old["warm_pool"], **new["warm_pool"]}
    return merged


def merge(config: Mapping[str, Any], outputs: Outputs, *, source: str, target: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The burst.yaml document with the outputs merged in, and each group's change (added, updated, unchanged).

    Raises TerraformOutputError when the outputs contradict the file (another
    cluster, AWS groups in several regions or not in the aws section's region).
    """
    doc = dict(config)
    controller = outputs.controller
    if controller:
        cluster = controller["cluster"]
        if "cluster" in doc and doc["cluster"] != cluster:
            raise TerraformOutputError(
                f"{source}: output {CONTROLLER_OUTPUT}: field `cluster`: {cluster!r} is not {target}'s cluster "
                f"{doc['cluster']!r}; import into that cluster's burst.yaml"
            )
        doc["cluster"] = cluster
    existing = doc.get("node_groups") or []
    if not isinstance(existing, list):
        raise TerraformOutputError(f"{target}: node_groups is not a list")
    groups = [dict(g) if isinstance(g, dict) else g for g in existing]
    index = {g.get("id"): i for i, g in enumerate(groups) if isinstance(g, dict)}
    changes: dict[str, str] = {}
    for group in outputs.groups:
        gid = str(group.entry["id"])
        if gid in index:
            old = groups[index[gid]]
            new = _merge_entry(old, group.entry)
            changes[gid] = "unchanged" if new == old else "updated"
            groups[index[gid]] = new
        else:
            groups.append(dict(group.entry))
            index[gid] = len(groups) - 1
            changes[gid] = "added"
    doc["node_groups"] = groups
    aws_groups = [g for g in outputs.groups if g.entry["provider"] == "aws"]
    if aws_groups or (controller.get("events_queue_url") and isinstance(doc.get("aws"), dict)):
        aws = dict(doc.get("aws") or {})
        regions = sorted({str(g.entry["region"]) for g in aws_groups})
        if len(regions) > 1:
            raise TerraformOutputError(
                f"{source}: aws groups are in several regions ({', '.join(regions)}); burst.yaml's aws section has one"
            )
        if regions and aws.get("region") not in (None, regions[0]):
            first = next(g for g in aws_groups if g.entry["region"] == regions[0])
            raise TerraformOutputError(
                f"{source}: output {first.output}: field `region`: {regions[0]!r} is not {target}'s aws.region "
                f"{aws['region']!r}"
            )
        if regions:
            aws["region"] = regions[0]
        if controller.get("events_queue_url"):
            aws["events_queue_url"] = controller["events_queue_url"]
        doc["aws"] = aws
    gcp_groups = [g for g in outputs.groups if g.entry["provider"] == "gcp"]
    if gcp_groups:
        gcp = dict(doc.get("gcp") or {})
        project = gcp.get("project") or _project_of(controller.get("service_account"))
        if project:  # else burst.yaml needs a gcp section the outputs cannot give (the runtime says so)
            gcp["project"] = project
            zones_value = gcp.get("zones")
            old_zones: list[str] = [str(z) for z in zones_value] if isinstance(zones_value, list) else []
            if old_zones or not gcp.get("region"):
                gcp["zones"] = sorted({*old_zones, *(z for g in gcp_groups for z in g.zones)})
            doc["gcp"] = gcp
    return doc, changes


def _project_of(service_account: Any) -> str | None:
    """The project of a user-managed service account (NAME@PROJECT.iam.gserviceaccount.com), else None."""
    if not isinstance(service_account, str):
        return None
    _, _, domain = service_account.partition("@")
    project, _, rest = domain.partition(".")
    return project if project and rest == "iam.gserviceaccount.com" else None


def _read_config(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise TerraformOutputError(f"{path}: cannot read ({str(exc).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TerraformOutputError(f"{path}: expected a mapping of burst config keys")
    return data


def write_config(path: Path, doc: Mapping[str, Any], *, dry_run: bool) -> str:
    """Validate `doc` with burst.yaml's schema as the file it would be, then (unless dry_run) replace `path`.

    The document goes to a temporary file beside `path` (so relative paths
    resolve the same), is loaded with `load_config`, and is renamed over
    `path` only if it is valid: a failure leaves the old file as it was.
    Returns the YAML text.
    """
    from policies.config import load_config
    from policies.loader import PolicyValidationError

    text = yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False)
    directory = path.absolute().parent
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        try:
            load_config(tmp)
        except PolicyValidationError as exc:
            lines = [str(e).replace(str(tmp), str(path)) for e in exc.errors]
            raise TerraformOutputError(f"{path}: the merged config is invalid: {'; '.join(lines)}") from None
        if not dry_run:
            if path.exists():
                os.chmod(tmp, path.stat().st_mode & 0o7777)
            else:  # mkstemp's file is 0600; a new config gets the usual mode
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return text


def _document(outputs: Outputs, changes: Mapping[str, str], *, source: Path, config: Path, written: bool,
              dry_run: bool) -> dict[str, Any]:
    return {
        "terraform_output": str(source),
        "config": str(config),
        "dry_run": dry_run,
        "written": written,
        "controller": dict(outputs.controller) or None,
        "groups": [
            {"output": g.output, "change": changes.get(str(g.entry["id"]), "added"), **g.entry,
             "instance_types": list(g.instance_types), "zones": list(g.zones)}
            for g in outputs.groups
        ],
        "ignored_outputs": outputs.ignored,
    }


@click.group("nodegroups")
def nodegroups_group() -> None:
    """Node groups provisioned by Terraform: import them into burst.yaml."""


@nodegroups_group.command("import")
@click.option("--terraform-output", "source", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="`terraform output -json` file of the root module (e.g. terraform/examples/hybrid).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=Path("burst.yaml"),
              show_default=True, help="burst.yaml to merge the groups into (created if missing; comments are not kept).")
@click.option("--json", "as_json", is_flag=True, help="Print the groups found and what changed as one JSON object.")
@click.option("--dry-run", is_flag=True, help="Check and show the merge; write nothing.")
def import_cmd(source: Path, config_path: Path, as_json: bool, dry_run: bool) -> None:
    """Read the burst_node_group and burst_controller outputs and merge them into burst.yaml.

    Entries of node_groups are matched by id: Terraform's fields (provider,
    region, zone, tier, capacity type, instance type, GPUs, sizes, warm pool)
    replace theirs, other settings stay. The aws section gets the region and
    the events queue URL, the gcp section the project and the groups' zones. Any inconsistent output is an error naming the
    output and field, and nothing is written.
    """
    try:
        outputs = read_outputs(source)
        if not outputs.groups:
            raise TerraformOutputError(f"{source}: no burst_node_group outputs (outputs: "
                                       f"{', '.join(outputs.ignored) or 'none'})")
        doc, changes = merge(_read_config(config_path), outputs, source=str(source), target=str(config_path))
        write_config(config_path, doc, dry_run=dry_run)
    except TerraformOutputError as exc:
        raise click.ClickException(f"{exc}; nothing written") from None
    written = not dry_run
    if as_json:
        click.echo(json.dumps(_document(outputs, changes, source=source, config=config_path, written=written,
                                        dry_run=dry_run), indent=2))
        return
    _print_table(outputs, changes)
    if outputs.ignored:
        click.echo(f"ignored outputs (not burst_node_group): {', '.join(outputs.ignored)}")
    verb = "would write" if dry_run else "wrote"
    counts = {c: sum(1 for v in changes.values() if v == c) for c in ("added", "updated", "unchanged")}
    click.echo(f"{verb} {config_path}: {counts['added']} added, {counts['updated']} updated, "
               f"{counts['unchanged']} unchanged")


def _print_table(outputs: Outputs, changes: Mapping[str, str]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="node groups from terraform outputs")
    for col in ("output", "id", "provider", "region", "zones", "tier", "capacity", "GPUs", "instance types",
                "min", "max", "warm pool", "change"):
        table.add_column(col, justify="right" if col in ("min", "max") else "left")
    for g in outputs.groups:
        e = g.entry
        pool = e.get("warm_pool")
        pool_text = f"{pool.get('min_size', 0)}..{pool.get('max_prepared', 0)} {pool.get('state', 'stopped')}" if pool else "-"
        table.add_row(g.output, str(e["id"]), str(e["provider"]), str(e["region"]), ",".join(g.zones) or "-",
                      str(e["tier"]), str(e["capacity_type"]), f"{e['gpus_per_node']}x {e['gpu_model']}",
                      ",".join(g.instance_types), str(e["min_size"]), str(e["max_size"]), pool_text,
                      changes.get(str(e["id"]), "added"))
    Console(width=None if sys.stdout.isatty() else 200).print(table)
