"""The HTML report of `burst simulate --report`: where the money went and what waiting cost, per strategy.

One self-contained page (`burst.plots`): a summary table, cost against P95
wait, cost against P95 delay with the frontier and whether burst is dominated
(`burst.sim.frontier`), the cost gap above the oracle by part (a waterfall), then, for each
simulated strategy on shared axes, cost rate by cost line, ready capacity
against demand with the plan's actions marked, pending GPUs, and the wait
CDFs with each tenant's SLO. The bounds (`oracle`, `floor`) are computed, not
simulated: they appear in the table, the scatter, the waterfall and the CDF,
but have no timeline.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burst import plots
from burst.plots import Theme
from burst.sim.compare import Comparison
from burst.sim.engine import GAP_PARTS, MARKS, TIERS, StrategyResult, TimelinePoint
from burst.sim.frontier import NOT_COMPARED, Point, cost_delay_frontier, dominated_by

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

BOUND_NAMES = ("oracle", "floor")
MARK_STYLE = {"scale_up": ("^", "scale-up"), "scale_down": ("v", "scale-down"), "move": ("o", "move (evict to resume)"),
              "interruption": ("x", "interruption")}
MARK_COLOURS = {"scale_up": "#2da44e", "scale_down": "#cf222e", "move": "#8250df", "interruption": "#bf8700"}
GAP_COLOURS = dict(zip(GAP_PARTS, ("#8c8c8c", "#4c72b0", "#f2a65a", "#c44e52", "#e377c2", "#7b2d26", "#ffd166", "#6a4c93",
                                   "#17becf", "#b5b5ff", "#5c5c5c"), strict=True))
"""Cost gap parts, in `GAP_PARTS` order; green is kept for what lowers the cost."""
SAVING = "#2da44e"

SUMMARY_COLUMNS = ("cost", "vs oracle", "vs reactive", "P95 wait", "SLO misses", "jobs completed", "lost GPU-h",
                   "on-prem util")


def write_report(result: Comparison, directory: Path) -> Path:
    """Write the report as `index.html` into `directory` (created); returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / "index.html"
    out.write_text(render(result), encoding="utf-8")
    return out


def render(result: Comparison) -> str:
    """The report's HTML (every plot embedded)."""
    data = result.to_json()
    names = list(result.results)
    colours = plots.series_colours([n for n in names if n not in BOUND_NAMES])
    simulated = {n: r for n, r in result.results.items() if r.timeline}
    t = data["trace"]
    lede = (f"Trace <code>{html.escape(t['path'])}</code> ({html.escape(t['format'])}): {t['jobs']:,} jobs, "
            f"{t['gpu_hours']:,.0f} GPU-hours, peak {t['peak_gpus']:,g} GPUs, P50 {t['p50_gpus']:,g} GPUs; billed from "
            f"{_utc(result.start)} to {_utc(result.end)}. Strategies: {html.escape(', '.join(names))}.")
    sections: list[tuple[str, str]] = [("Summary", summary_table(data["strategies"]))]
    sections.append(("Cost against P95 wait", plots.picture(lambda th: _tradeoff(th, result.results, colours),
                                                             "cost against P95 wait, one point per strategy")
                     + '<p class="note">Lower left is better: cheaper and less waiting. The oracle and floor are '
                       "bounds (every job starts at submission).</p>"))
    sections.append(("Cost against P95 delay: the frontier", frontier_section(result.results, colours)))
    if any(r.cost_gap for r in result.results.values()):
        sections.append(("Where the money went: cost above the oracle", _gap_section(result, data["strategies"])))
    sections.append(("Cost by cost line", plots.picture(lambda th: _by_line(th, result.results),
                                                        "cost per strategy stacked by cost line")))
    if simulated:
        sections.append(("Cost rate over time, by cost line", plots.picture(
            lambda th: _cost_rate(th, simulated), "cost rate over time stacked by cost line, per strategy")
            + '<p class="note">USD per hour averaged over each interval between loop ticks; all panels share both '
              "axes.</p>"))
        sections.append(("Ready capacity against demand", plots.picture(
            lambda th: _capacity(th, simulated), "ready capacity by cost line against demand, with actions marked")
            + '<p class="note">Markers along the top of each panel: the ticks whose plan scaled a group up or down '
              "(or terminated nodes), moved a job (checkpoint, evict, resume elsewhere), or lost a run to an "
              "interruption.</p>"))
        sections.append(("Pending GPUs", plots.picture(lambda th: _pending(th, simulated, colours),
                                                       "GPUs of jobs still pending after each plan, per strategy")))
    slos = sorted({result.setup.policy(tenant).queue_wait_slo_s for tenant in result.trace.tenants} or {math.inf})
    sections.append(("Queue wait", plots.picture(lambda th: _wait_cdf(th, result.results, colours, slos),
                                                 "CDF of queue wait per strategy, with the SLO")
                     + '<p class="note">Wait from submission to first start; jobs never started count with their '
                       "wait so far. Waits under 1 s are drawn at 1 s.</p>"))
    sections.append(("Assumptions", "<ul>" + "".join(f"<li>{html.escape(a)}</li>" for a in data["assumptions"]) + "</ul>"))
    return plots.page("burst simulate", lede, sections)


