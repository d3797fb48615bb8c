"""Benchmark: the API under a flood of idle connections, at the common file limit of 1,024 descriptors.

    python bench/api_connections.py            # RLIMIT_NOFILE 1024, 1,100 idle connections (about 15 s)
    python bench/api_connections.py --small    # RLIMIT_NOFILE 256, 200 idle connections (a few seconds)

A child process lowers its soft RLIMIT_NOFILE, builds the quickstart daemon
on a SQLite state file and serves the API on 127.0.0.1 through `start_api`
(`tests/api_child.py`). This process opens more idle connections than the
API's cap (they connect and send nothing), then reports: how many the API
holds and how many it closed to make room; whether fresh clients' GET
/healthz are answered and how fast; whether the daemon beside the API still
ticks, backs its state up, reloads its policies and writes a file; how many
descriptors the child has left; how soon the server closes the idle
connections it still holds (the read deadline); and how many bytes the
child logged.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout first; the shared child and clients

from api_child import ApiChild, closed_by_peer, get, open_idle, poll  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="RLIMIT_NOFILE 256, 200 connections, 1 s deadline")
    parser.add_argument("--nofile", type=int, help="the child's soft RLIMIT_NOFILE (default 1024; 256 with --small)")
    parser.add_argument("--connections", type=int, help="idle connections to open (default 1100; 200 with --small)")
    parser.add_argument("--read-timeout", type=float, help="the API's read deadline in seconds (default 10; 1 with "
                        "--small)")
    args = parser.parse_args()
    nofile = args.nofile or (256 if args.small else 1024)
    count = args.connections or (200 if args.small else 1100)
    read_timeout = args.read_timeout or (1.0 if args.small else 10.0)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = count + 64
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            sys.exit(f"this process may open {hard} descriptors at most; {need} are needed for {count} connections")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))

    with tempfile.TemporaryDirectory(prefix="burst-bench-api-") as tmp:
        child = ApiChild(Path(tmp), nofile=nofile, read_timeout_s=read_timeout)
        try:
            run(child, nofile, count, read_timeout)
        finally:
            child.stop()
            print(f"child's log output:            {len(child.stderr().encode())} bytes")


def run(child: ApiChild, nofile: int, count: int, read_timeout: float) -> None:
    cap = child.started["cap"]
    print(f"child RLIMIT_NOFILE (soft):    {nofile}")
    print(f"descriptors open at start:     {child.started['open_fds']}")
    print(f"API connection cap:            {cap}")
    print(f"read deadline:                 {read_timeout:g} s")

    started = time.monotonic()
    idle = open_idle(child.host, child.port, count)
    print(f"idle connections opened:       {count} in {time.monotonic() - started:.2f} s")
    poll(lambda: child.command("status")["open"] >= min(cap, count), 10)

    samples = [get(child.host, child.port, "/healthz", timeout_s=read_timeout + 5) for _ in range(5)]
    answered = [seconds for status, seconds in samples if status == 200]
    status = child.command("status")
    print(f"API holds:                     {status['open']} connections; {status['evicted']} closed to make room")
    print(f"child descriptors in use:      {status['open_fds']} of {nofile} ({nofile - status['open_fds']} free)")
    print(f"fresh GET /healthz answered:   {len(answered)} of {len(samples)}"
          + (f"; median {statistics.median(answered) * 1000:.1f} ms, slowest {max(answered) * 1000:.1f} ms"
             if answered else ""))

    work = child.command("work")
    for step in ("ticks", "backup", "reload", "write"):
        print(f"{'daemon ' + step + ':':31s}{work[step]}")

    started = time.monotonic()
    open_now = [s for s in idle if not closed_by_peer(s)]
    all_closed = poll(lambda: all(closed_by_peer(s) for s in open_now), read_timeout + 5, every_s=0.1)
    print(f"idle connections still open:   {len(open_now)}; "
          + (f"all closed by the server within {time.monotonic() - started:.1f} s" if all_closed
             else f"some still open after {read_timeout + 5:g} s"))
    for s in idle:
        s.close()


if __name__ == "__main__":
    main()
