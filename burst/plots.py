"""The look both HTML reports share: page shell, themes, colours, number formats and the charts they both draw.

A report is one self-contained HTML file: every plot is drawn twice, for a
light and a dark page, and embedded as data-URI PNGs in a `<picture>` that the
browser picks from by `prefers-color-scheme`; the stylesheet follows the same
switch. Nothing is fetched from the network. Times are UTC.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from burst.extras import missing_extra

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

TIER_COLOURS = {"steady": "#4c72b0", "elastic_on_demand": "#dd8452", "elastic_spot": "#55a868", "hot_pool": "#c44e52"}
"""One colour per cost line, in every chart of both reports."""

TIER_LABELS = {"steady": "steady (on-prem)", "elastic_on_demand": "elastic on-demand", "elastic_spot": "elastic spot",
               "hot_pool": "hot pool (standby)"}

SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
                  "#7f7f7f", "#aec7e8", "#ffbb78")
"""Colours of strategies and scenarios, in their order on the page."""

DPI = 110
WIDTH_IN = 10.4  # about 1150 px: the page's content width at 1280 px


@dataclass(frozen=True)
class Theme:
    """Colours of one page mode."""

    name: str
    background: str
    text: str
    muted: str
    grid: str


LIGHT = Theme("light", "#ffffff", "#1f2328", "#59636e", "#d8dee4")
DARK = Theme("dark", "#0d1117", "#e6edf3", "#9198a1", "#30363d")


def series_colours(names: Sequence[str]) -> dict[str, str]:
    """A colour per name, by position (the same name keeps its colour across one report's charts)."""
    return {n: SERIES_COLOURS[i % len(SERIES_COLOURS)] for i, n in enumerate(names)}


def _rc(theme: Theme) -> dict[str, Any]:
    return {
        "figure.facecolor": theme.background, "axes.facecolor": theme.background, "savefig.facecolor": theme.background,
        "text.color": theme.text, "axes.labelcolor": theme.text, "axes.edgecolor": theme.muted,
        "xtick.color": theme.text, "ytick.color": theme.text, "axes.titlecolor": theme.text,
        "grid.color": theme.grid, "axes.grid": True, "grid.linewidth": 0.6, "axes.axisbelow": True,
        "legend.facecolor": theme.background, "legend.edgecolor": theme.grid, "legend.labelcolor": theme.text,
        "font.size": 9, "axes.titlesize": 9.5, "axes.labelsize": 9, "legend.fontsize": 8,
        "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": DPI,
        "text.parse_math": False,  # labels hold dollar signs
    }


def png(draw: Callable[[Theme], Figure], theme: Theme) -> bytes:
    """The PNG bytes of the figure `draw` makes in `theme` (the figure is closed afterwards)."""
    try:
        import matplotlib
    except ModuleNotFoundError as exc:
        missing = missing_extra(exc, "an HTML report's plots")
        if missing is None:
            raise
        raise missing from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context(cast(Any, _rc(theme))):
        fig = draw(theme)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI)
        plt.close(fig)
    return buf.getvalue()


def data_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def picture(draw: Callable[[Theme], Figure], alt: str) -> str:
    """A `<picture>` of the plot in both page modes, embedded as data URIs (the light one is the `<img>`)."""
    light, dark = png(draw, LIGHT), png(draw, DARK)
    return (f'<figure><picture><source media="(prefers-color-scheme: dark)" srcset="{data_uri(dark)}">'
            f'<img src="{data_uri(light)}" alt="{html.escape(alt)}"></picture></figure>')


