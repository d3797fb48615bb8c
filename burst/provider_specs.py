"""Every provider burst can run, registered in one place: what config and wiring iterate.

A `ProviderSpec` says what a provider needs from `burst.yaml` (its settings
section, and the fix when a node group names the provider without it),
whether it finds node groups itself (tags, Terraform outputs) and how to build
it from the config. `burst.runtime.validate_config` and `build_runtime` walk
`PROVIDERS` instead of one branch per backend; `register` adds a spec. A
provider's SDK is imported inside its factory, so a config that does not use
it never loads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from burst.agent.hub import AgentHub
from burst.catalog import Catalog
from burst.model import CapacityType, NodeGroup
from policies import BurstConfig
from policies.schema import PROVIDER_NAMES
from providers.base import Provider
from providers.sim import SimProvider


class ConfigError(ValueError):
    """A config that cannot be run (one line naming what and how to fix it)."""


@dataclass(frozen=True)
class ProviderContext:
    """What a factory builds a provider from: the config, the node groups it lists for this provider (empty when
    the provider discovers them), prices, the clock and the on-prem agents' hub."""

    config: BurstConfig
    listed: tuple[NodeGroup, ...]
    catalog: Catalog
    clock: Callable[[], datetime]
    hub: AgentHub | None = None

    def price(self, provider: str) -> Callable[[str, str, CapacityType], float | None]:
        """The catalog's price of an instance type in a region on a capacity type, for `provider`'s rows."""
        catalog = self.catalog

        def price(instance_type: str, region: str, capacity: CapacityType) -> float | None:
            row = catalog.find(provider, instance_type, region)
            return row.cloud_price(capacity) if row is not None else None

        return price


@dataclass(frozen=True)
class ProviderSpec:
    """One provider: its name, its settings section and how to build it."""

    name: str  # as node groups name it (`provider:`)
    build: Callable[[ProviderContext], Provider]
    section: str | None = None  # the BurstConfig attribute holding its settings; None: it needs none
    section_fix: str = ""  # what a config listing its groups without the section must add
    discovers: Callable[[BurstConfig], bool] = lambda config: False  # it finds node groups itself
    none_found: str = ""  # after building: the fix when it manages no group (a "{cluster}" in it is filled in)

    def settings(self, config: BurstConfig) -> object | None:
        """The provider's settings section in `config` (None when it has none, or none is needed)."""
        return getattr(config, self.section) if self.section is not None else None

    def wanted(self, config: BurstConfig) -> bool:
        """Whether `config` runs this provider: node groups name it, or it discovers them."""
        if self.section is not None and self.settings(config) is None:
            return False
        return any(g.provider == self.name for g in config.node_groups) or self.discovers(config)


PROVIDERS: dict[str, ProviderSpec] = {}
"""The providers by name, in the order a runtime builds them."""


def register(spec: ProviderSpec) -> ProviderSpec:
    """Add a provider: node groups, tenant policies and price rows may name it from now on (a name registered
    twice is a ValueError)."""
    if spec.name in PROVIDERS:
        raise ValueError(f"provider {spec.name} is registered already")
    PROVIDERS[spec.name] = spec
    if spec.name not in PROVIDER_NAMES:
        PROVIDER_NAMES.append(spec.name)
    return spec


def unregister(name: str) -> None:
    """Remove a provider `register` added (configs naming it are refused again)."""
    del PROVIDERS[name]
    if name in PROVIDER_NAMES:
        PROVIDER_NAMES.remove(name)


# ---------------------------------------------------------------- the providers burst ships


def _sim(ctx: ProviderContext) -> Provider:
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


def _aws(ctx: ProviderContext) -> Provider:
    """The AWS provider for the config's aws section: the listed aws groups, else those it discovers."""
    from providers.aws import AwsProvider  # boto3 is loaded only when a config uses AWS
    from providers.aws.discovery import DiscoveryError
    from providers.base import ProviderError

    config = ctx.config
    aws = config.aws
    assert aws is not None
    try:
        return AwsProvider(
            cluster=config.cluster,
            region=aws.region,
            clock=ctx.clock,
            endpoint_url=aws.endpoint_url,
            groups=ctx.listed or None,
            terraform_outputs=config.aws_terraform_outputs(),
            events_queue_url=aws.events_queue_url,
            prices=ctx.price("aws"),
            sqs_wait_s=0 if config.clock == "sim" else 1,  # no long poll on a simulated clock
            launch_hook=aws.launch_hook,
            terminate_hook=aws.terminate_hook,
        )
    except (ProviderError, DiscoveryError) as exc:
        raise ConfigError(f"aws: {exc}") from None


