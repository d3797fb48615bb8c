"""Benchmark: one background refit of 200 demand series, and how long the loop's forecast read takes meanwhile.

    python bench/forecast_refit.py            # 200 series
    python bench/forecast_refit.py --small    # 5 series (CI keeps the script from rotting)

The series are real: the Helios "Earth" virtual clusters (running + pending
GPUs), each cut into 14-day windows starting 8 hours apart (laid on one common
clock), hourly, as 200 (tenant, GPU model) series. A `ForecastService` refits them in its
background thread while this script calls `forecasts()` every 10 ms, as the
reconcile loop would; it prints the refit's wall time and the slowest read.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from datetime import timedelta

from burst.model import DemandPoint
from burst.settings import data_dir
from forecasting.series import load_series
from forecasting.service import ForecastService

WINDOW_H = 14 * 24


def points(count: int) -> list[DemandPoint]:
    """`count` series of demand points cut from the Helios VCs (see the module doc)."""
    vcs = [load_series(p, value_expr="running_gpu_num+pending_gpu_num").series
           for p in sorted((data_dir() / "demand" / "helios-earth").glob("vc*.csv"))]
    out: list[DemandPoint] = []
    for i in range(count):
        vc = vcs[i % len(vcs)]
        offset = (i // len(vcs)) * 8  # hours into the VC's month: each window starts later
        for k in range(WINDOW_H):
            v = vc.values[(offset + k) % len(vc.values)]
            out.append(DemandPoint(at=vc.timestamps[0] + timedelta(hours=k), tenant=f"t{i:03d}",
                                   gpu_model=vc.tenant, running_gpus=v, pending_gpus=0.0))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="5 series")
    args = parser.parse_args()
    count = 5 if args.small else 200
    history = points(count)
    now = max(p.at for p in history) + timedelta(hours=1)
    service = ForecastService(lambda _now: history, background=True)
    t0 = time.perf_counter()
    service.forecasts(now)
    slowest = 0.0
    reads = 0
    while service.refitting:
        r0 = time.perf_counter()
        service.forecasts(now)
        slowest = max(slowest, time.perf_counter() - r0)
        reads += 1
        time.sleep(0.01)
    service.wait()
    wall = time.perf_counter() - t0
    served = service.served_by()
    models = Counter(m.split(" (")[0] for m in served.values())
    print(f"refit of {len(served)} series: {wall:.1f} s wall ({wall / max(1, len(served)):.2f} s per series), "
          f"served by {', '.join(f'{m} x{n}' for m, n in sorted(models.items()))}; {reads} forecast reads meanwhile, slowest {slowest * 1000:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
