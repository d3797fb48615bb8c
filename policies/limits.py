"""The `limits:` section of a tenant policy file: how much of the controller the tenant's API submissions may hold.

Each limit is enforced by the API (`burst.api.limits`): a submit beyond one is
answered 429 with a `Retry-After` header and the limit's name. The defaults
keep any one tenant from exhausting the controller; the bounds
(`burst.bounds`) keep a policy from switching the protection off.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, Strict, StrictInt

from burst.bounds import MAX_PENDING_JOB_BYTES, MAX_SUBMIT_BURST, MAX_SUBMITS_PER_S, MAX_TENANT_PENDING_JOBS
from burst.model import SubmitLimits
from policies.fields import StrictModel

API = "read by the API"
DEFAULTS = SubmitLimits()


class LimitsDoc(StrictModel):
    """Per-tenant limits on what the tenant's submissions may hold (beyond one, the API answers 429)."""

    max_pending_jobs: Annotated[StrictInt, Field(ge=0, le=MAX_TENANT_PENDING_JOBS)] = Field(
        default=DEFAULTS.max_pending_jobs,
        description=f"Most jobs of the tenant not yet finished, failed or cancelled (default "
        f"{DEFAULTS.max_pending_jobs}); {API}.",
    )
    submits_per_second: Annotated[float, Strict(), Field(gt=0, le=MAX_SUBMITS_PER_S)] = Field(
        default=DEFAULTS.submits_per_second,
        description=f"Sustained submits per second (a token bucket's refill; default {DEFAULTS.submits_per_second:g}); "
        f"{API}.",
    )
    submit_burst: Annotated[StrictInt, Field(ge=1, le=MAX_SUBMIT_BURST)] = Field(
        default=DEFAULTS.submit_burst,
        description=f"Submits allowed at once before the rate applies (the bucket's size; default "
        f"{DEFAULTS.submit_burst}); {API}.",
    )
    max_pending_job_bytes: Annotated[StrictInt, Field(ge=0, le=MAX_PENDING_JOB_BYTES)] = Field(
        default=DEFAULTS.max_pending_job_bytes,
        description="Most bytes of stored job records (command, GPU model, ids and the rest) of the tenant's jobs "
        f"not yet finished (default {DEFAULTS.max_pending_job_bytes}, 16 MiB); {API}.",
    )

    def to_limits(self) -> SubmitLimits:
        """Decide the domain `SubmitLimits` this section means."""
        return SubmitLimits(
            max_pending_jobs=self.max_pending_jobs,
            submits_per_second=self.submits_per_second,
            submit_burst=self.submit_burst,
            max_pending_job_bytes=self.max_pending_job_bytes,
        )
