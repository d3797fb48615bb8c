"""`burst simulate --report` and `burst cost --report`: self-contained pages whose figures are the `--json` ones,
rendered in headless Chromium (Debian's `chromium`) in light and dark mode.

Without Chromium the browser tests skip, except where BURST_REQUIRE_BROWSER=1
(as `.ci/run` sets it): there a missing browser fails them.
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from burst import plots
from burst.cli import main
from burst.settings import data_dir

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from report_screenshots import find_chromium, screenshot  # noqa: E402

pytestmark = pytest.mark.slow  # each fixture replays a real trace and draws every plot twice (about 20 s)

TRACE = data_dir() / "traces" / "itp-cluster02.csv"
STRATEGIES = ("burst-no-forecast", "reactive", "static-p50", "floor", "oracle")


class Page(HTMLParser):
    """What the checks read from a report: image sources, links, scripts, and the cells naming a figure."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []  # every <img src> and <source srcset>
        self.links: list[str] = []  # every href and src that is not an image
        self.scripts = 0
        self.rows: list[dict[str, str]] = []  # per <tr>, data-key -> data-value
        self.texts: list[dict[str, str]] = []  # per <tr>, data-key -> shown text
        self._key: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "img":
            self.images.append(a.get("src", ""))
        elif tag == "source":
            self.images.append(a.get("srcset", ""))
        elif tag in ("script", "link", "iframe", "object", "embed"):
            self.scripts += 1
        for attr in ("href", "src"):
            if attr in a and tag != "img":
                self.links.append(a[attr])
        if tag == "tr":
            self.rows.append({})
            self.texts.append({})
        if tag == "td" and "data-key" in a:
            self.rows[-1][a["data-key"]] = a["data-value"]
            self.texts[-1][a["data-key"]] = ""
            self._key = a["data-key"]

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._key = None

    def handle_data(self, data: str) -> None:
        if self._key is not None:
            self.texts[-1][self._key] += data


def parse(path: Path) -> tuple[str, Page]:
    text = path.read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    return text, page


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """One `burst simulate --json --report` run on six hours of a real trace: the report and the JSON it printed."""
    out = tmp_path_factory.mktemp("sim-report")
    args = ["simulate", "--trace", str(TRACE), "--days", "0.25", "--json", "--report", str(out)]
    for name in STRATEGIES:
        args += ["--strategy", name]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out / "index.html", json.loads(result.stdout)


@pytest.fixture(scope="module")
def projected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object], dict[str, str]]:
    """One `burst cost --json --report` run with two what-ifs: the report, its JSON and what each what-if changes."""
    out = tmp_path_factory.mktemp("cost-report")
    (out / "no-spot.yaml").write_text("name: no-spot\nspot: false\n")
    (out / "more.yaml").write_text("name: more-onprem\nsteady_gpus_delta: 8\n")
    result = CliRunner().invoke(main, [
        "cost", "--history", str(TRACE), "--at", "2021-03-20T00:00:00Z", "--horizon", "1d", "--strategy",
        "burst-no-forecast", "--workers", "1", "--paths", "20", "--what-if", str(out / "no-spot.yaml"), "--what-if",
        str(out / "more.yaml"),
        "--json", "--report", str(out / "report")])
    assert result.exit_code == 0, result.output
    changes = {"no-spot": "no spot: spot groups removed, their work goes on demand",
               "more-onprem": "+8 on-prem GPUs in the steady tier (whole nodes)"}
    return out / "report" / "index.html", json.loads(result.stdout), changes


def _assert_self_contained(path: Path) -> int:
    """Every image is a data-URI PNG that decodes to a non-empty picture; nothing else is loaded. Returns images."""
    text, page = parse(path)
    assert page.images and page.scripts == 0 and page.links == []
    assert "http://" not in text and "https://" not in text and "url(" not in text
    for src in page.images:
        assert src.startswith("data:image/png;base64,"), src[:60]
        data = base64.b64decode(src.removeprefix("data:image/png;base64,"), validate=True)
        image = Image.open(io.BytesIO(data))
        assert image.format == "PNG" and image.width > 200 and image.height > 100
        assert len(image.convert("RGB").getcolors(1 << 24) or ()) > 8  # something is drawn on it
    return len(page.images)


