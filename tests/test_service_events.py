"""Service events declared through the API: stored (both backends), scoped to the caller's tenant and its policy's
services, bounded per tenant, kept across a restart, and read by the service loop, which sizes ahead of them.

The API tests run a real uvicorn server beside a real quickstart runtime (sim clock), whose prod tenant declares
the `chat` service."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from builders import T0, group

from burst.api.server import ApiServer, start_api
from burst.bounds import MAX_TENANT_SERVICE_EVENTS, SERVICE_EVENT_MEMORY_S
from burst.model import Policy, Service, ServiceEvent
from burst.runtime import Runtime, build_runtime, load_run_config, stored_events
from burst.service_forecasts import TRAINING_DAYS, ServiceForecasts
from burst.service_loop import ServiceLoop
from burst.state import LATEST_VERSION, Store
from burst.workloads.queue import MemoryQueue
from burst.workloads.rates import DailyCycle, SyntheticRates
from burst.workloads.replicas import QueueReplicas


def start(state: Path, tokens: Path) -> tuple[Runtime, ApiServer]:
    runtime = build_runtime(load_run_config(None), state_path=state)
    return runtime, start_api(runtime, "127.0.0.1:0", tokens_dir=tokens)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Runtime, ApiServer]]:
    runtime, api = start(tmp_path / "burst.db", tmp_path / "tokens")
    yield runtime, api
    api.stop()
    runtime.close()


def token(api: ApiServer, who: str) -> dict[str, str]:
    name = "admin.token" if who == "admin" else f"tenant-{who}.token"
    return {"Authorization": f"Bearer {(api.tokens_dir / name).read_text().strip()}"}


def window(runtime: Runtime, start_min: float, end_min: float, **extra: Any) -> dict[str, Any]:
    """An event body from `start_min` to `end_min` minutes after the runtime's now."""
    now = runtime.now()
    return {"start": (now + timedelta(minutes=start_min)).isoformat(),
            "end": (now + timedelta(minutes=end_min)).isoformat(), **extra}


def events_url(api: ApiServer, service: str = "chat") -> str:
    return f"{api.url}/v1/services/{service}/events"


# ------------------------------------------------------------------ the store, on SQLite and PostgreSQL


def test_the_store_keeps_events_per_tenant_and_service_and_deletes_only_the_named_one(
        state_location: str | Path) -> None:
    launch = ServiceEvent(T0 + timedelta(hours=2), T0 + timedelta(hours=5), 2.5, "launch")
    promo = ServiceEvent(T0, T0 + timedelta(hours=1))
    with Store.open(state_location) as store:
        assert store.schema_version == LATEST_VERSION
        first = store.add_service_event("prod", "chat", launch, at=T0)
        second = store.add_service_event("prod", "chat", promo, at=T0)
        store.add_service_event("prod", "search", promo, at=T0)
        theirs = store.add_service_event("batch", "chat", promo, at=T0)
        assert [e.event for e in store.service_events("prod", "chat")] == [promo, launch]  # in start order
        assert [e.service for e in store.service_events("prod")] == ["chat", "search", "chat"]
        assert [e.id for e in store.service_events("prod", "chat", ended_after=T0 + timedelta(hours=1))] == [first.id]
        assert store.count_service_events("prod") == 3
        assert store.count_service_events("prod", ended_after=T0 + timedelta(hours=1)) == 1
        assert not store.delete_service_event("prod", "chat", theirs.id)  # batch's event, named as prod's
        assert not store.delete_service_event("prod", "search", second.id)  # another service's id
        assert store.delete_service_event("prod", "chat", second.id)
        assert not store.delete_service_event("prod", "chat", second.id)
    with Store.open(state_location) as reopened:
        assert [(e.id, e.event, e.created_at) for e in reopened.service_events("prod", "chat")] == [
            (first.id, launch, T0)]
        assert reopened.count_service_events("batch") == 1


def test_a_store_at_the_previous_schema_gains_the_table_with_its_data_kept(db_path: Path) -> None:
    with Store.open(db_path, target_version=LATEST_VERSION - 1) as old:
        old.put_token_hash("admin", "a" * 64)
        assert not old._query("SELECT name FROM sqlite_master WHERE name = 'service_events'")
    with Store.open(db_path) as store:
        assert store.token_hashes() == {"admin": "a" * 64}
        store.add_service_event("prod", "chat", ServiceEvent(T0, T0 + timedelta(hours=1), 2.0))
        assert store.count_service_events("prod") == 1


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "burst.db"


