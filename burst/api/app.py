"""The daemon's HTTP API (FastAPI): health, status, the current plan, the embedded job queue, metrics, agents.

Served by `burst run --api HOST:PORT` (127.0.0.1 by default); the OpenAPI
schema is at `/openapi.json` and browsable at `/docs`.

| endpoint | who |
| --- | --- |
| `GET /healthz`, `GET /readyz` | anyone (liveness; ready once a tick ran recently) |
| `GET /v1/status`, `GET /v1/plan`, `GET /metrics` | admin token |
| `GET /v1/jobs`, `POST /v1/jobs`, `GET /v1/jobs/{id}`, `DELETE /v1/jobs/{id}` | admin, or a tenant token for its own jobs |
| `/agent/v1/...` | each node agent's own token (burst.agent.router) |

Tokens are declared in the OpenAPI schema as the `bearerAuth` security
scheme (HTTP bearer), required by every route here but the health checks. A
missing or unknown token is 401; a tenant token reaching for another
tenant's jobs, or for an admin endpoint, is 403, and another tenant's job
answers exactly as an unknown one does (404), so job ids cannot be probed. A
job's `id`, when the submitter gives one, is its tenant's own: the job is
stored as `TENANT:ID` (a tenant names its jobs by `ID` or `TENANT:ID`), so two
tenants may use the same ids and a taken id (409) is always the caller's own.
A bad payload is 422 naming the field (values outside `burst.bounds` included);
a body over `burst.bounds.MAX_BODY_BYTES` is 413. Job writes go to the state
store's embedded queue (its own SQLite connection, beside the loop's: WAL lets
them share the file).
"""

import contextlib
import dataclasses
import re
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from burst.agent.channel import Eviction
from burst.agent.hub import AgentHub
from burst.agent.router import agent_router
from burst.api.limits import BodyLimit
from burst.api.tokens import ApiTokens, Principal
from burst.bounds import (
    MAX_ARG_LENGTH,
    MAX_JOB_GPUS,
    MAX_JOB_ID_LENGTH,
    MAX_LIST_LENGTH,
    MAX_NAME_LENGTH,
    MAX_PRIORITY,
    MAX_TEXT_LENGTH,
)
from burst.codec import job_to_json
from burst.model import Job, JobState
from burst.state import JobExists, Store

JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
BEARER = HTTPBearer(
    scheme_name="bearerAuth", auto_error=False,
    description="The admin token or a tenant's token (files in api.tokens_dir).",
)
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or unknown bearer token"},
    403: {"description": "The token may not do this (a tenant token on another tenant, or on an admin endpoint)"},
}


class DaemonView:
    """What the loop last saw and decided, for the API to read (updated after every tick; thread-safe)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._status: dict[str, Any] = {}
        self._plan: dict[str, Any] | None = None
        self._at: datetime | None = None

    def update(self, at: datetime, status: dict[str, Any], plan: dict[str, Any]) -> None:
        with self._lock:
            self._at, self._status, self._plan = at, status, plan

    def read(self) -> tuple[datetime | None, dict[str, Any], dict[str, Any] | None]:
        with self._lock:
            return self._at, dict(self._status), self._plan


class JobSubmission(BaseModel):
    """A job for the embedded queue."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

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
        description="argv an on-prem node agent runs for the job (default: none).",
    )

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
        if value is not None and not JOB_ID.match(value):
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


def _readable(store: Store, job_id: str) -> Job | None:
    """The stored job, or None when there is none or its record does not decode (the next tick fails it)."""
    try:
        return store.get_job(job_id)
    except ValueError:
        return None


def _not_found(job_id: str) -> HTTPException:
    return HTTPException(404, f"no job {job_id}" if len(job_id) <= MAX_JOB_ID_LENGTH else "no job with that id")


