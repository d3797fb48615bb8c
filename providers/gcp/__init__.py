"""The GCP provider: zonal managed instance groups as burst node groups (google-cloud-compute, REST transport).

`GcpProvider` implements `providers.base.Provider`; `GCP_API_METHODS` is every
Compute API method it calls, and `GCP_IAM_PERMISSIONS` the IAM permission
each needs.
Importing this package imports google-cloud-compute: burst imports it only
when a config has gcp groups.
"""

from providers.base import BackendUnavailable, RetrySettings
from providers.gcp.provider import (
    GCP_API_METHODS,
    GCP_IAM_PERMISSIONS,
    STANDBY_RECREATE_S,
    GcpProvider,
    request_id,
)

__all__ = [
    "GCP_API_METHODS",
    "GCP_IAM_PERMISSIONS",
    "STANDBY_RECREATE_S",
    "BackendUnavailable",
    "GcpProvider",
    "RetrySettings",
    "request_id",
]