def test_the_simulate_summary_shows_the_json_figures_of_the_same_run(simulated: tuple[Path, dict]) -> None:
    path, data = simulated
    text, page = parse(path)
    strategies = data["strategies"]
    assert set(strategies) == set(STRATEGIES)
    rows = {r["strategy"]: (r, t) for r, t in zip(page.rows, page.texts, strict=True) if "strategy" in r and "cost_usd" in r}
    assert list(rows) == list(STRATEGIES)  # every strategy, in the run's order
    oracle, reactive = strategies["oracle"]["cost_usd"], strategies["reactive"]["cost_usd"]
    for name, (values, shown) in rows.items():
        r = strategies[name]
        for key in ("cost_usd", "wait_p95_s", "slo_violations", "jobs_completed", "lost_gpu_hours", "onprem_utilization"):
            assert float(values[key]) == r[key], (name, key)
        assert float(values["vs_oracle"]) == pytest.approx(r["cost_usd"] / oracle)
        assert float(values["vs_reactive"]) == pytest.approx(r["cost_usd"] / reactive)
        assert shown["cost_usd"] == plots.usd(r["cost_usd"])  # shown with units and thousands separators
        assert shown["wait_p95_s"] == plots.duration(r["wait_p95_s"])
        assert shown["jobs_completed"] == f"{r['jobs_completed']:,} / {r['jobs']:,}"
        assert shown["vs_oracle"] == plots.ratio(r["cost_usd"] / oracle)
    gap_rows = [r for r in page.rows if "structural" in r]
    assert {r["strategy"] for r in gap_rows} == set(STRATEGIES) - {"oracle"}
    for r in gap_rows:
        for part, value in strategies[r["strategy"]]["cost_gap"].items():
            assert float(r[part]) == value
    assert rows["oracle"][1]["vs_oracle"] == "1.00×"
    assert not [t for shown in page.texts for t in shown.values() if "e+" in t or "e-" in t]  # no %g notation


def test_the_cost_report_shows_every_what_if_beside_the_baseline_with_its_change(projected: tuple[Path, dict, dict]) -> None:
    path, data, changes = projected
    text, page = parse(path)
    options = {r["option"]: r for r in page.rows if "option" in r}
    assert list(options) == ["baseline", *data["what_if"]] == ["baseline", "no-spot", "more-onprem"]
    figures = {"baseline": data, **data["what_if"]}
    for name, row in options.items():
        for q in ("p10", "p50", "p90"):
            assert float(row[f"total_usd.{q}"]) == figures[name]["total_usd"][q]
        assert figures[name]["total_usd"]["p10"] <= figures[name]["total_usd"]["p50"] <= figures[name]["total_usd"]["p90"]
    for change in changes.values():
        assert change in text
    assert "Demand: history and forecast" in text and "P10–P90 of each day" in text


def test_both_reports_are_self_contained_pngs(simulated: tuple[Path, dict], projected: tuple[Path, dict, dict]) -> None:
    # a light and a dark picture of: tradeoff, frontier, waterfall, gap bars, cost by line, cost rate, capacity,
    # pending, CDF
    assert _assert_self_contained(simulated[0]) == 2 * 9
    # demand, cost per day, per tenant, per line
    assert _assert_self_contained(projected[0]) == 2 * 4


def _browser() -> None:
    if find_chromium() is None:
        if os.environ.get("BURST_REQUIRE_BROWSER") == "1":
            pytest.fail("BURST_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)")
        pytest.skip("no chromium on PATH (apt-get install chromium); .ci/run installs it and requires it")


def _not_blank(png: Path) -> tuple[tuple[int, int, int], float]:
    """The page's background colour and the share of pixels that differ from it; asserts the page is drawn."""
    image = Image.open(png).convert("RGB")
    assert image.width == 1280
    background = image.getpixel((2, 2))
    assert isinstance(background, tuple)
    colours = image.getcolors(1 << 24) or []
    drawn = 1.0 - sum(n for n, c in colours if c == background) / (image.width * image.height)
    assert drawn > 0.05, f"{png}: only {drawn:.1%} of the screenshot differs from the background"
    assert len(colours) > 500  # text, tables and plots, not a flat page
    return background, drawn


def _luminance(rgb: tuple[int, int, int]) -> float:
    return (0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]) / 255.0


@pytest.mark.slow
@pytest.mark.parametrize("report", ["simulate", "cost"])
def test_each_report_renders_in_chromium_in_light_and_dark_mode(
    report: str, simulated: tuple[Path, dict], projected: tuple[Path, dict, dict], tmp_path: Path
) -> None:
    _browser()
    page = simulated[0] if report == "simulate" else projected[0]
    light, light_share = _not_blank(screenshot(page, tmp_path / "light.png", height=2400))
    dark, dark_share = _not_blank(screenshot(page, tmp_path / "dark.png", height=2400, dark=True))
    assert _luminance(light) > 0.9 and _luminance(dark) < 0.1  # the page follows prefers-color-scheme
    for png, background in ((tmp_path / "light.png", light), (tmp_path / "dark.png", dark)):
        image = Image.open(png).convert("RGB")
        margin = image.crop((image.width - 30, 0, image.width, image.height)).getcolors(1 << 24) or []
        assert [c for _, c in margin] == [background], f"{png}: something runs past the page at 1280 px"
    assert not math.isclose(light_share, 0.0) and not math.isclose(dark_share, 0.0)
