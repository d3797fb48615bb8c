"""Optional integrations: which extra installs the package an integration imports, and the one-line error when
it is missing.

burst's core (the daemon, the quickstart, the simulator, forecasts, the API) installs with
`pip install burst-controller`; each integration's SDK comes with its extra, so a node agent or a
single-cloud deployment does not pull every SDK: `aws` (boto3), `gcp` (google-cloud-compute),
`libcloud`, `kubernetes`, `postgres` (psycopg) and `reports` (matplotlib, for `--report`); `all` is
every one of them. Each SDK is imported where it is used, so what a config does not use is never loaded.
"""

from __future__ import annotations

EXTRAS: dict[str, str] = {
    "boto3": "aws",
    "botocore": "aws",
    "google": "gcp",
    "libcloud": "libcloud",
    "kubernetes": "kubernetes",
    "psycopg": "postgres",
    "matplotlib": "reports",
}
"""The top-level module an integration imports -> the extra that installs it."""

DISTRIBUTIONS: dict[str, str] = {"botocore": "boto3", "google": "google-cloud-compute", "libcloud": "apache-libcloud"}
"""A module whose distribution (what pip installs) has another name, as users know it."""

PACKAGE = "burst-controller"


class MissingExtra(RuntimeError):
    """An integration's package is not installed: one line naming it and the extra that installs it."""


def missing_extra(exc: ModuleNotFoundError, what: str) -> MissingExtra | None:
    """Decide whether `exc` is an optional integration's package missing (the error for `what` needing it), or
    None when it is some other module (a real bug, left to surface)."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return MissingExtra(f"{what} needs the Python package {DISTRIBUTIONS.get(top, top)}, which is not installed: "
                        f"pip install '{PACKAGE}[{extra}]' (or '{PACKAGE}[all]' for every integration)")


__all__ = ["DISTRIBUTIONS", "EXTRAS", "PACKAGE", "MissingExtra", "missing_extra"]
