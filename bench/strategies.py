"""Benchmark: every strategy on windows of the real traces, with the cost gap waterfall and the issue's targets.

    python bench/strategies.py            # the docs: Philly and ITP clusters 01..05, plus the three variants
    python bench/strategies.py --small    # a one-day slice of one trace (CI keeps the script from rotting)
    python bench/strategies.py --speed    # the speed target: 60 days of itp-cluster04, the original strategies
    python bench/strategies.py --no-variants  # the docs' main set-up only (faster; writes nothing)
    python bench/strategies.py --no-variants --window itp-cluster01.csv --strategy burst --strategy reactive
                                          # some windows, some strategies (writes nothing; floor and oracle always run)

Traces are read from $BURST_DATA_DIR (default ../shared/data). Prices are the
shipped catalog's (burst/data/prices.csv: p4d.24xlarge us-east-1 on-demand and
spot, on-prem from the catalog's cost model); the set-up is the default one
sized from each trace (see burst.sim.setup): 50% of each tenant's jobs
fault-tolerant, checkpoints every 30 min, 0.01 spot interruptions per
node-hour. Three variants replay the same windows:

- `spot-scarcity`: each spot offering holds at most 25% of its group's max
  size; launches beyond it fail (`burst.sim.setup.with_spot_scarcity`), so
  waiting for spot costs time;
- `second-price`: the cloud groups in us-west-2, where p4d spot costs
  $8.00/node-h rather than $2.47 (`burst.sim.setup.with_second_price`).
- `multi-shape`: GCP A100 nodes of 1 and 8 GPUs (`a2-highgpu-1g`,
  `a2-highgpu-8g`, us-central1), each on-demand and spot, in place of the p4d
  groups (`burst.sim.setup.with_multi_shape`). Beside its section, burst
  replays every window on it and on its 8-GPU shape alone (`only_shape`): the
  target is (burst - oracle) <= 0.8 x (burst on the 8-GPU shape - oracle) on
  at least 4 of the 6 windows, with no worse P95 delay (`--multi-shape` runs
  only that comparison, on the chosen windows, and writes nothing).

The variants' sections replay the windows of `VARIANT_WINDOWS` (itp-cluster02 and
itp-cluster05), which keeps the whole run within a few minutes on two cores.

The docs run also replays the main set-up's windows under two further seeds
(`--seeds N`; burst, reactive, floor and oracle: every target but Karpenter's)
and says, per window, how far forecasts could move burst's P95 wait and cost
at most (the jobs that wait about a cold boot; the spend on capacity booting,
idle or warm), with `burst-clairvoyant` (burst planning with the trace's true
future demand) replayed beside burst on the main set-up as a reference.

Every strategy pays for the same work: once nothing is queued at the end of a
run, what still runs is charged to its end at its nodes' prices, and the
bounds count whole jobs (`burst.sim.engine.remainders`); static-p50, which
ends with jobs queued, keeps its window and no target reads it. A "cost <=
baseline" target is waived for a baseline whose P95 delay exceeds burst's by
more than 60 s, reported as "cheaper at worse service"; lost work is held to
reactive's (half of reactive's is a reported column, beside the loss spot
reclaims took); and burst must not be dominated on the cost-delay frontier
(`burst.sim.frontier`), whose figure the docs run draws to
docs/benchmarks/strategies-frontier.png (`--frontier-png PATH` draws it from
any run).

Time: `--small --seeds 1` (fourteen strategies, karpenter-ml and
karpenter-balanced-ml included, plus one further seed) took 6.5-7.2
CPU-seconds and 15-19 s wall on the two-core CI machine under load (it was
6.2 CPU-seconds with twelve strategies); drawing the frontier adds under 1 s.

`--window FILE` and `--strategy NAME` (each repeatable) replay only those
windows of FULL and those strategies (`floor` and `oracle` always run: the
ratios need them); targets whose reference did not run are left out.

Without --small, --speed, --no-variants, --window or --strategy the tables are written to
docs/benchmarks/strategies.md with the command, commit and date.
"""

from __future__ import annotations

import argparse
import logging
import math
import resource
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from benchdoc import write_doc

from burst import plots
from burst.model import Job
from burst.settings import data_dir
from burst.sim.compare import Comparison, compare, ratio
from burst.sim.engine import GAP_PARTS, StrategyResult
from burst.sim.frontier import NOT_COMPARED, SERVICE_GATE_S, CostVerdict, Point, cost_verdict, dominated_by
from burst.sim.registry import check, default_names, offered_names
from burst.sim.report import BOUND_NAMES, frontier_figure
from burst.sim.setup import NAMED_SETUPS, named_setup, only_shape, with_fault_tolerance
from burst.sim.traces import load_trace

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks" / "strategies.md"
FRONTIER_PNG = DOC.with_name("strategies-frontier.png")
"""The cost-delay frontier of the main set-up's windows, written beside the doc by the docs run."""

