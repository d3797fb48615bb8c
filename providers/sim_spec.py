"""Registers the simulated cloud (`providers.sim`): what `burst.yaml` groups with `provider: sim` run on."""

from __future__ import annotations

from burst.provider_registry import ProviderContext, ProviderSpec, register
from providers.sim import SimProvider


def build(ctx: ProviderContext) -> SimProvider:
    """The simulated cloud over the config's sim groups, priced from the catalog, each with its spot hazard and
    initial size."""
    groups, catalog = ctx.listed, ctx.catalog
    docs = {d.id: d for d in ctx.config.node_groups}
    return SimProvider(
        groups,
        clock=ctx.clock,
        cluster=ctx.config.cluster,
        prices={g.id: catalog.group_price(g) for g in groups},
        standby_prices={g.id: catalog.standby_price(g) for g in groups},
        spot_hazard_per_hour={g.id: docs[g.id].spot_hazard_per_hour for g in groups},
        initial={g.id: docs[g.id].effective_initial_size for g in groups},
    )


SPEC = register(ProviderSpec("sim", build, min_billed_s=60.0))
