"""The AWS provider: EC2 Auto Scaling groups as burst node groups (boto3).

`AwsProvider` implements `providers.base.Provider`; `AWS_API_ACTIONS` is every
IAM action it calls (the Terraform IAM policy grants exactly these). Importing
this package imports boto3/botocore: burst imports it only when a config has
aws groups.
"""

from providers.aws.provider import (
    AWS_API_ACTIONS,
    AWS_IAM_PERMISSIONS,
    LIFECYCLE_STATES,
    AwsProvider,
    client_token,
)
from providers.base import BackendUnavailable, CircuitBreaker, RetrySettings

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
