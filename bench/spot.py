"""Benchmark: spot with checkpoint on notice, periodic checkpoints only, no checkpoints, and no spot at all.

    python bench/spot.py           # the docs table: Philly, 3 days, at each AWS interruption-frequency band
    python bench/spot.py --small   # a one-day slice of itp-cluster02 at one band (CI keeps the script from rotting)

AWS's Spot Instance Advisor publishes, per instance type and region, the
share of instances interrupted per month in bands: <5%, 5-10%, 10-15%,
15-20%, >20%. Each band is replayed at its midpoint (25% for >20%) as a
per-node hazard, h = -ln(1 - p) / 720 per hour; a last row uses 0.01 per
node-hour (about 99.9% a month) to stress the protocol. The strategies are
burst's planner without forecasts (`burst-no-forecast`, checkpoint on
notice), the same without it (`burst-periodic-only`), the same again with
trace jobs that never checkpoint, and with spot disallowed (every job
on-demand). Checkpoints are every 30 min and take a seeded 30-300 s; the
notice is 2 min (burst/sim/setup.py). Without --small the table is written to
docs/benchmarks/spot.md.

A second table splits the spot capacity over two offerings (zones) of the
same price, one interrupted at the stress rate and one in the quietest band,
each with half the single group's max size: burst's capacity-optimized spread
with learnt rates (no band given, so both start at the same prior), the same
with the per-offering share rule off (`spot.max_offering_share` 1: learnt
rates alone), against the single stressed group of the first table.

A third table measures the notice protocol by checkpoint duration: at the
stress rate, checkpoints drawn only from 30-100 s (they fit the notice) and
only from 130-300 s (they do not), with and without checkpoint on notice.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from datetime import UTC, datetime
from pathlib import Path

from benchdoc import write_doc

from burst.model import SpotPolicy
from burst.planner.notice import SAFETY_MARGIN_S
from burst.settings import data_dir
from burst.sim.compare import compare
from burst.sim.engine import StrategyResult
from burst.sim.setup import SimSetup, default_setup
from burst.sim.traces import load_trace

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "spot.md"
BANDS = (("<5%", 0.025), ("5-10%", 0.075), ("10-15%", 0.125), ("15-20%", 0.175), (">20%", 0.25))
STRESS_PER_HOUR = 0.01
FITS_NOTICE_S = (30.0, 100.0)
"""Checkpoint durations that fit AWS's 2-minute notice less the notice step's safety margin."""
EXCEEDS_NOTICE_S = (130.0, 300.0)
"""Checkpoint durations that do not: the job is evicted at once and resumes from its periodic checkpoint."""


def hazard(monthly_share: float) -> float:
    """Per-node hazard per hour for a share of instances interrupted in a 30-day month."""
    return -math.log(1.0 - monthly_share) / 720.0


def with_hazard(setup: SimSetup, per_hour: float) -> SimSetup:
    spot = {g.id: per_hour for g in setup.groups if g.capacity_type.value == "spot"}
    return dataclasses.replace(setup, spot_hazard_per_hour=spot)


def two_zones(setup: SimSetup, noisy_per_hour: float, quiet_per_hour: float, *, share: float = 0.5) -> SimSetup:
    """The set-up with its spot group split into a noisy and a quiet zone, half its max size each."""
    (spot,) = [g for g in setup.groups if g.capacity_type.value == "spot"]
    half = max(1, math.ceil(spot.max_size / 2))
    noisy = dataclasses.replace(spot, id=f"{spot.id}-a", zone="us-east-1a", max_size=half)
    quiet = dataclasses.replace(spot, id=f"{spot.id}-b", zone="us-east-1b", max_size=half)
    initial = {gid: n for gid, n in setup.initial.items() if gid != spot.id} | {noisy.id: 0, quiet.id: 0}
    assert setup.default_policy is not None
    policy = dataclasses.replace(setup.default_policy,
                                 spot=dataclasses.replace(setup.default_policy.spot, max_offering_share=share))
    return dataclasses.replace(setup, groups=(*[g for g in setup.groups if g.id != spot.id], noisy, quiet),
                               initial=initial, spot_hazard_per_hour={noisy.id: noisy_per_hour,
                                                                      quiet.id: quiet_per_hour},
                               default_policy=policy)


def no_spot(setup: SimSetup) -> SimSetup:
    assert setup.default_policy is not None
    policy = dataclasses.replace(setup.default_policy, spot=SpotPolicy(allowed=False, fault_tolerant_fraction=0.5))
    return dataclasses.replace(setup, default_policy=policy)


def row(band: str, name: str, r: StrategyResult, on_demand: StrategyResult) -> str:
    vs = r.cost_usd / on_demand.cost_usd if on_demand.cost_usd else math.nan
    return (f"| {band} | {name} | {r.cost_usd:,.0f} | {vs:.2f} | {r.interruptions} | {r.lost_gpu_hours:,.1f} "
            f"| {r.spot_gpu_hours:,.0f} | {r.goodput:.3f} | {r.checkpoint_violations} | {r.wait_p95_s:,.0f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="one-day slice of itp-cluster02 at one band; writes nothing")
    parser.add_argument("--workers", type=int, default=2, help="processes running strategies at once (default 2)")
    args = parser.parse_args()
    if args.small:
        trace = load_trace(data_dir() / "traces" / "itp-cluster02.csv").window(days=1.0)
        days, rows = 1.0, [(">20%", hazard(0.25))]
    else:
        trace = load_trace(data_dir() / "traces" / "philly.csv").window(datetime(2017, 10, 2, tzinfo=UTC), days=3.0)
        days = 3.0
        rows = [(f"{band} ({hazard(p):.2g}/h)", hazard(p)) for band, p in BANDS]
        rows.append((f"stress ({STRESS_PER_HOUR:g}/h)", STRESS_PER_HOUR))
    base = default_setup(trace.stats())
    on_demand = compare(trace, ["burst-no-forecast"], setup=no_spot(base), days=days).results["burst-no-forecast"]
    lines = ["| spot hazard (AWS band) | strategy | cost $ | vs all on-demand | interruptions | lost GPU-h "
             "| spot GPU-h | goodput | checkpoint violations | wait p95 s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    with_notice: dict[float, StrategyResult] = {}
    for band, per_hour in rows:
        setup = with_hazard(base, per_hour)
        pair = compare(trace, ["burst-no-forecast", "burst-periodic-only"], setup=setup, days=days,
                       workers=args.workers).results
        bare = compare(trace, ["burst-periodic-only"], setup=dataclasses.replace(setup, checkpointing=False),
                       days=days).results["burst-periodic-only"]
        with_notice[per_hour] = pair["burst-no-forecast"]
        lines += [row(band, "checkpoint on notice + periodic", pair["burst-no-forecast"], on_demand),
                  row(band, "periodic only", pair["burst-periodic-only"], on_demand),
                  row(band, "no checkpoints", bare, on_demand)]
        print(f"{band}: done", file=sys.stderr)
    lines.append(row("-", "all on-demand (no spot)", on_demand, on_demand))
    noisy, quiet = (STRESS_PER_HOUR, hazard(0.025)) if not args.small else (hazard(0.25), hazard(0.025))
    zones = ["| spot offerings | strategy | cost $ | vs all on-demand | interruptions | lost GPU-h | spot GPU-h "
             "| goodput | checkpoint violations | wait p95 s |", lines[1]]
    zones.append(row(f"one, {noisy:.2g}/h", "checkpoint on notice + periodic", with_notice[noisy], on_demand))
    for share, name in ((0.5, "spread + learnt rates"), (1.0, "learnt rates, no share rule")):
        run = compare(trace, ["burst-no-forecast"], setup=two_zones(base, noisy, quiet, share=share),
                      days=days).results["burst-no-forecast"]
        zones.append(row(f"two, {noisy:.2g}/h and {quiet:.2g}/h", name, run, on_demand))
    durations = ["| checkpoint takes | strategy | cost $ | vs all on-demand | interruptions | lost GPU-h | spot GPU-h "
                 "| goodput | checkpoint violations | wait p95 s |", lines[1]]
    for span, name in ((FITS_NOTICE_S, "fits the notice"), (EXCEEDS_NOTICE_S, "exceeds the notice")):
        setup = dataclasses.replace(with_hazard(base, noisy), checkpoint_duration_range_s=span)
        pair = compare(trace, ["burst-no-forecast", "burst-periodic-only"], setup=setup, days=days,
                       workers=args.workers).results
        label = f"{span[0]:g}-{span[1]:g} s ({name})"
        durations += [row(label, "checkpoint on notice + periodic", pair["burst-no-forecast"], on_demand),
                      row(label, "periodic only", pair["burst-periodic-only"], on_demand)]
    print("\n".join(lines))
    print("\n".join(zones))
    print("\n".join(durations))
    if not args.small:
        write_doc(DOC, "spot.py", "Spot benchmark",
                  "Philly, 3 days from 2017-10-02; the default set-up (burst/sim/setup.py) with half of each tenant's "
                  "jobs fault-tolerant (seeded), checkpointing every 30 min, each checkpoint taking a seeded 30-300 s, a "
                  "2-minute spot notice. `goodput` is GPU-hours jobs held on spot nodes less the work they lost there, "
                  "over spot GPU-hours paid. `checkpoint violations` counts interruptions in which a job lost more than "
                  "its checkpoint interval (must be 0; jobs that never checkpoint have no interval). Hazards are per "
                  "node-hour.", [*lines, "", "Spot capacity split over two offerings of the same price (see the "
                                 "script's docstring), checkpoint on notice + periodic throughout:", "", *zones, "",
                                 f"Checkpoint durations drawn only below or only above what the 2-minute notice "
                                 f"leaves (less its {SAFETY_MARGIN_S:g} s margin), one spot group at the "
                                 f"{noisy:g}/h stress rate:", "", *durations, ""])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
