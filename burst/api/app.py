"""The daemon's HTTP API (FastAPI): health, status, the current plan, the embedded job queue, metrics, agents.

Served by `burst run --api HOST:PORT` (127.0.0.1 by default); the OpenAPI
schema is at `/openapi.json` and browsable at `/docs`.

| endpoint | who |
| --- | --- |
| `GET /healthz`, `GET /readyz` | anyone (liveness; ready once a tick ran recently) |
| `GET /v1/status`, `GET /v1/plan`, `GET /metrics` | admin token |
| `GET /v1/jobs`, `POST /v1/jobs`, `GET /v1/jobs/{id}`, `DELETE /v1/jobs/{id}` | admin, or a tenant token for its own jobs |
| `GET|POST /v1/services/{name}/events`, `DELETE /v1/services/{name}/events/{id}` | a tenant token for its own services, or admin with `?tenant=` (burst.api.service_events) |
| `/agent/v1/...` | each node agent's own token (burst.agent.router) |

Tokens are declared in the OpenAPI schema as the `bearerAuth` security
scheme (HTTP bearer), required by every route here but the health checks. A
missing or unknown token is 401; a tenant token reaching for another
tenant's jobs, or for an admin endpoint, is 403, and another tenant's job
answers exactly as an unknown one does (404), so job ids cannot be probed. A
job's `id`, when the submitter gives one, is its tenant's own: the job is
stored as `TENANT:ID` (a tenant names its jobs by `ID` or `TENANT:ID`), so two
tenants may use the same ids and a taken id (409) is always the caller's own.
A bad payload is 422 naming the field (values outside `burst.bounds` included,
control characters in text, and JSON of the wrong type: `"gpus": true` is not
a number and `"fault_tolerant": "yes"` not a boolean); a body over
`burst.bounds.MAX_BODY_BYTES` is 413. A submit beyond its tenant's `limits`
(pending jobs, their stored bytes, submits per second: the tenant's policy) is
429 with `Retry-After` and the limit's name (`burst.api.limits`). Listings
are pages: `limit` jobs at most (and fewer once their records pass
`burst.bounds.MAX_PAGE_BYTES`) with an opaque `next_cursor` for the next page,
null on the last. A cancel writes only over the record it read
(`Store.swap_job`), so of concurrent cancels of one job exactly one answers
200 and the others 409, and a cancel never overwrites what the loop wrote
meanwhile. Job writes go to the state store's embedded queue (its own SQLite
connection, beside the loop's: WAL lets them share the file).
"""

import base64
import binascii
import contextlib
import dataclasses
import json
import math
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from burst import codec
from burst.agent.channel import Eviction
from burst.agent.hub import AgentHub
from burst.agent.router import agent_router
from burst.api.group_commit import GroupCommit
from burst.api.limits import Backlogs, BodyLimit, LimitExceeded, SubmitRate
from burst.api.service_events import ServiceEventBook, service_event_router
from burst.api.tokens import ApiTokens, Principal
from burst.bounds import (
    DEFAULT_PAGE_JOBS,
    MAX_ARG_LENGTH,
    MAX_JOB_GPUS,
    MAX_JOB_ID_LENGTH,
    MAX_LIST_LENGTH,
    MAX_NAME_LENGTH,
    MAX_PAGE_BYTES,
    MAX_PAGE_JOBS,
    MAX_PRIORITY,
    MAX_TEXT_LENGTH,
    control_problem,
)
from burst.codec import job_to_json
from burst.model import Job, JobState, Policy, SubmitLimits
from burst.state import Store

JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
BEARER = HTTPBearer(
    scheme_name="bearerAuth", auto_error=False,
    description="The admin token or a tenant's token (files in api.tokens_dir).",
)
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or unknown bearer token"},
    403: {"description": "The token may not do this (a tenant token on another tenant, or on an admin endpoint)"},
}
SUBMIT_RESPONSES: dict[int | str, dict[str, Any]] = {
    **AUTH_RESPONSES,
    409: {"description": "The tenant already has a job with that id"},
    429: {"description": "Beyond one of the tenant's limits: the body names it (`limit`), `Retry-After` says "
          "when to try again (seconds)"},
}
CANCEL_RESPONSES: dict[int | str, dict[str, Any]] = {
    **AUTH_RESPONSES,
    404: {"description": "No such job (or another tenant's)"},
    409: {"description": "The job has already ended (a second cancel answers this)"},
}
CANCEL_TRIES = 5
"""Reads a cancel makes of a job the loop keeps changing under it before it answers 409 (try again)."""


