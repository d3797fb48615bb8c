"""Build a libcloud compute driver by name, with credentials read from the environment."""

from __future__ import annotations

import inspect
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
    `secret_env` and constructed with `args` (region, auth URL, tenant: never secrets). The credentials go in
    as the `key` and `secret` keywords where the constructor names both (EC2, Azure), else in order as its
    first arguments (GCE's user_id and key, OpenStack's user and password, Equinix Metal's token).

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
    creds: dict[str, str] = {}
    for field, name, var in (("key_env", "key", key_env), ("secret_env", "secret", secret_env)):
        if var is None:
            continue
        value = env.get(var)
        if not value:
            raise CredentialsError(f"libcloud.{field}: environment variable {var} is not set; export the "
                                   f"{driver} credential in it")
        creds[name] = value
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    try:
        if "key" in params and "secret" in params:  # by name: Azure's come after tenant_id and subscription_id
            return cls(**creds, **dict(args or {}))
        return cls(*creds.values(), **dict(args or {}))  # by position: GCE (user_id, key), OpenStack, Equinix
    except (TypeError, ValueError) as exc:
        raise LibcloudConfigError(f"libcloud.driver_args: the {driver} driver rejected them: {exc}") from None
