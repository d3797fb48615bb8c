"""The `/v1/services/{name}/events` routes: a tenant declares, lists and deletes its services' events.

An event (a promotion, a launch) is a window of unusual demand for one
service, with the factor expected on its request rate (`multiplier`) or
none (the forecaster learns it). Stored in the state store, it survives a
restart, and the service loop adds it to the events the service's policy
declares (`burst.runtime.service_loop`) until it has ended
`burst.bounds.SERVICE_EVENT_MEMORY_S` ago.

A tenant token acts on its own tenant's services; the admin token names the
tenant (`?tenant=`). A service the tenant's policy does not declare answers
404, another tenant's included (so names cannot be probed), and so does an
event id that is not that service's. A bad body is 422 naming the field
(`end` not after `start`, `multiplier` outside (0, MAX_EVENT_MULTIPLIER], an
unknown field, an event ended before the window the loop still reads), with
nothing stored; one event beyond the tenant's limit
(`burst.api.limits.check_service_events`) is 429.
"""

import math
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationInfo, field_validator

from burst.api.limits import check_service_events
from burst.api.tokens import Principal
from burst.bounds import (
    MAX_EVENT_MULTIPLIER,
    MAX_NAME_LENGTH,
    MAX_TEXT_LENGTH,
    SERVICE_EVENT_MEMORY_S,
    control_problem,
)
from burst.model import Policy, Service, ServiceEvent
from burst.state import Store, StoredServiceEvent
from policies.services import Instant

MAX_EVENT_ID = 2**63 - 1
"""Largest event id (the store's ids are 64-bit)."""

RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or unknown bearer token"},
    403: {"description": "A tenant token naming another tenant (`?tenant=`)"},
    404: {"description": "No such service in the tenant's policy (another tenant's included), or no such event"},
}
ADD_RESPONSES: dict[int | str, dict[str, Any]] = {
    **RESPONSES,
    429: {"description": "The tenant has as many events in use as it may keep: the body names the limit "
          "(`limit`), `Retry-After` says when one goes out of use (seconds)"},
}


class ServiceEventSubmission(BaseModel):
    """A window of unusual demand for one service (a promotion, a launch)."""

    # Each field strict ("2" is not a number, true not 1); not the whole model, whose strict datetimes would refuse
    # the ISO text `Instant` passes on.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    start: Instant = Field(description="When the event starts: ISO 8601 with a timezone (stored in UTC), or a date "
                           "(its 00:00 UTC).")
    end: Instant = Field(description="When it ends (exclusive), after start.")
    multiplier: Annotated[float, Strict(), Field(gt=0, le=MAX_EVENT_MULTIPLIER)] | None = Field(
        default=None,
        description=f"Expected factor on the request rate during the window (> 0 .. {MAX_EVENT_MULTIPLIER:g}); "
        "absent or null: the forecaster learns it.")
    name: Annotated[str, Strict(), Field(min_length=1, max_length=MAX_TEXT_LENGTH)] | None = Field(
        default=None, description="Label of the event, optional (events sharing one share a learnt effect).")

    @field_validator("end")
    @classmethod
    def _after_start(cls, value: datetime, info: ValidationInfo) -> datetime:
        start = info.data.get("start")
        if start is not None and value <= start:
            raise ValueError(f"end {value.isoformat()} is not after start {start.isoformat()}")
        return value

    @field_validator("name")
    @classmethod
    def _no_control(cls, value: str | None) -> str | None:
        problem = None if value is None else control_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    def to_event(self) -> ServiceEvent:
        """Decide the domain `ServiceEvent` of this body."""
        return ServiceEvent(start=self.start, end=self.end, multiplier=self.multiplier, name=self.name)


