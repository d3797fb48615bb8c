"""Build a libcloud compute driver by name, with credentials read from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from providers.base import CredentialsError
from providers.libcloud.provider import LibcloudConfigError


def connect(
    driver: str,
    *,
    key_env: str | None,
    secret_env: str | None = None,
    args: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Any:
    """The libcloud driver `driver` (a `libcloud.compute.types.Provider` value: `ec2`, `openstack`, `azure_arm`,
    `equinixmetal`, `gce`, `dummy`, ...), keyed with the values of the environment variables `key_env` and
    `secret_env` and constructed with `args` (region, auth URL, tenant: never secrets).

    Raises LibcloudConfigError for an unknown driver or constructor arguments
    it rejects, CredentialsError when a named variable is not set.
    """
    from libcloud.compute.providers import get_driver

    env = os.environ if environ is None else environ
    try:
        cls = get_driver(driver)
    except AttributeError:
        raise LibcloudConfigError(
            f"libcloud.driver: {driver!r} is not a libcloud compute driver (e.g. ec2, openstack, azure_arm, "
            "equinixmetal, gce)"
        ) from None
    positional: list[str] = []
    for field, var in (("key_env", key_env), ("secret_env", secret_env)):
        if var is None:
            continue
        value = env.get(var)
        if not value:
            raise CredentialsError(f"libcloud.{field}: environment variable {var} is not set; export the "
                                   f"{driver} credential in it")
        positional.append(value)
    try:
        return cls(*positional, **dict(args or {}))
    except (TypeError, ValueError) as exc:
        raise LibcloudConfigError(f"libcloud.driver_args: the {driver} driver rejected them: {exc}") from None