class DaemonView:
    """What the loop last saw and decided, for the API to read (updated after every tick; thread-safe)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._status: dict[str, Any] = {}
        self._plan: dict[str, Any] | None = None
        self._at: datetime | None = None
        self._failing = False  # the last tick failed (a store outage, a lost lease): not ready until one succeeds

    def update(self, at: datetime, status: dict[str, Any], plan: dict[str, Any]) -> None:
        with self._lock:
            self._at, self._status, self._plan = at, status, plan
            self._failing = False

    def failed(self) -> None:
        """The last tick failed: readiness is false until a tick succeeds."""
        with self._lock:
            self._failing = True

    @property
    def failing(self) -> bool:
        with self._lock:
            return self._failing

    def read(self) -> tuple[datetime | None, dict[str, Any], dict[str, Any] | None]:
        with self._lock:
            return self._at, dict(self._status), self._plan


class JobSubmission(BaseModel):
    """A job for the embedded queue."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)  # true is not 1, "yes" not true

    tenant: str = Field(min_length=1, max_length=MAX_NAME_LENGTH,
                        description="Tenant the job belongs to (its policy applies).")
    gpus: int = Field(ge=0, le=MAX_JOB_GPUS, description="Whole GPUs (0 with gpu_share for a fraction of one).")
    gpu_share: float | None = Field(default=None, gt=0, le=1, description="Fraction of one GPU, with gpus 0.")
    gpu_model: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT_LENGTH,
                                  description="GPU model needed, e.g. A100 (default any).")
    priority: int | None = Field(
        default=None, ge=-MAX_PRIORITY, le=MAX_PRIORITY,
        description="Priority within the tenant: orders this tenant's own jobs only; between tenants their "
        "policies decide.",
    )
    fault_tolerant: bool = Field(default=False, description="Resumes from checkpoints, so it may run on spot.")
    checkpoint_interval: str | None = Field(default=None, max_length=64,
                                            description="How often it checkpoints, e.g. 15m (at most 366 days).")
    duration: str | None = Field(default=None, max_length=64, description="Expected run time, e.g. 2h (at most 366 days).")
    id: str | None = Field(default=None, max_length=MAX_NAME_LENGTH,
                           description="Job id within the tenant (default generated): letters, digits, . _ -; "
                           "stored, and answered, as TENANT:ID")
    command: list[Annotated[str, Field(max_length=MAX_ARG_LENGTH)]] | None = Field(
        default=None, min_length=1, max_length=MAX_LIST_LENGTH,
        description="argv an on-prem node agent runs for the job (default: none); no control characters.",
    )

    @field_validator("tenant", "gpu_model")
    @classmethod
    def _no_control(cls, value: str | None) -> str | None:
        problem = None if value is None else control_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("command")
    @classmethod
    def _argv(cls, value: list[str] | None) -> list[str] | None:
        for i, arg in enumerate(value or ()):
            problem = control_problem(arg)
            if problem is not None:
                raise ValueError(f"argument {i}: {problem}")
        return value

    @field_validator("checkpoint_interval", "duration")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        from policies import parse_duration

        if value is not None:
            parse_duration(value)  # raises ValueError with the reason
        return value

    @field_validator("id")
    @classmethod
    def _id(cls, value: str | None) -> str | None:
        if value is not None and not JOB_ID.fullmatch(value):  # match() would let a trailing newline through
            raise ValueError("must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "JobSubmission":
        if self.gpus == 0 and self.gpu_share is None:
            raise ValueError("gpus must be >= 1, or 0 with a gpu_share")
        if self.gpus > 0 and self.gpu_share is not None:
            raise ValueError("gpu_share needs gpus 0")
        if self.checkpoint_interval is not None and not self.fault_tolerant:
            raise ValueError("checkpoint_interval needs fault_tolerant true")
        return self

    def to_job(self, submitted_at: datetime) -> Job:
        from policies import parse_duration

        return Job(
            id=scoped_id(self.tenant, self.id) if self.id else f"job-{uuid.uuid4().hex[:12]}",
            tenant=self.tenant,
            gpus=self.gpus,
            gpu_share=self.gpu_share,
            submitted_at=submitted_at,
            gpu_model=self.gpu_model,
            priority=self.priority,
            fault_tolerant=self.fault_tolerant,
            checkpoint_interval_s=parse_duration(self.checkpoint_interval) if self.checkpoint_interval else None,
            duration_s=parse_duration(self.duration) if self.duration else None,
            declared_duration_s=parse_duration(self.duration) if self.duration else None,
            command=tuple(self.command or ()),
        )


def scoped_id(tenant: str, job_id: str) -> str:
    """The stored id of a job its submitter named `job_id`: `TENANT:ID` (the separator is in neither part)."""
    return f"{tenant}:{job_id}"


def _field_error(field: str, msg: str) -> HTTPException:
    return HTTPException(422, detail=[{"loc": ["body", field], "msg": msg, "type": "value_error"}])


def validation_detail(exc: RequestValidationError) -> list[dict[str, Any]]:
    """Decide the 422 detail for a request that did not validate: each error's field (`loc`), message and type.

    The offending input is left out (it may be megabytes, or a NaN JSON cannot
    carry), and messages are cut to a few hundred characters.
    """
    out: list[dict[str, Any]] = []
    for err in exc.errors():
        loc = [p if isinstance(p, int) else str(p)[:MAX_NAME_LENGTH] for p in err.get("loc", ())]
        out.append({"loc": loc, "msg": str(err.get("msg", "invalid value"))[:300], "type": str(err.get("type", ""))})
    return out


def _record(store: Store, job_id: str) -> tuple[Job, str] | None:
    """The stored job and its version, or None when there is none or its record does not decode (the next tick
    fails it)."""
    try:
        return store.job_record(job_id)
    except ValueError:
        return None


def encode_cursor(submitted_at: str, job_id: str) -> str:
    """The opaque cursor of a listing page that ends with this job (its sort key, base64url JSON)."""
    return base64.urlsafe_b64encode(json.dumps([submitted_at, job_id]).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    """Decide the sort key a cursor from `encode_cursor` stands for; ValueError when it is not one."""
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError("not a cursor this API gave") from None
    if not (isinstance(key, list) and len(key) == 2 and all(isinstance(k, str) for k in key)):
        raise ValueError("not a cursor this API gave")
    return key[0], key[1]


def _not_found(job_id: str) -> HTTPException:
    return HTTPException(404, f"no job {job_id}" if len(job_id) <= MAX_JOB_ID_LENGTH else "no job with that id")


class JobQueue:
    """The embedded queue as the API serves it: one store connection behind one lock, each tenant's limits
    (`burst.api.limits`), and the agents' hub to tell of a cancelled running job."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], datetime],
        tenants: Callable[[], set[str]],
        limits_of: Callable[[str], SubmitLimits],
        limits_clock: Callable[[], float],
        retry_after_s: Callable[[], float],
        hub: AgentHub | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.tenants = tenants
        self.limits_of = limits_of
        self.retry_after_s = retry_after_s
        self.hub = hub
        self.lock = threading.Lock()
        self.rate = SubmitRate(limits_clock)
        self.backlogs = Backlogs(store.tenant_backlog, limits_clock)
        self.commits = GroupCommit(self._add_jobs)

    def page(self, who: Principal, tenant: str | None, states: list[JobState] | None, limit: int,
             cursor: str | None) -> dict[str, Any]:
        """Decide one page of the jobs `who` may see, oldest submission first, and the cursor of the next."""
        if tenant is not None and not who.may_see(tenant):
            raise HTTPException(403, f"a token of tenant {who.tenant} cannot read tenant {tenant}'s jobs")
        try:
            after = decode_cursor(cursor) if cursor is not None else None
        except ValueError as exc:
            raise HTTPException(422, detail=[{"loc": ["query", "cursor"], "msg": str(exc), "type": "value_error"}]) \
                from None
        with self.lock:
            rows, more = self.store.job_page(states=states or None, tenant=tenant if tenant is not None else who.tenant,
                                             after=after, limit=limit, max_bytes=MAX_PAGE_BYTES)
        jobs: list[dict[str, Any]] = []
        for _, _, text in rows:
            try:
                jobs.append(job_to_json(codec.loads(Job, text)))
            except (ValueError, TypeError, OverflowError):
                continue  # a record that does not decode is left out (the tick fails its job)
        last = rows[-1] if rows and more else None
        return {"jobs": jobs, "next_cursor": encode_cursor(last[0], last[1]) if last is not None else None}

    def submit(self, body: JobSubmission, who: Principal) -> dict[str, Any]:
        """Decide whether the job is taken: the caller's tenant, a known one, within its limits, a free id."""
        if not who.may_see(body.tenant):
            raise HTTPException(403, f"a token of tenant {who.tenant} cannot submit for tenant {body.tenant}")
        if body.tenant not in self.tenants():
            raise _field_error("tenant", f"unknown tenant {body.tenant!r}: it has no policy file")
        limits = self.limits_of(body.tenant)
        self.rate.take(body.tenant, limits)
        job = body.to_job(self.clock())
        size = len(codec.dumps(job))  # the record as stored (ASCII JSON: characters are bytes)
        with self.lock:  # the check and its reservation are one step; the write joins the next shared commit
            self.backlogs.check(body.tenant, limits, size, retry_after_s=self.retry_after_s())
            self.backlogs.added(job.tenant, size)
        try:
            stored = self.commits.add(job)
        except BaseException:
            stored = False
            raise
        finally:
            if not stored:
                with self.lock:
                    self.backlogs.removed(job.tenant, size)
        if not stored:  # ids are scoped by tenant: a taken one is the caller's tenant's own
            raise HTTPException(409, f"job {job.id} already exists: choose another id, or leave id out for a "
                                "generated one")
        return job_to_json(job)

    def _add_jobs(self, jobs: Sequence[Job]) -> list[bool]:
        """One shared commit of submitted jobs (`GroupCommit`), each stamped at its own submission."""
        with self.lock:
            return self.store.add_jobs(jobs, at=min(j.submitted_at for j in jobs))

    def own(self, job_id: str, who: Principal) -> tuple[Job, str]:
        """Decide which job `job_id` names for `who`, with its version; another tenant's job answers exactly as
        an unknown id (404)."""
        with self.lock:
            found = _record(self.store, job_id)
            if (found is None or not who.may_see(found[0].tenant)) and who.tenant is not None and ":" not in job_id:
                found = _record(self.store, scoped_id(who.tenant, job_id))  # a tenant names its own jobs by their ID
        if found is None or not who.may_see(found[0].tenant):
            raise _not_found(job_id)
        return found

    def cancel(self, job_id: str, who: Principal) -> dict[str, Any]:
        """Decide whether this request cancels the job: only if it is still active and nobody changed it between
        the read and the write (compare-and-set); a job already ended answers 409."""
        for _ in range(CANCEL_TRIES):
            job, version = self.own(job_id, who)
            if not job.active:
                raise HTTPException(409, f"job {job_id} is already {job.state.value}")
            done = dataclasses.replace(job, state=JobState.CANCELLED)
            with self.lock:
                if self.store.swap_job(done, version=version, at=self.clock()):
                    self.backlogs.removed(job.tenant, len(version))
                    break
        else:  # the loop rewrote it between every read and write
            raise HTTPException(409, f"job {job_id} changed while it was being cancelled: try again")
        if self.hub is not None and job.state is not JobState.PENDING:
            for node_id in job.node_ids:  # its process stops now, not when the node is next reclaimed
                if self.hub.knows(node_id):
                    self.hub.evict(node_id, Eviction(
                        job_id=job.id, reason=f"cancelled through the API by {who.tenant or 'the admin'}"))
        return job_to_json(done)


def job_router(queue: JobQueue, principal: Callable[..., Principal]) -> APIRouter:
    """The `/v1/jobs` routes over `queue`, each caller resolved by `principal` (the bearer-token dependency)."""
    router = APIRouter()
    Who = Annotated[Principal, Depends(principal)]

    @router.get("/v1/jobs", summary="Jobs in the embedded queue, a page at a time (a tenant token sees its own only)",
                responses=AUTH_RESPONSES)
    def list_jobs(
        who: Who,
        tenant: Annotated[str | None, Query(description="Only this tenant's jobs")] = None,
        state: Annotated[list[JobState] | None, Query(description="Only jobs in these states")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE_JOBS, description="Most jobs on this page (fewer once their "
                                    f"records pass {MAX_PAGE_BYTES // 1024**2} MiB)")] = DEFAULT_PAGE_JOBS,
        cursor: Annotated[str | None, Query(max_length=2048, description="The next_cursor of the page before "
                                            "(none: the first page)")] = None,
    ) -> dict[str, Any]:
        return queue.page(who, tenant, state, limit, cursor)

    @router.post("/v1/jobs", status_code=201, summary="Submit a job to the embedded queue", responses=SUBMIT_RESPONSES)
    def submit(body: JobSubmission, who: Who) -> dict[str, Any]:
        return queue.submit(body, who)

    @router.get("/v1/jobs/{job_id}", summary="One job", responses=AUTH_RESPONSES)
    def get_job(job_id: str, who: Who) -> dict[str, Any]:
        return job_to_json(queue.own(job_id, who)[0])

    @router.delete("/v1/jobs/{job_id}", summary="Cancel a job (pending or running); its GPUs are freed next tick",
                   responses=CANCEL_RESPONSES)
    def cancel(job_id: str, who: Who) -> dict[str, Any]:
        return queue.cancel(job_id, who)

    return router


def bearer_auth(tokens: ApiTokens) -> tuple[Callable[..., Principal], Callable[..., Principal]]:
    """The two bearer-token dependencies: who a request acts as (401 without a known token), and the same only
    for the admin (403 for a tenant)."""

    def principal(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)]) -> Principal:
        if credentials is None:  # no Authorization header, or not a bearer one
            raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
        who = tokens.resolve(credentials.credentials)
        if who is None:
            raise HTTPException(401, "unknown token", headers={"WWW-Authenticate": "Bearer"})
        return who

    def admin(who: Annotated[Principal, Depends(principal)]) -> Principal:
        if not who.is_admin:
            raise HTTPException(403, "this endpoint needs the admin token")
        return who

    return principal, admin


