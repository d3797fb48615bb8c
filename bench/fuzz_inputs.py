"""Fuzzed hostile inputs at every edge of burst, counted: how many were tried, accepted, and refused cleanly.

    python bench/fuzz_inputs.py           # 500 inputs of each kind
    python bench/fuzz_inputs.py --small   # 40 of each (CI keeps the script from rotting)
    python bench/fuzz_inputs.py --json

The kinds: API job submissions (the real app over a real store, beside a
quickstart daemon that ticks after each one), tenant policy files (accepted
ones planned under for two ticks), burst.yaml
files (loaded and checked as `burst run` does; accepted ones run a daemon for
three ticks), and trace files (loaded, then their jobs ticked through the
reconcile loop). Values come from `tests/hostile.py`'s catalogue (huge and
non-finite numbers, 10,000-character strings, wrong types, the inputs of the
hostile-input report) mixed with random ones, seeded. "Refused cleanly" means
a 4xx naming the field, `FILE:LINE: field: message` lines, or rows skipped
with their line; "unclean" is anything else (a 5xx, a traceback, an error
without its place, a value out of bounds accepted, a tick that failed) and is
listed. The exit status is 1 when any input was unclean.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout first; the shared verdicts and catalogue

from hostile import (  # noqa: E402
    API_KEYS,
    CONFIG_KEYS,
    HOSTILE_VALUES,
    POLICY_KEYS,
    Unclean,
    api_body,
    api_verdict,
    config_text,
    config_verdict,
    policy_text,
    policy_verdict,
    tick_under_policy,
    trace_text,
    trace_verdict,
)

KINDS = ("api", "policy", "config", "trace")


def value(rng: random.Random) -> Any:
    """A hostile value: from the catalogue most of the time, else a random number or string."""
    pick = rng.random()
    if pick < 0.6:
        return rng.choice(HOSTILE_VALUES)
    if pick < 0.75:
        return rng.choice([rng.randint(-(2**70), 2**70), rng.randint(-10, 10_000)])
    if pick < 0.9:
        return rng.choice([rng.uniform(-1e6, 1e6), 10 ** rng.uniform(-10, 300)])
    return "".join(rng.choice("0123456789dhms.:-eNaIf x😀") for _ in range(rng.randint(0, 30)))


class Tally:
    """Counts per kind, and the unclean answers."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
        self.unclean: list[tuple[str, str, str]] = []

    def judge(self, kind: str, what: str, check: Callable[[], str]) -> None:
        try:
            verdict = check()
        except Unclean as exc:
            verdict = "unclean"
            self.unclean.append((kind, what[:200], str(exc)[:300]))
        except Exception as exc:  # a crash of the edge itself
            verdict = "unclean"
            self.unclean.append((kind, what[:200], f"{type(exc).__name__}: {str(exc)[:300]}"))
        self.counts[kind]["tried"] += 1
        self.counts[kind][verdict] += 1


REPORTED_API = [  # the hostile-input report's own cases
    {"duration": "99999999999d"}, {"gpu_model": "x" * 1_000_000}, {"command": ["x"] * 1_000_000},
    {"gpu_share": float("nan"), "gpus": 0}, {"gpu_share": float("inf"), "gpus": 0}, {"duration": "9" * 400},
    {"priority": 1000, "tenant": "batch"},
]


def fuzz_api(tally: Tally, rng: random.Random, n: int, home: Path) -> None:
    from fastapi.testclient import TestClient

    from burst.api.app import DaemonView, api_app
    from burst.api.tokens import load_api_tokens
    from burst.runtime import build_runtime, load_run_config

    runtime = build_runtime(load_run_config(None), state_path=home / "burst.db")
    tokens = load_api_tokens(home / "tokens", runtime.reloader.current.keys())
    app = api_app(store_path=runtime.state_path, tokens=tokens, view=DaemonView(60.0), clock=runtime.now,
                  tenants=lambda: set(runtime.reloader.current), policies=lambda: runtime.reloader.current,
                  limits_clock=lambda: runtime.now().timestamp())  # submits a minute apart in simulated time
    headers = {"Authorization": f"Bearer {tokens.admin}", "Content-Type": "application/json"}
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            cases = [dict(c) for c in REPORTED_API]
            while len(cases) < n:
                cases.append({rng.choice(API_KEYS): value(rng) for _ in range(rng.randint(1, 4))})
            for case in cases[:n]:
                body = api_body(case.__getitem__, list(case))

                def check(body: str = body) -> str:
                    verdict = api_verdict(client.post("/v1/jobs", content=body, headers=headers))
                    assert runtime.sim_clock is not None
                    runtime.sim_clock.advance(60)
                    try:
                        runtime.controller.tick()
                    except Exception as exc:
                        raise Unclean(f"the next tick failed: {type(exc).__name__}: {exc}") from exc
                    return verdict

                tally.judge("api", body, check)
    finally:
        runtime.close()


def fuzz_policies(tally: Tally, rng: random.Random, n: int, home: Path) -> None:
    reported = [[(("max_job_runtime",), 10**400)], [(("max_job_runtime",), "9" * 400)], [(("priority",), 2**63)],
                [(("quota", "steady_gpus"), 2**63)], [(("max_job_runtime",), 1e30)]]
    cases = reported + [[(rng.choice(POLICY_KEYS), value(rng)) for _ in range(rng.randint(1, 5))]
                        for _ in range(max(0, n - len(reported)))]
    for i, case in enumerate(cases[:n]):
        path = home / f"p{i}" / "batch.yaml"
        path.parent.mkdir()
        path.write_text(policy_text(case))
        tally.judge("policy", path.read_text(), lambda path=path: policy_verdict(path, tick=tick_under_policy))


