"""The AWS provider: EC2 Auto Scaling groups as burst node groups (boto3).

`AwsProvider` implements `providers.base.Provider`; `AWS_API_ACTIONS` is every
IAM action it calls (the Terraform IAM policy grants exactly these). The
package's names are imported on first use, so importing it (for `spec`, which
registers the provider) loads no boto3: burst imports boto3 only when a config
has aws groups.
"""

from typing import TYPE_CHECKING

from providers.lazy import lazy_exports

if TYPE_CHECKING:
    from providers.aws.provider import (
        AWS_API_ACTIONS,
        AWS_IAM_PERMISSIONS,
        LIFECYCLE_STATES,
        AwsProvider,
        client_token,
    )
    from providers.base import BackendUnavailable, CircuitBreaker, RetrySettings

__getattr__ = lazy_exports(__name__, {
    "AWS_API_ACTIONS": "providers.aws.provider",
    "AWS_IAM_PERMISSIONS": "providers.aws.provider",
    "LIFECYCLE_STATES": "providers.aws.provider",
    "AwsProvider": "providers.aws.provider",
    "client_token": "providers.aws.provider",
    "BackendUnavailable": "providers.base",
    "CircuitBreaker": "providers.base",
    "RetrySettings": "providers.base",
})

__all__ = [
    "AWS_API_ACTIONS",
    "AWS_IAM_PERMISSIONS",
    "LIFECYCLE_STATES",
    "AwsProvider",
    "BackendUnavailable",
    "CircuitBreaker",
    "RetrySettings",
    "client_token",
]