# (file, first submission replayed or None for the trace's first job, days). Philly's first weeks hold a
# handful of jobs, so its window starts on the first Monday of October 2017.
FULL = (
    ("philly.csv", "2017-10-02T00:00:00Z", 3.0),
    ("itp-cluster01.csv", None, 14.0),
    ("itp-cluster02.csv", None, 14.0),
    ("itp-cluster03.csv", None, 14.0),
    ("itp-cluster04.csv", None, 7.0),
    ("itp-cluster05.csv", None, 14.0),
)
VARIANT_WINDOWS = ("itp-cluster02.csv", "itp-cluster05.csv")
"""The windows the variants replay (the main set-up replays every window of FULL)."""
SMALL = (("itp-cluster02.csv", None, 1.0),)
SPEED = (("itp-cluster04.csv", None, 60.0),)
SPEED_STRATEGIES = ("burst", "burst-no-forecast", "reactive", "reactive-hotpool", "static-peak", "static-p50", "oracle")
"""The strategies the speed target was set for (Karpenter's 1 s reactions make its replays several times longer)."""
CLAIRVOYANT = "burst-clairvoyant"
"""burst with perfect point forecasts (a reference, not an upper bound), replayed beside burst on the main
set-up's windows."""

SPEED_TARGET_S = 60.0
MEMORY_TARGET_MIB = 1024.0
TTC_SLACK_S = 15.0  # time to capacity on cold boots may exceed the boot latency by this much
OUTSIDE_TARGETS = ("static-p50",)
"""Strategies no target reads: static-p50 does not finish its work (its run keeps its window)."""

VARIANTS = NAMED_SETUPS  # main, spot-scarcity, second-price, multi-shape: `burst simulate --setup NAME` replays each
MULTI_SHAPE = "multi-shape"
MULTI_SHAPE_RATIO = 0.8
MULTI_SHAPE_WINDOWS = 4
"""The multi-shape target: (burst - oracle) <= MULTI_SHAPE_RATIO x (burst on the 8-GPU shape alone - oracle), with
no worse P95 delay, on at least MULTI_SHAPE_WINDOWS of the windows of FULL."""
MULTI_SHAPE_STRATEGIES = ("burst", "floor", "oracle")


def multi_shape_row(file: str, days: float, multi: Comparison, wide: Comparison) -> tuple[str, bool]:
    """One window of the multi-shape comparison: burst on both shapes and on the 8-GPU shape alone, each over its
    own oracle. Returns the table row and whether the target holds there."""
    b, f, o = (multi.results[n] for n in MULTI_SHAPE_STRATEGIES)
    b8, f8, o8 = (wide.results[n] for n in MULTI_SHAPE_STRATEGIES)
    gap, gap8 = b.cost_usd - o.cost_usd, b8.cost_usd - o8.cost_usd
    holds = gap <= MULTI_SHAPE_RATIO * gap8 and b.delay_p95_s <= b8.delay_p95_s
    return (f"| {file}, {days:g} d | {fmt(b.cost_usd)} | {fmt(b8.cost_usd)} | {fmt(o.cost_usd)} | {fmt(f.cost_usd)} "
            f"| {fmt(f8.cost_usd)} | {fmt(gap)} | {fmt(gap8)} | {ratio(gap, gap8):.2f} | {fmt(b.delay_p95_s)} "
            f"| {fmt(b8.delay_p95_s)} | {b.lost_gpu_hours:,.1f} | {b8.lost_gpu_hours:,.1f} "
            f"| {'yes' if holds else '**no**'} |"), holds


def multi_shape_section(rows: Sequence[str], held: int) -> list[str]:
    """The multi-shape comparison's table and its target's count."""
    verdict = "met" if held >= MULTI_SHAPE_WINDOWS else "not met"
    return ["## Two node shapes", "",
            "burst on the `multi-shape` set-up (GCP `a2-highgpu-1g` and `a2-highgpu-8g`, on-demand and spot) and on "
            "the same set-up with only the 8-GPU shape (`burst-8g`), each against its own oracle. Target: (burst - "
            f"oracle) <= {MULTI_SHAPE_RATIO:g} x (burst-8g - oracle) with no worse P95 delay on at least "
            f"{MULTI_SHAPE_WINDOWS} windows: it holds on {held} of {len(rows)} ({verdict}).", "",
            "| window | burst $ | burst-8g $ | oracle $ | floor $ | floor (8g) $ | burst - oracle | burst-8g - oracle "
            "| ratio | burst P95 delay s | burst-8g P95 delay s | burst lost GPU-h | burst-8g lost GPU-h | holds |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|", *rows, ""]


