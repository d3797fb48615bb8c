"""Services' request rates read from Prometheus's HTTP API (`/api/v1/query`, `/api/v1/query_range`).

Each service's `rate_query` is PromQL for its offered load in requests per
second. The answer is summed over the series it returns, so a query may be
written per pod or per instance and still mean the service's total. Every
failure (no answer, refused connection, an HTTP or PromQL error, no series,
a value that is not a finite rate) raises `RateUnavailable` with the cause
in one line; the daemon then keeps the service's replicas.
"""

from __future__ import annotations

import math
import ssl
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from burst.model import Service
from burst.workloads.rates import RateUnavailable
from policies.rates import PrometheusDoc

MAX_STEPS_PER_QUERY = 10_999
"""Steps one range query spans: Prometheus refuses more than 11,000 points per series; longer ranges are split."""


def _unix(at: datetime) -> float:
    """`at` as unix seconds; a naive datetime is taken as UTC."""
    return (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).timestamp()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _rate_value(query: str, raw: Any, at: float) -> float:
    """Decide that one sample is a rate: a finite number >= 0, else `RateUnavailable` naming it."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise RateUnavailable(query, f"sample {raw!r} at {at:g} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise RateUnavailable(query, f"sample {raw} at {at:g} is not a rate (a finite number >= 0)")
    return value


class PrometheusRates:
    """A `RateSource` over one Prometheus: `rate` is an instant query, `history` range queries.

    The bearer token, when given, is read from `bearer_token_file` on every
    request (a rotated token is picked up at once); `ca_file` is the CA
    bundle an https URL's certificate is verified with (read once, here: a
    missing one raises OSError at construction); `timeout_s` bounds
    each request (and is passed to Prometheus as the query's own timeout).
    `client` replaces the HTTP client (its own timeout and TLS settings then
    apply).
    """

    def __init__(
        self,
        url: str,
        *,
        bearer_token_file: Path | None = None,
        ca_file: Path | None = None,
        timeout_s: float = 5.0,
        client: httpx.Client | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.bearer_token_file = bearer_token_file
        self.timeout_s = timeout_s
        verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=str(ca_file)) if ca_file else True
        self.client = client if client is not None else httpx.Client(timeout=timeout_s, verify=verify)

    def close(self) -> None:
        """Close the HTTP client's connections."""
        self.client.close()

    def _headers(self, query: str) -> dict[str, str]:
        if self.bearer_token_file is None:
            return {}
        try:
            token = self.bearer_token_file.read_text().strip()
        except OSError as exc:
            raise RateUnavailable(query, f"bearer token file {self.bearer_token_file}: {exc.strerror}") from None
        return {"Authorization": f"Bearer {token}"}

    def _get(self, path: str, query: str, params: Mapping[str, str]) -> dict[str, Any]:
        """GET one API endpoint; its `data` on success, else `RateUnavailable` saying what failed."""
        where = self.url + path
        try:
            response = self.client.get(where, params={"query": query, "timeout": f"{self.timeout_s:g}s", **params},
                                       headers=self._headers(query))
        except httpx.TimeoutException:
            raise RateUnavailable(query, f"no answer from {where} within {self.timeout_s:g} s (timeout)") from None
        except httpx.HTTPError as exc:
            raise RateUnavailable(query, f"cannot reach {where}: {_one_line(str(exc)) or type(exc).__name__}") \
                from None
        try:
            body = response.json()
        except ValueError:
            raise RateUnavailable(query, f"HTTP {response.status_code} from {where}, not JSON: "
                                         f"{_one_line(response.text[:200])!r}") from None
        if not isinstance(body, dict):
            raise RateUnavailable(query, f"HTTP {response.status_code} from {where}: not an API answer")
        if body.get("status") != "success":
            cause = f"{body.get('errorType', 'error')}: {body.get('error', 'no error text')}"
            raise RateUnavailable(query, f"HTTP {response.status_code} from {where}: {_one_line(cause)}")
        data = body.get("data")
        if not response.is_success or not isinstance(data, dict):
            raise RateUnavailable(query, f"HTTP {response.status_code} from {where}: no data")
        return data

    def rate(self, service: Service, now: datetime) -> float:
        """The service's `rate_query` evaluated at `now`: a vector's values summed over its series (or a
        scalar). No series, a non-finite or negative value, or any failure raises `RateUnavailable`."""
        query = _query_of(service)
        data = self._get("/api/v1/query", query, {"time": f"{_unix(now):.3f}"})
        kind, result = data.get("resultType"), data.get("result")
        if kind == "scalar" and isinstance(result, list) and len(result) == 2:
            return _rate_value(query, result[1], float(result[0]))
        if kind != "vector" or not isinstance(result, list):
            raise RateUnavailable(query, f"answer is a {kind}, not an instant vector")
        if not result:
            raise RateUnavailable(query, "no series")
        try:
            return sum(_rate_value(query, s["value"][1], float(s["value"][0])) for s in result)
        except (KeyError, IndexError, TypeError):
            raise RateUnavailable(query, "malformed vector sample") from None

    def history(self, service: Service, start: datetime, end: datetime, step_s: float) -> list[tuple[datetime, float]]:
        """The service's `rate_query` at each step from `start` to `end`, summed over its series at each step;
        ascending UTC timestamps, steps where no series has a sample left out. A range longer than
        `MAX_STEPS_PER_QUERY` steps is read in several queries. Any failure, or a non-finite or negative value,
        raises `RateUnavailable`."""
        query = _query_of(service)
        if not step_s > 0:
            raise ValueError(f"history: step_s must be > 0, got {step_s}")
        totals: dict[float, float] = {}
        first, last = _unix(start), _unix(end)
        while first <= last:
            upto = min(last, first + MAX_STEPS_PER_QUERY * step_s)
            for at, value in self._range(query, first, upto, step_s):
                totals[at] = totals.get(at, 0.0) + value
            first = upto + step_s
        return [(datetime.fromtimestamp(at, UTC), totals[at]) for at in sorted(totals)]

    def _range(self, query: str, first: float, last: float, step_s: float) -> list[tuple[float, float]]:
        """One range query's (unix time, value) samples, every series' together."""
        data = self._get("/api/v1/query_range", query,
                         {"start": f"{first:.3f}", "end": f"{last:.3f}", "step": f"{step_s:g}"})
        if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
            raise RateUnavailable(query, f"answer is a {data.get('resultType')}, not a range vector")
        try:
            return [(float(at), _rate_value(query, raw, float(at)))
                    for series in data["result"] for at, raw in series["values"]]
        except (KeyError, TypeError, ValueError):
            raise RateUnavailable(query, "malformed matrix sample") from None


def _query_of(service: Service) -> str:
    """The service's PromQL, or `RateUnavailable` when it declares none."""
    if not service.rate_query:
        raise RateUnavailable("", f"service {service.tenant}/{service.name} declares no rate_query")
    return service.rate_query


def prometheus_rates(doc: PrometheusDoc, resolve: Callable[[str | None], Path | None]) -> PrometheusRates:
    """The `PrometheusRates` burst.yaml's `rates.prometheus` describes; `resolve` turns the file names it gives
    into paths (`BurstConfig.rates_file`: relative to burst.yaml)."""
    return PrometheusRates(doc.url, bearer_token_file=resolve(doc.bearer_token_file), ca_file=resolve(doc.ca_file),
                           timeout_s=doc.timeout)

