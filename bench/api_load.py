"""Benchmark: the API under load and under attack, one checkout beside another.

    python bench/api_load.py                      # this checkout
    python bench/api_load.py --base ../burst-base # and a base checkout, side by side
    python bench/api_load.py --small              # fewer submits, a shorter attack (CI)

Each checkout serves a real daemon (`burst run --api`, the quickstart's
groups and tenants on a real clock, its own SQLite state file) in a child
process; this process is the clients. Three measures:

1. Submits: 2,000 job submits over the three tenants from 200 keep-alive
   clients at once (400 and 40 with --small): status codes, p50 / p99 latency
   and submits per second. The tenants' submit limits are raised for it (the
   policies get `limits:` with 100,000 pending jobs, 10,000 submits/s, bursts
   of 100,000), as printed; a checkout without per-tenant limits has none.
2. The one-token growth attack: one tenant's token submits jobs of about
   61 KiB (every field within its bound) from 20 clients for 40 s (8 s with
   --small) under the default limits, then lists the jobs three times at
   once: the state store's growth, the answers, and the daemon's peak RSS.
3. Idle connections: `bench/api_connections.py` (RLIMIT_NOFILE 1,024 and
   1,100 idle connections; its --small with --small).

Figures are reported, not asserted: the targets are p99 <= 2 s and >= 400
submits/s with every submit 201, and RSS <= 500 MB under the attack.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
TENANTS = ("prod", "research", "batch")
RAISED_LIMITS = {"max_pending_jobs": 100_000, "submits_per_second": 10_000, "submit_burst": 100_000}
ATTACK_ARG = "x" * 4000
ATTACK_ARGS = 15  # 15 x 4,000 characters: a body of about 61 KiB, under the 64 KiB limit


@dataclass
class Daemon:
    """A `burst run --api` child process of one checkout, its URL, token directory and state file."""

    checkout: Path
    proc: subprocess.Popen[bytes]
    url: str
    tokens: Path
    state: Path

    def token(self, tenant: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {(self.tokens / f'tenant-{tenant}.token').read_text().strip()}"}

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def store_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.state.parent.glob(self.state.name + "*") if p.is_file()
                   and not p.name.endswith(".lock"))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_daemon(checkout: Path, workdir: Path, *, raised: bool) -> Daemon:
    """Serve `checkout`'s daemon from `workdir`: the quickstart's config on a real clock, the API on a free port."""
    quick = checkout / "burst" / "data" / "quickstart"
    config = yaml.safe_load((quick / "burst.yaml").read_text())
    config.update(clock="real", loop_interval="10s")
    config.pop("sim_start", None)
    config.pop("clock_speed", None)
    (workdir / "burst.yaml").write_text(yaml.safe_dump(config))
    shutil.copytree(quick / "policies", workdir / "policies")
    has_limits = (checkout / "policies" / "limits.py").exists()
    if raised and has_limits:
        for path in (workdir / "policies").glob("*.yaml"):
            policy = yaml.safe_load(path.read_text())
            policy["limits"] = RAISED_LIMITS
            path.write_text(yaml.safe_dump(policy))
    port = _free_port()
    code = f"import sys; sys.path.insert(0, {str(checkout)!r}); from burst.cli import main; main()"
    proc = subprocess.Popen([sys.executable, "-c", code, "run", "--quiet", "--config", str(workdir / "burst.yaml"),
                             "--api", f"127.0.0.1:{port}"], cwd=workdir, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{checkout}: the daemon did not come up")
        time.sleep(0.2)
    return Daemon(checkout, proc, url, workdir / "tokens", workdir / "burst.db")


class RawClient:
    """One keep-alive HTTP/1.1 connection speaking just enough of the protocol to post JSON and read the answer:
    a client several times cheaper than httpx, so the clients' CPU is not what a two-core machine measures."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, token: str) -> int:
        if self.writer is None or self.reader is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        await self.writer.drain()
        lines = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        length = next((int(h.split(":", 1)[1]) for h in lines if h.lower().startswith("content-length:")), 0)
        await self.reader.readexactly(length)
        if any(h.lower() == "connection: close" for h in lines):
            self.writer.close()
            self.reader = self.writer = None
        return int(lines[0].split()[1])

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def _submits(daemon: Daemon, count: int, clients: int) -> tuple[Counter[int], list[float], float]:
    """`count` submits over the tenants from `clients` keep-alive connections; codes, latencies, wall seconds."""
    codes: Counter[int] = Counter()
    latencies: list[float] = []
    host, port = daemon.url.removeprefix("http://").rsplit(":", 1)
    tokens = {t: daemon.token(t)["Authorization"].removeprefix("Bearer ") for t in TENANTS}
    bodies = {t: json.dumps({"tenant": t, "gpus": 1, "duration": "1h"}).encode() for t in TENANTS}
    todo = iter(range(count))
    conns = [RawClient(host, int(port)) for _ in range(clients)]

    async def worker(conn: RawClient) -> None:
        for i in todo:
            tenant = TENANTS[i % len(TENANTS)]
            started = time.perf_counter()
            codes[await conn.post("/v1/jobs", bodies[tenant], tokens[tenant])] += 1
            latencies.append(time.perf_counter() - started)

    began = time.perf_counter()
    try:
        await asyncio.gather(*(worker(c) for c in conns))
    finally:
        for c in conns:
            c.close()
    return codes, latencies, time.perf_counter() - began