def _utc(at: datetime) -> str:
    return f"{at:%Y-%m-%d %H:%M} UTC"


def summary_table(strategies: dict[str, Any]) -> str:
    """One row per strategy: the `--json` figures, formatted, each cell naming its key and exact value."""
    oracle = strategies.get("oracle", {}).get("cost_usd")
    reactive = strategies.get("reactive", {}).get("cost_usd")
    rows = []
    for name, r in strategies.items():
        vs_oracle = r["cost_usd"] / oracle if oracle else math.nan
        vs_reactive = r["cost_usd"] / reactive if reactive else math.nan
        cells = [
            plots.cell(name, "strategy", name),
            plots.cell(plots.usd(r["cost_usd"]), "cost_usd", r["cost_usd"]),
            plots.cell(plots.ratio(vs_oracle), "vs_oracle", vs_oracle),
            plots.cell(plots.ratio(vs_reactive), "vs_reactive", vs_reactive),
            plots.cell(plots.duration(r["wait_p95_s"]), "wait_p95_s", r["wait_p95_s"]),
            plots.cell(plots.number(r["slo_violations"]), "slo_violations", r["slo_violations"]),
            plots.cell(f"{r['jobs_completed']:,} / {r['jobs']:,}", "jobs_completed", r["jobs_completed"]),
            plots.cell(plots.number(r["lost_gpu_hours"], 1), "lost_gpu_hours", r["lost_gpu_hours"]),
            plots.cell(f"{r['onprem_utilization']:.1%}", "onprem_utilization", r["onprem_utilization"]),
        ]
        css = ' class="bound"' if name in BOUND_NAMES else ""
        rows.append(f'<tr{css} data-strategy="{html.escape(name)}">{"".join(cells)}</tr>')
    return plots.table(("strategy", *SUMMARY_COLUMNS), rows, css="summary") + (
        '<p class="note">Cost: the bill over the whole run, every cost line. vs oracle / vs reactive: cost over the '
        "oracle's and reactive's. P95 wait: submission to first start. Lost GPU-h: work lost since the last checkpoint "
        "and run again. Italic rows are bounds, computed from the trace.</p>")


# ---------------------------------------------------------------- plots


def _tradeoff(theme: Theme, results: dict[str, StrategyResult], colours: dict[str, str]) -> Figure:
    fig, (ax,) = plots.figure(theme, height_in=3.8)
    for name, r in results.items():
        colour = colours.get(name, theme.muted)
        marker = "D" if name in BOUND_NAMES else "o"
        ax.scatter([r.wait_p95_s], [r.cost_usd], s=46, color=colour, marker=marker, zorder=3,
                   edgecolors=theme.text if name in BOUND_NAMES else "none")
    waits = [r.wait_p95_s for r in results.values()]
    if max(waits, default=0.0) > 10 * max(1.0, min((w for w in waits if w > 0), default=1.0)):
        ax.set_xscale("symlog", linthresh=10.0, linscale=0.5)
        plots.duration_axis(ax, skip=(1.0,))
    ax.set_xlabel("P95 queue wait (submission to first start; log scale above 10 s)")
    ax.set_ylabel("cost over the run (USD)")
    plots.usd_axis(ax)
    ax.margins(x=0.14, y=0.14)
    plots.label_points(fig, ax, [(name, r.wait_p95_s, r.cost_usd) for name, r in results.items()], theme)
    return fig