def daemon_router(view: DaemonView, clock: Callable[[], datetime], registry: CollectorRegistry | None,
                  admin: Callable[..., Principal]) -> APIRouter:
    """The health checks (no token) and the daemon's own views: status, plan, metrics (the admin's)."""
    router = APIRouter()

    @router.get("/healthz", summary="Liveness: the process serves requests")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/readyz", summary="Readiness: the last tick succeeded, within three loop intervals")
    def readyz(response: Response) -> dict[str, Any]:
        at, _, _ = view.read()
        failing = view.failing
        ready = at is not None and not failing and (clock() - at).total_seconds() <= 3 * view.interval_s
        if not ready:
            response.status_code = 503
        return {"ready": ready, "last_tick": at.isoformat() if at else None, "failing": failing}

    @router.get("/v1/status", summary="Tiers, groups, warm pools, queue and spend rate at the last tick",
                responses=AUTH_RESPONSES)
    def status(_: Annotated[Principal, Depends(admin)]) -> dict[str, Any]:
        return view.read()[1]

    @router.get("/v1/plan", summary="The plan of the last tick, with every action's reason and every hold",
                responses=AUTH_RESPONSES)
    def current_plan(_: Annotated[Principal, Depends(admin)]) -> dict[str, Any]:
        plan = view.read()[2]
        if plan is None:
            raise HTTPException(404, "no tick has run yet")
        return plan

    @router.get("/metrics", summary="Prometheus metrics (text exposition format)", responses=AUTH_RESPONSES)
    def metrics(_: Annotated[Principal, Depends(admin)]) -> Response:
        body = generate_latest(registry) if registry is not None else b""
        return Response(content=body, media_type=CONTENT_TYPE_LATEST)

    return router


