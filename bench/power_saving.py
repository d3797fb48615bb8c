"""Benchmark: on-prem power saving (idle nodes powered off, woken on demand) against an always-on steady tier.

    python bench/power_saving.py           # the docs table: Philly, 7 days from 2017-10-02
    python bench/power_saving.py --small   # one day (CI keeps the script from rotting)

Same run, same trace, the default set-up (burst/sim/setup.py: steady tier at
the trace's P50 demand, on-demand and spot cloud groups). With power saving
the steady group keeps a quarter of its nodes always on, powers the others off
after 30 min idle and wakes them in 5 min (resume) for pending work or ahead
of forecast demand. A powered-off node costs the catalog's on-prem standby
rate (depreciation and operations, no power), shown as the `hot_pool` line.
Without --small the table is written to docs/benchmarks/power-saving.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from datetime import UTC, datetime
from pathlib import Path

from benchdoc import write_doc

from burst.model import PowerSaving, Tier, WarmState
from burst.settings import data_dir
from burst.sim.compare import compare
from burst.sim.setup import SimSetup, default_setup
from burst.sim.traces import load_trace

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "power-saving.md"
ALWAYS_ON_SHARE = 0.25
RESUME_S = 300.0
SUSPEND_S = 1800.0
STRATEGIES = ("burst", "burst-no-forecast")


def with_power_saving(setup: SimSetup) -> SimSetup:
    """The set-up with its steady group saving power (a quarter of its nodes always on)."""
    groups = []
    for g in setup.groups:
        if g.tier is Tier.STEADY:
            on = max(1, math.ceil(ALWAYS_ON_SHARE * g.max_size))
            g = dataclasses.replace(g, min_size=on, warm_wake_latency_s={**g.warm_wake_latency_s,
                                                                         WarmState.POWERED_OFF: RESUME_S})
            g = g.with_power_saving(PowerSaving(suspend_after_s=SUSPEND_S))
        groups.append(g)
    note = (f"steady tier saves power: {ALWAYS_ON_SHARE:.0%} of its nodes always on, the rest off after "
            f"{SUSPEND_S / 60:g} min idle, {RESUME_S / 60:g} min to wake")
    return dataclasses.replace(setup, groups=tuple(groups), assumptions=(*setup.assumptions, note))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="one day of Philly, burst-no-forecast only; writes nothing")
    parser.add_argument("--workers", type=int, default=2, help="processes running strategies at once (default 2)")
    args = parser.parse_args()
    days = 1.0 if args.small else 7.0
    strategies = ["burst-no-forecast"] if args.small else list(STRATEGIES)
    trace = load_trace(data_dir() / "traces" / "philly.csv").window(datetime(2017, 10, 2, tzinfo=UTC), days=days)
    base = default_setup(trace.stats())
    lines = ["| strategy | steady tier | cost $ | steady $ | hot_pool (powered off) $ | cloud $ | on-prem util "
             "| wait p95 s | time to capacity p95 s |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, setup in (("always on", base), ("power saving", with_power_saving(base))):
        results = compare(trace, strategies, setup=setup, days=days, workers=args.workers).results
        for name in strategies:
            r = results[name]
            tiers = r.cost_by_tier
            cloud = tiers.get("elastic_on_demand", 0.0) + tiers.get("elastic_spot", 0.0)
            lines.append(f"| {name} | {label} | {r.cost_usd:,.0f} | {tiers.get('steady', 0.0):,.0f} | "
                         f"{tiers.get('hot_pool', 0.0):,.0f} | {cloud:,.0f} | {r.onprem_utilization:.2f} | "
                         f"{r.wait_p95_s:,.0f} | {r.time_to_capacity_p95_s:,.0f} |")
        print(f"{label}: done", file=sys.stderr)
    print("\n".join(lines))
    if not args.small:
        write_doc(DOC, "power_saving.py", "On-prem power saving benchmark",
                  f"Philly, {days:g} days from 2017-10-02, the default set-up; see the script's docstring. The "
                  "on-prem rates are the catalog's (burst/catalog.py): powered-off nodes keep their depreciation "
                  "and operations cost and save their power.", [*lines, ""])
    return 0


if __name__ == "__main__":
    sys.exit(main())
