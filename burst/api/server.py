"""Serving the API beside the reconcile loop: uvicorn in a thread, on a socket bound before the first tick.

Binding first means a taken port or a bad address is one clear error at
start, not a traceback in a thread later. The socket listens from then on, so
a client that connects while the server starts waits in the listen queue.

The server holds a bounded number of connections, each for a bounded time, so
no client, authenticated or not, can spend the descriptors the store, backups
and reloads need: `burst.api.connections` has the rules (the cap from
RLIMIT_NOFILE less a reserve, the read deadline, what happens at the cap).
Repeated log lines from the server (accept errors, malformed requests,
failing handlers) are rate-limited by `burst.logs.limit_repeats`.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from burst.agent.hub import AgentHub
from burst.api.app import DaemonView, api_app
from burst.api.connections import LISTEN_BACKLOG, ConnectionLimits, GuardedServer
from burst.api.status import daemon_status
from burst.api.tokens import load_api_tokens
from burst.logs import limit_repeats
from burst.reconcile import TickReport
from policies.config import listen_address

if TYPE_CHECKING:
    from burst.runtime import Runtime


class ApiStartError(RuntimeError):
    """The API could not start (address taken, bad token files): one line saying why."""


@dataclass
class ApiServer:
    """A running API: where it listens, where its tokens are, and how to stop it."""

    url: str
    tokens_dir: Path
    view: DaemonView
    hub: AgentHub | None
    _server: GuardedServer
    _thread: threading.Thread
    _sock: socket.socket

    @property
    def max_connections(self) -> int:
        """The most connections the server holds at once (see `burst.api.connections`)."""
        return self._server.cap

    def open_connections(self) -> int:
        """Connections the server holds now (accepted and not yet closed)."""
        return self._server.open_connections

    def evicted_connections(self) -> int:
        """Connections closed so far to make room for new ones at the cap."""
        acceptor = self._server.acceptor
        return acceptor.evicted if acceptor is not None else 0

    def stop(self) -> None:
        """Stop serving (finishing requests in flight) and release the port."""
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


def _bind(listen: str) -> socket.socket:
    """Bind `listen` (HOST:PORT, or a bare port for 127.0.0.1; see `policies.config.listen_address`)."""
    try:
        listen = listen_address(listen)
    except ValueError as exc:
        raise ApiStartError(f"api: {exc}") from None
    host, _, port = listen.rpartition(":")
    try:
        sock = socket.socket(socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), int(port)))
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        raise ApiStartError(f"api: cannot listen on {listen}: {exc.strerror or exc}") from None
    return sock


def start_api(runtime: Runtime, listen: str, *, tokens_dir: Path,
              limits: ConnectionLimits | None = None) -> ApiServer:
    """Start the API for `runtime` on `listen` (HOST:PORT, or a bare PORT for 127.0.0.1), tokens from (or
    generated into) `tokens_dir`, connections bounded by `limits` (the defaults unless given)."""
    limits = limits or ConnectionLimits()
    config = runtime.config
    try:
        shared = runtime.store if runtime.store.postgres else None  # replicas on other hosts share its hashes
        tokens = load_api_tokens(tokens_dir, runtime.reloader.current.keys(), shared=shared)
    except (OSError, ValueError) as exc:
        raise ApiStartError(f"api: {exc}") from None
    hub = runtime.hub
    view = DaemonView(config.loop_interval)

    def on_tick(report: TickReport | None, _seconds: float) -> None:
        if report is None:
            view.failed()
        else:
            serving = runtime.forecasts.serving() if runtime.forecasts is not None else {}
            view.update(report.at, daemon_status(report, runtime.catalog.group_price, serving), report.plan.to_json())

    runtime.on_tick_timed.append(on_tick)
    app = api_app(
        store_path=runtime.state_path,
        tokens=tokens,
        view=view,
        clock=runtime.controller.clock,
        tenants=lambda: set(runtime.reloader.current),
        policies=lambda: runtime.reloader.current,  # each tenant's `limits` bound its submits
        registry=runtime.metrics.registry,
        hub=hub,
    )
    sock = _bind(listen)
    cap = limits.cap()  # after binding: the listening socket is one of the descriptors in use
    server = GuardedServer(uvicorn.Config(app, log_level="warning", lifespan="on", http="h11", ws="none",
                                          timeout_keep_alive=limits.keep_alive_s), limits, cap)
    limit_repeats("burst.api", "uvicorn.error", "asyncio")  # after uvicorn's Config has set its loggers up
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="burst-api", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise ApiStartError(f"api: the server on {listen} did not start")
        time.sleep(0.01)
    host, port = sock.getsockname()[:2]
    return ApiServer(f"http://{host}:{port}", tokens_dir, view, hub, server, thread, sock)