def frontier_section(results: dict[str, StrategyResult], colours: dict[str, str]) -> str:
    """The cost-delay frontier of one window and whether burst is dominated (`burst.sim.frontier`)."""
    points = {n: Point.of(r) for n, r in results.items()}
    body = plots.picture(lambda th: frontier_figure(th, [("", points)], colours),
                         "cost against P95 delay, one point per strategy, with the frontier")
    if "burst" in points:
        rivals = dominated_by("burst", points)
        verdict = (f"burst is dominated by {html.escape(', '.join(rivals))}" if rivals
                   else "No strategy dominates burst")
        body += (f'<p class="note">{verdict} (a strategy cheaper and no worse on P95 delay, lost work and work '
                 f"delivered; {html.escape(', '.join(NOT_COMPARED))} are drawn but not compared).</p>")
    return body


def frontier_figure(theme: Theme, windows: Sequence[tuple[str, dict[str, Point]]], colours: dict[str, str]) -> Figure:
    """Cost against P95 delay, one panel per (title, points) window: every strategy a point (the strategies left
    out of the dominance check hollow), the cost-delay frontier of the compared ones a line."""
    rows, cols = _grid(len(windows))
    fig, axes = plots.figure(theme, rows=rows, cols=cols, height_in=0.6 + 3.4 * rows)
    for ax in axes[len(windows):]:
        ax.set_visible(False)
    for ax, (title, points) in zip(axes, windows, strict=False):
        compared = {n: p for n, p in points.items() if n not in NOT_COMPARED}
        line = cost_delay_frontier(compared)
        ax.plot([compared[n].delay_p95_s for n in line], [compared[n].cost_usd for n in line], color=theme.muted,
                lw=1.0, ls="--", zorder=2, label="frontier (compared strategies)")
        for name, p in points.items():
            colour = colours.get(name, theme.muted)
            hollow = name in NOT_COMPARED
            ax.scatter([p.delay_p95_s], [p.cost_usd], s=40, marker="D" if name in BOUND_NAMES else "o", zorder=3,
                       color="none" if hollow else colour, edgecolors=theme.text if hollow else "none")
        delays = [p.delay_p95_s for p in points.values()]
        if max(delays, default=0.0) > 10 * max(1.0, min((d for d in delays if d > 0), default=1.0)):
            ax.set_xscale("symlog", linthresh=10.0, linscale=0.5)
            plots.duration_axis(ax, skip=(1.0,) if len(windows) == 1 else (1.0, 10.0, 6 * 3600.0, 7 * 86400.0))
        ax.set_title(title)
        ax.set_xlabel("P95 delay (completion - submission - duration; log scale above 10 s)" if len(windows) == 1
                      else "P95 delay (log scale above 10 s)", fontsize=7.5)
        ax.set_ylabel("cost over the run (USD)")
        plots.usd_axis(ax)
        ax.margins(x=0.14, y=0.14)
        plots.label_points(fig, ax, [(n, p.delay_p95_s, p.cost_usd) for n, p in points.items()], theme)
    return fig


