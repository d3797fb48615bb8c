"""The `rates:` section of burst.yaml: where the daemon reads its services' request rates.

`prometheus` names a Prometheus HTTP API (each service's `rate_query` is the
PromQL read there); `synthetic` gives burst's seeded daily cycles, for the
quickstart and tests. At most one of the two.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, Strict, model_validator

from burst.bounds import MAX_REQUESTS_PER_S
from policies.fields import NonEmptyStr, PathStr, PositiveDuration, StrictModel


class PrometheusDoc(StrictModel):
    """A Prometheus HTTP API (`/api/v1/query`, `/api/v1/query_range`) the services' rate queries are read from."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    url: NonEmptyStr = Field(description="Base URL of the Prometheus HTTP API, e.g. http://prometheus:9090.")
    bearer_token_file: PathStr | None = Field(
        default=None, description="File holding a bearer token sent with every query (relative to burst.yaml)."
    )
    ca_file: PathStr | None = Field(
        default=None, description="CA bundle that verifies an https URL's certificate (relative to burst.yaml)."
    )
    timeout: PositiveDuration = Field(
        default=5.0, description="Duration one query may take before it counts as failed (default 5 s)."
    )


class DailyCycleDoc(StrictModel):
    """One synthetic service's rate: a daily cosine around a mean, with seeded noise."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    base_rps: Annotated[float, Strict(), Field(gt=0, le=MAX_REQUESTS_PER_S)] = Field(
        description="Mean request rate over the day, requests/s."
    )
    amplitude: Annotated[float, Strict(), Field(ge=0, lt=1)] = Field(
        default=0.6, description="Daily swing as a share of the mean (0 .. < 1, default 0.6)."
    )
    peak_hour: Annotated[float, Strict(), Field(ge=0, lt=24)] = Field(
        default=13.0, description="Hour of the day (UTC) the rate peaks (default 13)."
    )
    noise: Annotated[float, Strict(), Field(ge=0, lt=1)] = Field(
        default=0.05, description="Relative noise drawn once a minute (0 .. < 1, default 0.05)."
    )


class SyntheticRatesDoc(StrictModel):
    """burst's seeded synthetic request rates, one daily cycle per service (`TENANT/NAME` or `NAME`)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    seed: Annotated[int, Strict(), Field(ge=0)] = Field(default=0, description="Seed of the noise (default 0).")
    services: dict[NonEmptyStr, DailyCycleDoc] = Field(
        default_factory=dict, description="Each service's cycle, keyed TENANT/NAME or NAME."
    )


class RatesDoc(StrictModel):
    """Where services' request rates come from: a Prometheus, or synthetic cycles (at most one)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    prometheus: PrometheusDoc | None = Field(default=None, description="The Prometheus the rate queries read.")
    synthetic: SyntheticRatesDoc | None = Field(
        default=None, description="Seeded synthetic daily cycles (the quickstart's; not real traffic)."
    )
    step: Annotated[PositiveDuration, Field(ge=60, le=3600)] = Field(
        default=300.0, description="Step the services' rate history is kept and forecast at (1 min .. 1 h, default "
        "5 min): history is read at it, and the forecast's instants are its multiples."
    )

    @model_validator(mode="after")
    def _one_source(self) -> RatesDoc:
        if self.prometheus is not None and self.synthetic is not None:
            raise ValueError("rates: give prometheus or synthetic, not both")
        return self
