"""A real HTTP server for the agent link: uvicorn serving the agent router on 127.0.0.1, a free port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn

from burst.agent.hub import AgentHub
from burst.agent.router import agent_app

TOKENS = {"node-a": "token-a", "node-b": "token-b", "rack-00001": "token-rack"}


@dataclass
class Controller:
    hub: AgentHub
    url: str


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """`app` served by uvicorn on 127.0.0.1 at a free port, in a thread; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture
def controller() -> Iterator[Controller]:
    hub = AgentHub(TOKENS)
    with serve(agent_app(hub)) as url:
        yield Controller(hub, url)
