"""The services page of `burst simulate --report`: per service, a table of each strategy's figures and a panel
per strategy of the replicas the rate needs against the replicas serving, over time.

Long windows are drawn in at most `MAX_POINTS` buckets per line: the need's highest value in each bucket and the
serving replicas' lowest, so a shortfall shorter than a bucket still shows.
"""

from __future__ import annotations

import html
import math
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from burst import plots
from burst.plots import Theme
from burst.sim.service_engine import Replay, ServiceMetrics
from burst.sim.service_setup import ServiceSetup
from burst.sim.service_traces import TICK_S

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_POINTS = 1500
PAGE = "services.html"


def buckets(values: np.ndarray, count: int, how: str) -> np.ndarray:
    """`values` in `count`-tick buckets: each bucket's max (`how` "max") or min."""
    if count <= 1:
        return values
    padded = np.concatenate([values, np.full((-len(values)) % count, values[-1] if len(values) else 0)])
    shaped = padded.reshape(-1, count)
    return np.asarray(shaped.max(axis=1) if how == "max" else shaped.min(axis=1))


def _panel(theme: Theme, setup: ServiceSetup, replays: dict[str, Replay]) -> Figure:
    rows = math.ceil(len(replays) / 2)
    fig, axes = plots.figure(theme, rows=rows, cols=2 if len(replays) > 1 else 1, height_in=0.6 + 1.7 * rows,
                             sharex=True, sharey=True)
    need = setup.need(setup.series.fine_counts().sum(axis=1) / TICK_S)
    per = max(1, math.ceil(len(need) / MAX_POINTS))
    start = setup.series.window_start
    times = plots.dates(start + timedelta(seconds=k * per * TICK_S) for k in range(math.ceil(len(need) / per)))
    need_line = buckets(need, per, "max")
    for ax, (name, run) in zip(axes, replays.items(), strict=False):
        ax.step(times, buckets(run.serving, per, "min"), where="post", linewidth=0.9, color="#4c72b0",
                label="replicas serving")
        ax.step(times, need_line, where="post", linewidth=0.8, color=theme.text, label="replicas the rate needs")
        ax.set_title(name)
        ax.set_ylabel("replicas")
        plots.utc_time_axis(ax, label=False)
        ax.tick_params(axis="x", labelsize=7.5)
    for ax in axes[len(replays):]:
        ax.set_visible(False)
    plots.legend_above(fig, axes[0], ncol=2)
    return fig


def _table(name: str, results: dict[str, dict[str, ServiceMetrics]]) -> str:
    rows = []
    for strategy, per in results.items():
        m = per[name]
        rows.append("<tr>" + "".join((
            plots.cell(strategy),
            plots.cell(f"{m.unserved_request_share:.3%}", "unserved_request_share", m.unserved_request_share),
            plots.cell(f"{m.slo_minutes_missed_share:.2%}", "slo_minutes_missed_share", m.slo_minutes_missed_share),
            plots.cell(plots.usd(m.cost_usd), "cost_usd", round(m.cost_usd, 2)),
            plots.cell(f"{m.replica_gpu_hours:,.1f}", "replica_gpu_hours", round(m.replica_gpu_hours, 3)),
            plots.cell(plots.duration(m.ttc_p95_s), "ttc_p95_s", m.ttc_p95_s))) + "</tr>")
    return plots.table(("strategy", "unserved", "SLO minutes missed", "cost", "replica GPU-h", "TTC p95"), rows)


def render(setups: list[ServiceSetup], results: dict[str, dict[str, ServiceMetrics]],
           replays: dict[str, dict[str, Replay]]) -> str:
    """The page's HTML: per service its mapping, its table and its panels."""
    sections = []
    for setup in setups:
        name = setup.series.name
        runs = {strategy: per[name] for strategy, per in replays.items() if name in per}
        m = setup.mapping()
        lede = (f"<p>{html.escape(m['file'])}: window {html.escape(m['window'][0])} .. {html.escape(m['window'][1])}; "
                f"{m['capacity_rps']:g} req/s per replica at target {m['target_utilisation']:g}; up to "
                f"{m['max_replicas']} replicas ({html.escape(m['source'])}).</p>")
        picture = plots.picture(lambda th, s=setup, r=runs: _panel(th, s, r),  # type: ignore[misc]
                                f"replicas needed against replicas serving for {name}, per strategy")
        sections.append((f"service {name}", lede + _table(name, results) + picture))
    return plots.page("burst simulate: services", "Demand against ready replicas, per service and strategy.", sections)


def write_service_report(setups: list[ServiceSetup], results: dict[str, dict[str, ServiceMetrics]],
                         replays: dict[str, dict[str, Replay]], directory: Path) -> Path:
    """Write the services page into `directory` (created); returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / PAGE
    out.write_text(render(setups, results, replays), encoding="utf-8")
    return out