def _gcp(ctx: ProviderContext) -> Provider:
    """The GCP provider for the config's gcp section: the listed gcp groups, else those it discovers."""
    from providers.base import ProviderError
    from providers.gcp import GcpProvider  # google-cloud-compute is loaded only when a config uses GCP
    from providers.gcp.discovery import DiscoveryError

    config = ctx.config
    gcp = config.gcp
    assert gcp is not None
    try:
        return GcpProvider(
            cluster=config.cluster,
            project=gcp.project,
            zones=tuple(gcp.zones),
            region=gcp.region,
            clock=ctx.clock,
            endpoint=gcp.endpoint,
            groups=ctx.listed or None,
            prices=ctx.price("gcp"),
        )
    except (ProviderError, DiscoveryError) as exc:
        raise ConfigError(f"gcp: {exc}") from None


def _libcloud(ctx: ProviderContext) -> Provider:
    """The libcloud provider for the config's libcloud section and its node groups."""
    from providers.base import ProviderError
    from providers.libcloud import GroupSpec, LibcloudConfigError, LibcloudProvider, connect

    config, groups = ctx.config, ctx.listed
    doc = config.libcloud
    assert doc is not None
    missing = [g.id for g in groups if g.id not in doc.groups]
    if missing:
        raise ConfigError(f"libcloud.groups: no size and image for node group(s) {', '.join(missing)}; "
                          "add an entry per libcloud group")
    specs = {gid: GroupSpec(size=g.size, image=g.image, location=g.location, create_args=dict(g.create_args))
             for gid, g in doc.groups.items()}
    try:
        driver = connect(doc.driver, key_env=doc.key_env, secret_env=doc.secret_env, args=doc.driver_args)
        return LibcloudProvider(driver, groups, specs, cluster=config.cluster, clock=ctx.clock,
                                prices=ctx.price("libcloud"), metadata_arg=doc.metadata_arg)
    except (ProviderError, LibcloudConfigError) as exc:
        raise ConfigError(f"libcloud: {exc}") from None


def _onprem(ctx: ProviderContext) -> Provider:
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
    try:
        return OnPremProvider(groups, load_inventory(path), clock=ctx.clock, cluster=config.cluster,
                              prices={g.id: ctx.catalog.group_price(g) for g in groups}, commands=commands,
                              heartbeats=heartbeats, heartbeat_timeout_s=doc.heartbeat_timeout,
                              resume_timeout_s=doc.resume_timeout,
                              initial={g.id: docs[g.id].effective_initial_size for g in groups})
    except InventoryError as exc:
        raise ConfigError(f"onprem.inventory: {exc}") from None


def _lists_none(config: BurstConfig, name: str) -> bool:
    return not any(g.provider == name for g in config.node_groups)


register(ProviderSpec("sim", _sim))
register(ProviderSpec(
    "aws", _aws, section="aws", section_fix="an aws: section with at least its region",
    discovers=lambda c: c.aws is not None and c.aws.discover and _lists_none(c, "aws"),
    none_found="aws: no node groups found: tag Auto Scaling groups with burst:cluster {cluster} or set "
               "aws.terraform_outputs"))
register(ProviderSpec(
    "gcp", _gcp, section="gcp", section_fix="a gcp: section with its project and zones (or region)",
    discovers=lambda c: c.gcp is not None and c.gcp.discover and _lists_none(c, "gcp"),
    none_found="gcp: no node groups found: label managed instance groups' templates with burst-cluster {cluster} "
               "(and burst-max-size), or list them in node_groups"))
register(ProviderSpec("libcloud", _libcloud, section="libcloud",
                      section_fix="a libcloud: section with its driver and each group's size and image"))
register(ProviderSpec("onprem", _onprem, section="onprem", section_fix="an onprem: section with its inventory file"))

__all__ = ["PROVIDERS", "ConfigError", "ProviderContext", "ProviderSpec", "register", "unregister"]
