"""A daemon with its API in a child process under a low RLIMIT_NOFILE, and the clients that load it.

Shared by tests/test_api_connections.py and bench/api_connections.py. The
child (`python tests/api_child.py --nofile N ...`) lowers its soft file limit
first, so the parent keeps its own; it then builds the quickstart runtime on
a SQLite state file, starts the API through `start_api` on 127.0.0.1, prints
one JSON line (`url`, `cap`, `nofile`, `open_fds`) and answers one JSON line
per command read from stdin:

    status     the API's open connections, evictions, and the child's open descriptors
    work       what the daemon does beside the API: half an hour of ticks, a state backup, a
               policy reload and a file written, each reported ok or with its error
    exhaust    open files until the process runs out of descriptors, and hold them
    release    close the files `exhaust` holds
    quit       stop the API and the runtime, and exit
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent


class ApiChild:
    """The child process: `command(name)` sends one command and returns its JSON answer."""

    def __init__(self, workdir: Path, *, nofile: int, read_timeout_s: float, keep_alive_s: int = 5) -> None:
        self.workdir = workdir
        self.stderr_path = workdir / "child.stderr"
        self._stderr: IO[bytes] = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--nofile", str(nofile), "--read-timeout", str(read_timeout_s),
             "--keep-alive", str(keep_alive_s), "--dir", str(workdir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True, cwd=ROOT)
        self.started = self._answer()
        self.url: str = self.started["url"]
        self.host, port = self.url.removeprefix("http://").rsplit(":", 1)
        self.port = int(port)

    def command(self, name: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise RuntimeError(f"the API child exited ({self.proc.returncode}): {self.stderr()[-2000:]}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.command("quit")
                self.proc.wait(timeout=30)
            except (OSError, RuntimeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=30)
        self._stderr.close()


def open_idle(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` connections to host:port that send nothing."""
    socks = []
    for _ in range(count):
        sock = socket.create_connection((host, port), timeout=10)
        socks.append(sock)
    return socks


def get(host: str, port: int, path: str, *, timeout_s: float) -> tuple[int | None, float]:
    """One GET on a fresh connection: its status (None when no answer came within `timeout_s`) and the seconds
    it took."""
    started = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            head = b""
            while b"\r\n" not in head:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                head += chunk
    except OSError:
        return None, time.monotonic() - started
    parts = head.split(b" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    return status, time.monotonic() - started


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the server has closed `sock` (end of stream or reset), without waiting."""
    sock.setblocking(False)
    try:
        while sock.recv(65536):
            pass
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)


def poll(check: Callable[[], bool], deadline_s: float, every_s: float = 0.02) -> bool:
    """Whether `check()` came true before `deadline_s` seconds passed."""
    until = time.monotonic() + deadline_s
    while True:
        if check():
            return True
        if time.monotonic() > until:
            return False
        time.sleep(every_s)


def _open_fds() -> int | None:
    try:
        return len(os.listdir("/proc/self/fd")) - 1
    except OSError:  # out of descriptors, or no /proc
        return None


def _try(step: Callable[[], object]) -> str:
    try:
        step()
    except Exception as exc:  # reported to the parent, which judges it
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def _reload(runtime: Any) -> None:
    """Reload the config and policies as SIGHUP does; an error if any failed."""
    runtime.request_reload()
    errors = runtime.reload_if_changed()
    if errors:
        raise RuntimeError("; ".join(errors))


def _child(args: argparse.Namespace) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, hard))

    from datetime import timedelta

    from burst.api.connections import ConnectionLimits
    from burst.api.server import start_api
    from burst.logs import configure_logging
    from burst.runtime import build_runtime, load_run_config

    configure_logging("text", "warning")
    workdir = Path(args.dir)
    runtime = build_runtime(load_run_config(None), state_path=workdir / "burst.db")
    api = start_api(runtime, "127.0.0.1:0", tokens_dir=workdir / "tokens",
                    limits=ConnectionLimits(read_timeout_s=args.read_timeout, keep_alive_s=args.keep_alive))
    runtime.run(until=runtime.now() + timedelta(minutes=30), realtime=False)

    def say(answer: dict[str, Any]) -> None:
        print(json.dumps(answer), flush=True)

    say({"url": api.url, "cap": api.max_connections, "nofile": args.nofile, "open_fds": _open_fds()})
    held: list[IO[bytes]] = []
    written = 0
    for line in sys.stdin:
        name = line.strip()
        if name == "status":
            say({"open": api.open_connections(), "evicted": api.evicted_connections(), "open_fds": _open_fds()})
        elif name == "work":
            before = runtime.now()
            written += 1
            target = workdir / f"written-{written}.txt"
            answer: dict[str, Any] = {
                "ticks": _try(lambda: runtime.run(until=runtime.now() + timedelta(minutes=30), realtime=False)),
                "backup": _try(lambda: runtime.store.backup(runtime.now())),
                "reload": _try(lambda: _reload(runtime)),
                "write": _try(functools.partial(target.write_text, "still writable\n")),
            }
            answer["clock_moved"] = runtime.now() > before
            answer["open_fds"] = _open_fds()
            say(answer)
        elif name == "exhaust":
            try:
                while True:
                    held.append(open(os.devnull, "rb"))  # held until `release`
            except OSError:
                pass
            say({"held": len(held), "open_fds": _open_fds()})
        elif name == "release":
            for f in held:
                f.close()
            say({"released": len(held)})
            held.clear()
        elif name == "quit":
            api.stop()
            runtime.close()
            say({"bye": True})
            return


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nofile", type=int, required=True)
    parser.add_argument("--read-timeout", type=float, default=10.0)
    parser.add_argument("--keep-alive", type=int, default=5)
    parser.add_argument("--dir", required=True)
    _child(parser.parse_args())
