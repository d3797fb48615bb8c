"""The GCP provider: zonal managed instance groups as burst node groups (google-cloud-compute, REST transport).

`GcpProvider` implements `providers.base.Provider`; `GCP_API_METHODS` is every
Compute API method it calls, and `GCP_IAM_PERMISSIONS` the IAM permission
each needs.
The package's names are imported on first use, so importing it (for `spec`,
which registers the provider) loads no google-cloud-compute: burst imports it
only when a config has gcp groups.
"""

from typing import TYPE_CHECKING

from providers.lazy import lazy_exports

if TYPE_CHECKING:
    from providers.base import BackendUnavailable, RetrySettings
    from providers.gcp.provider import (
        GCP_API_METHODS,
        GCP_IAM_PERMISSIONS,
        STANDBY_RECREATE_S,
        GcpProvider,
        request_id,
    )

__getattr__ = lazy_exports(__name__, {
    "BackendUnavailable": "providers.base",
    "RetrySettings": "providers.base",
    "GCP_API_METHODS": "providers.gcp.provider",
    "GCP_IAM_PERMISSIONS": "providers.gcp.provider",
    "STANDBY_RECREATE_S": "providers.gcp.provider",
    "GcpProvider": "providers.gcp.provider",
    "request_id": "providers.gcp.provider",
})

__all__ = [
    "GCP_API_METHODS",
    "GCP_IAM_PERMISSIONS",
    "STANDBY_RECREATE_S",
    "BackendUnavailable",
    "GcpProvider",
    "RetrySettings",
    "request_id",
]
