"""A real Prometheus for the tests: Debian's `prometheus` and `promtool`, a data directory, 127.0.0.1, a free port.

`backfill` writes a gauge's past samples into a data directory with `promtool
tsdb create-blocks-from openmetrics`; `PrometheusServer` runs `prometheus` on
it, scraping the targets given (an `Exporter`, a gauge the test sets), and can
be stopped and started again on the same directory and port (an outage).
`StubApi` is a local HTTP endpoint that answers every request with one fixed
reply, records what it was sent, and can hold its answer back (a server too
slow to answer). Where the binaries are missing the Prometheus tests skip,
unless ``BURST_REQUIRE_PROMETHEUS=1`` (set by `.ci/run`), which turns the skip
into a failure. A Prometheus the machine runs itself (Debian's service, on
9090) is never used.
"""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NoReturn, TypeVar

import httpx
import pytest

REQUIRE_ENV = "BURST_REQUIRE_PROMETHEUS"
READY_WITHIN_S = 60.0

T = TypeVar("T")
Series = tuple[Mapping[str, str], Sequence[tuple[float, float]]]
"""One labelled series: its labels, and its (unix seconds, value) samples in ascending time."""


def unavailable(reason: str) -> NoReturn:
    """Skip (or, where Prometheus is required, fail) the tests that need a server."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def binary(name: str) -> str:
    """The path of `prometheus` or `promtool`, or skip (fail where required) when it is not installed."""
    found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if found is None:
        unavailable(f"{name} is not installed (apt-get install prometheus)")
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def eventually(read: Callable[[], T], accept: Callable[[T], bool], within_s: float = 30.0) -> T:
    """Call `read` until `accept` takes what it returns (exceptions count as not yet); the last exception, or
    an AssertionError naming the last value, once `within_s` has passed."""
    deadline = time.monotonic() + within_s
    pause = threading.Event()
    while True:
        try:
            value = read()
            if accept(value):
                return value
            failure: BaseException = AssertionError(f"not accepted within {within_s:g} s: {value!r}")
        except Exception as exc:  # noqa: BLE001 (retried until the deadline, then raised)
            failure = exc
        if time.monotonic() > deadline:
            raise failure
        pause.wait(0.05)


def openmetrics(metric: str, series: Sequence[Series]) -> str:
    """The OpenMetrics text of gauge `metric` with the series given, ending with `# EOF`."""
    lines = [f"# HELP {metric} Backfilled by the burst tests.", f"# TYPE {metric} gauge"]
    for labels, samples in series:
        times = [at for at, _ in samples]
        if times != sorted(times) or len(set(times)) != len(times):
            raise ValueError(f"{metric}{dict(labels)}: samples must be in strictly ascending time")
        tags = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        lines += [f"{metric}{{{tags}}} {value!r} {at:.3f}" for at, value in samples]
    return "\n".join([*lines, "# EOF"]) + "\n"


def backfill(data_dir: Path, metric: str, series: Sequence[Series]) -> None:
    """Write the past samples of gauge `metric` into the TSDB at `data_dir` (`promtool tsdb
    create-blocks-from openmetrics`); every sample must be older than now, in ascending time per series."""
    latest = max((at for _, samples in series for at, _ in samples), default=0.0)
    if latest >= time.time():
        raise ValueError(f"{metric}: backfilled samples must be older than now (latest {latest:.0f})")
    data_dir.mkdir(parents=True, exist_ok=True)
    source = data_dir.parent / f"{data_dir.name}.{metric}.om"
    source.write_text(openmetrics(metric, series))
    made = subprocess.run([binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", str(source),
                           str(data_dir)], capture_output=True, text=True)
    if made.returncode != 0:
        raise RuntimeError(f"promtool could not backfill {metric}: {made.stderr.strip()[-2000:]}")


class PrometheusServer:
    """`prometheus` on 127.0.0.1:`port` over the TSDB at `data_dir`, scraping `targets` (host:port, path
    /metrics) every `scrape_interval_s`; `start` and `stop` may alternate, on the same directory and port."""

    def __init__(self, data_dir: Path, targets: Sequence[str] = (), *, scrape_interval_s: float = 1.0) -> None:
        self.data_dir = data_dir
        self.targets = list(targets)
        self.scrape_interval_s = scrape_interval_s
        self.port = free_port()
        self.config_file = data_dir.parent / f"{data_dir.name}.prometheus.yml"
        self.log_file = data_dir.parent / f"{data_dir.name}.prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The base URL of its HTTP API."""
        return f"http://127.0.0.1:{self.port}"

    def _write_config(self) -> None:
        interval = f"{int(self.scrape_interval_s * 1000)}ms"
        targets = ", ".join(f'"{t}"' for t in self.targets)
        self.config_file.write_text(
            f"global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n"
            f"scrape_configs:\n  - job_name: burst-test\n    scrape_interval: {interval}\n"
            f"    scrape_timeout: {interval}\n    static_configs:\n      - targets: [{targets}]\n")

    def start(self) -> None:
        """Start the server and wait until `/-/ready` answers 200; RuntimeError with its log when it does not."""
        if self.process is not None:
            raise RuntimeError("prometheus is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                [binary("prometheus"), f"--config.file={self.config_file}", f"--storage.tsdb.path={self.data_dir}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=30d"],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_WITHIN_S
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            try:
                code = self.process.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                continue
            self.process = None
            raise RuntimeError(f"prometheus exited with {code}: {self.log_file.read_text()[-2000:]}")
        self.stop()
        raise RuntimeError(f"prometheus not ready within {READY_WITHIN_S:g} s: {self.log_file.read_text()[-2000:]}")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 30 s); its data stays for the next `start`."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


