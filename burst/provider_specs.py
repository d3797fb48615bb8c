"""Every provider burst can run, as the runtime reads them: the registry its packages fill (`burst.provider_registry`).

A `ProviderSpec` says what a provider needs from `burst.yaml` (its settings
section, and the fix when a node group names the provider without it),
whether it finds node groups itself (tags, Terraform outputs) and how to build
it from the config. `burst.runtime.validate_config` and `build_runtime` walk
`PROVIDERS` instead of one branch per backend. Each provider's package
registers its own spec (`providers/<name>/spec.py`); its SDK is imported inside
its factory, so a config that does not use it never loads it.
"""

from __future__ import annotations

from burst.provider_registry import (
    PROVIDERS,
    ConfigError,
    ProviderContext,
    ProviderSpec,
    provider_names,
    register,
    unregister,
)

__all__ = ["PROVIDERS", "ConfigError", "ProviderContext", "ProviderSpec", "provider_names", "register", "unregister"]
