"""Benchmark: `bench/strategies.py --speed` in several checkouts, run in turn or together, with each run's wall and CPU time.

    python bench/speed_side_by_side.py BASE_DIR NEW_DIR [MORE_DIR ...] [--rounds 2] [--workers 2] [--json] [--small]
    python bench/speed_side_by_side.py BASE_DIR NEW_DIR --together     # each round runs them at once, one core each
    python bench/speed_side_by_side.py DIR --store-writes               # DIR with and without its per-tick store writes

Each DIR is a checkout of burst (e.g. `git worktree add --detach /tmp/base
<commit>`), the first the base the others are compared with. Each run is
`python bench/strategies.py --speed` started in that directory with this
interpreter and `PYTHONPATH` set to it, so each replays its own code (not the
installed burst). The runs take turns (base, new, ..., base, new, ...), so
load from anything else on the machine falls on all alike. Each run's user and
system CPU are its process tree's (`resource.getrusage(RUSAGE_CHILDREN)` before
and after: the workers are children of the run). On a loaded machine the CPU
figures are the steadier ones: wall time also counts the waits for a core.

On a shared machine whose pace drifts between runs, turns are not enough: two
runs of the same pair a few minutes apart have differed by 15% in their ratio.
`--together` starts every checkout of a round at the same moment, each with
`--workers 1` (give the machine at least as many cores as checkouts), so any
drift falls on all of them at once; each run's CPU is its own process tree's
(`os.wait4`).

`--store-writes` takes one checkout and times, together as above, its
`--speed` run without the loop's per-tick store writes (the journal of job
actions and the controller's memory, `bench/without_store_writes.py`) as the
base, and as it is: the ratio is what those writes cost.

Prints one row per run and each checkout's ratios over the base of the median wall and user CPU; writes
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

STRATEGIES = "bench/strategies.py"
WITHOUT_STORE_WRITES = "bench/without_store_writes.py"
Run = tuple[Path, str]
"""A checkout and the script run there (`STRATEGIES`, or `WITHOUT_STORE_WRITES`)."""


def run_once(checkout: Path, workers: int, scope: str = "--speed", script: str = STRATEGIES) -> dict[str, Any]:
    """Wall, user and system seconds of one `--speed` run of `script` in `checkout`, and the wall seconds it
    printed per strategy (the rest of its output is discarded)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}  # its own burst, not the installed one
    done = subprocess.run([sys.executable, script, scope, "--workers", str(workers)],
                          cwd=checkout, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {script} {scope} exited {done.returncode}:\n{done.stderr[-2000:]}")
    per = next((line for line in done.stderr.splitlines() if " wall (" in line), "")  # each strategy's wall
    return {"wall_s": wall, "user_s": after.ru_utime - before.ru_utime, "sys_s": after.ru_stime - before.ru_stime,
            "strategies": per[per.find("(") + 1:per.rfind(")")] if per else ""}


def run_together(runs: list[Run], scope: str = "--speed") -> list[dict[str, Any]]:
    """`run_once` for every run at the same time, each with one worker: one dict per run, in order."""
    with tempfile.TemporaryDirectory() as tmp:
        started: dict[int, tuple[int, subprocess.Popen[bytes], Path]] = {}
        t0 = time.perf_counter()
        for i, (checkout, script) in enumerate(runs):
            env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
            err = Path(tmp) / f"{i}.err"
            with err.open("wb") as sink:
                proc = subprocess.Popen([sys.executable, script, scope, "--workers", "1"], cwd=checkout,
                                        env=env, stdout=subprocess.DEVNULL, stderr=sink)
            started[proc.pid] = (i, proc, err)
        out: list[dict[str, Any]] = [{} for _ in runs]
        while started:
            pid, status, usage = os.wait4(-1, 0)
            if pid not in started:
                continue
            i, proc, err = started.pop(pid)
            text = err.read_text(errors="replace")
            if os.waitstatus_to_exitcode(status) != 0:
                raise SystemExit(f"{runs[i][0]}: {runs[i][1]} {scope} exited "
                                 f"{os.waitstatus_to_exitcode(status)}:\n{text[-2000:]}")
            per = next((line for line in text.splitlines() if " wall (" in line), "")
            out[i] = {"wall_s": time.perf_counter() - t0, "user_s": usage.ru_utime, "sys_s": usage.ru_stime,
                      "strategies": per[per.find("(") + 1:per.rfind(")")] if per else ""}
            proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkouts", type=Path, nargs="+", metavar="DIR",
                        help="burst checkouts, the base first; each round runs them in this order")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each checkout (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="--workers of each run (default 2)")
    parser.add_argument("--json", action="store_true", help="print the runs and ratios as one JSON object")
    parser.add_argument("--small", action="store_true", help="time `--small` runs instead (a check of this script)")
    parser.add_argument("--together", action="store_true",
                        help="run each round's checkouts at the same time, one worker each (see the module doc)")
    parser.add_argument("--store-writes", action="store_true",
                        help="one checkout, with and without its per-tick store writes, together (see the module doc)")
    args = parser.parse_args()
    if args.store_writes and len(args.checkouts) != 1:
        parser.error("--store-writes takes one checkout")
    if not args.store_writes and len(args.checkouts) < 2:
        parser.error("give at least two checkouts: the base and one to compare with it")
    for checkout in args.checkouts:
        if not (checkout / STRATEGIES).is_file():
            parser.error(f"{checkout}: no {STRATEGIES} there (expected a burst checkout)")
        if args.store_writes and not (checkout / WITHOUT_STORE_WRITES).is_file():
            parser.error(f"{checkout}: no {WITHOUT_STORE_WRITES} there (a checkout from before --store-writes)")
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if args.store_writes:
        checkout = args.checkouts[0]
        specs: list[Run] = [(checkout, WITHOUT_STORE_WRITES), (checkout, STRATEGIES)]
        labels = [f"{checkout} without store writes", str(checkout)]
    else:
        specs = [(c, STRATEGIES) for c in args.checkouts]
        labels = [str(c) for c in args.checkouts]
    together_each_round = args.together or args.store_writes
    runs: list[dict[str, Any]] = []
    scope = "--small" if args.small else "--speed"
    for round_ in range(1, args.rounds + 1):
        together = run_together(specs, scope) if together_each_round else None
        for i, (label, (checkout, script)) in enumerate(zip(labels, specs, strict=True)):
            figures = together[i] if together is not None else run_once(checkout, args.workers, scope, script)
            runs.append({"round": round_, "checkout": label, **figures})
            if not args.json:
                print(f"round {round_} wall {figures['wall_s']:7.1f} s  user {figures['user_s']:7.1f} s  "
                      f"sys {figures['sys_s']:5.1f} s  {label}\n    {figures['strategies']}", flush=True)

    def median(label: str, key: str) -> float:
        return statistics.median(float(r[key]) for r in runs if r["checkout"] == label)

    ratios = {label: {key: median(label, key) / median(labels[0], key) for key in ("wall_s", "user_s")}
              for label in labels[1:]}
    if args.json:
        print(json.dumps({"base": labels[0], "runs": runs, "ratio_over_base": ratios}, indent=2))
    else:
        for label, r in ratios.items():
            print(f"{label} over {labels[0]}, medians: wall x{r['wall_s']:.3f}, user CPU x{r['user_s']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
