"""The API's limits: request size (413) and each tenant's share of the controller (429).

A body over `burst.bounds.MAX_BODY_BYTES` is refused with 413, unread: an
ASGI middleware (`BodyLimit`), so the limit holds before FastAPI parses
anything: a declared `Content-Length` over the limit is refused at once, and a
body sent without one (chunked) is counted as it arrives and refused once it
passes the limit.

A submit beyond its tenant's `limits` (`burst.model.SubmitLimits`, from the
tenant's policy file) is refused with 429, a `Retry-After` header (whole
seconds) and a body naming the limit (`LimitExceeded`): the submit rate is a
token bucket per tenant (`SubmitRate`, on an injected monotonic clock), and
the tenant's pending jobs and their stored bytes are counted from the store
(`Backlogs`), kept up to date between counts by the API's own writes. A
tenant keeps at most `burst.bounds.MAX_TENANT_SERVICE_EVENTS` service events
in use through the API (`check_service_events`): one more is 429 the same way.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException

from burst.bounds import MAX_BODY_BYTES, MAX_TENANT_SERVICE_EVENTS, SERVICE_EVENT_MEMORY_S
from burst.model import SubmitLimits

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyTooLarge(HTTPException):
    """A request body passed the limit while it was read (an HTTP 413 the app's handlers render)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body larger than {limit} bytes")


class BodyLimit:
    """Refuse HTTP requests whose body is larger than `limit` bytes (413, with a JSON detail)."""

    def __init__(self, app: App, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.limit
            except ValueError:
                too_big = False  # the server refuses a malformed header itself
            if too_big:
                await self._refuse(send)
                return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BodyTooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps({"detail": f"request body larger than {self.limit} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class LimitExceeded(Exception):
    """A submit its tenant's limits refuse (an HTTP 429): which limit, why, and in how many seconds to retry."""

    def __init__(self, limit: str, detail: str, retry_after_s: float) -> None:
        super().__init__(detail)
        self.limit = limit
        self.detail = detail
        self.retry_after_s = max(1, math.ceil(retry_after_s))

    def body(self) -> dict[str, Any]:
        """The 429's JSON body: the detail, the limit's policy key, and the retry delay in seconds."""
        return {"detail": self.detail, "limit": self.limit, "retry_after_s": self.retry_after_s}


@dataclass
class _Bucket:
    tokens: float
    at: float


class SubmitRate:
    """One token bucket per tenant: `submit_burst` tokens at most, refilled at `submits_per_second`; each
    submit takes one. Thread-safe; `clock` is monotonic seconds (injected, so tests need not sleep)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}

    def take(self, tenant: str, limits: SubmitLimits) -> None:
        """Decide whether one more submit of `tenant` may go now: take a token, or raise `LimitExceeded`
        saying when the next token is there. A policy's new rate or burst applies from the next submit."""
        now = self.clock()
        rate, burst = limits.submits_per_second, float(limits.submit_burst)
        with self._lock:
            bucket = self._buckets.get(tenant)
            if bucket is None:
                bucket = self._buckets[tenant] = _Bucket(tokens=burst, at=now)
            bucket.tokens = min(burst, bucket.tokens + max(0.0, now - bucket.at) * rate)
            bucket.at = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return
            wait = (1.0 - bucket.tokens) / rate
        raise LimitExceeded(
            "limits.submits_per_second",
            f"tenant {tenant} submits faster than its limit of {rate:g} per second (bursts of {limits.submit_burst})",
            wait,
        )


@dataclass
class _Backlog:
    jobs: int
    size: int
    counted_at: float


class Backlogs:
    """Each tenant's jobs not yet terminal and the bytes of their stored records, as this API knows them.

    Counted from the store (`count`, e.g. `Store.tenant_backlog`) at a tenant's
    first submit, again once a count is `recount_s` old, and again before a
    refusal once it is `min_recount_s` old (jobs finished by the loop leave
    the backlog, which this API does not see); in between, the API's own
    submits and cancels keep the figures current. Not thread-safe: the caller
    holds its store lock from `check` to `added`, so a check and its write are
    one step.
    """

    def __init__(self, count: Callable[[str], tuple[int, int]], clock: Callable[[], float], *,
                 recount_s: float = 10.0, min_recount_s: float = 1.0) -> None:
        self.count = count
        self.clock = clock
        self.recount_s = recount_s
        self.min_recount_s = min_recount_s
        self._known: dict[str, _Backlog] = {}

    def _recount(self, tenant: str, now: float) -> _Backlog:
        jobs, size = self.count(tenant)
        backlog = self._known[tenant] = _Backlog(jobs, size, now)
        return backlog

    def check(self, tenant: str, limits: SubmitLimits, size: int, *, retry_after_s: float) -> None:
        """Decide whether one more job of `size` stored bytes fits `tenant`'s pending-job and job-text limits;
        raise `LimitExceeded` naming the limit it would pass (retry in `retry_after_s`: jobs leave on ticks)."""
        now = self.clock()
        backlog = self._known.get(tenant)
        if backlog is None or now - backlog.counted_at >= self.recount_s:
            backlog = self._recount(tenant, now)
        over = self._over(backlog, limits, size)
        if over is not None and now - backlog.counted_at >= self.min_recount_s:
            backlog = self._recount(tenant, now)  # the loop may have finished some since
            over = self._over(backlog, limits, size)
        if over is None:
            return
        if over == "limits.max_pending_jobs":
            detail = (f"tenant {tenant} has {backlog.jobs} jobs not yet finished, at its limit of "
                      f"{limits.max_pending_jobs}")
        else:
            detail = (f"tenant {tenant}'s jobs not yet finished hold {backlog.size} bytes: {size} more would pass "
                      f"its limit of {limits.max_pending_job_bytes}")
        raise LimitExceeded(over, detail, retry_after_s)

    @staticmethod
    def _over(backlog: _Backlog, limits: SubmitLimits, size: int) -> str | None:
        if backlog.jobs + 1 > limits.max_pending_jobs:
            return "limits.max_pending_jobs"
        if backlog.size + size > limits.max_pending_job_bytes:
            return "limits.max_pending_job_bytes"
        return None

    def added(self, tenant: str, size: int) -> None:
        """Count a job of `size` stored bytes the API has just written for `tenant`."""
        backlog = self._known.get(tenant)
        if backlog is not None:
            backlog.jobs += 1
            backlog.size += size

    def removed(self, tenant: str, size: int) -> None:
        """Forget a job of `size` stored bytes the API has just ended (cancelled) for `tenant`."""
        backlog = self._known.get(tenant)
        if backlog is not None:
            backlog.jobs = max(0, backlog.jobs - 1)
            backlog.size = max(0, backlog.size - size)


def check_service_events(tenant: str, in_use: int, *, retry_after_s: float,
                         limit: int = MAX_TENANT_SERVICE_EVENTS) -> None:
    """Decide whether `tenant`, with `in_use` service events stored and not yet out of use (ended within
    `SERVICE_EVENT_MEMORY_S`), may store one more; raise `LimitExceeded` if not (retry in `retry_after_s`: when
    the first of them goes out of use, unless the tenant deletes one)."""
    if in_use + 1 <= limit:
        return
    days = SERVICE_EVENT_MEMORY_S / 86400
    raise LimitExceeded(
        "max_service_events",
        f"tenant {tenant} has {in_use} service events in use (not ended, or ended within {days:g} days), at its "
        f"limit of {limit}: delete one (DELETE /v1/services/NAME/events/ID)",
        retry_after_s,
    )