def figure(theme: Theme, rows: int = 1, height_in: float = 3.4, *, sharex: bool = False, sharey: bool = False,
           cols: int = 1) -> tuple[Figure, list[Axes]]:
    """A full-width figure with `rows` x `cols` axes (flattened, row by row)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(rows, cols, figsize=(WIDTH_IN, height_in), squeeze=False, sharex=sharex, sharey=sharey,
                             layout="constrained")
    return fig, [ax for row in axes for ax in row]


def utc_time_axis(ax: Axes, label: bool = True) -> None:
    """Date ticks in UTC, concise (the year and month sit at the axis end); `label` names the axis."""
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(tz=UTC, maxticks=9)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC, show_offset=True))  # type: ignore[no-untyped-call]
    if label:
        ax.set_xlabel("time (UTC)")


def dates(values: Iterable[datetime]) -> list[float]:
    """Instants as a date axis plots them (matplotlib's day numbers; `utc_time_axis` labels them in UTC)."""
    import matplotlib.dates as mdates

    return [float(mdates.date2num(v)) for v in values]  # type: ignore[no-untyped-call]


def usd_axis(ax: Axes, which: str = "y", suffix: str = "") -> None:
    """Tick labels as dollars with thousands separators (and `suffix`, e.g. "/h")."""
    from matplotlib.ticker import FuncFormatter

    axis = ax.yaxis if which == "y" else ax.xaxis
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: usd(v, signed=False) + suffix))


DURATION_TICKS_S = (0.0, 1.0, 10.0, 60.0, 600.0, 3600.0, 6 * 3600.0, 86400.0, 7 * 86400.0, 30 * 86400.0)


def duration_axis(ax: Axes, which: str = "x", *, skip: Sequence[float] = ()) -> None:
    """Ticks at round durations (1 s, 10 s, 1 min, 10 min, 1 h, 6 h, 1 d, ...) labelled with their units."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_locator(FixedLocator([t for t in DURATION_TICKS_S if t not in skip]))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: "0" if v == 0 else duration(v)))


def stacked_cost_bars(ax: Axes, theme: Theme, names: Sequence[str], by_line: Mapping[str, Sequence[float]],
                      *, totals: Sequence[float] | None = None) -> None:
    """Horizontal bars, one per name, stacked by cost line, with each bar's total at its end.

    `by_line` maps each cost line to one value per name (USD). Names read down
    the y axis, so long names never run together; segments too narrow for
    their value are left unlabelled.
    """
    import numpy as np

    y = np.arange(len(names))
    left = np.zeros(len(names))
    peak = max((sum(v[i] for v in by_line.values()) for i in range(len(names))), default=0.0) or 1.0
    for line, values in by_line.items():
        vals = np.asarray(values, dtype=float)
        if not vals.any():
            continue
        bars = ax.barh(y, vals, left=left, color=TIER_COLOURS.get(line, theme.muted), label=TIER_LABELS.get(line, line),
                       height=0.62)
        for bar, v in zip(bars, vals, strict=True):
            if v >= 0.12 * peak:
                ax.text(bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2, usd(v), ha="center",
                        va="center", fontsize=7.5, color="white")
        left += vals
    shown = totals if totals is not None else list(left)
    for i, total in enumerate(shown):
        ax.text(left[i] + 0.01 * peak, i, usd(total), va="center", ha="left", fontsize=8.5, color=theme.text)
    ax.set_yticks(y, list(names))
    ax.invert_yaxis()
    ax.set_xlim(0, peak * 1.16)
    usd_axis(ax, "x")
    ax.grid(axis="y", visible=False)


def label_points(fig: Figure, ax: Axes, points: Sequence[tuple[str, float, float]], theme: Theme) -> None:
    """Name each point beside it; a label that would overlap one already placed moves down until it does not."""
    fig.canvas.draw()  # fixes the axes' limits and transform
    placed: list[tuple[float, float, float, float]] = []  # label boxes in display pixels
    height = 11.0 * fig.dpi / 100.0
    for name, x, y in sorted(points, key=lambda p: -p[2]):
        px, py = ax.transData.transform((x, y))
        left, top = px + 7, py + 3
        width = 5.6 * len(name) * fig.dpi / 100.0
        while any(left < r and left + width > lft and top - height < t and top > b for lft, b, r, t in placed):
            top -= height
        placed.append((left, top - height, left + width, top))
        ax.annotate(name, (x, y), xytext=(left - px, top - height - py), textcoords="offset pixels", fontsize=8,
                    color=theme.text, va="bottom", arrowprops={"arrowstyle": "-", "color": theme.muted, "lw": 0.6,
                                                               "shrinkA": 0, "shrinkB": 3}
                    if top - py < -2 else None)


def legend_above(fig: Figure, ax: Axes, ncol: int = 6) -> None:
    """One legend for the figure, above its axes, out of the data's way."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside upper center", ncol=min(ncol, len(handles)), frameon=False)


