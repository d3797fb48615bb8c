"""The libcloud provider: burst node groups over any apache-libcloud compute driver (OpenStack, Azure, EC2, ...).

`LibcloudProvider` implements `providers.base.Provider`; `connect` builds a
driver by its libcloud name. Importing this package imports libcloud: burst
imports it only when a config has libcloud groups.
"""

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
