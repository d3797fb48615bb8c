"""Registers the onprem provider: racked hosts from an inventory file, switched on and off by power commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burst.model import Tier
from burst.provider_registry import ProviderContext, ProviderSpec, configured, register

if TYPE_CHECKING:
    from providers.base import Provider


def build(ctx: ProviderContext) -> Provider:
    """The onprem provider: the groups' hosts from the inventory file, power commands from the onprem section,
    node states from the agents' heartbeats when the agent link is on (else hosts are READY as declared)."""
    from providers.onprem.provider import InventoryError, OnPremProvider, PowerCommands, load_inventory

    config, groups, hub = ctx.config, ctx.listed, ctx.hub
    doc, path = config.onprem, config.onprem_inventory_path()
    assert doc is not None and path is not None
    docs = {d.id: d for d in config.node_groups}
    commands = PowerCommands(power_on=tuple(doc.power_on) if doc.power_on else None,
                             power_off=tuple(doc.power_off) if doc.power_off else None, timeout_s=doc.command_timeout)
    heartbeats = (lambda: {nid: v.last_seen for nid, v in hub.views().items()}) if hub is not None else None
    return configured("onprem.inventory", lambda: OnPremProvider(
        groups, load_inventory(path), clock=ctx.clock, cluster=config.cluster,
        prices={g.id: ctx.catalog.group_price(g) for g in groups}, commands=commands, heartbeats=heartbeats,
        heartbeat_timeout_s=doc.heartbeat_timeout, resume_timeout_s=doc.resume_timeout,
        initial={g.id: docs[g.id].effective_initial_size for g in groups},
    ), InventoryError)


SPEC = register(ProviderSpec("onprem", build, section="onprem", section_fix="an onprem: section with its inventory file",
                             tier=Tier.STEADY))