def api_app(
    *,
    store_path: Path | str,
    tokens: ApiTokens,
    view: DaemonView,
    clock: Callable[[], datetime],
    tenants: Callable[[], set[str]],
    registry: CollectorRegistry | None = None,
    hub: AgentHub | None = None,
    policies: Callable[[], Mapping[str, Policy]] | None = None,
    limits_clock: Callable[[], float] = time.monotonic,
) -> FastAPI:
    """The API app over the daemon's state file, its last view, and (optionally) the agents' hub.

    `policies` gives each tenant's current policy, whose `limits` bound its
    submits (the defaults where none is given) and whose `services` are those
    events may be declared for; `limits_clock` (monotonic
    seconds) times the submit rate and the backlog recounts.
    """

    def limits_of(tenant: str) -> SubmitLimits:
        policy = policies().get(tenant) if policies is not None else None
        return policy.limits if policy is not None else SubmitLimits()

    store = Store.open(store_path)
    queue = JobQueue(store, clock=clock, tenants=tenants, limits_of=limits_of, limits_clock=limits_clock,
                     retry_after_s=lambda: max(1.0, math.ceil(view.interval_s)), hub=hub)  # jobs leave on ticks

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        store.close()

    app = FastAPI(title="burst controller API", version="1", lifespan=lifespan)
    app.add_middleware(BodyLimit)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": validation_detail(exc)})

    @app.exception_handler(LimitExceeded)
    async def _limited(_: Request, exc: LimitExceeded) -> JSONResponse:
        return JSONResponse(status_code=429, content=exc.body(), headers={"Retry-After": str(exc.retry_after_s)})

    principal, admin = bearer_auth(tokens)
    app.include_router(daemon_router(view, clock, registry, admin))
    app.include_router(job_router(queue, principal))
    app.include_router(service_event_router(ServiceEventBook(store, clock=clock, policies=policies), principal))
    if hub is not None:
        app.include_router(agent_router(hub))
    return app