# ------------------------------------------------------------------ the API


def test_a_tenant_posts_lists_and_deletes_its_services_events(daemon) -> None:
    runtime, api = daemon
    made = httpx.post(events_url(api), json=window(runtime, 60, 180, multiplier=2, name="launch"),
                      headers=token(api, "prod"))
    assert made.status_code == 201, made.text
    event = made.json()
    now = runtime.now()
    assert {k: event[k] for k in ("tenant", "service", "name", "multiplier")} == {
        "tenant": "prod", "service": "chat", "name": "launch", "multiplier": 2.0}
    assert datetime.fromisoformat(event["start"]) == now + timedelta(hours=1)
    assert datetime.fromisoformat(event["end"]) == now + timedelta(hours=3)
    assert event["start"].endswith("+00:00") and datetime.fromisoformat(event["created_at"]) == now
    plain = httpx.post(events_url(api), json=window(runtime, 10, 20), headers=token(api, "prod"))
    assert plain.status_code == 201 and (plain.json()["multiplier"], plain.json()["name"]) == (None, None)

    listed = httpx.get(events_url(api), headers=token(api, "prod"))
    assert listed.status_code == 200
    assert [e["id"] for e in listed.json()["events"]] == [plain.json()["id"], event["id"]]  # in start order

    gone = httpx.delete(f"{events_url(api)}/{event['id']}", headers=token(api, "prod"))
    assert (gone.status_code, gone.content) == (204, b"")
    again = httpx.delete(f"{events_url(api)}/{event['id']}", headers=token(api, "prod"))
    assert again.status_code == 404
    assert [e["id"] for e in httpx.get(events_url(api), headers=token(api, "prod")).json()["events"]] == [
        plain.json()["id"]]
    assert [e.id for e in runtime.store.service_events("prod", "chat")] == [plain.json()["id"]]


def test_a_time_with_an_offset_or_a_bare_date_is_stored_in_utc(daemon) -> None:
    runtime, api = daemon
    day = (runtime.now() + timedelta(days=3)).date()
    body = {"start": f"{day}T09:00:00+05:30", "end": str(day + timedelta(days=1))}
    made = httpx.post(events_url(api), json=body, headers=token(api, "prod"))
    assert made.status_code == 201, made.text
    assert (made.json()["start"], made.json()["end"]) == (f"{day}T03:30:00+00:00",
                                                          f"{day + timedelta(days=1)}T00:00:00+00:00")


def test_another_tenants_service_and_an_undeclared_name_are_404_and_nothing_is_stored(daemon) -> None:
    runtime, api = daemon
    theirs = httpx.post(events_url(api), json=window(runtime, 10, 20), headers=token(api, "batch"))
    unknown = httpx.post(events_url(api, "nope"), json=window(runtime, 10, 20), headers=token(api, "prod"))
    for reply, name in ((theirs, "chat"), (unknown, "nope")):
        assert (reply.status_code, reply.json()) == (404, {"detail": f"no service {name}"})
    assert httpx.get(events_url(api), headers=token(api, "batch")).status_code == 404
    assert httpx.get(events_url(api, "x" * 5000), headers=token(api, "prod")).json() == {
        "detail": "no service with that name"}
    mine = httpx.post(events_url(api), json=window(runtime, 10, 20), headers=token(api, "prod")).json()
    assert httpx.delete(f"{events_url(api)}/{mine['id']}", headers=token(api, "batch")).status_code == 404
    assert httpx.delete(f"{events_url(api)}/{mine['id'] + 1}", headers=token(api, "prod")).status_code == 404
    assert httpx.get(events_url(api), params={"tenant": "prod"}, headers=token(api, "batch")).status_code == 403
    assert [e.id for e in runtime.store.service_events("prod")] == [mine["id"]]
    assert runtime.store.count_service_events("batch") == 0
    assert httpx.get(events_url(api)).status_code == 401


