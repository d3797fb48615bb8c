"""Registers the GCP provider; google-cloud-compute is imported by its factory, only when a config uses GCP."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from burst.model import Tier
from burst.provider_registry import ProviderContext, ProviderSpec, configured, register

if TYPE_CHECKING:
    from providers.base import Provider


def build(ctx: ProviderContext) -> Provider:
    """The GCP provider for the config's gcp section: the listed gcp groups, else those it discovers."""
    from providers.base import ProviderError
    from providers.gcp import GcpProvider
    from providers.gcp.discovery import DiscoveryError

    gcp = ctx.config.gcp
    return configured("gcp", lambda: GcpProvider(
        cluster=ctx.config.cluster, project=gcp.project, zones=tuple(gcp.zones), region=gcp.region, clock=ctx.clock,
        endpoint=gcp.endpoint, groups=ctx.listed or None, prices=ctx.price("gcp"),
    ), ProviderError, DiscoveryError)


def discovers(config: Any) -> bool:
    """Whether the gcp section asks for discovery and no node group lists a gcp group."""
    return bool(config.gcp is not None and config.gcp.discover) and all(g.provider != "gcp" for g in config.node_groups)


SPEC = register(ProviderSpec(
    "gcp", build, section="gcp", section_fix="a gcp: section with its project and zones (or region)",
    discovers=discovers,
    none_found="gcp: no node groups found: label managed instance groups' templates with burst-cluster {cluster} "
               "(and burst-max-size), or list them in node_groups",
    tier=Tier.ELASTIC, min_billed_s=60.0, root_volume_type="pd-ssd", storage_region="us-central1"))
