"""`burst cost --report`'s figures, drawn from a projection whose history has a daily cycle.

The checks read the matplotlib artists the report draws: the forecast and
the sampled demand paths follow the cycle within each day, every legend sits
clear of the plotted data, and every label lies inside its figure. The page
itself is rendered in headless Chromium (skipped without it, except where
BURST_REQUIRE_BROWSER=1).
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from burst import plots
from burst.model import Policy
from burst.projection.arrivals import JobTemplate
from burst.projection.demand import fit_forecast
from burst.projection.project import Projection, project
from burst.projection.report import figures, write_report
from forecasting.models import DemandSeries
from tests.test_projection import NO_STATS, T0, tiny_setup
from tests.test_reports import _browser, _not_blank

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from report_screenshots import screenshot  # noqa: E402

HISTORY_DAYS = 8
HORIZON_S = 2 * 86400.0
AMPLITUDE = 12.0  # GPUs either side of the daily mean


def _cycle(hours: int) -> tuple[float, ...]:
    return tuple(16.0 + AMPLITUDE * math.sin(2 * math.pi * h / 24) for h in range(hours))


def _projected(horizon_s: float) -> tuple[Projection, DemandSeries]:
    """A projection over `horizon_s` fitted on eight days of a demand that swings 4 to 28 GPUs every day."""
    hours = HISTORY_DAYS * 24
    history = DemandSeries("all", "any", tuple(T0 + timedelta(hours=h) for h in range(hours)), _cycle(hours), 3600.0)
    forecast, dependence = fit_forecast(history, horizon_s)
    setup = tiny_setup(a=Policy(tenant="a"), b=Policy(tenant="b"))
    mix = [JobTemplate("a", 8, 3600.0), JobTemplate("b", 4, 2 * 3600.0)]
    start = T0 + timedelta(hours=hours)
    projection = project(setup, NO_STATS, forecast, mix, start=start, horizon_s=horizon_s, strategy="burst-no-forecast",
                         dependence=dependence, paths=20, history_s=history.history_s)
    return projection, history


@pytest.fixture(scope="module")
def cycled() -> tuple[Projection, DemandSeries]:
    """Two days ahead: daily cost bars."""
    return _projected(HORIZON_S)


@pytest.fixture(scope="module")
def short() -> tuple[Projection, DemandSeries]:
    """Six hours ahead: hourly cost bars, and the projection's start near the demand plot's right edge."""
    return _projected(6 * 3600.0)


def _draw(projected: tuple[Projection, DemandSeries]) -> Iterator[dict[str, Any]]:
    """Each report figure, laid out as the report saves it (its theme, constrained layout done)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = {}
    with plt.rc_context(plots._rc(plots.LIGHT)):
        for name, draw in figures(*projected).items():
            fig = draw(plots.LIGHT)
            fig.canvas.draw()
            out[name] = fig
        yield out
    for fig in out.values():
        plt.close(fig)


@pytest.fixture
def drawn(cycled: tuple[Projection, DemandSeries]) -> Iterator[dict[str, Any]]:
    yield from _draw(cycled)


@pytest.fixture(params=["2d", "6h"])
def any_drawn(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    yield from _draw(request.getfixturevalue("cycled" if request.param == "2d" else "short"))


def test_the_forecast_and_sampled_paths_follow_the_daily_cycle(drawn: dict[str, Any]) -> None:
    ax = drawn["demand"].axes[0]
    lines = {gid: [ln for ln in ax.get_lines() if ln.get_gid() == gid] for gid in ("forecast-p50", "sampled-path")}
    assert len(lines["forecast-p50"]) == 1 and len(lines["sampled-path"]) == 5
    for line in lines["forecast-p50"] + lines["sampled-path"]:
        by_day: dict[int, list[float]] = defaultdict(list)
        for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True):
            by_day[math.floor(x)].append(float(y))
        whole = [v for v in by_day.values() if len(v) >= 24]
        assert len(whole) == 2, "two whole days drawn"
        for values in whole:  # the history swings 24 GPUs within a day; a flat path swings none
            assert max(values) - min(values) >= AMPLITUDE, (line.get_gid(), values)


def _texts(fig: Any) -> list[Any]:
    """Every label the figure shows: titles, axis labels, tick labels in view, annotations, legend entries."""
    out = list(fig.texts)
    for ax in fig.axes:
        out += [ax.title, ax.xaxis.label, ax.yaxis.label, ax.xaxis.get_offset_text(), *ax.texts]
        for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            lo, hi = min(lo, hi), max(lo, hi)
            out += [t for loc, t in zip(axis.get_ticklocs(), axis.get_ticklabels(), strict=True) if lo <= loc <= hi]
    for legend in _legends(fig):
        out += legend.get_texts()
    return [t for t in out if t.get_visible() and t.get_text()]


def _legends(fig: Any) -> list[Any]:
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]


def _data_points(ax: Any) -> list[tuple[float, float]]:
    """Display coordinates of the plotted data: line vertices, band and bar corners, value labels' corners."""
    points: list[tuple[float, float]] = []
    for line in ax.get_lines():
        if line.get_gid() is not None or line.get_label() and not line.get_label().startswith("_"):
            points += [tuple(p) for p in line.get_transform().transform(line.get_xydata())]
    for coll in ax.collections:
        for path in coll.get_paths():
            points += [tuple(p) for p in coll.get_transform().transform(path.vertices)]
    renderer = ax.figure.canvas.get_renderer()
    for artist in [*ax.patches, *ax.texts]:
        box = artist.get_window_extent(renderer)
        points += [(box.x0, box.y0), (box.x1, box.y1), (box.x0, box.y1), (box.x1, box.y0)]
    return points


@pytest.mark.parametrize("name", ["demand", "cost", "tenants", "lines"])
def test_every_label_lies_inside_the_figure_and_the_legend_clear_of_the_data(any_drawn: dict[str, Any],
                                                                             name: str) -> None:
    fig = any_drawn[name]
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox
    for text in _texts(fig):
        box = text.get_window_extent(renderer)
        assert (box.x0 >= frame.x0 - 0.5 and box.x1 <= frame.x1 + 0.5 and box.y0 >= frame.y0 - 0.5
                and box.y1 <= frame.y1 + 0.5), f"{name}: {text.get_text()!r} at {box.bounds} outside {frame.bounds}"
    legends = _legends(fig)
    assert legends, f"{name}: no legend"
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            inside = [p for p in _data_points(ax) if box.x0 < p[0] < box.x1 and box.y0 < p[1] < box.y1]
            assert not inside, f"{name}: the legend at {box.bounds} covers data at {inside[:3]}"


@pytest.mark.slow
def test_the_cost_report_renders_in_chromium(cycled: tuple[Projection, DemandSeries], tmp_path: Path) -> None:
    _browser()
    page = write_report(cycled[0], tmp_path / "report", history=cycled[1])
    _not_blank(screenshot(page, tmp_path / "light.png", height=2400))
    text = page.read_text()
    assert "thin history" not in text  # eight days: a week and more
    assert text.count('<img src="data:image/png;base64,') == 4
