"""The libcloud provider: burst node groups over any apache-libcloud compute driver (OpenStack, Azure, EC2, ...).

`LibcloudProvider` implements `providers.base.Provider`; `connect` builds a
driver by its libcloud name. The package's names are imported on first use, so
importing it (for `spec`, which registers the provider) loads no libcloud: burst
imports it only when a config has libcloud groups.
"""

from typing import TYPE_CHECKING

from providers.lazy import lazy_exports

if TYPE_CHECKING:
    from providers.base import BackendUnavailable, RetrySettings
    from providers.libcloud.connect import connect
    from providers.libcloud.errors import map_error
    from providers.libcloud.provider import (
        CLUSTER_KEY,
        GROUP_KEY,
        GroupSpec,
        LibcloudConfigError,
        LibcloudProvider,
        metadata_of,
        node_name,
        supports_stop_start,
    )

__getattr__ = lazy_exports(__name__, {
    "BackendUnavailable": "providers.base",
    "RetrySettings": "providers.base",
    "connect": "providers.libcloud.connect",
    "map_error": "providers.libcloud.errors",
    "CLUSTER_KEY": "providers.libcloud.provider",
    "GROUP_KEY": "providers.libcloud.provider",
    "GroupSpec": "providers.libcloud.provider",
    "LibcloudConfigError": "providers.libcloud.provider",
    "LibcloudProvider": "providers.libcloud.provider",
    "metadata_of": "providers.libcloud.provider",
    "node_name": "providers.libcloud.provider",
    "supports_stop_start": "providers.libcloud.provider",
})

__all__ = [
    "CLUSTER_KEY",
    "GROUP_KEY",
    "BackendUnavailable",
    "GroupSpec",
    "LibcloudConfigError",
    "LibcloudProvider",
    "RetrySettings",
    "connect",
    "map_error",
    "metadata_of",
    "node_name",
    "supports_stop_start",
]
