"""Tenant policies and the global `burst.yaml` config: YAML loading, schema, file:line errors, last-good reload.

Imports only `burst.model` (plus pydantic and PyYAML).
"""

from policies.config import BurstConfig, config_json_schema, load_config
from policies.durations import Duration, format_duration, parse_duration
from policies.loader import (
    PolicyError,
    PolicyReloader,
    PolicyValidationError,
    load_policy_dir,
    load_policy_file,
    policy_files,
    policy_json_schema,
    validate_policy_dir,
    validate_policy_file,
)
from policies.schema import TenantPolicyDoc

__all__ = [
    "BurstConfig",
    "Duration",
    "PolicyError",
    "PolicyReloader",
    "PolicyValidationError",
    "TenantPolicyDoc",
    "config_json_schema",
    "format_duration",
    "load_config",
    "load_policy_dir",
    "load_policy_file",
    "parse_duration",
    "policy_files",
    "policy_json_schema",
    "validate_policy_dir",
    "validate_policy_file",
]
