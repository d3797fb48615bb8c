"""Make both HTML reports from a stated window of a real trace and screenshot them in headless Chromium.

    python scripts/report_screenshots.py --out /work/screens

Windows (from ../shared/data/traces, the repository's data directory):

- `burst simulate --report`: itp-cluster02.csv, two days of submissions from
  the first job (2021-03-04), every strategy;
- `burst cost --report`: history itp-cluster02.csv up to 2021-03-20T00:00Z,
  a 3-day horizon, strategy burst-no-forecast, with three what-ifs (spot
  allowed for every tenant; 8 more on-prem GPUs; a fixed hot pool of 2 nodes).

Writes into OUT (which should be outside the repository): `simulate/index.html`,
`cost/index.html`, each `--json` output, and `simulate-light.png`,
`simulate-dark.png`, `cost-light.png`, `cost-dark.png` (the whole page at
1280 px wide, in the browser's light and dark modes). Needs Debian's
`chromium` (`apt-get install chromium`). `screenshot` is also what the report
tests render with.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = "itp-cluster02.csv"
SIMULATE_DAYS = 2.0
COST_AT = "2021-03-20T00:00:00Z"
COST_HORIZON = "3d"
WHAT_IFS = {"spot-for-all.yaml": "name: spot-for-all\nspot: true\n",
            "more-onprem.yaml": "name: more-onprem\nsteady_gpus_delta: 8\n",
            "hot-pool.yaml": "name: hot-pool-2\nhot_pool_nodes: 2\n"}
WIDTH = 1280


def find_chromium() -> str | None:
    """The Chromium binary on PATH (Debian's `chromium`, or another build's name), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(page: Path, png: Path, *, dark: bool = False, width: int = WIDTH, height: int = 9000,
               timeout_s: float = 120.0) -> Path:
    """Render `page` in headless Chromium (no network, a fresh profile) and save the window as `png`.

    The window is `height` pixels tall; `trim` cuts the blank below the page.
    `dark` asks for the browser's dark mode (`prefers-color-scheme: dark`).
    Raises RuntimeError when Chromium is missing or fails.
    """
    binary = find_chromium()
    if binary is None:
        raise RuntimeError("chromium not found: apt-get install chromium")
    with tempfile.TemporaryDirectory(prefix="burst-chromium-") as profile:
        command = [binary, "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
                   "--disable-background-networking", "--disable-component-update", "--disable-sync",
                   "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={width},{height}",
                   f"--screenshot={png}"]
        if os.geteuid() == 0:
            command.append("--no-sandbox")  # Chromium refuses to run its sandbox as root
        if dark:
            command.append("--force-dark-mode")
        command.append(page.resolve().as_uri())
        png.unlink(missing_ok=True)
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        if done.returncode != 0 or not png.exists():
            raise RuntimeError(f"chromium exited {done.returncode} without a screenshot: {done.stderr[-2000:]}")
    return png


def trim(png: Path) -> tuple[int, int]:
    """Cut the rows below the page's last non-background row (the window is taller than the page); new size."""
    from PIL import Image, ImageChops

    image = Image.open(png).convert("RGB")
    background = Image.new("RGB", image.size, image.getpixel((image.width - 1, image.height - 1)))
    box = ImageChops.difference(image, background).getbbox()
    bottom = min(image.height, (box[3] if box else 1) + 24)
    image.crop((0, 0, image.width, bottom)).save(png)
    return image.width, bottom


def _burst(*args: str, out: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "burst.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"burst {' '.join(args)} failed:\n{done.stderr}")
    out.write_text(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the reports and screenshots")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data", help="the data directory")
    args = parser.parse_args()
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    trace = args.data / "traces" / TRACE
    _burst("simulate", "--trace", str(trace), "--days", f"{SIMULATE_DAYS:g}", "--json", "--report",
           str(out / "simulate"), out=out / "simulate.json")
    what_ifs = []
    for name, text in WHAT_IFS.items():
        (out / name).write_text(text)
        what_ifs += ["--what-if", str(out / name)]
    _burst("cost", "--history", str(trace), "--at", COST_AT, "--horizon", COST_HORIZON, "--strategy",
           "burst-no-forecast", *what_ifs, "--json", "--report", str(out / "cost"), out=out / "cost.json")
    for report in ("simulate", "cost"):
        for mode in ("light", "dark"):
            png = screenshot(out / report / "index.html", out / f"{report}-{mode}.png", dark=mode == "dark")
            width, height = trim(png)
            print(f"{png}: {width}x{height}")


if __name__ == "__main__":
    main()
