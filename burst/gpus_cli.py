"""`burst gpus`: what NVML discovery sees on this node, like a focused `nvidia-smi -q` for scheduling."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from providers.onprem.discovery import DiscoveryResult


def _document(found: DiscoveryResult) -> dict[str, Any]:
    """The JSON form: every reading with its health verdict, the pairwise topology, the status line."""
    health = {g.uuid: g for g in (found.node.gpus if found.node else ())}
    gpus = []
    readings = {r.uuid: r for r in found.readings}
    for uuid, gpu in health.items():
        entry: dict[str, Any] = {"index": gpu.index, "uuid": uuid, "model": gpu.model, "memory_mib": gpu.memory_mib,
                                 "health": gpu.health.value, "health_reason": gpu.health_reason}
        reading = readings.get(uuid)
        if reading is not None:
            entry["readings"] = dataclasses.asdict(reading)
        gpus.append(entry)
    return {
        "node_id": found.node_id, "source": found.source, "status": found.status,
        "nvml_available": found.nvml_available, "driver_version": found.driver_version, "gpus": gpus,
        "topology": [{"a": p.a, "b": p.b, "link": p.link.value, "label": p.label, "nvlinks": p.nvlinks}
                     for p in found.pairs],
        "errors": list(found.errors),
    }


def _value(value: object, unit: str = "") -> str:
    return "-" if value is None else f"{value}{unit}"


@click.command("gpus")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="burst.yaml whose provider: onprem groups give the static inventory used without NVML.")
@click.option("--group", "group_id", default=None, help="This node's group in --config (default: the only onprem group).")
@click.option("--node-id", default=None, help="The node's id (default: the host name).")
@click.option("--json", "as_json", is_flag=True, help="Print every reading, health verdict and the topology as JSON.")
def gpus_cmd(config_path: Path | None, group_id: str | None, node_id: str | None, as_json: bool) -> None:
    """This node's GPUs through NVML: identity, memory, clocks, power, ECC, health with its reason, topology.

    Without an NVIDIA driver it says so in one line and shows the static
    inventory of --config's on-prem groups (what the node agent would report).
    """
    from rich.console import Console
    from rich.table import Table

    from burst.runtime import ConfigError, config_node_groups
    from providers.onprem.discovery import discover

    try:
        groups = config_node_groups(config_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    found = discover(node_id, groups=groups, group_id=group_id)
    if as_json:
        click.echo(json.dumps(_document(found), indent=2, sort_keys=True, default=str))
        return
    click.echo(found.status)
    if found.node is None:
        return
    readings = {r.uuid: r for r in found.readings}
    table = Table(title=f"GPUs on {found.node_id} ({found.source})")
    for col in ("#", "uuid", "model", "memory MiB", "temp C", "power W", "SM MHz", "util %", "ECC vol/agg", "health"):
        table.add_column(col)
    measured = found.source != "static"  # the static inventory measures nothing: health and readings are `-`
    for g in found.node.gpus:
        r = readings.get(g.uuid)
        power = f"{r.power_w:.0f}/{r.power_limit_w:.0f}" if r and r.power_w is not None and r.power_limit_w else "-"
        clock = f"{r.sm_clock_mhz}/{r.sm_clock_max_mhz}" if r and r.sm_clock_mhz is not None else "-"
        ecc = f"{_value(r.ecc_volatile_uncorrected)}/{_value(r.ecc_aggregate_uncorrected)}" if r else "-"
        health = g.health.value + (f": {g.health_reason}" if g.health_reason else "") if measured else "-"
        memory = str(g.memory_mib) if g.memory_mib else "-"
        table.add_row(str(g.index), g.uuid[:20], g.model, memory, _value(r.temperature_c if r else None),
                      power, clock, _value(r.gpu_util_pct if r else None), ecc, health)
    console = Console(width=200)
    console.print(table)
    if not measured:
        click.echo("static inventory: `-` is not measured (memory is the config's gpu_memory_gib where it gives one)")
    if found.pairs:
        from providers.onprem.readings import TOPOLOGY_LEGEND

        label = {(p.a, p.b): p.label for p in found.pairs} | {(p.b, p.a): p.label for p in found.pairs}
        order = [g.uuid for g in found.node.gpus if any(g.uuid in (p.a, p.b) for p in found.pairs)]
        topo = Table(title="topology")
        topo.add_column("")
        for i, _ in enumerate(order):
            topo.add_column(f"GPU{i}")
        for i, a in enumerate(order):
            topo.add_row(f"GPU{i}", *["X" if a == b else label.get((a, b), "?") for b in order])
        console.print(topo)
        click.echo(TOPOLOGY_LEGEND)
