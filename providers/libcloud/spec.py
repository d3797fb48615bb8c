"""Registers the libcloud provider; apache-libcloud is imported by its factory, only when a config uses it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from burst.model import Tier
from burst.provider_registry import ConfigError, ProviderContext, ProviderSpec, configured, register

if TYPE_CHECKING:
    from providers.base import Provider


def build(ctx: ProviderContext) -> Provider:
    """The libcloud provider for the config's libcloud section and its node groups."""
    from providers.base import ProviderError
    from providers.libcloud.connect import connect
    from providers.libcloud.provider import GroupSpec, LibcloudConfigError, LibcloudProvider

    config, groups = ctx.config, ctx.listed
    doc = config.libcloud
    assert doc is not None
    missing = [g.id for g in groups if g.id not in doc.groups]
    if missing:
        raise ConfigError(f"libcloud.groups: no size and image for node group(s) {', '.join(missing)}; "
                          "add an entry per libcloud group")
    specs = {gid: GroupSpec(size=g.size, image=g.image, location=g.location, create_args=dict(g.create_args))
             for gid, g in doc.groups.items()}
    return configured("libcloud", lambda: LibcloudProvider(
        connect(doc.driver, key_env=doc.key_env, secret_env=doc.secret_env, args=doc.driver_args), groups, specs,
        cluster=config.cluster, clock=ctx.clock, prices=ctx.price("libcloud"), metadata_arg=doc.metadata_arg,
    ), ProviderError, LibcloudConfigError)


SPEC = register(ProviderSpec("libcloud", build, section="libcloud", tier=Tier.ELASTIC, min_billed_s=60.0,
                             section_fix="a libcloud: section with its driver and each group's size and image"))