def _gap_section(result: Comparison, figures: dict[str, Any]) -> str:
    """The waterfall of the headline strategy, every strategy's parts, and the table of `--json`'s `cost_gap`."""
    gaps = {n: r.cost_gap for n, r in result.results.items() if n != "oracle"}
    oracle_usd = result.results["oracle"].cost_usd if "oracle" in result.results else None
    headline = "burst" if "burst" in gaps else next((n for n in gaps if n not in BOUND_NAMES), None)
    body = ""
    if headline is not None and oracle_usd is not None:
        colour = plots.series_colours([n for n in result.results if n not in BOUND_NAMES]).get(headline, "#1f77b4")
        body += plots.picture(lambda th: _waterfall(th, headline, result.results[headline], oracle_usd, colour),
                              f"waterfall from the oracle's cost to {headline}'s")
    body += plots.picture(lambda th: _gap_bars(th, gaps), "cost above the oracle by part, per strategy")
    rows = []
    for name in gaps:
        gap = figures[name]["cost_gap"]
        cells = [plots.cell(name, "strategy", name), plots.cell(plots.usd(sum(gap.values()), signed=True))]
        cells += [plots.cell(plots.usd(gap.get(p, 0.0), signed=True), p, gap.get(p, 0.0)) for p in GAP_PARTS]
        rows.append(f'<tr data-strategy="{html.escape(name)}">{"".join(cells)}</tr>')
    body += plots.table(("strategy", "gap", *(p.replace("_", " ") for p in GAP_PARTS)), rows, css="gap")
    body += ('<p class="note">Each strategy\'s cost above the oracle, split into parts that sum to it. structural: what '
             "whole nodes, boots and first-fit placement cost any controller (the floor minus the oracle). booting, idle, "
             "hot pool: cloud nodes paid while not ready, holding no job, or warm. rerun: work lost and run again. "
             "on demand for spot work: fault-tolerant work on on-demand at its premium. onprem shortfall: work the "
             "floor ran on-prem that went to the cloud. tick lag: GPUs held after work finished until the next tick. "
             "undelivered: work not done by the end (negative: queued work costs nothing; 0 when the run ends with "
             "nothing queued, as what still runs is then charged to its end).</p>")
    return body


def _waterfall(theme: Theme, name: str, r: StrategyResult, oracle_usd: float, colour: str) -> Figure:
    """Oracle cost, then each part in turn (the structural step lands on the floor), then the strategy's cost."""
    fig, (ax,) = plots.figure(theme, height_in=3.6)
    labels, bottoms, heights, colours = ["oracle"], [0.0], [oracle_usd], [theme.muted]
    level = oracle_usd
    for part in GAP_PARTS:
        v = r.cost_gap.get(part, 0.0)
        if part != "structural" and abs(v) < 0.005 * max(1.0, r.cost_usd):
            continue
        labels.append("floor\n(structural)" if part == "structural" else _wrap(part.replace("_", " ")))
        bottoms.append(min(level, level + v))
        heights.append(abs(v))
        colours.append(GAP_COLOURS[part] if v >= 0 else SAVING)
        level += v
    labels.append(name)
    bottoms.append(0.0)
    heights.append(r.cost_usd)
    colours.append(colour)
    x = list(range(len(labels)))
    ax.bar(x, heights, bottom=bottoms, color=colours, width=0.62)
    top = max(b + h for b, h in zip(bottoms, heights, strict=True))
    for i, (b, h) in enumerate(zip(bottoms, heights, strict=True)):
        delta = i not in (0, len(labels) - 1)
        signed = h if not delta or colours[i] != SAVING else -h
        ax.text(i, b + h + 0.01 * top, plots.usd(signed, signed=delta), ha="center", va="bottom", fontsize=7.5,
                color=theme.text)
    ax.set_xticks(x, labels, fontsize=7.5)
    ax.set_ylabel("USD")
    plots.usd_axis(ax)
    ax.set_ylim(0, top * 1.1)
    ax.set_title(f"{name}: from the oracle's cost to its own, part by part (green parts lower it)")
    ax.grid(axis="x", visible=False)
    return fig


def _wrap(label: str, width: int = 12) -> str:
    """A tick label broken into lines of about `width` characters."""
    lines: list[str] = []
    for word in label.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "\n".join(lines)


