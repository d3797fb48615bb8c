"""Benchmark: the state store's size and row counts over 90 simulated days of the quickstart, with retention.

    python bench/store_growth.py             # 90 simulated days (about 25 min or more: not run by CI)
    python bench/store_growth.py --small     # 2 days, to keep the script from rotting
    python bench/store_growth.py --days 45 --every 5

The quickstart (`burst run` with no config: the embedded synthetic workload
on simulated cloud and on-prem groups, forecasts on) runs on a SQLite state
file in a temporary directory, as fast as it can (no wall-clock pacing). At
the end of every `--every` simulated days the script prints the file's size
(after a WAL checkpoint), the bytes its live pages use (SQLite keeps freed
pages for reuse rather than shrinking the file), and each table's rows. The
retention settings are burst.yaml's defaults (cost ledger rolled up to hourly
rows after 35 days; finished jobs, decisions, settled intents, terminated
nodes and demand samples deleted after 35 days), so from day 35 on the store
should stay flat: the last lines compare the final figures with those at the
first report past the window.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from burst.runtime import build_runtime, load_run_config

WINDOW_DAYS = 35


def measure(path: Path) -> tuple[int, int]:
    """The state file's size and the bytes of its live pages, after folding the WAL into it."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = int(conn.execute("PRAGMA page_size").fetchone()[0])
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    finally:
        conn.close()
    return path.stat().st_size, (pages - free) * page


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=90, help="simulated days to run (default 90)")
    parser.add_argument("--every", type=int, default=5, help="report every N simulated days (default 5)")
    parser.add_argument("--small", action="store_true", help="2 days, reported daily")
    args = parser.parse_args()
    days, every = (2, 1) if args.small else (args.days, args.every)
    with tempfile.TemporaryDirectory(prefix="burst-growth-") as tmp:
        path = Path(tmp) / "burst.db"
        runtime = build_runtime(load_run_config(None), state_path=path)
        start = runtime.now()
        began = time.monotonic()
        rows: list[tuple[int, int, int, dict[str, int]]] = []
        print(f"quickstart from {start.isoformat()} for {days} simulated days; state {path}", flush=True)
        try:
            for day in range(every, days + 1, every) if days >= every else [days]:
                runtime.run(until=start + timedelta(days=day), realtime=False)
                counts = runtime.store.row_counts()
                size, live = measure(path)
                rows.append((day, size, live, counts))
                tables = " ".join(f"{t}={n}" for t, n in counts.items())
                print(f"day {day:3d}: file {size / 1e6:7.2f} MB, live pages {live / 1e6:7.2f} MB, {tables} "
                      f"({time.monotonic() - began:.0f} s)", flush=True)
        finally:
            runtime.close()
    past = [r for r in rows if r[0] >= WINDOW_DAYS + every]
    if len(past) >= 2:
        (d0, s0, l0, c0), (d1, s1, l1, c1) = past[0], past[-1]
        print(f"after the {WINDOW_DAYS}-day window: day {d0} -> day {d1}: file {s0 / 1e6:.2f} -> {s1 / 1e6:.2f} MB "
              f"({s1 / s0 - 1:+.1%}), live pages {l0 / 1e6:.2f} -> {l1 / 1e6:.2f} MB ({l1 / l0 - 1:+.1%}), "
              f"cost_ledger rows {c0['cost_ledger']} -> {c1['cost_ledger']}, decisions {c0['decisions']} -> "
              f"{c1['decisions']}, jobs {c0['jobs']} -> {c1['jobs']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