# ---------------------------------------------------------------- number formats (tables and labels)


def usd(value: float, *, signed: bool = False, cents: bool = False) -> str:
    """Dollars with thousands separators: $51,730 (or $12.34 with `cents`); `signed` writes + and -."""
    if not math.isfinite(value):
        return "n/a"
    digits = 2 if cents else 0
    sign = "-" if value < 0 and round(abs(value), digits) > 0 else ("+" if signed and round(value, digits) > 0 else "")
    return f"{sign}${abs(value):,.{digits}f}"


def duration(seconds: float) -> str:
    """A duration with its unit: 42 s, 7.5 min, 1 h, 3.2 h, 2.1 d (a trailing .0 dropped)."""
    if not math.isfinite(seconds):
        return "n/a"
    s = abs(seconds)
    if s < 60:
        text = f"{s:,.0f} s"
    else:
        value, unit = (s / 60, "min") if s < 3600 else (s / 3600, "h") if s < 48 * 3600 else (s / 86400, "d")
        text = f"{value:,.1f}".removesuffix(".0") + f" {unit}"
    return ("-" if seconds < 0 else "") + text


def ratio(value: float) -> str:
    """A ratio such as 1.23×, or n/a."""
    return f"{value:,.2f}×" if math.isfinite(value) else "n/a"


def number(value: float, digits: int = 0) -> str:
    """A plain number with thousands separators."""
    return f"{value:,.{digits}f}" if math.isfinite(value) else "n/a"


# ---------------------------------------------------------------- the page

STYLE = """
:root{color-scheme:light dark;--bg:#ffffff;--fg:#1f2328;--muted:#59636e;--line:#d8dee4;--head:#f6f8fa;--accent:#0969da}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--line:#30363d;--head:#161b22;--accent:#4493f8}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1200px;padding:20px 24px 48px;background:var(--bg);color:var(--fg);
 font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid var(--line);padding-bottom:4px}
p.lede,p.note,li{color:var(--muted)}p.note{font-size:12.5px;margin:4px 0}
code{font-size:12.5px}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums;font-size:13px;margin:6px 0}
th,td{padding:4px 8px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th{background:var(--head);font-weight:600;vertical-align:bottom;white-space:normal}
th.text,td:first-child,td.text{text-align:left}td.text{white-space:normal}
tr.bound td{color:var(--muted);font-style:italic}
figure{margin:8px 0}img{max-width:100%;height:auto;display:block}
details{margin:8px 0}summary{cursor:pointer;color:var(--muted)}
"""


def page(title: str, lede: str, sections: Sequence[tuple[str, str]]) -> str:
    """A whole report: `title`, a lede paragraph (HTML) and (heading, HTML body) sections, styled for both modes."""
    body = "".join(f"<section><h2>{html.escape(h)}</h2>{content}</section>" for h, content in sections)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f'<meta name="color-scheme" content="light dark"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1><p class=\"lede\">{lede}</p>{body}"
            "</body></html>\n")


def cell(text: str, key: str | None = None, value: float | int | str | None = None, css: str = "") -> str:
    """A table cell; `key` and `value` name the figure it shows (data-key, data-value) so it can be checked."""
    attrs = f' class="{css}"' if css else ""
    if key is not None:
        attrs += f' data-key="{html.escape(key)}" data-value="{html.escape(str(value))}"'
    return f"<td{attrs}>{html.escape(text)}</td>"


def table(headers: Sequence[str], rows: Sequence[str], css: str = "", text_columns: Sequence[int] = (0,)) -> str:
    """A table from header texts and ready-made `<tr>` rows; `text_columns` (by index) are left-aligned."""
    attrs = f' class="{css}"' if css else ""
    head = "".join(f'<th class="text">{html.escape(h)}</th>' if i in text_columns else f"<th>{html.escape(h)}</th>"
                   for i, h in enumerate(headers))
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


__all__ = [
    "DARK", "LIGHT", "TIER_COLOURS", "TIER_LABELS", "Theme", "cell", "data_uri", "dates", "duration", "duration_axis", "figure", "label_points", "legend_above",
    "number", "page", "picture", "png", "ratio", "series_colours", "stacked_cost_bars", "table", "usd", "usd_axis",
    "utc_time_axis",
]
