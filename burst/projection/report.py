"""The HTML report of `burst cost --report`: what the forecast says is coming and what it will cost.

One self-contained page (`burst.plots`): the candidates table (the baseline,
then each what-if beside it with a line saying what it changed), the demand
history with the forecast band that drives the projection, cost per day by
cost line with the P10-P90 band of the sampled paths' runs, cost per tenant and per
cost line with values on the bars, the budget status, the capacity advice and
the assumptions.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from burst import plots
from burst.catalog import COST_LINES
from burst.model import Budget
from burst.plots import Theme
from burst.projection.budget import HOURLY, Breach, has_budget
from burst.projection.project import QUANTILES, Projection, Scenario
from burst.projection.runs import bin_s, bin_starts
from forecasting.models import DemandSeries
from forecasting.paths import quantile

if TYPE_CHECKING:
    from matplotlib.figure import Figure

HISTORY_SHOWN_S = 14 * 86400.0
"""How much demand history the demand plot shows before the projection starts."""
SAMPLED_SHOWN = 5
"""How many of the sampled demand paths the demand plot draws over the forecast band."""


def write_report(projection: Projection, directory: Path, *, history: DemandSeries | None = None,
                 changes: Mapping[str, str] | None = None) -> Path:
    """Write the report as `index.html` into `directory` (created); returns its path.

    `history` is the demand series the forecast was fitted on (drawn before
    the forecast when given); `changes` maps each what-if to the line that
    says what it changed.
    """
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / "index.html"
    out.write_text(render(projection, history=history, changes=changes), encoding="utf-8")
    return out


def daily_band(scenario: Scenario) -> dict[float, list[float]]:
    """Per day of the horizon (per hour, under 2 days: `per_bin`'s bins), the P10, P50 and P90 over the scenario's
    runs of that day's total cost (each day on its own)."""
    totals = [[sum(v) for v in zip(*spend.bins.values(), strict=True)] for spend in scenario.spend]
    return {q: [quantile(list(day), q) for day in zip(*totals, strict=True)] for q in QUANTILES}


def _q(q: float) -> str:
    return f"P{round(q * 100)}"


def _key(q: float) -> str:
    return f"p{round(q * 100)}"


def render(projection: Projection, *, history: DemandSeries | None = None, changes: Mapping[str, str] | None = None) -> str:
    """The report's HTML (every plot embedded)."""
    changes = dict(changes or {})
    base = projection.baseline
    scenarios = projection.scenarios()
    band = f"{_q(QUANTILES[0])}–{_q(QUANTILES[-1])}"
    end = projection.start + timedelta(seconds=projection.horizon_s)
    lede = (f"{projection.horizon_s / 3600:,.0f} h from {_utc(projection.start)} to {_utc(end)}; demand forecast by "
            f"{html.escape(projection.forecast.model)}. Options: {html.escape(', '.join(s.name for s in scenarios))}.")
    thin = "" if projection.thin is None else f'<p class="thin-history"><strong>{html.escape(projection.thin)}.</strong></p>'
    sections: list[tuple[str, str]] = [("Options", thin + candidates_table(projection, changes))]
    draw = figures(projection, history)
    sections.append(("Demand: history and forecast", plots.picture(draw["demand"], "demand history and the forecast band")
        + '<p class="note">GPUs demanded (running and pending), summed over tenants, per hour. The projection replays '
          f"synthetic jobs drawn to follow each of {len(projection.paths)} demand paths sampled from the forecast "
          f"(steps correlated as its errors were: {html.escape(projection.dependence.source)}).</p>"))
    sections.append((f"Cost per {_bin_name(projection.horizon_s)}, by cost line (baseline)", plots.picture(
        draw["cost"], f"baseline cost per {_bin_name(projection.horizon_s)} by cost line, with the {band} band")
        + f'<p class="note">Bars: the median run (the run whose total is the {_q(0.5)} of the {len(base.runs)} sampled '
          f"demand paths' runs), from the controller's cost ledger (held GPUs per tenant plus idle and hot-pool "
          f"overhead). Whiskers: the {band} of each day's total over the runs.</p>"))
    sections.append(("Per tenant (baseline)", plots.picture(draw["tenants"],
                                                            f"baseline cost per tenant, P50 bars with {band} whiskers")
                     + tenant_table(base)))
    sections.append(("Per cost line, each option beside the baseline", plots.picture(
        draw["lines"], "P50 cost per option stacked by cost line")
        + '<p class="note">Idle capacity and hot pools are overhead no tenant pays, so tenant figures add up to less '
          "than these totals.</p>"))
    sections.append(("Capacity planning", _advice(projection)))
    sections.append(("Assumptions", "<ul>" + "".join(f"<li>{html.escape(a)}</li>" for a in projection.assumptions) + "</ul>"))
    return plots.page("burst cost projection", lede, sections)


def figures(projection: Projection, history: DemandSeries | None = None) -> dict[str, Callable[[Theme], Figure]]:
    """The report's plots, in page order, each drawn in a theme: demand (history, forecast band, sampled paths), cost
    per day or hour by cost line, cost per tenant, and cost per line for each option."""
    return {"demand": lambda th: _demand(th, projection, history), "cost": lambda th: _cost_per_bin(th, projection),
            "tenants": lambda th: _per_tenant(th, projection.baseline),
            "lines": lambda th: _per_line(th, projection.scenarios())}


def _utc(at: datetime) -> str:
    return f"{at:%Y-%m-%d %H:%M} UTC"


def candidates_table(projection: Projection, changes: Mapping[str, str]) -> str:
    """The baseline and each what-if: totals (`--json`'s total_usd), the change against the baseline, waits."""
    base = projection.baseline
    rows = []
    for s in projection.scenarios():
        is_base = s is base
        delta = s.cost(0.5) - base.cost(0.5)
        share = delta / base.cost(0.5) if base.cost(0.5) else 0.0
        what = "the set-up as configured" if is_base else changes.get(s.name, "(what it changed was not given)")
        cells = [
            plots.cell(s.name, "option", s.name),
            plots.cell(what, css="text"),
            plots.cell(plots.usd(s.usd_per_hour(), cents=True) + "/h", "usd_per_hour", s.usd_per_hour()),
            *(plots.cell(plots.usd(s.cost(q)), f"total_usd.{_key(q)}", round(s.cost(q), 4)) for q in QUANTILES),
            plots.cell("—" if is_base else f"{plots.usd(delta, signed=True)} ({share:+.1%})"),
            plots.cell(plots.duration(s.median_run.wait_p95_s), "wait_p95_s", s.median_run.wait_p95_s),
        ]
        rows.append(f'<tr data-option="{html.escape(s.name)}">{"".join(cells)}</tr>')
    return plots.table(("option", "what it changes", "USD/hour (P50)", "P10 total", "P50 total", "P90 total",
                        "P50 vs baseline", "P95 wait (median run)"), rows, css="summary", text_columns=(0, 1)) + (
        f'<p class="note">P10, P50 and P90 totals: quantiles of the costs of {len(base.runs)} demand paths sampled from '
        "the forecast, each replayed over the horizon, every cost line. Every option replays the same jobs.</p>")


def tenant_table(base: Scenario) -> str:
    """Each tenant's P10/P50/P90 cost, its hourly and monthly budgets, and when the median run first passes one."""
    rows = []
    for t in base.tenants():
        budget = base.budgets.get(t)
        breach = base.exceeds_at.get(t)
        hourly, monthly = (None, None) if budget is None else (budget.usd_per_hour, budget.usd_per_month)
        rows.append(f'<tr data-tenant="{html.escape(t)}">' + plots.cell(t)
                    + "".join(plots.cell(plots.usd(base.tenant_cost(t, q))) for q in QUANTILES)
                    + plots.cell("none" if hourly is None else plots.usd(hourly) + "/hour", "budget_usd_hour", hourly)
                    + plots.cell("none" if monthly is None else plots.usd(monthly) + "/month", "budget_usd_month", monthly)
                    + plots.cell(_breach(budget, breach), "exceeds_budget_at", breach.at.isoformat() if breach else None)
                    + "</tr>")
    return plots.table(("tenant", "P10", "P50", "P90", "budget per hour", "budget per month",
                        "exceeds budget at (median run)"), rows)


def _breach(budget: Budget | None, breach: Breach | None) -> str:
    if breach is not None:
        return f"{_utc(breach.at)} ({'hourly' if breach.budget == HOURLY else 'monthly'} budget)"
    return "not within the horizon" if budget is not None and has_budget(budget) else "no budget"


def _advice(projection: Projection) -> str:
    cap = projection.capacity
    if cap is None:
        return "<p>No steady tier: no capacity advice.</p>"
    a = cap.steady_tier
    own = "" if a is None else (
        f"The median forecast P50 demand over the projection's horizon ({_utc(a.window_start)} to "
        f"{_utc(a.window_end)}), rounded up, is {a.recommended_gpus:,} GPUs: the on-prem GPUs to own, as burst plan "
        "reckons them over its own forecast horizon. ")
    text = (f"{own}Forecast P50 demand is above the steady tier ({cap.steady_gpus:,} GPUs) for {cap.above_share:.0%} of "
            f"the horizon; recommend adding {cap.add_gpus:,} on-prem GPU(s)")
    if cap.add_gpus:
        payback = "never" if cap.payback_months is None else f"{cap.payback_months:,.1f} months"
        text += (f": cloud avoided {plots.usd(cap.cloud_avoided_usd_month)}/month against "
                 f"{plots.usd(cap.onprem_running_usd_month)}/month to run them and {plots.usd(cap.capex_usd)} capex, "
                 f"paying back in {payback}")
    return f"<p>{html.escape(text)}.</p>"


# ---------------------------------------------------------------- plots


def _demand(theme: Theme, projection: Projection, history: DemandSeries | None) -> Figure:
    fig, (ax,) = plots.figure(theme, height_in=3.4)
    f = projection.forecast
    if history is not None:
        since = projection.start - timedelta(seconds=HISTORY_SHOWN_S)
        shown = [(t, v) for t, v in zip(history.timestamps, history.values, strict=True) if t >= since]
        if shown:
            ax.step(plots.dates(t for t, _ in shown), [v for _, v in shown], where="post", color=theme.text, linewidth=0.9,
                    label="history", gid="history")
    times = plots.dates(f.timestamps)
    qs = sorted(f.quantiles)
    if times:
        low_q = qs[0] if qs[0] < 0.5 else 0.5
        high_q = max((q for q in qs if q <= 0.9), default=qs[-1])
        ax.fill_between(times, f.quantiles[low_q], f.quantiles[high_q], step="post", color="#1f77b4", alpha=0.25,
                        linewidth=0, label=f"forecast {_q(low_q)}–{_q(high_q)}")
        for i, path in enumerate(projection.paths[:SAMPLED_SHOWN]):
            ax.step(times[: len(path)], path, where="post", color=theme.muted, linewidth=0.6, alpha=0.7, gid="sampled-path",
                    label=f"{min(SAMPLED_SHOWN, len(projection.paths))} of {len(projection.paths)} sampled paths"
                    if i == 0 else None)
        ax.step(times, f.quantiles[0.5], where="post", color="#1f77b4", linewidth=1.4, label="forecast P50",
                gid="forecast-p50")
        for q in qs:
            if q > 0.9:
                ax.step(times, f.quantiles[q], where="post", color="#1f77b4", linewidth=0.8, linestyle=":",
                        label=f"forecast {_q(q)}")
    (start,) = plots.dates([projection.start])
    ax.axvline(start, color=theme.muted, linewidth=0.9, linestyle="--")
    left, right = ax.get_xlim()
    late = start - left > (right - left) / 2  # then the label reads leftwards from the line, inside the axes
    ax.annotate("projection starts " if late else " projection starts", (start, 1.0),
                xycoords=("data", "axes fraction"), va="top", ha="right" if late else "left", fontsize=8,
                color=theme.muted)
    plots.utc_time_axis(ax)
    ax.set_ylabel("GPUs demanded")
    ax.set_ylim(bottom=0)
    plots.legend_above(fig, ax)
    return fig


def _bin_name(horizon_s: float) -> str:
    return "day" if bin_s(horizon_s) == 86400.0 else "hour"


def _cost_per_bin(theme: Theme, projection: Projection) -> Figure:
    import numpy as np

    fig, (ax,) = plots.figure(theme, height_in=3.5)
    base = projection.baseline
    starts, lines = bin_starts(projection.start, projection.horizon_s), base.spend[base.median_index].bins
    x = np.arange(len(starts))
    bottom = np.zeros(len(starts))
    for line in COST_LINES:
        values = np.asarray(lines[line])
        if values.any():
            ax.bar(x, values, bottom=bottom, color=plots.TIER_COLOURS[line], label=plots.TIER_LABELS[line], width=0.7)
        bottom += values
    band = daily_band(projection.baseline)
    lo, hi = band[QUANTILES[0]], band[QUANTILES[-1]]
    ax.errorbar(x, bottom, yerr=[np.maximum(0, bottom - np.asarray(lo)), np.maximum(0, np.asarray(hi) - bottom)],
                fmt="none", ecolor=theme.text, capsize=4, linewidth=1.0,
                label=f"{_q(QUANTILES[0])}–{_q(QUANTILES[-1])} of the day's total over {len(projection.baseline.runs)} paths")
    peak = max(max(hi, default=0.0), float(bottom.max(initial=0.0))) or 1.0
    for i, total in enumerate(bottom):
        ax.text(i + 0.38, total + 0.01 * peak, plots.usd(total), fontsize=7.5, color=theme.text, va="bottom",
                ha="left")
    fmt = "%a %d %b" if len(starts) <= 10 else "%d %b"
    ax.set_xticks(x, [f"{s:{fmt}}" if _bin_name(projection.horizon_s) == "day" else f"{s:%H:%M}" for s in starts])
    ax.set_xlabel(f"{_bin_name(projection.horizon_s)} (UTC, from {starts[0]:%Y-%m-%d %H:%M})")
    ax.set_ylabel(f"USD per {_bin_name(projection.horizon_s)}")
    ax.set_ylim(0, peak * 1.15)
    plots.usd_axis(ax)
    ax.grid(axis="x", visible=False)
    plots.legend_above(fig, ax)
    return fig


def _per_tenant(theme: Theme, base: Scenario) -> Figure:
    tenants = base.tenants() or ["(none)"]
    fig, (ax,) = plots.figure(theme, height_in=0.9 + 0.32 * len(tenants))
    p10 = [base.tenant_cost(t, 0.1) for t in tenants]
    p50 = [base.tenant_cost(t, 0.5) for t in tenants]
    p90 = [base.tenant_cost(t, 0.9) for t in tenants]
    y = list(range(len(tenants)))
    ax.barh(y, p50, color="#4c72b0", height=0.6, label="P50")
    ax.errorbar(p50, y, xerr=[[max(0.0, a - lo) for lo, a in zip(p10, p50, strict=True)],
                              [max(0.0, b - a) for a, b in zip(p50, p90, strict=True)]], fmt="none",
                ecolor=theme.text, capsize=3, linewidth=0.9, label="P10 to P90")
    peak = max([*p90, *p50, 1.0])
    for i, (lo, a, b) in enumerate(zip(p10, p50, p90, strict=True)):
        ax.text(max(a, b) + 0.01 * peak, i, f"{plots.usd(a)} (P10 {plots.usd(lo)}, P90 {plots.usd(b)})", va="center",
                fontsize=7.5, color=theme.text)
    ax.set_yticks(y, tenants)
    ax.invert_yaxis()
    ax.set_xlim(0, peak * 1.3)
    ax.set_xlabel("USD over the horizon")
    plots.usd_axis(ax, "x")
    ax.grid(axis="y", visible=False)
    plots.legend_above(fig, ax)
    return fig


def _per_line(theme: Theme, scenarios: Sequence[Scenario]) -> Figure:
    fig, (ax,) = plots.figure(theme, height_in=0.9 + 0.42 * len(scenarios))
    names = [s.name for s in scenarios]
    by_line: dict[str, list[float]] = {line: [s.median_run.cost_by_tier.get(line, 0.0) for s in scenarios]
                                       for line in COST_LINES}
    plots.stacked_cost_bars(ax, theme, names, by_line)
    ax.set_xlabel("USD over the horizon (median run)")
    plots.legend_above(fig, ax)
    return fig


__all__ = ["candidates_table", "daily_band", "figures", "render", "tenant_table", "write_report"]
