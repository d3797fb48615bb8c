"""Benchmark: how long `burst cost` takes, on the quickstart and on a month of ten busy tenants.

    python bench/cost_speed.py                    # both, at burst cost's defaults (the month takes hours on 2 cores)
    python bench/cost_speed.py --part quickstart  # one of them
    python bench/cost_speed.py --small            # short horizons, the fewest paths, no forecasts (CI: under a minute)

Each case runs the `burst` command itself, as a user would, and prints its
wall time, the CPU seconds it and its worker processes used, and the
machine's 1-minute load average before and after it (wall time moves with
what else the machine runs; CPU seconds much less):

- quickstart: README's first command (`burst run --duration 12h`) in a fresh
  state directory, then `burst cost` on that state (a week ahead, the default
  `--paths`, strategy and workers);
- month: the Philly trace's jobs submitted in October 2017 by its ten busiest
  virtual clusters (by GPU-hours that month), each cluster a tenant, projected
  30 days ahead from the trace's end (`--horizon 30d`) on a config written
  from that history: an on-prem tier of 8-GPU A100 nodes at the P50 of its
  concurrent demand, on-demand and spot p4d.24xlarge groups up to its peak,
  and per tenant a policy that allows spot, with half of its jobs assumed
  fault-tolerant (the simulator's assumption for traces that do not say).

`--small` runs the quickstart 2 h and projects it 6 h ahead, the month's
set-up 2 h ahead, each with 20 paths (the fewest burst cost takes) and the
`burst-no-forecast` strategy, so the script cannot rot. `--paths`,
`--workers` and `--strategy` pass through to `burst cost` (after the
`--small` ones, so they win). Traces are read from
$BURST_DATA_DIR (default ../shared/data).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from burst.settings import data_dir
from burst.sim.setup import DEFAULT_FAULT_TOLERANT_FRACTION, GPUS_PER_NODE
from burst.sim.traces import load_trace

MONTH = "2017-10"
TENANTS = 10


@dataclass(frozen=True)
class Timing:
    """One `burst cost` run: wall seconds, CPU seconds of it and its children, and its P50 total."""

    wall_s: float
    cpu_s: float
    p50_usd: float


def burst(*args: str, env: dict[str, str]) -> Timing:
    """Run `burst ARGS...` (from this venv), failing loudly; its wall and CPU time, and `--json`'s P50 total."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run([str(Path(sys.executable).parent / "burst"), *args], env=env, capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"burst {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    p50 = json.loads(done.stdout)["total_usd"]["p50"] if "--json" in args else float("nan")
    return Timing(wall, cpu, p50)


def quickstart(small: bool, extra: list[str]) -> Timing:
    """`burst run` on the embedded quickstart in a fresh state directory, then `burst cost` timed on its state."""
    with tempfile.TemporaryDirectory() as state:
        env = {**os.environ, "XDG_STATE_HOME": state}
        burst("run", "--duration", "2h" if small else "12h", "--quiet", env=env)
        args = ["--horizon", "6h", "--paths", "20", "--strategy", "burst-no-forecast"] if small else []
        return burst("cost", *args, *extra, "--json", env=env)


def month_inputs(directory: Path) -> tuple[Path, Path]:
    """The October trace of Philly's ten busiest clusters and a config for it, written into `directory`."""
    with (data_dir() / "traces" / "philly.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["timestamp"].startswith(MONTH)]
    work: Counter[str] = Counter()
    for r in rows:
        work[r["cluster"]] += float(r["duration"]) * int(r["num_gpus"])
    busiest = sorted(c for c, _ in work.most_common(TENANTS))
    trace = directory / f"philly-{MONTH}-busiest-{TENANTS}.csv"
    with trace.open("w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=list(rows[0]))
        out.writeheader()
        out.writerows(r for r in rows if r["cluster"] in busiest)
    stats = load_trace(trace, format="philly").stats()
    onprem = -(-int(stats.p50_gpus) // GPUS_PER_NODE)
    cloud = max(1, -(-int(stats.peak_gpus) // GPUS_PER_NODE))
    policies = directory / "policies"
    policies.mkdir()
    for tenant in busiest:
        (policies / f"{tenant}.yaml").write_text(
            f'tenant: "{tenant}"\nspot:\n  allowed: true\n  fault_tolerant_fraction: {DEFAULT_FAULT_TOLERANT_FRACTION}\n')
    group = "    provider: sim\n    gpu_model: A100\n    gpus_per_node: 8\n"
    config = directory / "burst.yaml"
    config.write_text(
        f"cluster: philly-busiest\npolicies_dir: policies\nnode_groups:\n"
        f"  - id: onprem\n{group}    region: dc1\n    tier: steady\n    capacity_type: onprem\n"
        f"    instance_type: dgx-a100\n    min_size: {onprem}\n    max_size: {onprem}\n    initial_size: {onprem}\n"
        f"    boot_latency: 10m\n"
        f"  - id: cloud-od\n{group}    region: us-east-1\n    tier: elastic\n    capacity_type: on_demand\n"
        f"    instance_type: p4d.24xlarge\n    max_size: {cloud}\n    boot_latency: 5m\n"
        f"  - id: cloud-spot\n{group}    region: us-east-1\n    tier: elastic\n    capacity_type: spot\n"
        f"    instance_type: p4d.24xlarge\n    max_size: {cloud}\n    boot_latency: 5m\n    spot_hazard_per_hour: 0.02\n")
    return trace, config


def month(small: bool, extra: list[str]) -> Timing:
    """`burst cost` of the ten busiest Philly clusters' October, 30 days ahead (2 h with `small`)."""
    with tempfile.TemporaryDirectory() as tmp:
        trace, config = month_inputs(Path(tmp))
        env = {**os.environ, "XDG_STATE_HOME": tmp}
        args = ["--horizon", "2h", "--paths", "20", "--strategy", "burst-no-forecast"] if small else ["--horizon", "30d"]
        return burst("cost", "--config", str(config), "--history", str(trace), "--format", "philly", *args, *extra,
                     "--json", env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="short horizons, 20 paths, no forecasts (CI)")
    parser.add_argument("--part", choices=("quickstart", "month"), action="append", default=None,
                        help="run only this case (repeatable; default both)")
    parser.add_argument("--paths", type=int, default=None, help="burst cost --paths (default: burst cost's)")
    parser.add_argument("--workers", type=int, default=None, help="burst cost --workers (default: burst cost's)")
    parser.add_argument("--strategy", default=None, help="burst cost --strategy (default: burst cost's)")
    args = parser.parse_args()
    extra = [f"--{k}={v}" for k, v in (("paths", args.paths), ("workers", args.workers), ("strategy", args.strategy)) if v]
    cases = {"quickstart": quickstart, "month": month}
    print(f"burst cost on {os.cpu_count()} CPU(s){' (--small)' if args.small else ''}:")
    for name in args.part or list(cases):
        load = os.getloadavg()[0]
        t = cases[name](args.small, extra)
        print(f"  {name:<10} {t.wall_s:8.1f} s wall, {t.cpu_s:8.1f} CPU s (with its workers); P50 total ${t.p50_usd:,.0f}; "
              f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