def api_app(
    *,
    store_path: Path | str,
    tokens: ApiTokens,
    view: DaemonView,
    clock: Callable[[], datetime],
    tenants: Callable[[], set[str]],
    registry: CollectorRegistry | None = None,
    hub: AgentHub | None = None,
) -> FastAPI:
    """The API app over the daemon's state file, its last view, and (optionally) the agents' hub."""
    store_lock = threading.Lock()
    store = Store.open(store_path)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        store.close()

    app = FastAPI(title="burst controller API", version="1", lifespan=lifespan)
    app.add_middleware(BodyLimit)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": validation_detail(exc)})

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

    @app.get("/healthz", summary="Liveness: the process serves requests")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", summary="Readiness: a tick completed within three loop intervals")
    def readyz(response: Response) -> dict[str, Any]:
        at, _, _ = view.read()
        ready = at is not None and (clock() - at).total_seconds() <= 3 * view.interval_s
        if not ready:
            response.status_code = 503
        return {"ready": ready, "last_tick": at.isoformat() if at else None}

    @app.get("/v1/status", summary="Tiers, groups, warm pools, queue and spend rate at the last tick",
             responses=AUTH_RESPONSES)
    def status(_: Annotated[Principal, Depends(admin)]) -> dict[str, Any]:
        return view.read()[1]

    @app.get("/v1/plan", summary="The plan of the last tick, with every action's reason and every hold",
             responses=AUTH_RESPONSES)
    def current_plan(_: Annotated[Principal, Depends(admin)]) -> dict[str, Any]:
        plan = view.read()[2]
        if plan is None:
            raise HTTPException(404, "no tick has run yet")
        return plan

    @app.get("/v1/jobs", summary="Jobs in the embedded queue (a tenant token sees its own only)",
             responses=AUTH_RESPONSES)
    def list_jobs(
        who: Annotated[Principal, Depends(principal)],
        tenant: Annotated[str | None, Query(description="Only this tenant's jobs")] = None,
        state: Annotated[list[JobState] | None, Query(description="Only jobs in these states")] = None,
    ) -> list[dict[str, Any]]:
        if tenant is not None and not who.may_see(tenant):
            raise HTTPException(403, f"a token of tenant {who.tenant} cannot read tenant {tenant}'s jobs")
        with store_lock:
            jobs = store.jobs(states=state or None, tenant=tenant if tenant is not None else who.tenant,
                              unreadable=[])  # a record that does not decode is left out (the tick fails its job)
        return [job_to_json(j) for j in jobs]

    @app.post("/v1/jobs", status_code=201, summary="Submit a job to the embedded queue",
              responses=AUTH_RESPONSES)
    def submit(body: JobSubmission, who: Annotated[Principal, Depends(principal)]) -> dict[str, Any]:
        if not who.may_see(body.tenant):
            raise HTTPException(403, f"a token of tenant {who.tenant} cannot submit for tenant {body.tenant}")
        if body.tenant not in tenants():
            raise _field_error("tenant", f"unknown tenant {body.tenant!r}: it has no policy file")
        job = body.to_job(clock())
        with store_lock:
            try:
                store.add_job(job, at=job.submitted_at)
            except JobExists:  # ids are scoped by tenant: a taken one is the caller's tenant's own
                raise HTTPException(409, f"job {job.id} already exists: choose another id, or leave id out "
                                    "for a generated one") from None
        return job_to_json(job)

    def _own_job(job_id: str, who: Principal) -> Job:
        """The job, if `who` may see it; another tenant's job answers exactly as an unknown id (404)."""
        with store_lock:
            job = _readable(store, job_id)
            if (job is None or not who.may_see(job.tenant)) and who.tenant is not None and ":" not in job_id:
                job = _readable(store, scoped_id(who.tenant, job_id))  # a tenant names its own jobs by their ID
        if job is None or not who.may_see(job.tenant):
            raise _not_found(job_id)
        return job

    @app.get("/v1/jobs/{job_id}", summary="One job", responses=AUTH_RESPONSES)
    def get_job(job_id: str, who: Annotated[Principal, Depends(principal)]) -> dict[str, Any]:
        return job_to_json(_own_job(job_id, who))

    @app.delete("/v1/jobs/{job_id}", summary="Cancel a job (pending or running); its GPUs are freed next tick",
                responses=AUTH_RESPONSES)
    def cancel(job_id: str, who: Annotated[Principal, Depends(principal)]) -> dict[str, Any]:
        job = _own_job(job_id, who)
        if not job.active:
            raise HTTPException(409, f"job {job_id} is already {job.state.value}")
        done = dataclasses.replace(job, state=JobState.CANCELLED)
        with store_lock:
            store.put_job(done, at=clock())
        if hub is not None and job.state is not JobState.PENDING:
            for node_id in job.node_ids:  # its process stops now, not when the node is next reclaimed
                if hub.knows(node_id):
                    hub.evict(node_id, Eviction(job_id=job.id, reason=f"cancelled through the API by {who.tenant or 'the admin'}"))
        return job_to_json(done)

    @app.get("/metrics", summary="Prometheus metrics (text exposition format)", responses=AUTH_RESPONSES)
    def metrics(_: Annotated[Principal, Depends(admin)]) -> Response:
        body = generate_latest(registry) if registry is not None else b""
        return Response(content=body, media_type=CONTENT_TYPE_LATEST)

    if hub is not None:
        app.include_router(agent_router(hub))
    return app