async def _attack(daemon: Daemon, seconds: float, clients: int) -> tuple[Counter[int], list[int], float]:
    """One tenant's token submitting ~61 KiB jobs for `seconds`, then three listings at once: the submit codes,
    the listings' answer sizes and the listings' wall seconds."""
    codes: Counter[int] = Counter()
    headers = daemon.token("research")
    body = {"tenant": "research", "gpus": 1, "command": [ATTACK_ARG] * ATTACK_ARGS}
    assert len(json.dumps(body)) < 64 * 1024
    end = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=daemon.url, timeout=120,
                                 limits=httpx.Limits(max_connections=clients)) as client:

        async def worker() -> None:
            while time.monotonic() < end:
                answer = await client.post("/v1/jobs", json=body, headers=headers)
                codes[answer.status_code] += 1
                if answer.status_code == 429:
                    await asyncio.sleep(min(1.0, float(answer.headers.get("Retry-After", "1"))))

        await asyncio.gather(*(worker() for _ in range(clients)))
        began = time.perf_counter()
        listings = await asyncio.gather(*(client.get("/v1/jobs", headers=headers) for _ in range(3)))
        return codes, [len(r.content) for r in listings], time.perf_counter() - began


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def measure(checkout: Path, *, small: bool) -> dict[str, object]:
    """The three measures for one checkout, each on a daemon of its own."""
    count, clients = (400, 40) if small else (2000, 200)
    out: dict[str, object] = {"checkout": str(checkout)}
    with tempfile.TemporaryDirectory(prefix="burst-bench-load-") as tmp:
        daemon = start_daemon(checkout, Path(tmp), raised=True)
        try:
            codes, latencies, wall = asyncio.run(_submits(daemon, count, clients))
        finally:
            daemon.stop()
        out.update(submits=count, clients=clients, codes=dict(codes), p50_s=statistics.median(latencies),
                   p99_s=_pct(latencies, 0.99), per_s=count / wall)
    with tempfile.TemporaryDirectory(prefix="burst-bench-attack-") as tmp:
        daemon = start_daemon(checkout, Path(tmp), raised=False)
        try:
            before = daemon.store_bytes()
            codes, sizes, wall = asyncio.run(_attack(daemon, 8.0 if small else 40.0, 20))
            out.update(attack_codes=dict(codes), growth_mb=(daemon.store_bytes() - before) / 1e6,
                       listing_mb=[round(s / 1e6, 2) for s in sizes], listing_s=wall, peak_rss_mb=daemon.peak_rss_mb())
        finally:
            daemon.stop()
    return out


def report(row: dict[str, object]) -> None:
    print(f"\n## {row['checkout']}")
    print(f"submits: {row['submits']} from {row['clients']} keep-alive clients; codes {row['codes']}; "
          f"p50 {row['p50_s']:.3f} s, p99 {row['p99_s']:.3f} s; {row['per_s']:.0f} submits/s "
          f"(targets: all 201, p99 <= 2 s, >= 400/s)")
    print(f"growth attack (one token, ~61 KiB jobs, default limits): codes {row['attack_codes']}; store grew "
          f"{row['growth_mb']:.1f} MB; three listings at once: {row['listing_mb']} MB in {row['listing_s']:.2f} s; "
          f"daemon peak RSS {row['peak_rss_mb']:.0f} MB (target <= 500 MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="400 submits from 40 clients, an 8 s attack")
    parser.add_argument("--base", type=Path, help="a base checkout measured first, side by side")
    parser.add_argument("--skip-connections", action="store_true", help="leave out bench/api_connections.py")
    args = parser.parse_args()
    print(f"raised limits for the submit measure: {json.dumps(RAISED_LIMITS)} (per tenant; none where a checkout "
          "has no per-tenant limits)")
    rows = [measure(c.resolve(), small=args.small) for c in ([args.base] if args.base else []) + [ROOT]]
    for row in rows:
        report(row)
    if len(rows) == 2:
        base, this = rows
        print(f"\nthis / base: submits/s x{float(this['per_s']) / float(base['per_s']):.2f}, p99 "  # type: ignore[arg-type]
              f"x{float(this['p99_s']) / float(base['p99_s']):.2f}, attack growth "  # type: ignore[arg-type]
              f"{this['growth_mb']:.1f} vs {base['growth_mb']:.1f} MB, peak RSS "
              f"{this['peak_rss_mb']:.0f} vs {base['peak_rss_mb']:.0f} MB")
    if not args.skip_connections:
        print("\n## idle connections (bench/api_connections.py)", flush=True)
        subprocess.run([sys.executable, str(ROOT / "bench" / "api_connections.py"), *(["--small"] if args.small
                        else [])], check=True, env={**os.environ})


if __name__ == "__main__":
    main()
