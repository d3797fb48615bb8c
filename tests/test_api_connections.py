"""The API's connection limits over a real server on 127.0.0.1: deadlines, the cap, and bounded logs.

The API is started through `start_api` (in this process, with short
deadlines), or in a child process with a lowered RLIMIT_NOFILE
(`tests/api_child.py`) so this process keeps its own limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from api_child import ApiChild, closed_by_peer, get, open_idle, poll

from burst.api.connections import FD_RESERVE, MIN_CONNECTIONS, ConnectionLimits, GuardedServer
from burst.api.server import ApiServer, start_api
from burst.logs import RepeatFilter
from burst.runtime import build_runtime, load_run_config

SHORT = ConnectionLimits(read_timeout_s=0.5, keep_alive_s=1)


@contextlib.contextmanager
def _daemon(tmp_path: Path, limits: ConnectionLimits) -> Iterator[ApiServer]:
    runtime = build_runtime(load_run_config(None), state_path=tmp_path / "burst.db")
    api = start_api(runtime, "127.0.0.1:0", tokens_dir=tmp_path / "tokens", limits=limits)
    runtime.run(until=runtime.now() + timedelta(minutes=30), realtime=False)
    yield api
    api.stop()
    runtime.close()


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiServer]:
    with _daemon(tmp_path, SHORT) as served:
        yield served


def address(api: ApiServer) -> tuple[str, int]:
    host, port = api.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def test_a_client_that_sends_nothing_is_closed_at_the_read_deadline(api: ApiServer) -> None:
    started = time.monotonic()
    with socket.create_connection(address(api)) as silent:
        assert poll(lambda: closed_by_peer(silent), 5)
        waited = time.monotonic() - started
    assert SHORT.read_timeout_s * 0.8 <= waited < SHORT.read_timeout_s + 2
    assert poll(lambda: api.open_connections() == 0, 2)


def test_a_header_trickled_byte_by_byte_is_cut_off_with_a_408(api: ApiServer) -> None:
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"
    started = time.monotonic()
    reply = b""
    with socket.create_connection(address(api)) as slow:
        for byte in request:  # one byte every 20 ms: the whole header would take 4.5 s
            if select.select([slow], [], [], 0.02)[0]:
                reply = slow.recv(4096)
                break
            slow.send(bytes([byte]))
        waited = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 408 "), reply
    assert waited < SHORT.read_timeout_s + 2  # trickling did not extend the deadline
    assert httpx.get(f"{api.url}/healthz").status_code == 200


def test_a_body_trickled_byte_by_byte_is_cut_off(api: ApiServer) -> None:
    body = b'{"tenant": "prod", "gpus": 1, "id": "' + b"x" * 60 + b'"}'
    head = (f"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    started = time.monotonic()
    with socket.create_connection(address(api)) as slow:
        slow.sendall(head)
        closed = False
        for byte in body:
            if select.select([slow], [], [], 0.02)[0]:
                closed = closed_by_peer(slow)
                break
            slow.send(bytes([byte]))
        waited = time.monotonic() - started
    assert closed and waited < SHORT.read_timeout_s + 2


def test_a_kept_alive_connection_serves_requests_inside_the_deadline_and_closes_when_idle(api: ApiServer) -> None:
    with httpx.Client(base_url=api.url) as client:
        for _ in range(4):  # 4 x 0.3 s on one connection: the deadline runs per request, not per connection
            assert client.get("/healthz").status_code == 200
            time.sleep(0.3)
    with socket.create_connection(address(api)) as kept:
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert kept.recv(4096).startswith(b"HTTP/1.1 200 ")
        answered = time.monotonic()
        assert poll(lambda: closed_by_peer(kept), 5)
    assert time.monotonic() - answered < SHORT.read_timeout_s + 2


def test_a_client_that_does_not_read_its_responses_is_dropped(api: ApiServer) -> None:
    """1,000 pipelined requests (about 10 MB of answers) on a small receive window, none read: once the
    kernel's buffers are full the server's write buffer stalls, and the connection is aborted at the deadline."""
    with socket.socket() as reader:
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.connect(address(api))
        reader.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 1000)
        assert poll(lambda: api.open_connections() == 0, 10)


def test_at_the_cap_idle_connections_make_room_for_a_real_client(tmp_path: Path) -> None:
    """The fresh client is answered because at the cap the server closes the connection that has waited
    longest for its request: the read deadline here is a minute, so no idle connection times out."""
    with _daemon(tmp_path, ConnectionLimits(read_timeout_s=60, max_connections=8)) as api:
        assert api.max_connections == 8
        idle = open_idle(*address(api), 20)
        assert poll(lambda: api.open_connections() == 8, 5)
        status, seconds = get(*address(api), "/healthz", timeout_s=10)
        assert status == 200 and seconds < 5
        assert api.evicted_connections() >= 13  # the 12 idle ones over the cap, then one for the real client
        assert api.open_connections() <= 8
        assert sum(closed_by_peer(s) for s in idle) >= 12
        for s in idle:
            s.close()


def test_when_every_connection_is_busy_new_clients_wait_unaccepted(tmp_path: Path) -> None:
    """With every connection in the middle of a request none is displaced: a new client waits in the listen
    queue, holding no descriptor of the server's, and is served once one finishes."""
    release = threading.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while scope["path"] == "/block" and not release.is_set():
            await asyncio.sleep(0.01)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    sock = socket.create_server(("127.0.0.1", 0))
    server = GuardedServer(uvicorn.Config(app, lifespan="off", ws="none", log_level="warning"), SHORT, cap=3)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    assert poll(lambda: server.started, 10)
    host, port = sock.getsockname()[:2]
    busy = [socket.create_connection((host, port)) for _ in range(3)]
    try:
        for conn in busy:
            conn.sendall(b"GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
        assert poll(lambda: server.open_connections == 3, 5)
        waiting = socket.create_connection((host, port))  # the kernel completes the handshake; nobody accepts
        waiting.sendall(b"GET /fast HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert not select.select([waiting], [], [], 1.0)[0]  # a second past the read deadline: still queued
        assert server.open_connections == 3
        release.set()
        waiting.settimeout(5)
        assert waiting.recv(4096).startswith(b"HTTP/1.1 200 ")
        for conn in busy:
            conn.settimeout(5)
            assert conn.recv(4096).startswith(b"HTTP/1.1 200 ")
        waiting.close()
    finally:
        for conn in busy:
            conn.close()
        server.should_exit = True
        thread.join(10)
        sock.close()


class Kept(logging.Handler):
    """Keeps the records it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_malformed_requests_log_one_line_per_window(api: ApiServer) -> None:
    handler = Kept()
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(handler)
    try:
        for _ in range(50):
            with socket.create_connection(address(api)) as conn:
                conn.sendall(b"NOT HTTP AT ALL\r\n\r\n")
                conn.settimeout(5)
                assert conn.recv(4096).startswith(b"HTTP/1.1 400 ")
    finally:
        logger.removeHandler(handler)
    assert len([r for r in handler.records if "Invalid HTTP request" in r.getMessage()]) <= 1  # 50 without the filter


@pytest.fixture
def low_limit(tmp_path: Path) -> Iterator[ApiChild]:
    child = ApiChild(tmp_path, nofile=256, read_timeout_s=60)
    yield child
    child.stop()


def test_with_a_low_file_limit_a_flood_of_idle_connections_leaves_the_daemon_working(low_limit: ApiChild) -> None:
    """RLIMIT_NOFILE 256 in the child: its cap leaves the reserve free. More idle connections than the cap do
    not starve a real client (answered at once: the cap displaces the longest-idle connections; the read
    deadline is a minute, so none timed out), nor the ticks, a backup, a policy reload or a file write."""
    cap = low_limit.started["cap"]
    assert MIN_CONNECTIONS <= cap <= 256 - FD_RESERVE
    idle = open_idle(low_limit.host, low_limit.port, cap + 60)
    assert poll(lambda: low_limit.command("status")["open"] == cap, 10)
    status, seconds = get(low_limit.host, low_limit.port, "/healthz", timeout_s=10)
    assert status == 200 and seconds < 5
    loaded = low_limit.command("status")
    assert loaded["open"] <= cap and loaded["evicted"] > 60
    assert loaded["open_fds"] <= 256 - FD_RESERVE + low_limit.started["open_fds"]
    work = low_limit.command("work")
    assert {k: work[k] for k in ("ticks", "backup", "reload", "write")} == dict.fromkeys(
        ("ticks", "backup", "reload", "write"), "ok")
    assert work["clock_moved"]
    assert (low_limit.workdir / "written-1.txt").read_text() == "still writable\n"
    for s in idle:
        s.close()


def test_accept_errors_when_descriptors_run_out_log_one_line_and_recover(low_limit: ApiChild) -> None:
    assert low_limit.command("exhaust")["held"] > 0  # as if something else in the process used the reserve up
    refused = 0
    until = time.monotonic() + 2.5  # accepting is retried every second: three tries fail
    while time.monotonic() < until:
        status, _ = get(low_limit.host, low_limit.port, "/healthz", timeout_s=0.25)
        refused += status is None
    assert refused > 0
    low_limit.command("release")
    assert poll(lambda: get(low_limit.host, low_limit.port, "/healthz", timeout_s=1)[0] == 200, 5)
    lines = [line for line in low_limit.stderr().splitlines() if "cannot accept connections" in line]
    assert len(lines) == 1 and "Too many open files" in lines[0] and "Traceback" not in low_limit.stderr()


@pytest.mark.parametrize(("soft", "in_use", "limits", "cap"), [
    (1024, 20, ConnectionLimits(), 1024 - 20 - FD_RESERVE),
    (1_048_576, 20, ConnectionLimits(), 4096),
    (100, 20, ConnectionLimits(), MIN_CONNECTIONS),  # too low for the reserve: a few connections, and a warning
    (100, 20, ConnectionLimits(max_connections=4), 4),
    (1024, 20, ConnectionLimits(fd_reserve=512, max_connections=100), 100),
])
def test_the_cap_leaves_the_reserve_under_the_soft_file_limit(soft: int, in_use: int, limits: ConnectionLimits,
                                                               cap: int) -> None:
    assert limits.cap(soft, in_use) == cap


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(msg: str, *args: object, name: str = "burst.api") -> logging.LogRecord:
    return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, None)


def test_repeats_pass_once_per_window_and_the_next_line_counts_them() -> None:
    clock = Clock()
    limit = RepeatFilter(60, clock=clock)
    passed = [r for r in (record("accept failed: %s", "EMFILE") for _ in range(1000)) if limit.filter(r)]
    assert len(passed) == 1
    assert limit.filter(record("another message"))
    clock.now = 61
    later = record("accept failed: %s", "EMFILE")
    assert limit.filter(later)
    assert later.getMessage() == "accept failed: EMFILE (999 more like this suppressed in the last 61 s)"
    assert later.suppressed == 999  # type: ignore[attr-defined]  # a key of its own in JSON logs


def test_distinct_messages_past_the_tracked_number_share_one_allowance() -> None:
    limit = RepeatFilter(60, max_keys=3, clock=Clock())
    passed = sum(limit.filter(record(f"connection {n} failed")) for n in range(100))
    assert passed == 4
