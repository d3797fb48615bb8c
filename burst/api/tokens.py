"""API bearer tokens: one admin token and one per tenant, configured or generated on first start.

Tokens live in a directory, one file each: `admin.token` and
`tenant-<name>.token`. A missing file is generated (32 random bytes,
URL-safe) and written readable by its owner only (0600), in a directory
only its owner may enter (0700, tightened if it was looser), so the operator
hands each tenant its file. Comparison is constant-time.
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ADMIN = "admin"


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: the admin, or one tenant."""

    tenant: str | None  # None for the admin

    @property
    def is_admin(self) -> bool:
        return self.tenant is None

    def may_see(self, tenant: str) -> bool:
        """Whether this principal may read or act on `tenant`'s jobs."""
        return self.is_admin or self.tenant == tenant


@dataclass(frozen=True)
class ApiTokens:
    """The admin token and the tenants' tokens."""

    admin: str
    tenants: dict[str, str]

    def resolve(self, token: str) -> Principal | None:
        """The principal a bearer token stands for, or None if it is nobody's."""
        if hmac.compare_digest(self.admin.encode(), token.encode()):
            return Principal(None)
        for tenant, expected in sorted(self.tenants.items()):
            if hmac.compare_digest(expected.encode(), token.encode()):
                return Principal(tenant)
        return None


def _read_or_create(path: Path) -> str:
    if path.exists():
        token = path.read_text().strip()
        if not token:
            raise ValueError(f"{path}: token file is empty")
        return token
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def load_api_tokens(directory: Path, tenants: Iterable[str]) -> ApiTokens:
    """The tokens in `directory` (made 0700), generating (0600) the admin's and each tenant's that is missing."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if directory.stat().st_mode & 0o077:
        directory.chmod(0o700)
    admin = _read_or_create(directory / f"{ADMIN}.token")
    return ApiTokens(admin=admin, tenants={t: _read_or_create(directory / f"tenant-{t}.token") for t in sorted(set(tenants))})
