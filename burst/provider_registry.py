"""The providers burst can run, each registered by its own package: what config, validation, the catalog and the
runtime iterate.

A provider package calls `register` with a `ProviderSpec` when it is imported:
its name (what node groups and tenant policies write as `provider:`), how to
build it, its `burst.yaml` section (and that section's model, for a provider
that brings a new one), the tier its groups must be, and its rows of the
catalog's per-provider tables (minimum billed seconds, root volume type). The
providers burst ships are loaded from `BUILTIN` the first time the registry is
read; others from the `burst.providers` entry point group, the modules named in
`BURST_PROVIDERS`, or by importing their package before the config is read. A spec module imports no cloud SDK: its
factory does, so a deployment without one still runs.

This module sits beside `burst.model`: policies, providers and the runtime all
read it, and it imports none of them (what it holds of theirs is typed loosely).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, TypeVar

from burst.model import CapacityType, NodeGroup, Tier

T = TypeVar("T")

BUILTIN = ("providers.sim_spec", "providers.onprem.spec", "providers.aws.spec", "providers.gcp.spec",
           "providers.libcloud.spec")
"""The modules registering the providers burst ships, in the order configs list them (sim first)."""

ENTRY_POINTS = "burst.providers"
"""The entry point group an installed provider package registers itself through (each entry: its spec module)."""

ENV = "BURST_PROVIDERS"
"""Comma-separated modules that register providers, imported with the built-ins (a package on the path that is
not installed, e.g. one under development)."""


class ConfigError(ValueError):
    """A config that cannot be run (one line naming what and how to fix it)."""


class PriceBook(Protocol):
    """What a factory reads of the price catalog (`burst.catalog.Catalog`)."""

    def find(self, provider: str, instance_type: str, region: str) -> Any: ...

    def group_price(self, group: NodeGroup) -> float: ...

    def standby_price(self, group: NodeGroup) -> float: ...


@dataclass(frozen=True)
class ProviderContext:
    """What a factory builds a provider from: the config (a `policies.BurstConfig`), the node groups it lists for
    this provider (empty when the provider discovers them), prices, the clock and the on-prem agents' hub."""

    config: Any
    listed: tuple[NodeGroup, ...]
    catalog: PriceBook
    clock: Callable[[], datetime]
    hub: Any = None

    def price(self, provider: str) -> Callable[[str, str, CapacityType], float | None]:
        """The catalog's price of an instance type in a region on a capacity type, for `provider`'s rows."""
        catalog = self.catalog

        def price(instance_type: str, region: str, capacity: CapacityType) -> float | None:
            row = catalog.find(provider, instance_type, region)
            return row.cloud_price(capacity) if row is not None else None

        return price


def configured(name: str, make: Callable[[], T], *errors: type[Exception]) -> T:
    """`make()`, with any of `errors` it raises turned into the one-line ConfigError naming `name` (a provider or
    its setting) that a factory raises for a config it cannot run."""
    try:
        return make()
    except errors as exc:
        raise ConfigError(f"{name}: {exc}") from None


def _never(config: Any) -> bool:
    return False


@dataclass(frozen=True)
class ProviderSpec:
    """One provider: its name, how to build it, its settings section and its catalog rows."""

    name: str  # as node groups name it (`provider:`)
    build: Callable[[ProviderContext], Any]  # returns a `providers.base.Provider`
    section: str | None = None  # the BurstConfig attribute holding its settings; None: it needs none
    section_fix: str = ""  # what a config listing its groups without the section must add
    discovers: Callable[[Any], bool] = _never  # it finds node groups itself
    none_found: str = ""  # after building: the fix when it manages no group (a "{cluster}" in it is filled in)
    settings_model: type | None = None  # the section's model, for a section `policies.BurstConfig` does not declare
    section_help: str = ""  # the section's description in the config schema (with `settings_model`)
    tier: Tier | None = None  # the tier every group of it must be (None: either)
    min_billed_s: float | None = None  # the least a launched node is billed, seconds (None: no minimum)
    root_volume_type: str | None = None  # the block storage its node-group module boots from (standby price)
    storage_region: str | None = None  # where its storage is priced when a region has no row of its own
    price_csv: Path | None = None  # its list prices (the catalog's CSV columns), read after the shipped ones

    def settings(self, config: Any) -> object | None:
        """The provider's settings section in `config` (None when it has none, or none is needed)."""
        return getattr(config, self.section) if self.section is not None else None

    def wanted(self, config: Any) -> bool:
        """Whether `config` runs this provider: node groups name it, or it discovers them."""
        if self.section is not None and self.settings(config) is None:
            return False
        return any(g.provider == self.name for g in config.node_groups) or self.discovers(config)


class _Registry(Mapping[str, ProviderSpec]):
    """The providers by name, in the order they registered (the built-ins first, loaded on first read)."""

    def __init__(self) -> None:
        self._specs: dict[str, ProviderSpec] = {}
        self._loaded = False
        self._listeners: list[Callable[[ProviderSpec, bool], None]] = []

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for module in BUILTIN:
            importlib.import_module(module)
        for entry in metadata.entry_points(group=ENTRY_POINTS):
            importlib.import_module(entry.value)
        for module in filter(None, (m.strip() for m in os.environ.get(ENV, "").split(","))):
            importlib.import_module(module)

    def __getitem__(self, name: str) -> ProviderSpec:
        self._load()
        return self._specs[name]

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(list(self._specs))

    def __len__(self) -> int:
        self._load()
        return len(self._specs)

    def add(self, spec: ProviderSpec) -> None:
        self._load()  # the built-ins keep their places ahead of any other
        if spec.name in self._specs:
            raise ValueError(f"provider {spec.name} is registered already")
        self._specs[spec.name] = spec
        for listener in self._listeners:
            listener(spec, True)

    def remove(self, name: str) -> None:
        spec = self._specs.pop(name)
        for listener in self._listeners:
            listener(spec, False)

    def listen(self, listener: Callable[[ProviderSpec, bool], None]) -> None:
        self._listeners.append(listener)
        for spec in self._specs.values():
            listener(spec, True)


PROVIDERS = _Registry()
"""Every registered provider by name, in the order a runtime builds them and the config schema lists them."""


def register(spec: ProviderSpec) -> ProviderSpec:
    """Add a provider: node groups, tenant policies and price rows may name it from now on, and its section (a
    `settings_model`) is read from `burst.yaml` (a name registered twice is a ValueError)."""
    PROVIDERS.add(spec)
    return spec


def unregister(name: str) -> None:
    """Remove a provider `register` added (configs naming it are refused again)."""
    PROVIDERS.remove(name)


def on_register(listener: Callable[[ProviderSpec, bool], None]) -> None:
    """Call `listener(spec, True)` for every provider registered (those already there at once), and
    `listener(spec, False)` when one is removed: how a layer below the providers derives its tables."""
    PROVIDERS.listen(listener)


def provider_names() -> list[str]:
    """The names configs may give `provider:`, in registration order."""
    return list(PROVIDERS)


__all__ = ["BUILTIN", "ENTRY_POINTS", "ENV", "PROVIDERS", "ConfigError", "PriceBook", "ProviderContext", "ProviderSpec", "configured", "on_register",
           "provider_names", "register", "unregister"]