def start_prometheus(data_dir: Path, targets: Sequence[str] = (), *, scrape_interval_s: float = 1.0
                     ) -> PrometheusServer:
    """A started `PrometheusServer` (see there); the caller stops it."""
    server = PrometheusServer(data_dir, targets, scrape_interval_s=scrape_interval_s)
    server.start()
    return server


class _Http:
    """A stdlib HTTP server on 127.0.0.1, a free port, serving in a daemon thread."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


class Exporter:
    """A Prometheus target on 127.0.0.1: `/metrics` serves gauge `metric` with `labels` at the value last
    `set` (no sample before the first `set`, or after `set(None)`); `scrapes` counts the requests."""

    def __init__(self, metric: str, labels: Mapping[str, str] | None = None) -> None:
        self.metric = metric
        self.labels = dict(labels or {})
        self.value: float | None = None
        self.scrapes = 0
        exporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                exporter.scrapes += 1
                body = exporter.exposition().encode()
                self.send_response(200 if self.path.startswith("/metrics") else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._http = _Http(Handler)

    @property
    def target(self) -> str:
        """Its host:port, as a scrape config names it."""
        return f"127.0.0.1:{self._http.port}"

    def set(self, value: float | None) -> None:
        """The value the next scrape reads (None: the gauge is not exposed)."""
        self.value = value

    def exposition(self) -> str:
        """The text format body `/metrics` serves now."""
        head = f"# HELP {self.metric} Set by the burst tests.\n# TYPE {self.metric} gauge\n"
        if self.value is None:
            return head
        tags = ",".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()))
        return head + f"{self.metric}{{{tags}}} {self.value!r}\n"

    def close(self) -> None:
        """Stop serving."""
        self._http.close()


class StubApi:
    """A local HTTP endpoint that answers every GET with `status` and `body` (`content_type`), recording each
    request's path and query and headers in `requests`. With `hold=True` it answers only once `release` is
    called (or after `hold_limit_s`): a server too slow for any client timeout. `tls` serves https."""

    def __init__(self, body: str, *, status: int = 200, content_type: str = "application/json", hold: bool = False,
                 hold_limit_s: float = 60.0, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._released = threading.Event()
        if not hold:
            self._released.set()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                stub.requests.append((self.path, dict(self.headers.items())))
                stub._released.wait(hold_limit_s)
                payload = body.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up waiting

            def log_message(self, *args: object) -> None:
                pass

        self._http = _Http(Handler, tls)
        self.scheme = "https" if tls is not None else "http"

    @property
    def url(self) -> str:
        """Its base URL."""
        return f"{self.scheme}://127.0.0.1:{self._http.port}"

    def release(self) -> None:
        """Let held requests (and every later one) be answered."""
        self._released.set()

    def close(self) -> None:
        """Answer what is held and stop serving."""
        self.release()
        self._http.close()