def _gap_bars(theme: Theme, gaps: dict[str, dict[str, float]]) -> Figure:
    """One diverging stacked bar per strategy: positive parts to the right of 0 (the oracle), negative ones left."""
    names = list(gaps)
    fig, (ax,) = plots.figure(theme, height_in=0.75 + 0.34 * len(names))
    pos = [0.0] * len(names)
    neg = [0.0] * len(names)
    for part in GAP_PARTS:
        values = [gaps[n].get(part, 0.0) for n in names]
        lefts = [pos[i] if v >= 0 else neg[i] + v for i, v in enumerate(values)]
        ax.barh(range(len(names)), [abs(v) for v in values], left=lefts, color=GAP_COLOURS[part], height=0.6,
                label=part.replace("_", " "))
        for i, v in enumerate(values):
            if v >= 0:
                pos[i] += v
            else:
                neg[i] += v
    totals = [sum(gaps[n].values()) for n in names]
    ax.scatter(totals, range(len(names)), marker="|", s=160, color=theme.text, zorder=4, label="net gap")
    structural = next((g.get("structural", 0.0) for g in gaps.values()), 0.0)
    ax.axvline(0.0, color=theme.text, linewidth=0.9)
    ax.axvline(structural, color=theme.muted, linewidth=0.9, linestyle="--")
    ax.text(0.0, -0.6, " oracle", fontsize=7.5, color=theme.text, va="center")
    ax.text(structural, -0.6, " floor", fontsize=7.5, color=theme.muted, va="center")
    span = max(max(pos, default=0.0), 1.0)
    for i, total in enumerate(totals):
        ax.text(pos[i] + 0.01 * span, i, plots.usd(total, signed=True), va="center", fontsize=7.5, color=theme.text)
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(len(names) - 0.5, -1.1)
    ax.set_xlim(min(min(neg, default=0.0) * 1.1, 0.0), span * 1.15)
    ax.set_xlabel("cost above the oracle (USD)")
    plots.usd_axis(ax, "x")
    ax.grid(axis="y", visible=False)
    plots.legend_above(fig, ax, ncol=6)
    return fig


def _by_line(theme: Theme, results: dict[str, StrategyResult]) -> Figure:
    names = list(results)
    fig, (ax,) = plots.figure(theme, height_in=0.9 + 0.34 * len(names))
    plots.stacked_cost_bars(ax, theme, names, {line: [results[n].cost_by_tier.get(line, 0.0) for n in names]
                                               for line in TIERS})
    ax.set_xlabel("cost over the run (USD)")
    plots.legend_above(fig, ax)
    return fig


def _grid(count: int) -> tuple[int, int]:
    cols = 1 if count == 1 else 2 if count <= 4 else 3
    return math.ceil(count / cols), cols


def _panels(theme: Theme, simulated: dict[str, StrategyResult], height_per_row: float) -> tuple[Figure, list[Axes]]:
    rows, cols = _grid(len(simulated))
    fig, axes = plots.figure(theme, rows=rows, cols=cols, height_in=0.6 + height_per_row * rows, sharex=True,
                             sharey=True)
    for ax in axes[len(simulated):]:
        ax.set_visible(False)
    for i, ax in enumerate(axes[: len(simulated)]):
        plots.utc_time_axis(ax, label=i >= len(simulated) - cols)
        ax.tick_params(axis="x", labelbottom=True, labelsize=7.5)
    return fig, axes


def cost_rates(timeline: Sequence[TimelinePoint]) -> tuple[list[datetime], dict[str, list[float]]]:
    """Interval starts and each cost line's average USD per hour over the interval to the next tick."""
    times: list[datetime] = []
    rates: dict[str, list[float]] = {line: [] for line in TIERS}
    for a, b in zip(timeline, timeline[1:], strict=False):
        hours = (b.at - a.at).total_seconds() / 3600.0
        if hours <= 0:
            continue
        times.append(a.at)
        for line in TIERS:
            rates[line].append((b.spent_usd.get(line, 0.0) - a.spent_usd.get(line, 0.0)) / hours)
    return times, rates


def _cost_rate(theme: Theme, simulated: dict[str, StrategyResult]) -> Figure:
    fig, axes = _panels(theme, simulated, 1.75)
    lines = [line for line in TIERS if any(r.cost_by_tier.get(line) for r in simulated.values())]
    for ax, (name, r) in zip(axes, simulated.items(), strict=False):
        times, rates = cost_rates(r.timeline)
        if times:
            stacks = [[*rates[line], rates[line][-1]] for line in lines]
            ax.stackplot(plots.dates([*times, r.timeline[-1].at]), stacks,
                         colors=[plots.TIER_COLOURS[line] for line in lines], step="post",
                         labels=[plots.TIER_LABELS[line] for line in lines], linewidth=0)
        ax.set_title(f"{name}: {plots.usd(r.cost_usd)}")
        ax.set_ylabel("USD/h")
    plots.usd_axis(axes[0], suffix="/h")
    plots.legend_above(fig, axes[0])
    return fig