def test_the_admin_names_the_tenant(daemon) -> None:
    runtime, api = daemon
    admin = token(api, "admin")
    missing = httpx.post(events_url(api), json=window(runtime, 10, 20), headers=admin)
    assert missing.status_code == 422 and missing.json()["detail"][0]["loc"] == ["query", "tenant"]
    assert httpx.get(events_url(api), params={"tenant": "batch"}, headers=admin).status_code == 404
    made = httpx.post(events_url(api), params={"tenant": "prod"}, json=window(runtime, 10, 20), headers=admin)
    assert made.status_code == 201 and made.json()["tenant"] == "prod"
    assert [e["id"] for e in httpx.get(events_url(api), headers=token(api, "prod")).json()["events"]] == [
        made.json()["id"]]
    assert httpx.delete(f"{events_url(api)}/{made.json()['id']}", params={"tenant": "prod"},
                        headers=admin).status_code == 204
    assert runtime.store.count_service_events("prod") == 0


@pytest.mark.parametrize(("change", "field"), [
    ({"start_min": 30, "end_min": 20}, "end"),  # end before start
    ({"start_min": 30, "end_min": 30}, "end"),  # an empty window
    ({"multiplier": 0}, "multiplier"),
    ({"multiplier": -1.5}, "multiplier"),
    ({"multiplier": 1001}, "multiplier"),
    ({"multiplier": True}, "multiplier"),
    ({"multiplier": "2"}, "multiplier"),
    ({"colour": "red"}, "colour"),
    ({"name": ""}, "name"),
    ({"name": "x" * 300}, "name"),
    ({"name": "promo\nforged log line"}, "name"),
    ({"start": "2026-03-02T12:00:00"}, "start"),  # no timezone
    ({"start": 1772452800}, "start"),  # a number is not an instant
    ({"end": "9999-01-01T00:00:00Z"}, "end"),  # beyond the years the API takes
    ({"start_min": -40 * 24 * 60, "end_min": -20 * 24 * 60}, "end"),  # ended before the window the loop reads
])
def test_bad_bodies_are_422_naming_the_field_and_store_nothing(daemon, change: dict[str, Any], field: str) -> None:
    runtime, api = daemon
    change = dict(change)
    body = window(runtime, change.pop("start_min", 10), change.pop("end_min", 20))
    body.update(change)
    reply = httpx.post(events_url(api), json=body, headers=token(api, "prod"))
    assert reply.status_code == 422, reply.text
    assert any(field in [str(p) for p in d["loc"]] for d in reply.json()["detail"]), reply.json()
    assert runtime.store.count_service_events("prod") == 0


def test_a_non_finite_multiplier_and_a_bad_event_id_are_422(daemon) -> None:
    runtime, api = daemon
    for number in ("NaN", "Infinity", "1e999"):
        body = window(runtime, 10, 20)
        text = f'{{"start": "{body["start"]}", "end": "{body["end"]}", "multiplier": {number}}}'
        reply = httpx.post(events_url(api), content=text, headers={**token(api, "prod"),
                                                                   "Content-Type": "application/json"})
        assert reply.status_code == 422, (number, reply.text)
    for bad in ("x", "0", str(2**63)):
        assert httpx.delete(f"{events_url(api)}/{bad}", headers=token(api, "prod")).status_code == 422
    assert runtime.store.count_service_events("prod") == 0


def test_a_tenant_keeps_at_most_the_limit_of_events_in_use(daemon) -> None:
    runtime, api = daemon
    prod = token(api, "prod")
    with httpx.Client(headers=prod) as client:
        made = [client.post(events_url(api), json=window(runtime, 10 + k, 70 + k)) for k in range(MAX_TENANT_SERVICE_EVENTS)]
        assert {r.status_code for r in made} == {201}
        over = client.post(events_url(api), json=window(runtime, 10, 20))
        assert over.status_code == 429
        assert over.json()["limit"] == "max_service_events"
        # the first event ends 70 minutes from now, and is read for 14 days after that
        assert int(over.headers["Retry-After"]) == 70 * 60 + SERVICE_EVENT_MEMORY_S
        assert runtime.store.count_service_events("prod") == MAX_TENANT_SERVICE_EVENTS
        assert client.delete(f"{events_url(api)}/{made[0].json()['id']}").status_code == 204
        assert client.post(events_url(api), json=window(runtime, 10, 20)).status_code == 201
        assert client.post(events_url(api), json=window(runtime, 10, 20)).status_code == 429
        assert runtime.sim_clock is not None
        runtime.sim_clock.advance(SERVICE_EVENT_MEMORY_S + 3 * 3600)  # every event has been out of use for a while
        assert client.post(events_url(api), json=window(runtime, 10, 20)).status_code == 201
    other = httpx.post(events_url(api), params={"tenant": "prod"}, json=window(runtime, 10, 20),
                       headers=token(api, "admin"))
    assert other.status_code == 201  # the limit is per tenant, whoever posts