def peak_rss_mib() -> float:
    """Peak resident memory of this process or its largest worker so far (ru_maxrss is KiB on Linux)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, workers) / 1024.0


def fmt(x: float | None, spec: str = ",.0f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def table(result: Comparison) -> list[str]:
    """Each strategy's figures, with cost over the oracle, the floor and reactive."""
    res = result.results
    oracle, floor, reactive = res.get("oracle"), res.get("floor"), res.get("reactive")
    lines = [
        "| strategy | cost $ | vs oracle | vs floor | vs reactive | wait p50 s | wait p95 s | wait p99 s | delay mean s "
        "| delay p95 s | SLO misses | jobs done | work GPU-h | lost GPU-h | of it, spot reclaims | ckpt violations | TTC p95 s "
        "| sim h / wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for strategy, r in res.items():
        sim_wall = r.wall_s - r.forecast_fit_s
        speed = r.simulated_hours / sim_wall if sim_wall > 0 else math.nan
        lines.append(
            f"| {strategy} | {fmt(r.cost_usd)} | {fmt(ratio(r.cost_usd, oracle.cost_usd) if oracle else math.nan, '.2f')} "
            f"| {fmt(ratio(r.cost_usd, floor.cost_usd) if floor else math.nan, '.2f')} "
            f"| {fmt(ratio(r.cost_usd, reactive.cost_usd) if reactive else math.nan, '.2f')} "
            f"| {fmt(r.wait_p50_s)} | {fmt(r.wait_p95_s)} | {fmt(r.wait_p99_s)} | {fmt(r.delay_mean_s)} "
            f"| {fmt(r.delay_p95_s)} | {r.slo_violations} | {r.jobs_completed} | {fmt(r.work_gpu_hours, ',.1f')} "
            f"| {fmt(r.lost_gpu_hours, ',.1f')} | {fmt(r.reclaim_lost_gpu_hours, ',.1f')} | {r.checkpoint_violations} "
            f"| {fmt(r.time_to_capacity_p95_s)} "
            f"| {fmt(speed, ',.0f')} |"
        )
    return lines


def waterfall(result: Comparison) -> list[str]:
    """Each strategy's cost above the oracle, by part (USD), and the share 'other' takes."""
    lines = [
        "| strategy | gap $ | " + " | ".join(p.replace("_", " ") for p in GAP_PARTS) + " | other / gap |",
        "|---|" + "---:|" * (len(GAP_PARTS) + 2),
    ]
    for strategy, r in result.results.items():
        gap = sum(r.cost_gap.values())
        other = abs(r.cost_gap.get("other", 0.0)) / gap if gap > 0 else 0.0
        lines.append(f"| {strategy} | {fmt(gap)} | " + " | ".join(fmt(r.cost_gap.get(p, 0.0)) for p in GAP_PARTS)
                     + f" | {other:.1%} |")
    return lines


Target = tuple[str, str, str, str]  # name, burst's figure, the reference, verdict: "yes", "no" or WAIVED
WAIVED = CostVerdict.WORSE_SERVICE.value
"""The verdict of a cost target waived by the service gate (`burst.sim.frontier.cost_verdict`)."""


COST_BASELINES = ("reactive", "reactive-hotpool", "karpenter", "karpenter-do-not-disrupt", "karpenter-balanced",
                  "karpenter-ml", "karpenter-balanced-ml")
"""The baselines burst's cost is held to (each behind the service gate)."""


def target_rows(result: Comparison, boot_s: float) -> list[Target]:
    """The issue's must-show targets for burst on this window (those whose reference ran): figure, reference, holds."""
    res = result.results
    b, r, floor = res.get("burst"), res.get("reactive"), res.get("floor")
    if b is None or r is None or floor is None:
        return []
    rows: list[Target] = []

    def check(name: str, mine: float, ref: float, holds: bool | CostVerdict, spec: str = ",.0f") -> None:
        verdict = holds.value if isinstance(holds, CostVerdict) else "yes" if holds else "no"
        rows.append((name, fmt(mine, spec), fmt(ref, spec), verdict))

    check("(burst - floor) <= 0.5 x (reactive - floor), $", b.cost_usd - floor.cost_usd,
          0.5 * (r.cost_usd - floor.cost_usd), b.cost_usd - floor.cost_usd <= 0.5 * (r.cost_usd - floor.cost_usd))
    for other in COST_BASELINES:
        o = res.get(other)
        if o is not None:
            check(f"cost <= {other}, $", b.cost_usd, o.cost_usd, cost_verdict(Point.of(b), Point.of(o)))
    check("P95 wait <= reactive's, s", b.wait_p95_s, r.wait_p95_s, b.wait_p95_s <= r.wait_p95_s)
    check("P99 wait <= reactive's, s", b.wait_p99_s, r.wait_p99_s, b.wait_p99_s <= r.wait_p99_s)
    check("SLO misses <= reactive's", b.slo_violations, r.slo_violations, b.slo_violations <= r.slo_violations)
    check("mean delay <= reactive's, s", b.delay_mean_s, r.delay_mean_s, b.delay_mean_s <= r.delay_mean_s)
    check("P95 delay <= reactive's, s", b.delay_p95_s, r.delay_p95_s, b.delay_p95_s <= r.delay_p95_s)
    check("jobs completed >= reactive's", b.jobs_completed, r.jobs_completed, b.jobs_completed >= r.jobs_completed)
    check("work delivered >= reactive's, GPU-h", b.work_gpu_hours, r.work_gpu_hours,
          b.work_gpu_hours >= r.work_gpu_hours - 1e-6, ",.2f")
    check("lost work <= reactive's, GPU-h", b.lost_gpu_hours, r.lost_gpu_hours, b.lost_gpu_hours <= r.lost_gpu_hours,
          ",.1f")
    check("checkpoint violations = 0", b.checkpoint_violations, 0, b.checkpoint_violations == 0)
    check(f"time to capacity p95 <= boot + {TTC_SLACK_S:g} s", b.time_to_capacity_p95_s, boot_s + TTC_SLACK_S,
          b.time_to_capacity_p95_s <= boot_s + TTC_SLACK_S)
    worst = max((x for x in res.values() if x.name not in OUTSIDE_TARGETS), key=_other_share)
    check(f"'other' <= 10% of the gap (largest: {worst.name}), %", 100 * _other_share(worst), 10.0,
          _other_share(worst) <= 0.10, ".1f")
    rivals = dominated_by("burst", {name: Point.of(x) for name, x in res.items()})
    rows.append(("not dominated (by a strategy cheaper and no worse on P95 delay, lost work, work delivered)",
                 f"{fmt(b.cost_usd)} $, {fmt(b.delay_p95_s)} s", ", ".join(rivals) or "none", "no" if rivals else "yes"))
    return rows


def targets(result: Comparison, boot_s: float) -> tuple[list[str], int, int]:
    """The targets of `target_rows` as a table. Returns lines, held, all."""
    rows = target_rows(result, boot_s)
    if not rows:
        return [], 0, 0
    lines = ["| target (burst) | burst | reference | holds |", "|---|---:|---:|---|"]
    lines += [f"| {name} | {mine} | {ref} | {'**no**' if ok == 'no' else ok} |" for name, mine, ref, ok in rows]
    return lines, held_count(rows), len(rows)


def held_count(rows: Sequence[Target]) -> int:
    """Targets that hold, those waived by the service gate included."""
    return sum(ok != "no" for *_, ok in rows)


def waived(rows: Sequence[Target]) -> str:
    """The cost targets waived on this window (the cheaper baseline serves worse), for the summary tables."""
    names = [name.split(",")[0].removeprefix("cost <= ") for name, *_, ok in rows if ok == WAIVED]
    return f" ({WAIVED}: {', '.join(names)})" if names else ""


def _other_share(r: StrategyResult) -> float:
    gap = sum(r.cost_gap.values())
    return abs(r.cost_gap.get("other", 0.0)) / gap if gap > 0 else 0.0


def boot_latency_s(result: Comparison) -> float:
    """The slowest cold boot of the set-up's elastic groups."""
    return max((g.boot_latency_s for g in result.setup.groups if g.tier.value == "elastic"), default=0.0)


def section(file: str, days: float, variant: str, result: Comparison) -> tuple[list[str], int, int, str]:
    """One window under one set-up: figures, waterfall, targets. Returns lines, targets held, all, and the cost
    targets waived (`waived`)."""
    boot_s = boot_latency_s(result)
    title = f"### {file}, {days:g} days from {result.start:%Y-%m-%d %H:%M} UTC ({result.to_json()['trace']['jobs']} jobs)"
    if variant != "main":
        title += f", variant {variant}"
    checks, held, total = targets(result, boot_s)
    lines = [title, "", *table(result), "", "Cost above the oracle, by part (USD; `burst/sim/engine.py` defines each):",
             "", *waterfall(result), ""]
    if checks:
        lines += [f"Targets ({held} of {total} hold" + ("; the cost targets are not required here" if variant != "main"
                                                          else "") + "):", "", *checks, ""]
    note = waived(target_rows(result, boot_s))
    with_f, without = result.results.get("burst"), result.results.get("burst-no-forecast")
    if with_f and without:
        line = (f"Forecasting (burst over burst-no-forecast, same run): cost x{ratio(with_f.cost_usd, without.cost_usd):.3f}, "
                f"P95 wait x{ratio(with_f.wait_p95_s, without.wait_p95_s):.3f}, {with_f.forecast_fits} fits")
        seer = result.results.get(CLAIRVOYANT)
        if seer:
            line += (f"; with the true future demand in place of forecasts (`{CLAIRVOYANT}`, a reference): cost "
                     f"x{ratio(seer.cost_usd, without.cost_usd):.3f}, P95 wait x{ratio(seer.wait_p95_s, without.wait_p95_s):.3f}")
        lines += [line + ".", ""]
    lines += ["Assumptions: " + "; ".join(result.setup.assumptions) + ".", ""]
    return lines, held, total, note if checks else ""


SEED_STRATEGIES = ("burst", "reactive", "floor", "oracle")
"""What the other seeds replay: enough for every target that does not compare with Karpenter."""
DOC_SEEDS = 2
"""Further seeds the docs run replays (1..DOC_SEEDS) besides `--seed`."""


def seed_rows(file: str, days: float, result: Comparison, seed: int) -> str:
    """One window under one further seed: burst's ratios over reactive and the targets that fail."""
    res = result.results
    b, r, floor = res["burst"], res["reactive"], res["floor"]
    rows = target_rows(result, boot_latency_s(result))
    failing = "; ".join(f"{name.split(',')[0]} ({mine} vs {ref})" for name, mine, ref, ok in rows if ok == "no") or "none"
    return (f"| {file} | {seed} | {ratio(b.cost_usd, r.cost_usd):.2f} "
            f"| {ratio(b.cost_usd - floor.cost_usd, r.cost_usd - floor.cost_usd):.2f} "
            f"| {ratio(b.wait_p95_s, r.wait_p95_s):.2f} {loss_cells(b, r)}"
            f"| {held_count(rows)} of {len(rows)}{waived(rows)} | {failing} |")


LOSS_HEADERS = "| lost work vs reactive | lost work <= 0.5 x reactive's | burst's spot-reclaim loss GPU-h "
"""The lost-work columns of the summary tables (`loss_cells`)."""


def loss_cells(b: StrategyResult, r: StrategyResult) -> str:
    """burst's lost work over reactive's, whether it is within half of reactive's (reported; the target is within
    reactive's), and the part of burst's loss that spot reclaims took."""
    half = "yes" if b.lost_gpu_hours <= 0.5 * r.lost_gpu_hours else "no"
    return f"| {ratio(b.lost_gpu_hours, r.lost_gpu_hours):.2f} | {half} | {b.reclaim_lost_gpu_hours:,.1f} "


def _seed_names(seeds: range) -> str:
    return f"seed {seeds.start}" if len(seeds) == 1 else f"seeds {seeds.start}..{seeds.stop - 1}"


def seeds_section(rows: list[str], seeds: range) -> list[str]:
    """The other seeds' table: the same windows and set-up, other draws of fault tolerance and interruptions."""
    return ["## Other seeds", "",
            f"The main set-up's windows again under {_seed_names(seeds)} (the seed draws which jobs "
            "are fault-tolerant, their checkpoint durations and the spot interruptions), with "
            f"{', '.join(SEED_STRATEGIES)}: every target above that does not compare with Karpenter. A target that holds "
            "under one seed only is not one burst meets.", "",
            "| window | seed | cost vs reactive | (burst - floor) / (reactive - floor) | P95 wait vs reactive "
            + LOSS_HEADERS + "| targets held | failing (burst vs reference) |",
            "|---|---:|---:|---:|---:|---:|---|---:|---|---|", *rows, ""]


Window = tuple[str, dict[str, Point]]  # a panel's title, each strategy's point


def frontier_doc(windows: Sequence[Window], image: str) -> list[str]:
    """The frontier section: the figure (`image`, relative to the doc) and, per window, what dominates burst."""
    rows = [f"| {title} | {', '.join(dominated_by('burst', points)) or 'none'} |" for title, points in windows
            if "burst" in points]
    return ["## Cost against P95 delay", "",
            "Every strategy's cost against its P95 delay on each window of the main set-up, and the frontier of the "
            "strategies compared (dashed): burst must not be dominated, i.e. no strategy may be cheaper and no worse "
            "on P95 delay, lost work and work delivered (`burst.sim.frontier`). "
            f"{', '.join(NOT_COMPARED)} are drawn hollow and not compared.", "",
            f"![cost against P95 delay per window]({image})", "",
            "| window | burst dominated by |", "|---|---|", *rows, ""]


def write_frontier(windows: Sequence[Window], path: Path) -> None:
    """Draw the windows' cost-delay frontier (`burst.sim.report.frontier_figure`) as a PNG at `path`."""
    names = list(dict.fromkeys(n for _, points in windows for n in points))
    colours = plots.series_colours([n for n in names if n not in BOUND_NAMES])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(plots.png(lambda th: frontier_figure(th, windows, colours), plots.LIGHT))
    print(f"wrote {path}", file=sys.stderr)


def headroom_row(file: str, result: Comparison, jobs: Sequence[Job]) -> str | None:
    """How far forecasts could move burst's figures on this window, at most (see `headroom_section`); `jobs` are
    the replayed jobs with their fault tolerance, in the order of burst's waits."""
    b = result.results.get("burst")
    if b is None or not b.waits_s:
        return None
    waiting = [j for j, w in zip(jobs, b.waits_s, strict=True) if w >= 0.95 * b.wait_p95_s]
    at_p95 = len(waiting) / len(b.waits_s)
    tolerant = sum(j.fault_tolerant for j in waiting) / len(waiting) if waiting else 0.0
    empty = b.spend.empty_node_usd if b.spend is not None else 0.0
    ahead = sum(b.cost_gap.get(p, 0.0) for p in ("booting", "hot_pool")) + empty
    seer, without = result.results.get(CLAIRVOYANT), result.results.get("burst-no-forecast")
    reference = (f"x{ratio(seer.cost_usd, without.cost_usd):.3f} | x{ratio(seer.wait_p95_s, without.wait_p95_s):.3f}"
                 if seer and without else "n/a | n/a")
    return (f"| {file} | {b.wait_p95_s:,.0f} | {at_p95:.1%} | {tolerant:.0%} | {max(0.0, at_p95 - 0.05):.1%} "
            f"| {fmt(b.cost_gap.get('idle', 0.0))} | {fmt(empty)} | {ahead:,.0f} | {ratio(ahead, b.cost_usd):.1%} "
            f"| {reference} |")


def headroom_section(rows: list[str]) -> list[str]:
    """What forecasts could change at most on each window: the bound under the forecast targets."""
    return ["## What forecasts can move", "",
            "Forecasts act on whole nodes held ahead of demand or kept after it (pre-scaling, hot pools, scale-in). "
            "burst's P95 wait falls by 5% only if fewer than 5% of jobs wait at least 95% of it, so the jobs above "
            "that share must find capacity ready when they arrive. Those that are fault-tolerant wait a spot boot, "
            "and no forecast-driven step holds spot ahead: spot groups have no hot pool (AWS refuses warm pools on "
            "Spot) and pre-scaling launches on-demand capacity only. On cost a forecast can save at most what burst "
            "pays beyond the floor for nodes booting or warm (the waterfall's booting and hot pool parts) and for "
            "ready cloud nodes with no job on them; the rest of the idle part is free GPUs on nodes that run work, "
            "a matter of placement, not of when nodes come and go. Main set-up, burst's run above. The last two "
            f"columns are a reference: `{CLAIRVOYANT}` is burst planning with the trace's true future demand, "
            "minute by minute, in place of forecasts (`burst.sim.forecasts.ClairvoyantForecaster`), over "
            "burst-no-forecast: what perfect point forecasts move with today's forecast-driven steps (a "
            "reference, not an upper bound: the steps are heuristics and a point forecast does not say which jobs "
            "will be fault-tolerant).", "",
            "| window | burst P95 wait s | jobs waiting >= 0.95 x P95 | of them fault-tolerant "
            "| of all jobs, to serve ahead for -5% | idle part $ | of it, empty nodes $ "
            "| booting + hot pool + empty nodes $ | share of burst's cost | true future demand: cost "
            "| true future demand: P95 wait |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|", *rows, ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="one-day slice of one trace; writes nothing")
    parser.add_argument("--speed", action="store_true",
                        help="60 days of itp-cluster04 with the strategies of SPEED_STRATEGIES; writes nothing")
    parser.add_argument("--no-variants", action="store_true", help="the main set-up only; writes nothing")
    parser.add_argument("--window", action="append", default=[], metavar="FILE",
                        help="replay only this window of FULL (repeatable); writes nothing")
    parser.add_argument("--strategy", action="append", default=[], metavar="NAME",
                        help="run only this strategy (repeatable; floor and oracle always run); writes nothing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=None, metavar="N",
                        help=f"also replay the main set-up's windows under seeds SEED+1..SEED+N with "
                             f"{', '.join(SEED_STRATEGIES)} (default {DOC_SEEDS} for the docs run, else 0)")
    parser.add_argument("--frontier-png", type=Path, default=None, metavar="PATH",
                        help=f"also draw the main set-up's cost-delay frontier to PATH (the docs run draws "
                             f"{FRONTIER_PNG.relative_to(ROOT)})")
    parser.add_argument("--multi-shape", action="store_true",
                        help="only burst on the multi-shape set-up against its 8-GPU shape alone; writes nothing")
    parser.add_argument("--workers", type=int, default=2, help="processes running strategies at once (default 2: the CI machine's cores)")
    args = parser.parse_args()
    check((*SPEED_STRATEGIES, *SEED_STRATEGIES, CLAIRVOYANT))  # the subsets measured here are registered strategies
    # the spot-scarcity variant's refused launches are expected: the actuator's warning per failed call is noise here
    logging.getLogger("burst.actuator").setLevel(logging.ERROR)
    runs = SMALL if args.small else SPEED if args.speed else FULL
    known = [f for f, _, _ in runs]
    unknown = [w for w in args.window if w not in known]
    if unknown:
        parser.error(f"--window {unknown[0]}: expected one of {', '.join(known)}")
    bad = [s for s in args.strategy if s not in offered_names()]
    if bad:
        parser.error(f"--strategy {bad[0]}: expected one of {', '.join(offered_names())}")
    if args.window:
        runs = tuple(r for r in runs if r[0] in args.window)
    partial = bool(args.window or args.strategy or args.multi_shape)
    variants = ([] if args.multi_shape else ["main"] if args.small or args.speed or args.no_variants
                else list(VARIANTS))
    writes = not (args.small or args.speed or args.no_variants or partial)
    extra = args.seeds if args.seeds is not None else DOC_SEEDS if writes else 0
    if extra < 0:
        parser.error("--seeds must be 0 or more")
    seeds = range(args.seed + 1, args.seed + 1 + extra)
    out: list[str] = []
    summary_rows: list[str] = []
    seed_lines: list[str] = []
    headroom: list[str] = []
    frontier: list[Window] = []
    total_wall = 0.0
    for variant in variants:
        out += [f"## {'Main set-up' if variant == 'main' else 'Variant: ' + variant}", ""]
        for file, start, days in runs:
            if variant != "main" and file not in VARIANT_WINDOWS:
                continue
            since = datetime.fromisoformat(start) if start else None
            trace = load_trace(data_dir() / "traces" / file).window(since, days=days)
            setup = named_setup(variant, trace.stats())
            t0 = time.perf_counter()
            names = list(SPEED_STRATEGIES if args.speed else default_names())
            if variant == "main" and not args.speed and "burst-no-forecast" in names:
                names.insert(names.index("burst-no-forecast") + 1, CLAIRVOYANT)
            if args.strategy:
                names = [n for n in names if n in args.strategy or n in ("floor", "oracle")]
            result = compare(trace, names, setup=setup, seed=args.seed, days=days, workers=args.workers)
            wall = time.perf_counter() - t0
            total_wall += wall
            lines, held, total, note = section(file, days, variant, result)
            out += lines
            if variant == "main" and not args.speed:
                frontier.append((f"{file}, {days:g} d", {n: Point.of(x) for n, x in result.results.items()}))
                row = headroom_row(file, result, with_fault_tolerance(trace.jobs, setup, args.seed))
                headroom += [row] if row else []
                for seed in seeds:
                    other = compare(trace, [n for n in SEED_STRATEGIES if n in names], setup=setup, seed=seed,
                                    days=days, workers=args.workers)
                    if "burst" in other.results and "reactive" in other.results:
                        seed_lines.append(seed_rows(file, days, other, seed))
                    print(f"{variant} {file} seed {seed}: {other.wall_s:.1f} s wall", file=sys.stderr)
            res = result.results
            b, r = res.get("burst"), res.get("reactive")
            karpenter = res.get("karpenter")
            per = ", ".join(f"{n} {x.wall_s:.1f}s" for n, x in res.items())
            print(f"{variant} {file} {days:g} d: {wall:.1f} s wall ({per}); peak RSS {peak_rss_mib():.0f} MiB", file=sys.stderr)
            if b is None or r is None:
                continue
            summary_rows.append(
                f"| {variant} | {file} | {b.cost_usd / r.cost_usd:.2f} "
                f"| {ratio(b.cost_usd, karpenter.cost_usd) if karpenter else math.nan:.2f} "
                f"| {ratio(b.cost_usd - res['floor'].cost_usd, r.cost_usd - res['floor'].cost_usd) if 'floor' in res else math.nan:.2f} "
                f"| {ratio(b.wait_p95_s, r.wait_p95_s):.2f} {loss_cells(b, r)}| {held} of {total}{note} |")
    multi_rows: list[str] = []
    multi_held = 0
    for file, start, days in runs if writes or args.multi_shape else ():
        since = datetime.fromisoformat(start) if start else None
        trace = load_trace(data_dir() / "traces" / file).window(since, days=days)
        setup = named_setup(MULTI_SHAPE, trace.stats())
        t0 = time.perf_counter()
        multi, wide = (compare(trace, MULTI_SHAPE_STRATEGIES, setup=s, seed=args.seed, days=days, workers=args.workers)
                       for s in (setup, only_shape(setup, 8)))
        total_wall += time.perf_counter() - t0
        row, holds = multi_shape_row(file, days, multi, wide)
        multi_rows.append(row)
        multi_held += holds
        print(f"{MULTI_SHAPE} vs 8-GPU shape {file}: {time.perf_counter() - t0:.1f} s wall", file=sys.stderr)
    summary = (f"Total wall {total_wall:.1f} s with {args.workers} worker process(es); peak memory of the largest "
               f"process {peak_rss_mib():.0f} MiB.")
    if args.speed:
        summary += (f" Target: under {SPEED_TARGET_S:g} s wall ({'met' if total_wall < SPEED_TARGET_S else 'not met'}), "
                    f"under {MEMORY_TARGET_MIB:g} MiB ({'met' if peak_rss_mib() < MEMORY_TARGET_MIB else 'not met'}).")
    ratios = ["## Ratios", "", "burst's cost over reactive's and karpenter's, its excess over the floor as a share of "
              "reactive's, its P95 wait and lost work over reactive's, whether its lost work is within half of "
              "reactive's (reported: the target is lost work <= reactive's), the part of its lost work that spot "
              "reclaims took, and how many targets hold (every window, every set-up; the cost targets are required "
              "on the main set-up only). A cost target is waived for a baseline whose P95 delay exceeds burst's by "
              f"more than {SERVICE_GATE_S:g} s, and such a baseline is named here as {WAIVED!r}.", "",
              "| set-up | window | cost vs reactive | cost vs karpenter | (burst - floor) / (reactive - floor) "
              "| P95 wait vs reactive " + LOSS_HEADERS + "| targets held |",
              "|---|---|---:|---:|---:|---:|---:|---|---:|---|", *summary_rows, ""]
    extras = (seeds_section(seed_lines, seeds) if seed_lines else []) + (headroom_section(headroom) if headroom else [])
    extras += frontier_doc(frontier, FRONTIER_PNG.name) if frontier else []
    extras += multi_shape_section(multi_rows, multi_held) if multi_rows else []
    for path in [FRONTIER_PNG] * writes + ([args.frontier_png] if args.frontier_png else []):
        if frontier:
            write_frontier(frontier, path)
    print("\n".join([*ratios, *extras, *out]))
    print(summary)
    if writes:
        write_doc(DOC, "strategies.py", "Strategy benchmark",
                  "Every strategy replays the same trace window through the same controller and sim provider; "
                  "`oracle` is the fluid bound of `burst.sim.oracle` and `floor` the whole-node reference point of "
                  "`burst.sim.floor`. Ratios are a strategy's figure over the oracle's, the floor's or reactive's, "
                  "measured in one run. Waits and delays of jobs unfinished at the end of the run are counted up to "
                  "it. `TTC` is time to capacity. `burst` plans with demand forecasts; `burst-no-forecast` is the "
                  "same planner and policies without them. `reactive` is the Cluster Autoscaler, `karpenter` and "
                  "`karpenter-do-not-disrupt` are Karpenter with its documented defaults, the latter with every job "
                  "annotated do-not-disrupt (`burst/sim/strategies.py`, `burst/sim/karpenter.py`). Windows: "
                  + "; ".join(f"{f} {d:g} days from {s or 'its first job'}" for f, s, d in FULL)
                  + f"; the variants replay {' and '.join(VARIANT_WINDOWS)}.",
                  [*ratios, *extras, *out, summary, ""])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
