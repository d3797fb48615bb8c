"""Fuzzing every edge that takes user input with hostile values (hypothesis, bounded examples).

For the API (the real app over a real store, beside a real quickstart daemon),
the policy loader, the config loader (with the daemon's own checks) and the
trace loader: no 5xx, no traceback, every refusal carries its field or
FILE:LINE, nothing out of bounds is accepted, and the daemon's next tick
succeeds. `tests/hostile.py` holds the verdicts; `bench/fuzz_inputs.py` counts
them over many more inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from builders import T0
from fastapi.testclient import TestClient
from hostile import (
    API_KEYS,
    CONFIG_KEYS,
    HOSTILE_VALUES,
    POLICY_KEYS,
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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_reconcile import build

from burst.api.app import DaemonView, api_app
from burst.api.tokens import load_api_tokens
from burst.runtime import Runtime, build_runtime, load_run_config, quickstart_config_path
from burst.state import Store
from burst.workloads.queue import MemoryQueue
from providers.sim import ManualClock

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

hostile = st.one_of(
    st.sampled_from(HOSTILE_VALUES),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=80),
)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Runtime, TestClient, str]]:
    home = tmp_path_factory.mktemp("fuzz-api")
    runtime = build_runtime(load_run_config(None), state_path=home / "burst.db")
    tokens = load_api_tokens(home / "tokens", runtime.reloader.current.keys())
    app = api_app(store_path=runtime.state_path, tokens=tokens, view=DaemonView(60.0), clock=runtime.now,
                  tenants=lambda: set(runtime.reloader.current))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield runtime, client, tokens.admin
    runtime.close()


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(API_KEYS), hostile), min_size=1, max_size=4))
def test_the_api_answers_hostile_submissions_cleanly_and_the_next_tick_runs(
    daemon: tuple[Runtime, TestClient, str], fields: list[tuple[str, Any]]
) -> None:
    runtime, client, admin = daemon
    values = dict(fields)
    body = api_body(values.__getitem__, list(values))
    reply = client.post("/v1/jobs", content=body, headers={"Authorization": f"Bearer {admin}",
                                                            "Content-Type": "application/json"})
    api_verdict(reply)
    assert runtime.sim_clock is not None
    runtime.sim_clock.advance(60)
    report = runtime.controller.tick()  # raises if a job it cannot reason about got through
    assert report.plan.id


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(POLICY_KEYS), hostile), min_size=1, max_size=5))
def test_the_policy_loader_refuses_hostile_values_with_file_and_line_and_a_tick_runs_under_the_rest(
    tmp_path_factory: pytest.TempPathFactory, settings_: list[tuple[tuple[str, ...], Any]]
) -> None:
    path = tmp_path_factory.mktemp("policy") / "batch.yaml"
    path.write_text(policy_text(settings_))
    policy_verdict(path, tick=tick_under_policy)


QUICKSTART = quickstart_config_path().read_text()


def tick_a_daemon(home: Path) -> Any:
    def tick(config: Any) -> None:
        runtime = build_runtime(config.with_base_dir(quickstart_config_path().parent), state_path=home / "s.db")
        try:
            for _ in range(3):
                assert runtime.sim_clock is not None
                runtime.controller.tick()
                runtime.sim_clock.advance(config.loop_interval)
        finally:
            runtime.close()
            for p in home.iterdir():
                if p.is_file():
                    p.unlink()

    return tick


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(CONFIG_KEYS) - 1), hostile), min_size=1, max_size=3))
def test_the_config_loader_refuses_hostile_values_with_file_and_line(
    tmp_path_factory: pytest.TempPathFactory, changes: list[tuple[int, Any]]
) -> None:
    home = tmp_path_factory.mktemp("config")
    path = home / "burst.yaml"
    path.write_text(config_text(QUICKSTART, changes))
    (home / "state").mkdir()
    config_verdict(path, tick=tick_a_daemon(home / "state"))


cell = st.one_of(hostile, st.sampled_from(["0", "60", "1", "8", "3600"]))


@FUZZ
@given(st.lists(st.lists(cell, min_size=0, max_size=5), min_size=1, max_size=8))
def test_the_trace_loader_skips_hostile_rows_with_their_line_and_a_tick_runs_the_rest(
    tmp_path_factory: pytest.TempPathFactory, rows: list[list[Any]]
) -> None:
    path = tmp_path_factory.mktemp("trace") / "fuzz.csv"
    path.write_text(trace_text(rows), encoding="utf-8", errors="surrogatepass")
    _, jobs = trace_verdict(path)
    clock = ManualClock(T0)
    queue = MemoryQueue()
    controller, _, _ = build(Store(":memory:"), clock, queue=queue)
    for job in jobs[:20]:
        queue.submit(dataclasses.replace(job, submitted_at=T0))
    controller.tick()
    clock.advance(timedelta(minutes=10).total_seconds())
    controller.tick()
