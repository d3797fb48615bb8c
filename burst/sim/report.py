"""The HTML report of a simulation: a table per strategy and PNG plots it embeds.

Plots: demand vs ready capacity by tier over time (one panel per simulated
strategy), cost per strategy split by tier, and the queue-wait CDF.
"""

from __future__ import annotations

import html
from pathlib import Path

from burst.sim.compare import Comparison
from burst.sim.engine import TIERS

TIER_COLOURS = {"steady": "#4c72b0", "elastic_on_demand": "#dd8452", "elastic_spot": "#55a868", "hot_pool": "#c44e52"}


def write_report(result: Comparison, directory: Path) -> Path:
    """Write `index.html` and its PNG plots into `directory` (created); returns the HTML path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    simulated = {n: r for n, r in result.results.items() if r.timeline}

    fig, axes = plt.subplots(max(1, len(simulated)), 1, figsize=(10, 2.6 * max(1, len(simulated))), squeeze=False)
    for ax, (name, r) in zip(axes[:, 0], simulated.items(), strict=False):
        times = [p.at for p in r.timeline]
        stacks = [[p.capacity_gpus.get(t, 0.0) for p in r.timeline] for t in TIERS]
        ax.stackplot(times, stacks, labels=TIERS, colors=[TIER_COLOURS[t] for t in TIERS], step="post", alpha=0.7)
        ax.step(times, [p.demand_gpus for p in r.timeline], where="post", color="black", linewidth=0.8, label="demand")
        ax.set_title(name, fontsize=9)
        ax.set_ylabel("GPUs")
    axes[0, 0].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(directory / "capacity.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 3.5))
    names = list(result.results)
    bottom = [0.0] * len(names)
    for tier in TIERS:
        values = [result.results[n].cost_by_tier.get(tier, 0.0) for n in names]
        ax.bar(names, values, bottom=bottom, label=tier, color=TIER_COLOURS[tier])
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel("USD")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(directory / "cost.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 3.5))
    for name, r in result.results.items():
        if not r.waits_s:
            continue
        waits = sorted(max(w, 1.0) for w in r.waits_s)
        ax.step(waits, [(i + 1) / len(waits) for i in range(len(waits))], where="post", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("queue wait (s, log)")
    ax.set_ylabel("share of jobs")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(directory / "wait_cdf.png", dpi=110)
    plt.close(fig)

    data = result.to_json()
    keys = ["cost_usd", "wait_p50_s", "wait_p95_s", "wait_p99_s", "slo_violations", "onprem_utilization",
            "interruptions", "lost_gpu_hours", "time_to_capacity_p95_s"]
    rows = "".join(
        "<tr><td>" + html.escape(n) + "</td>" + "".join(f"<td>{r[k]:,.4g}</td>" for k in keys) + "</tr>"
        for n, r in data["strategies"].items()
    )
    t = data["trace"]
    assumptions = "".join(f"<li>{html.escape(a)}</li>" for a in data["assumptions"])
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>burst simulate: {html.escape(t['path'])}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}}td,th{{padding:2px 8px;text-align:right}}</style></head>
<body><h1>burst simulate</h1>
<p>Trace <code>{html.escape(t['path'])}</code> ({html.escape(t['format'])}): {t['jobs']} jobs, {t['gpu_hours']:,.0f} GPU-hours,
peak {t['peak_gpus']:g} GPUs, P50 {t['p50_gpus']:g} GPUs; {html.escape(t['start'])} to {html.escape(t['end'])}.</p>
<h2>Assumptions</h2><ul>{assumptions}</ul>
<h2>Results</h2><table><tr><th>strategy</th>{''.join(f'<th>{k}</th>' for k in keys)}</tr>{rows}</table>
<h2>Demand and ready capacity by tier</h2><img src="capacity.png" alt="capacity">
<h2>Cost by tier</h2><img src="cost.png" alt="cost">
<h2>Queue wait CDF</h2><img src="wait_cdf.png" alt="wait CDF">
</body></html>
"""
    out = directory / "index.html"
    out.write_text(page)
    return out


__all__ = ["write_report"]