def test_events_survive_a_restart_and_reach_the_service_loop(tmp_path: Path) -> None:
    runtime, api = start(tmp_path / "burst.db", tmp_path / "tokens")
    try:
        made = httpx.post(events_url(api), json=window(runtime, 5, 65, multiplier=2, name="launch"),
                          headers=token(api, "prod")).json()
    finally:
        api.stop()
        runtime.close()
    runtime, api = start(tmp_path / "burst.db", tmp_path / "tokens")
    try:
        assert httpx.get(events_url(api), headers=token(api, "prod")).json()["events"] == [made]
        loop = runtime.controller.services
        assert loop is not None and loop.events is not None
        chat = next(s for s in runtime.reloader.current["prod"].services if s.name == "chat")
        assert loop.events(chat) == [ServiceEvent(datetime.fromisoformat(made["start"]),
                                                  datetime.fromisoformat(made["end"]), 2.0, "launch")]
    finally:
        api.stop()
        runtime.close()


# ------------------------------------------------------------------ the service loop


CHAT = Service(tenant="prod", name="chat", gpu_model="A100", max_replicas=40, ready_within_s=300.0,
               unserved_request_cost_usd=0.001, requests_per_s=4.0, min_replicas=1, replica_start_s=120.0)
CLOUD = dataclasses.replace(group("cloud", max_size=8), boot_latency_s=300.0)  # lead: 300 s boot + 120 s load
POLICIES = {"prod": Policy(tenant="prod", priority=10, services=(CHAT,))}


class Prices:
    def group_price(self, g: object) -> float:
        return 24.0


def desired(store: Store | None, now: datetime) -> int:
    """The replicas one tick of a fresh service loop plans for a flat 20 req/s with two weeks of history, reading
    the events stored in `store` as the daemon does (none without a store)."""
    rates = SyntheticRates({"chat": DailyCycle(base_rps=20.0, amplitude=0.0, noise=0.0)})
    events = stored_events(store, lambda: now) if store is not None else None
    loop = ServiceLoop(rates, QueueReplicas(MemoryQueue()), ServiceForecasts(rates, background=False), events=events)
    (status,) = loop.tick(now, [], POLICIES, [CLOUD], Prices(), {}).statuses
    return status.desired


def test_a_stored_event_starting_within_the_lead_time_raises_the_replicas_before_it_starts() -> None:
    now = T0.replace(hour=12)
    store = Store(":memory:")
    baseline = desired(None, now)
    assert baseline == 8  # ceil(20 / (4 x 0.7))
    store.add_service_event("prod", "chat", ServiceEvent(now + timedelta(minutes=5), now + timedelta(hours=2), 2.0))
    assert desired(store, now) == 15 > baseline  # ceil(40 / 2.8), 5 minutes before the event starts


def test_the_loop_reads_an_event_until_it_has_been_over_for_the_forecasters_training_window() -> None:
    assert SERVICE_EVENT_MEMORY_S == TRAINING_DAYS * 86400
    store, now = Store(":memory:"), T0
    read = stored_events(store, lambda: now)
    later = ServiceEvent(now + timedelta(hours=3), now + timedelta(hours=4), 2.0)
    past = ServiceEvent(now - timedelta(days=10), now - timedelta(days=9), 3.0)
    forgotten = ServiceEvent(now - timedelta(days=20), now - timedelta(days=15), 3.0)
    for event in (later, past, forgotten):
        store.add_service_event("prod", "chat", event)
    store.add_service_event("prod", "other", later)
    assert read(CHAT) == [past, later]
    assert desired(store, now + timedelta(hours=1)) == 8  # an event beyond the lead time changes nothing yet
