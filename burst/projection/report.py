"""The HTML page of a cost projection, with the PNG plots it links.

Plots: cumulative projected cost over the horizon (P50 run, with the band up
to the P90 run), cost per tenant (P50 bars, P90 whiskers) and cost per line
stacked for the baseline and each what-if. The page also holds the candidate
table, the budget status and the capacity advice.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from burst.catalog import COST_LINES
from burst.projection.project import Projection
from burst.sim.report import TIER_COLOURS
from burst.state import CostEntry


def cumulative(ledger: Sequence[CostEntry], start: datetime, horizon_s: float, step_s: float = 3600.0) -> list[float]:
    """Cumulative ledger spend (every tenant and the overhead) at each step end over the horizon."""
    n = max(1, int(round(horizon_s / step_s)))
    per = [0.0] * n
    for row in ledger:
        k = min(n - 1, max(0, int((row.at - start).total_seconds() // step_s)))
        per[k] += row.usd
    out, total = [], 0.0
    for v in per:
        total += v
        out.append(total)
    return out


def write_report(projection: Projection, directory: Path) -> Path:
    """Write `index.html` and its PNG plots into `directory` (created); returns the HTML path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    base = projection.baseline
    start, horizon_s = projection.start, projection.horizon_s

    fig, ax = plt.subplots(figsize=(9, 3.5))
    for s in projection.scenarios():
        lo = cumulative(s.p50.ledger, start, horizon_s)
        hi = cumulative(s.p90.ledger, start, horizon_s)
        times = [float(k + 1) for k in range(len(lo))]  # hours from the start
        line = ax.plot(times, lo, label=f"{s.name} P50")[0]
        ax.fill_between(times, lo, [max(a, b) for a, b in zip(lo, hi, strict=True)], color=line.get_color(), alpha=0.2,
                        label=f"{s.name} P50-P90")
    ax.set_ylabel("cumulative USD")
    ax.set_xlabel(f"hours from {start:%Y-%m-%d %H:%M} UTC")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(directory / "cost_over_time.png", dpi=110)
    plt.close(fig)

    tenants = base.tenants()
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(tenants) + 3), 3.5))
    p50 = [base.p50.cost_by_tenant.get(t, 0.0) for t in tenants]
    p90 = [base.p90.cost_by_tenant.get(t, 0.0) for t in tenants]
    ax.bar(tenants, p50, color="#4c72b0", label="P50")
    ax.errorbar(tenants, p50, yerr=[[0.0] * len(p50), [max(0.0, b - a) for a, b in zip(p50, p90, strict=True)]],
                fmt="none", ecolor="black", capsize=3, label="to P90")
    ax.set_ylabel("USD")
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(directory / "by_tenant.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 3.5))
    names = [s.name for s in projection.scenarios()]
    bottom = [0.0] * len(names)
    for line_name in COST_LINES:
        values = [s.p50.cost_by_tier.get(line_name, 0.0) for s in projection.scenarios()]
        ax.bar(names, values, bottom=bottom, label=line_name, color=TIER_COLOURS[line_name])
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel("USD (P50)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(directory / "by_tier.png", dpi=110)
    plt.close(fig)

    e = html.escape
    rows = "".join(
        f"<tr><td>{e(s.name)}</td><td>{s.usd_per_hour():,.2f}</td><td>{s.p50.cost_usd:,.0f}</td><td>{s.p90.cost_usd:,.0f}</td>"
        f"<td>{s.p50.wait_p50_s:,.0f}</td><td>{s.p50.wait_p95_s:,.0f}</td></tr>"
        for s in projection.scenarios()
    )
    budgets = "".join(
        f"<tr><td>{e(t)}</td><td>{base.p50.cost_by_tenant.get(t, 0.0):,.0f}</td><td>{base.p90.cost_by_tenant.get(t, 0.0):,.0f}</td>"
        f"<td>{'' if base.budgets.get(t) is None else f'{base.budgets[t]:,.0f}'}</td>"
        f"<td>{e(str(base.exceeds_at.get(t) or ''))}</td></tr>"
        for t in tenants
    )
    cap = projection.capacity
    advice = "<p>no steady tier: no capacity advice</p>"
    if cap is not None:
        advice = (f"<p>forecast P50 above the steady tier ({cap.steady_gpus} GPUs) for {cap.above_share:.0%} of the horizon; "
                  f"recommend adding {cap.add_gpus} on-prem GPU(s)"
                  + (f": cloud avoided ${cap.cloud_avoided_usd_month:,.0f}/month against ${cap.onprem_running_usd_month:,.0f}/month "
                     f"to run them and ${cap.capex_usd:,.0f} capex, paying back in "
                     f"{'never' if cap.payback_months is None else f'{cap.payback_months:,.1f} months'}" if cap.add_gpus else "")
                  + "</p>")
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>burst cost projection</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}
td:first-child{{text-align:left}}</style></head><body>
<h1>Cost projection: {projection.horizon_s / 3600:g} h from {projection.start.isoformat()}</h1>
<h2>Candidates</h2>
<table><tr><th>option</th><th>USD/hour</th><th>P50 total $</th><th>P90 total $</th><th>wait P50 s</th><th>wait P95 s</th></tr>{rows}</table>
<h2>Cost over time</h2><p><a href="cost_over_time.png"><img src="cost_over_time.png" alt="cost over time"></a></p>
<h2>Per tenant (baseline)</h2>
<table><tr><th>tenant</th><th>P50 $</th><th>P90 $</th><th>budget $/month</th><th>exceeds budget at</th></tr>{budgets}</table>
<p><a href="by_tenant.png"><img src="by_tenant.png" alt="cost per tenant"></a></p>
<h2>Per cost line</h2><p><a href="by_tier.png"><img src="by_tier.png" alt="cost per line"></a></p>
<h2>Capacity planning</h2>{advice}
<h2>Assumptions</h2><ul>{''.join(f'<li>{e(a)}</li>' for a in projection.assumptions)}</ul>
</body></html>
"""
    out = directory / "index.html"
    out.write_text(page, encoding="utf-8")
    return out


__all__ = ["cumulative", "write_report"]