class ServiceEventBook:
    """Services' events as the API serves them: which service a request names, for whom, and each tenant's limit."""

    def __init__(self, store: Store, *, clock: Callable[[], datetime],
                 policies: Callable[[], Mapping[str, Policy]] | None) -> None:
        self.store = store
        self.clock = clock
        self.policies = policies
        self.lock = threading.Lock()  # a tenant's count and the write it allows are one step

    def service(self, who: Principal, tenant: str | None, name: str) -> Service:
        """Decide which tenant's service `name` the request acts on: the token's tenant (the admin names one);
        404 unless that tenant's current policy declares it."""
        if who.tenant is None and tenant is None:
            raise HTTPException(422, detail=[{"loc": ["query", "tenant"], "type": "missing",
                                              "msg": "the admin token names the tenant: ?tenant=NAME"}])
        if tenant is not None and not who.may_see(tenant):
            raise HTTPException(403, f"a token of tenant {who.tenant} cannot act on tenant {tenant}'s services")
        owner = who.tenant or tenant or ""
        policy = self.policies().get(owner) if self.policies is not None else None
        for service in policy.services if policy is not None else ():
            if service.name == name:
                return service
        raise HTTPException(404, f"no service {name}" if len(name) <= MAX_NAME_LENGTH else "no service with that name")

    def add(self, who: Principal, tenant: str | None, name: str, body: ServiceEventSubmission) -> dict[str, Any]:
        """Decide whether the event is stored: a declared service, an event still to be read, within the limit."""
        service = self.service(who, tenant, name)
        now = self.clock()
        out_of_use = now - timedelta(seconds=SERVICE_EVENT_MEMORY_S)
        if body.end <= out_of_use:
            raise HTTPException(422, detail=[{"loc": ["body", "end"], "type": "value_error", "msg": (
                f"end {body.end.isoformat()} is more than {SERVICE_EVENT_MEMORY_S / 86400:g} days ago: the "
                "forecaster no longer reads an event that old")}])
        with self.lock:
            in_use = self.store.service_events(service.tenant, ended_after=out_of_use)
            first_out = min((e.event.end for e in in_use), default=now) - out_of_use
            check_service_events(service.tenant, len(in_use), retry_after_s=math.ceil(first_out.total_seconds()))
            stored = self.store.add_service_event(service.tenant, service.name, body.to_event(), at=now)
        return stored.to_json()

    def listed(self, who: Principal, tenant: str | None, name: str) -> list[StoredServiceEvent]:
        """The events stored for the service, in start order."""
        service = self.service(who, tenant, name)
        return self.store.service_events(service.tenant, service.name)

    def delete(self, who: Principal, tenant: str | None, name: str, event_id: int) -> None:
        """Delete the service's event `event_id`; 404 when the service has none by that id."""
        service = self.service(who, tenant, name)
        if not self.store.delete_service_event(service.tenant, service.name, event_id):
            raise HTTPException(404, f"no event {event_id} of service {service.name}")


def service_event_router(book: ServiceEventBook, principal: Callable[..., Principal]) -> APIRouter:
    """The `/v1/services/{name}/events` routes over `book`, each caller resolved by `principal` (the bearer-token
    dependency)."""
    router = APIRouter()
    Who = Annotated[Principal, Depends(principal)]
    Tenant = Annotated[str | None, Query(max_length=MAX_NAME_LENGTH,
                                         description="The service's tenant: needed with the admin token")]
    Name = Annotated[str, Path(description="The service, as its tenant's policy names it")]

    @router.post("/v1/services/{name}/events", status_code=201, responses=ADD_RESPONSES,
                 summary="Declare an event (a promotion, a launch) for one of the tenant's services")
    def add(name: Name, body: ServiceEventSubmission, who: Who, tenant: Tenant = None) -> dict[str, Any]:
        return book.add(who, tenant, name, body)

    @router.get("/v1/services/{name}/events", responses=RESPONSES,
                summary="The events declared through the API for a service, in start order")
    def listed(name: Name, who: Who, tenant: Tenant = None) -> dict[str, Any]:
        return {"events": [e.to_json() for e in book.listed(who, tenant, name)]}

    @router.delete("/v1/services/{name}/events/{event_id}", status_code=204, response_class=Response,
                   responses=RESPONSES, summary="Delete an event declared through the API")
    def delete(name: Name, event_id: Annotated[int, Path(ge=1, le=MAX_EVENT_ID)], who: Who,
               tenant: Tenant = None) -> Response:
        book.delete(who, tenant, name, event_id)
        return Response(status_code=204)

    return router