def fuzz_configs(tally: Tally, rng: random.Random, n: int, home: Path) -> None:
    from burst.runtime import build_runtime, quickstart_config_path

    quickstart = quickstart_config_path().read_text()
    labels = [label for _, label in CONFIG_KEYS]
    reported = [[(labels.index("loop_interval"), 10**12)], [(labels.index("gpus_per_node"), 10**8)],
                [(labels.index("sim_start"), 1.5)], [(labels.index("base_jobs_per_hour"), 1e30)],
                [(labels.index("burst_window"), "x" * 10_000)]]
    cases = reported + [[(rng.randrange(len(CONFIG_KEYS)), value(rng)) for _ in range(rng.randint(1, 3))]
                        for _ in range(max(0, n - len(reported)))]

    for i, case in enumerate(cases[:n]):
        folder = home / f"c{i}"
        folder.mkdir()
        path = folder / "burst.yaml"
        path.write_text(config_text(quickstart, case))

        def tick(config: Any, folder: Path = folder) -> None:
            runtime = build_runtime(config.with_base_dir(quickstart_config_path().parent), state_path=folder / "s.db")
            try:
                for _ in range(3):
                    assert runtime.sim_clock is not None
                    try:
                        runtime.controller.tick()
                    except Exception as exc:
                        raise Unclean(f"a tick failed: {type(exc).__name__}: {exc}") from exc
                    runtime.sim_clock.advance(config.loop_interval)
            finally:
                runtime.close()

        changed = "\n".join(sorted(set(path.read_text().splitlines()) - set(quickstart.splitlines())))
        tally.judge("config", changed, lambda path=path, tick=tick: config_verdict(path, tick=tick))


def fuzz_traces(tally: Tally, rng: random.Random, n: int, home: Path) -> None:
    from builders import T0
    from test_reconcile import build

    from burst.state import Store
    from burst.workloads.queue import MemoryQueue
    from providers.sim import ManualClock

    reported = [[["a", 0, 1e15, 1]], [["b", 0, 60, 10**6]]]
    cases = reported + [[[value(rng) if rng.random() < 0.4 else rng.choice(["0", "60", "1", "8"])
                          for _ in range(rng.randint(0, 5))] for _ in range(rng.randint(1, 8))]
                        for _ in range(max(0, n - len(reported)))]
    for i, rows in enumerate(cases[:n]):
        path = home / f"t{i}.csv"
        path.write_text(trace_text(rows), encoding="utf-8", errors="surrogatepass")

        def check(path: Path = path) -> str:
            verdict, jobs = trace_verdict(path)
            clock = ManualClock(T0)
            queue = MemoryQueue()
            controller, _, _ = build(Store(":memory:"), clock, queue=queue)
            for job in jobs[:20]:
                queue.submit(dataclasses.replace(job, submitted_at=T0))
            try:
                controller.tick()
                clock.advance(600)
                controller.tick()
            except Exception as exc:
                raise Unclean(f"a tick over the loaded jobs failed: {type(exc).__name__}: {exc}") from exc
            return verdict

        tally.judge("trace", path.read_text(errors="replace")[:300], check)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="40 inputs of each kind")
    parser.add_argument("-n", type=int, default=None, help="inputs of each kind (default 500, 40 with --small)")
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument("--json", dest="as_json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    n = args.n if args.n is not None else (40 if args.small else 500)
    rng = random.Random(args.seed)
    tally = Tally()
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="burst-fuzz-") as tmp:
        for kind, run in (("api", fuzz_api), ("policy", fuzz_policies), ("config", fuzz_configs),
                          ("trace", fuzz_traces)):
            home = Path(tmp) / kind
            home.mkdir()
            started = time.perf_counter()
            run(tally, rng, n, home)
            seconds[kind] = time.perf_counter() - started
    rows = [{"kind": kind, "tried": c["tried"], "accepted": c["accepted"], "refused_cleanly": c["refused"],
             "unclean": c["unclean"], "seconds": round(seconds[kind], 1)} for kind, c in tally.counts.items()]
    if args.as_json:
        print(json.dumps({"seed": args.seed, "kinds": rows,
                          "unclean": [{"kind": k, "input": w, "why": y} for k, w, y in tally.unclean]}, indent=2))
    else:
        print(f"hostile inputs, seed {args.seed}")
        print(f"{'kind':<8} {'tried':>6} {'accepted':>9} {'refused cleanly':>16} {'unclean':>8} {'seconds':>8}")
        for r in rows:
            print(f"{r['kind']:<8} {r['tried']:>6} {r['accepted']:>9} {r['refused_cleanly']:>16} {r['unclean']:>8} "
                  f"{r['seconds']:>8}")
        for kind, what, why in tally.unclean[:20]:
            print(f"UNCLEAN {kind}: {why}\n    input: {what!r}")
    return 1 if tally.unclean else 0


if __name__ == "__main__":
    sys.exit(main())
