"""libcloud's EC2 driver against the moto server, through a small HTTP proxy on 127.0.0.1.

moto serialises EC2 responses with the XML namespace of botocore's service
model, `http://ec2.amazonaws.com/doc/2016-11-15` (no trailing slash), while
AWS answers `.../2016-11-15/`, which is what libcloud's EC2 driver looks for;
without the slash the driver finds no instances in any response. The proxy
rewrites that one namespace and otherwise forwards requests untouched, and it
injects faults by EC2 action (the driver sends the action in the query
string): an error code, HTTP 500s, or a response dropped after the call
reached moto (a lost response).
"""

from __future__ import annotations

import http.client
import http.server
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aws_env import AMI, REGION, moto_server

MOTO_NAMESPACE = b'xmlns="http://ec2.amazonaws.com/doc/2016-11-15"'
AWS_NAMESPACE = b'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"'


def ec2_error(code: str, message: str, status: int = 400) -> tuple[int, bytes]:
    """An EC2 error response (status, body) in the query protocol's shape."""
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error></Errors><RequestID>{uuid.uuid4()}</RequestID></Response>")
    return status, body.encode()


@dataclass
class Ec2Faults:
    """What the proxy injects, per EC2 action; counts drop by one per matching call (-1: until cleared)."""

    errors: dict[str, tuple[int, tuple[int, bytes]]] = field(default_factory=dict)  # action -> (count, reply)
    lose: dict[str, int] = field(default_factory=dict)  # action -> count: forwarded, response dropped


class Ec2Proxy:
    """A threaded proxy in front of moto: AWS's namespace in responses, and `faults` injected."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = f"127.0.0.1:{upstream_port}"
        self.faults = Ec2Faults()
        self.log: list[tuple[str, str]] = []  # (action, what happened)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                proxy._handle(self)

            def do_POST(self) -> None:
                proxy._handle(self)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def calls(self, action: str, what: str = "ok") -> int:
        return sum(1 for a, w in self.log if a == action and w == what)

    def _handle(self, req: http.server.BaseHTTPRequestHandler) -> None:
        length = int(req.headers.get("Content-Length", 0) or 0)
        body = req.rfile.read(length) if length else b""
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(req.path).query)
        form = urllib.parse.parse_qs(body.decode(errors="replace")) if body else {}
        action = (query.get("Action") or form.get("Action") or [""])[0]
        injected = self.faults.errors.get(action)
        if injected is not None and injected[0] != 0:
            count, (status, reply) = injected
            self.faults.errors[action] = (count - 1 if count > 0 else count, (status, reply))
            self.log.append((action, f"error {status}"))
            return _reply(req, status, reply, [("Content-Type", "text/xml")])
        conn = http.client.HTTPConnection(self.upstream, timeout=30)
        headers = {k: v for k, v in req.headers.items() if k.lower() not in ("connection", "content-length")}
        conn.request(req.command, req.path, body=body or None, headers=headers)
        resp = conn.getresponse()
        data = resp.read().replace(MOTO_NAMESPACE, AWS_NAMESPACE)
        conn.close()
        left = self.faults.lose.get(action, 0)
        if left != 0:
            self.faults.lose[action] = left - 1 if left > 0 else left
            self.log.append((action, "lost"))
            req.close_connection = True  # moto applied the call; the client never hears of it
            return None
        self.log.append((action, "ok"))
        out = [(k, v) for k, v in resp.getheaders()
               if k.lower() not in ("content-length", "connection", "transfer-encoding", "x-amz-crc32")]
        return _reply(req, resp.status, data, out)


def _reply(req: http.server.BaseHTTPRequestHandler, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
    req.send_response(status)
    for k, v in headers:
        req.send_header(k, v)
    req.send_header("Content-Length", str(len(body)))
    req.end_headers()
    req.wfile.write(body)


@contextmanager
def ec2_endpoint() -> Iterator[Ec2Proxy]:
    """A freshly reset moto server with the proxy in front of it (closed afterwards)."""
    server = moto_server()
    server.reset()
    proxy = Ec2Proxy(server.port)
    try:
        yield proxy
    finally:
        proxy.close()


def ec2_driver(port: int, *, key: str = "testing", secret: str = "testing") -> Any:
    """libcloud's own EC2NodeDriver on plain HTTP to 127.0.0.1:`port` (SigV4, as moto routes by its scope)."""
    from libcloud.compute.providers import get_driver
    from libcloud.compute.types import Provider

    cls = get_driver(Provider.EC2)
    return cls(key, secret, secure=False, host="127.0.0.1", port=port, region=REGION, signature_version="4")


__all__ = ["AMI", "REGION", "Ec2Faults", "Ec2Proxy", "ec2_driver", "ec2_endpoint", "ec2_error"]
