"""Benchmark: how long loading a trace and summarising it take.

    python bench/trace_loading.py           # Philly (82k jobs) from the data directory, and 80k generated rows
    python bench/trace_loading.py --small   # 8k generated rows only (CI keeps the script from rotting)

Targets (reported, not asserted): Philly loads in under 5 s; `Trace.stats()`
on 80k jobs takes under 1 s. Figures are wall seconds on this machine.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from burst.settings import data_dir
from burst.sim.traces import load_trace


def _generated(rows: int, folder: Path) -> Path:
    path = folder / "generated.csv"
    lines = ["submit_time,duration_s,gpus"] + [
        f"{i * 37},{600 + (i * 7919) % 86400},{1 + i % 8}" for i in range(rows)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _time_load_and_stats(path: Path) -> tuple[int, float, float]:
    t = time.perf_counter()
    trace = load_trace(path)
    loaded = time.perf_counter() - t
    t = time.perf_counter()
    trace.stats()
    return len(trace.jobs), loaded, time.perf_counter() - t


def main() -> None:
    """Print the load and stats time of each trace measured."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="8k generated rows only")
    args = parser.parse_args()
    print(f"{'trace':<12} {'jobs':>7} {'load s':>7} {'stats s':>8}")
    with tempfile.TemporaryDirectory() as folder:
        rows = 8_000 if args.small else 80_000
        jobs, load_s, stats_s = _time_load_and_stats(_generated(rows, Path(folder)))
        print(f"{'generated':<12} {jobs:>7} {load_s:>7.2f} {stats_s:>8.2f}")
    philly = data_dir() / "traces" / "philly.csv"
    if not args.small and philly.is_file():
        jobs, load_s, stats_s = _time_load_and_stats(philly)
        print(f"{'philly':<12} {jobs:>7} {load_s:>7.2f} {stats_s:>8.2f}   (target: load < 5 s)")


if __name__ == "__main__":
    main()
