"""No tenant can exhaust the controller through the API, and what is valid JSON but not a job is refused.

The real app over a real store (SQLite, and PostgreSQL where the test server
runs), served by uvicorn on 127.0.0.1; tenants' limits come from real policy
files. The submit rate is timed by an injected monotonic clock, so nothing
here sleeps to let a bucket refill.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from builders import job

from burst.api.app import DaemonView, api_app
from burst.api.tokens import ApiTokens, load_api_tokens
from burst.bounds import MAX_PAGE_JOBS
from burst.model import JobState, SubmitLimits
from burst.state import Store
from policies import PolicyValidationError, load_policy_dir, policy_json_schema
from providers.sim import ManualClock

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class Ticker:
    """A monotonic clock the test moves (seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """`app` served by uvicorn on 127.0.0.1 at a free port, in a thread; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@dataclass
class Api:
    url: str
    tokens: ApiTokens
    ticker: Ticker
    clock: ManualClock
    state: str | Path

    def headers(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens.admin if who == 'admin' else self.tokens.tenants[who]}"}

    def submit(self, who: str, **body: Any) -> httpx.Response:
        return httpx.post(f"{self.url}/v1/jobs", json={"tenant": who, "gpus": 1, **body}, headers=self.headers(who))

    def post_raw(self, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(f"{self.url}/v1/jobs", json=body, headers=self.headers("admin"))


@contextmanager
def running_api(tmp_path: Path, state: str | Path, limits: dict[str, str]) -> Iterator[Api]:
    """The API over `state`, tenants prod and batch, each with `limits` (a YAML `limits:` body) if given."""
    policy_dir = tmp_path / "policies"
    policy_dir.mkdir(exist_ok=True)
    for tenant in ("prod", "batch"):
        section = f"limits:\n{limits[tenant]}" if tenant in limits else ""
        (policy_dir / f"{tenant}.yaml").write_text(f"tenant: {tenant}\n{section}")
    policies = load_policy_dir(policy_dir)
    tokens = load_api_tokens(tmp_path / "tokens", policies)
    ticker, clock = Ticker(), ManualClock(NOW)
    Store.open(state).close()
    app = api_app(store_path=state, tokens=tokens, view=DaemonView(60.0), clock=clock, tenants=lambda: set(policies),
                  policies=lambda: policies, limits_clock=ticker)
    with serve(app) as url:
        yield Api(url, tokens, ticker, clock, state)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "burst.db"


def assert_limited(reply: httpx.Response, limit: str) -> int:
    """The reply is a 429 naming `limit`, with a whole-seconds Retry-After; returns it."""
    assert reply.status_code == 429, reply.text
    assert reply.json()["limit"] == limit
    retry = reply.headers["retry-after"]
    assert retry.isdigit() and int(retry) >= 1 and reply.json()["retry_after_s"] == int(retry)
    return int(retry)


# ------------------------------------------------------------------ per-tenant limits


def test_policy_limits_have_safe_defaults_bounds_and_a_schema(tmp_path: Path) -> None:
    (tmp_path / "prod.yaml").write_text("tenant: prod\n")
    (tmp_path / "batch.yaml").write_text("limits:\n  submits_per_second: 5\n  submit_burst: 10\n")
    policies = load_policy_dir(tmp_path)
    assert policies["prod"].limits == SubmitLimits(max_pending_jobs=10_000, submits_per_second=20.0, submit_burst=100,
                                                   max_pending_job_bytes=16 * 1024 * 1024)
    assert (policies["batch"].limits.submits_per_second, policies["batch"].limits.submit_burst) == (5.0, 10)
    (tmp_path / "batch.yaml").write_text("limits:\n  submit_burst: 0\n  max_pending_jobs: true\n")
    with pytest.raises(PolicyValidationError) as info:
        load_policy_dir(tmp_path)
    text = str(info.value)
    assert "batch.yaml:2" in text and "limits.submit_burst" in text
    assert "batch.yaml:3" in text and "limits.max_pending_jobs" in text
    schema = policy_json_schema()
    limits = schema["$defs"][schema["properties"]["limits"]["$ref"].rsplit("/", 1)[1]]["properties"]
    assert limits["max_pending_jobs"]["default"] == 10_000 and limits["max_pending_jobs"]["maximum"] == 1_000_000
    assert limits["submit_burst"]["minimum"] == 1 and limits["submits_per_second"]["exclusiveMinimum"] == 0


def test_the_pending_job_cap_answers_429_until_a_job_leaves(tmp_path: Path, state: Path) -> None:
    with running_api(tmp_path, state, {"prod": "  max_pending_jobs: 3\n"}) as api:
        assert [api.submit("prod", id=f"p{i}").status_code for i in range(3)] == [201, 201, 201]
        refused = api.submit("prod", id="p3")
        assert_limited(refused, "limits.max_pending_jobs")
        assert "3" in refused.json()["detail"]
        assert api.submit("batch").status_code == 201, "another tenant is not held back"
        with Store.open(state) as store:
            assert store.get_job("prod:p3") is None and store.tenant_backlog("prod")[0] == 3

        assert httpx.delete(f"{api.url}/v1/jobs/p0", headers=api.headers("prod")).status_code == 200
        assert api.submit("prod", id="p3").status_code == 201, "a cancel frees its place at once"
        assert_limited(api.submit("prod", id="p4"), "limits.max_pending_jobs")

        with Store.open(state) as store:  # the loop runs one to its end: this API learns it at its next count
            p1 = store.get_job("prod:p1")
            assert p1 is not None
            store.put_job(replace(p1, state=JobState.RUNNING, started_at=NOW), at=NOW)
            store.put_job(replace(p1, state=JobState.SUCCEEDED, started_at=NOW), at=NOW)
        assert_limited(api.submit("prod", id="p4"), "limits.max_pending_jobs")  # counted under a second ago
        api.ticker.now += 1.0
        assert api.submit("prod", id="p4").status_code == 201


def test_the_submit_rate_is_a_token_bucket_per_tenant(tmp_path: Path, state: Path) -> None:
    with running_api(tmp_path, state, {"prod": "  submits_per_second: 2\n  submit_burst: 5\n"}) as api:
        assert [api.submit("prod").status_code for _ in range(5)] == [201] * 5  # the burst
        assert assert_limited(api.submit("prod"), "limits.submits_per_second") == 1  # a token in 0.5 s: 1 s
        assert api.submit("batch").status_code == 201, "each tenant has its own bucket (batch: the default 20/s)"
        api.ticker.now += 0.5
        assert api.submit("prod").status_code == 201
        assert_limited(api.submit("prod"), "limits.submits_per_second")
        api.ticker.now += 3600  # a long pause refills the bucket to its burst, no further
        assert [api.submit("prod").status_code for _ in range(6)] == [201] * 5 + [429]
        with Store.open(state) as store:
            assert store.tenant_backlog("prod")[0] == 11


def test_the_pending_job_text_cap_answers_429_naming_it(tmp_path: Path, state: Path) -> None:
    with running_api(tmp_path, state, {"prod": "  max_pending_job_bytes: 200000\n"}) as api:
        command = ["x" * 4000] * 15  # about 60 KiB a job, every field within its bound
        replies = [api.submit("prod", command=command) for _ in range(4)]
        assert [r.status_code for r in replies[:3]] == [201, 201, 201]
        assert_limited(replies[3], "limits.max_pending_job_bytes")
        assert "200000" in replies[3].json()["detail"]
        assert api.submit("prod").status_code == 201, "a small job still fits"
        with Store.open(state) as store:
            jobs, size = store.tenant_backlog("prod")
        assert jobs == 4 and 180_000 < size <= 200_000


# ------------------------------------------------------------------ listings


def test_the_listing_pages_every_job_once_with_a_bounded_page(tmp_path: Path, state: Path) -> None:
    with running_api(tmp_path, state, {}) as api:
        made: dict[str, set[str]] = {"prod": set(), "batch": set()}
        for i in range(23):
            tenant = "prod" if i % 3 else "batch"
            if i % 5 == 0:
                api.clock.advance(60)  # some share a submission time: the id breaks the tie
            made[tenant].add(api.submit(tenant).json()["id"])

        def walk(who: str, **params: Any) -> list[list[str]]:
            pages: list[list[str]] = []
            cursor: str | None = None
            while True:
                query = {**params, **({"cursor": cursor} if cursor else {})}
                reply = httpx.get(f"{api.url}/v1/jobs", params=query, headers=api.headers(who))
                assert reply.status_code == 200, reply.text
                pages.append([j["id"] for j in reply.json()["jobs"]])
                cursor = reply.json()["next_cursor"]
                if cursor is None:
                    return pages
                assert len(pages) < 50, "the cursor does not move on"

        pages = walk("admin", limit=4)
        ids = [i for page in pages for i in page]
        assert all(len(page) <= 4 for page in pages) and len(pages) == 6
        assert len(ids) == len(set(ids)) == 23 and set(ids) == made["prod"] | made["batch"]
        mine = [i for page in walk("prod", limit=5) for i in page]
        assert sorted(mine) == sorted(made["prod"]), "a tenant's pages hold its own jobs only"
        default = httpx.get(f"{api.url}/v1/jobs", headers=api.headers("admin")).json()
        assert len(default["jobs"]) == 23 and default["next_cursor"] is None
        for bad in ({"limit": 0}, {"limit": MAX_PAGE_JOBS + 1}, {"cursor": "not-a-cursor"}):
            reply = httpx.get(f"{api.url}/v1/jobs", params=bad, headers=api.headers("admin"))
            assert reply.status_code == 422 and reply.json()["detail"][0]["loc"][0] == "query", bad


def test_a_page_stops_early_once_its_records_pass_the_byte_budget(state_location: str | Path) -> None:
    with Store.open(state_location) as store:
        for i in range(6):
            store.add_job(job(f"j{i}", tenant="prod", gpus=1, submitted=NOW + timedelta(seconds=i)), at=NOW)
        size = len(store.job_record("j0")[1])  # type: ignore[index]
        rows, more = store.job_page(limit=100, max_bytes=2 * size)
        assert [r[1] for r in rows] == ["j0", "j1"] and more
        rows, more = store.job_page(limit=100, max_bytes=1, after=(rows[-1][0], rows[-1][1]))
        assert [r[1] for r in rows] == ["j2"] and more, "one row at least, however large"
        rows, more = store.job_page(limit=3, max_bytes=10**9, after=(rows[-1][0], rows[-1][1]))
        assert [r[1] for r in rows] == ["j3", "j4", "j5"] and not more


# ------------------------------------------------------------------ input that is JSON but not a job


@pytest.mark.parametrize("bad", ["\x00", "\n", "\r", "\t", "\x1b[31m", "\x7f"])
@pytest.mark.parametrize("field", ["command", "gpu_model", "id"])
def test_control_characters_in_a_jobs_text_are_422(tmp_path: Path, state: Path, field: str, bad: str) -> None:
    value: Any = ["python", f"train{bad}.py"] if field == "command" else f"a{bad}"
    with running_api(tmp_path, state, {}) as api:
        reply = api.post_raw({"tenant": "prod", "gpus": 1, field: value})
        assert reply.status_code == 422, reply.text
        assert any(field in d["loc"] for d in reply.json()["detail"])
        with Store.open(state) as store:
            assert store.jobs() == []


@pytest.mark.parametrize(("field", "value"), [("gpus", True), ("gpus", "2"), ("gpus", 2.5), ("fault_tolerant", "yes"),
                                              ("fault_tolerant", 1), ("priority", False), ("gpu_model", 100)])
def test_json_of_the_wrong_type_is_422_not_coerced(tmp_path: Path, state: Path, field: str, value: object) -> None:
    with running_api(tmp_path, state, {}) as api:
        reply = api.post_raw({"tenant": "prod", "gpus": 1, field: value})
        assert reply.status_code == 422, reply.text
        assert any(field in d["loc"] for d in reply.json()["detail"])


def test_json_numbers_still_parse_where_numbers_are_expected(tmp_path: Path, state: Path) -> None:
    with running_api(tmp_path, state, {}) as api:
        whole = api.post_raw({"tenant": "prod", "gpus": 2, "priority": -3, "fault_tolerant": True})
        assert whole.status_code == 201 and (whole.json()["gpus"], whole.json()["priority"]) == (2, -3)
        share = api.post_raw({"tenant": "prod", "gpus": 0, "gpu_share": 1})  # an integer where a float goes
        assert share.status_code == 201 and share.json()["gpu_share"] == 1.0
        assert api.post_raw({"tenant": "prod", "gpus": 0, "gpu_share": 0.25}).status_code == 201


# ------------------------------------------------------------------ races answered once


def cancel_at_once(api: Api, job_id: str, n: int) -> list[int]:
    """`n` DELETEs of one job, each on its own connection and thread, released together; their statuses."""
    start = threading.Barrier(n)
    codes: list[int] = []
    lock = threading.Lock()

    def cancel(client: httpx.Client) -> None:
        start.wait()
        code = client.delete(f"{api.url}/v1/jobs/{job_id}", headers=api.headers("prod")).status_code
        with lock:
            codes.append(code)

    clients = [httpx.Client(timeout=60) for _ in range(n)]
    threads = [threading.Thread(target=cancel, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for c in clients:
        c.close()
    return codes


def test_concurrent_cancels_of_one_job_answer_200_exactly_once(tmp_path: Path, state_location: str | Path) -> None:
    # Each cancel read the job, then wrote it cancelled: of 100 at once, several read it pending and answered 200.
    with running_api(tmp_path, state_location, {}) as api:
        for round_ in range(3):
            assert api.submit("prod", id=f"train-{round_}").status_code == 201
            codes = cancel_at_once(api, f"train-{round_}", 100)
            assert len(codes) == 100 and codes.count(200) == 1 and codes.count(409) == 99, sorted(codes)
        again = httpx.delete(f"{api.url}/v1/jobs/train-0", headers=api.headers("prod"))
        assert again.status_code == 409 and "already cancelled" in again.json()["detail"]


def test_a_write_from_a_stale_read_moves_nothing(state_location: str | Path) -> None:
    with Store.open(state_location) as store:
        store.add_job(job("train", tenant="prod", gpus=1), at=NOW)
        read = store.job_record("train")
        assert read is not None
        stale, version = read
        placed = job("train", tenant="prod", gpus=1, state=JobState.RUNNING, nodes=("node-a",), started=NOW)
        store.put_job(placed, at=NOW)  # the loop places it meanwhile
        assert store.swap_job(replace(stale, state=JobState.CANCELLED), version=version, at=NOW) is False
        kept = store.get_job("train")
        assert kept is not None and kept.state is JobState.RUNNING and kept.node_ids == ("node-a",)
        fresh = store.job_record("train")
        assert fresh is not None
        moved = replace(fresh[0], state=JobState.CANCELLED)
        assert store.swap_job(moved, version=fresh[1], at=NOW) is True
        assert store.swap_job(moved, version=fresh[1], at=NOW) is False, "a second swap from the same read"
        final = store.get_job("train")
        assert final is not None and final.state is JobState.CANCELLED and final.node_ids == ("node-a",)