def _capacity(theme: Theme, simulated: dict[str, StrategyResult]) -> Figure:
    fig, axes = _panels(theme, simulated, 1.8)
    peak = max((max(p.demand_gpus, sum(p.capacity_gpus.values())) for r in simulated.values() for p in r.timeline),
               default=1.0)
    lines = [line for line in TIERS if any(p.capacity_gpus.get(line) for r in simulated.values() for p in r.timeline)]
    for ax, (name, r) in zip(axes, simulated.items(), strict=False):
        times = plots.dates(p.at for p in r.timeline)
        ax.stackplot(times, [[p.capacity_gpus.get(line, 0.0) for p in r.timeline] for line in lines],
                     colors=[plots.TIER_COLOURS[line] for line in lines], step="post", alpha=0.75, linewidth=0,
                     labels=[f"ready: {plots.TIER_LABELS[line]}" for line in lines])
        ax.step(times, [p.demand_gpus for p in r.timeline], where="post", color=theme.text, linewidth=0.9,
                label="demand (pending + running)")
        for k, mark in enumerate(MARKS):
            at = plots.dates(p.at for p in r.timeline if p.marks.get(mark))
            if at:
                symbol, label = MARK_STYLE[mark]
                ax.scatter(at, [peak * (1.22 - 0.07 * k)] * len(at), marker=symbol, s=14, color=MARK_COLOURS[mark],
                           label=label, linewidths=0.9, zorder=4)
        ax.set_title(name)
        ax.set_ylabel("GPUs")
    axes[0].set_ylim(0, peak * 1.28)
    handles: dict[str, Any] = {}
    for ax in axes[: len(simulated)]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    fig.legend(list(handles.values()), list(handles), loc="outside upper center", ncol=5, frameon=False)
    return fig


def _pending(theme: Theme, simulated: dict[str, StrategyResult], colours: dict[str, str]) -> Figure:
    fig, axes = _panels(theme, simulated, 1.45)
    for ax, (name, r) in zip(axes, simulated.items(), strict=False):
        times = plots.dates(p.at for p in r.timeline)
        values = [p.pending_gpus for p in r.timeline]
        ax.fill_between(times, values, step="post", color=colours.get(name, theme.muted), alpha=0.5, linewidth=0)
        ax.step(times, values, where="post", color=colours.get(name, theme.muted), linewidth=0.8)
        ax.set_title(f"{name}: peak {max(values, default=0.0):,.0f} GPUs")
        ax.set_ylabel("pending GPUs")
    return fig


def _wait_cdf(theme: Theme, results: dict[str, StrategyResult], colours: dict[str, str], slos: list[float]) -> Figure:
    fig, (ax,) = plots.figure(theme, height_in=3.9)
    longest = 1.0
    for name, r in results.items():
        if r.waits_s:
            waits = sorted(max(w, 1.0) for w in r.waits_s)
            longest = max(longest, waits[-1])
            ax.step([1.0, *waits], [0.0, *((i + 1) / len(waits) for i in range(len(waits)))], where="post",
                    label=name, color=colours.get(name, theme.muted), linewidth=1.2)
    for name in BOUND_NAMES:
        bound = results.get(name)
        if bound is not None and not bound.waits_s and bound.wait_p99_s == 0:  # a bound: every job starts at its submission
            ax.plot([1.0, max(longest, 10.0)], [1.0, 1.0], linestyle="--" if name == "oracle" else ":",
                    color=theme.text if name == "oracle" else theme.muted, linewidth=1.6,
                    label=f"{name} (every job at 0 s)")
    for i, slo in enumerate(s for s in slos if math.isfinite(s)):
        ax.axvline(slo, color="#cf222e", linestyle="-.", linewidth=1.0, label="SLO" if i == 0 else None)
        ax.text(slo, 0.03, f" SLO {plots.duration(slo)}", color="#cf222e", fontsize=8, rotation=90, va="bottom")
    ax.set_xscale("log")
    ax.set_xlim(1.0, max(longest, 10.0) * 1.3)
    plots.duration_axis(ax)
    ax.set_ylim(0, 1.04)
    ax.set_xlabel("queue wait (log scale)")
    ax.set_ylabel("share of jobs started within")
    ax.legend(loc="lower right", ncol=2, fontsize=7.5)
    return fig


__all__ = ["cost_rates", "render", "summary_table", "write_report"]
