"""API bearer tokens: one admin token and one per tenant, configured or generated on first start.

Tokens live in a directory, one file each: `admin.token` and
`tenant-<name>.token`. A missing file is generated (32 random bytes,
URL-safe) and written readable by its owner only (0600), in a directory
only its owner may enter (0700, tightened if it was looser), so the operator
hands each tenant its file. Comparison is constant-time.

Replicas share their tokens through the state store (`TokenHashes`): each
token's SHA-256 is kept there (never the token), so a token any replica holds
in a file (a Kubernetes Secret mounted on every replica, or one minted on
first start) is accepted by every replica. A token is minted only where the
store has none for that principal yet (the first replica to claim it wins,
the others keep no copy). No token is ever minted into a directory burst may
not write (a read-only Secret mount), shared or not: a missing file there is
said in a warning, and that principal has no token until the Secret has it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

ADMIN = "admin"

log = logging.getLogger("burst.api")


def digest(token: str) -> str:
    """The hex SHA-256 of a token, as the store keeps it."""
    return hashlib.sha256(token.encode()).hexdigest()


class TokenHashes(Protocol):
    """Where replicas share token hashes by token name (`burst.state.Store`'s api_token_hashes table)."""

    def token_hashes(self) -> dict[str, str]: ...

    def claim_token_hash(self, name: str, sha256: str) -> str: ...

    def put_token_hash(self, name: str, sha256: str) -> None: ...


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


def _principal(name: str) -> Principal | None:
    """The principal a token name (``admin``, ``tenant-<name>``) stands for."""
    if name == ADMIN:
        return Principal(None)
    return Principal(name.removeprefix("tenant-")) if name.startswith("tenant-") else None


@dataclass(frozen=True)
class ApiTokens:
    """The tokens this replica holds (admin's, tenants'), and the hashes every replica shares (when any).

    `admin` is "" where this replica holds no copy of the admin token (another
    replica, or the Secret, has it; its hash is shared).
    """

    admin: str
    tenants: dict[str, str]
    shared: TokenHashes | None = field(default=None, compare=False)

    def resolve(self, token: str) -> Principal | None:
        """The principal a bearer token stands for, or None if it is nobody's (held here, else shared)."""
        if not token:
            return None
        if self.admin and hmac.compare_digest(self.admin.encode(), token.encode()):
            return Principal(None)
        for tenant, expected in sorted(self.tenants.items()):
            if hmac.compare_digest(expected.encode(), token.encode()):
                return Principal(tenant)
        if self.shared is not None:
            mine = digest(token)
            for name, stored in sorted(self.shared.token_hashes().items()):
                if hmac.compare_digest(stored.encode(), mine.encode()):
                    return _principal(name)
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


def _own_token(directory: Path, name: str, writable: bool) -> str:
    """Token `name` from its file, minted if missing and `directory` is burst's to write ("" otherwise)."""
    path = directory / f"{name}.token"
    if path.exists() or writable:
        return _read_or_create(path)
    log.warning("api token missing: add it to the mounted tokens (none is minted into a read-only directory)",
                extra={"file": str(path)})
    return ""


def _shared_token(directory: Path, name: str, shared: TokenHashes, writable: bool) -> str:
    """This replica's copy of token `name` ("" when it holds none), its hash shared through `shared`."""
    path = directory / f"{name}.token"
    if path.exists():
        token = _read_or_create(path)
        shared.put_token_hash(name, digest(token))  # the file (a Secret) is the truth: rotation replaces the hash
        return token
    if not writable:
        if name not in shared.token_hashes():
            log.warning("api token missing: add it to the mounted tokens (none is minted into a read-only "
                        "directory)", extra={"file": str(path)})
        return ""
    token = secrets.token_urlsafe(32)
    if shared.claim_token_hash(name, digest(token)) != digest(token):
        return ""  # another replica minted it first: its hash stands, and this replica keeps no copy
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def load_api_tokens(directory: Path, tenants: Iterable[str], *, shared: TokenHashes | None = None) -> ApiTokens:
    """The tokens in `directory` (made 0700 when burst owns it), generating (0600) the admin's and each
    tenant's that is missing; with `shared` (the state store), only those no replica has minted yet, and
    their hashes are shared (see the module docstring)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = directory.stat()
    if mode.st_uid == os.geteuid() and mode.st_mode & 0o077:
        directory.chmod(0o700)
    names = [ADMIN, *(f"tenant-{t}" for t in sorted(set(tenants)))]
    writable = os.access(directory, os.W_OK)
    if shared is None:
        held = {n: _own_token(directory, n, writable) for n in names}
    else:
        held = {n: _shared_token(directory, n, shared, writable) for n in names}
    return ApiTokens(admin=held[ADMIN], tenants={n.removeprefix("tenant-"): t for n, t in held.items()
                                                 if n != ADMIN and t}, shared=shared)

