"""One bad job cannot stop a tick: a job out of bounds, written to the store past the API, is failed with its
reason and every other tenant is served (the reconcile loop over the sim provider and a real SQLite store)."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from pathlib import Path

import pytest
from builders import T0, job
from click.testing import CliRunner
from fastapi.testclient import TestClient
from test_reconcile import build

from burst.api.app import DaemonView, api_app
from burst.api.tokens import load_api_tokens
from burst.bounds import MAX_DURATION_S, job_problem
from burst.cli import main
from burst.model import JobState
from burst.state import Store
from burst.workloads.queue import MemoryQueue
from providers.sim import ManualClock


def test_a_running_job_with_an_absurd_duration_is_failed_and_the_others_placed(tmp_path: Path) -> None:
    # The hostile API used to accept "99999999999d": once placed, every tick raised OverflowError in finishes_at.
    clock = ManualClock(T0)
    store = Store(tmp_path / "burst.db")
    ctl, _, queue = build(store, clock)
    huge = dataclasses.replace(job("huge", tenant="batch", gpus=1, duration_s=99999999999 * 86400.0),
                               state=JobState.RUNNING, started_at=T0, node_ids=("onprem-00001",))
    store.add_job(huge, at=T0)  # straight into the store, past the API
    queue.submit(job("fine", tenant="prod", gpus=2, duration_s=3600.0))
    report = ctl.tick()
    failed = store.get_job("huge")
    assert failed is not None and failed.state is JobState.FAILED
    assert [a.target for a in report.plan.actions if a.kind.value == "place_job"] == ["fine"]
    [hold] = [h for h in report.plan.holds if h.subject == "job:huge"]
    assert hold.step == "intake" and "duration_s" in hold.reason and "366 days" in hold.reason
    assert any(d.subject == "job:huge" and "duration_s" in d.reason for d in store.decisions_about("huge"))
    clock.advance(60)
    ctl.tick()  # and the next tick too
    fine = store.get_job("fine")
    assert fine is not None and fine.state is JobState.RUNNING


def test_a_job_row_that_does_not_decode_is_failed_and_the_tick_goes_on(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = Store(tmp_path / "burst.db")
    ctl, _, queue = build(store, clock)
    store.add_job(job("mangled", tenant="batch", gpus=1), at=T0)
    bad = json.dumps({"id": "mangled", "tenant": "batch", "gpus": "lots"})
    with store.transaction():
        store._c().execute("UPDATE jobs SET json = ? WHERE id = 'mangled'", (bad,))
    queue.submit(job("fine", tenant="prod", gpus=1, duration_s=60.0))
    report = ctl.tick()
    assert [h.subject for h in report.plan.holds if h.step == "intake"] == ["job:mangled"]
    assert [j.id for j in store.jobs(states=[JobState.FAILED], unreadable=[])] == []  # kept as written, state failed
    assert store.job_counts()[JobState.FAILED] == 1
    assert store.get_job("fine").state is JobState.RUNNING  # type: ignore[union-attr]
    clock.advance(60)
    assert not [h for h in ctl.tick().plan.holds if h.step == "intake"]  # failed once, not every tick
    tokens = load_api_tokens(tmp_path / "tokens", ["prod", "batch"])
    app = api_app(store_path=tmp_path / "burst.db", tokens=tokens, view=DaemonView(60.0), clock=clock,
                  tenants=lambda: {"prod", "batch"})
    with TestClient(app, raise_server_exceptions=False) as client:
        admin = {"Authorization": f"Bearer {tokens.admin}"}
        assert [j["id"] for j in client.get("/v1/jobs", headers=admin).json()["jobs"]] == ["fine"]
        assert client.get("/v1/jobs/mangled", headers=admin).status_code == 404
    listed = CliRunner().invoke(main, ["jobs", "--state", str(tmp_path / "burst.db"), "--json"])
    assert listed.exit_code == 0 and "job mangled: its stored record does not decode" in listed.output


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"duration_s": MAX_DURATION_S * 2}, "duration_s"),
        ({"declared_duration_s": -1.0}, "declared_duration_s"),
        ({"gpus": 10**6}, "gpus"),
        ({"gpu_model": "x" * 1_000_000}, "gpu_model"),
        ({"priority": 2**63}, "priority"),
        ({"command": ("a",) * 1_000_000}, "command"),
        ({"checkpoint_interval_s": float("nan")}, "checkpoint_interval_s"),
        ({"submitted_at": T0.replace(year=9999)}, "submitted_at"),
    ],
)
def test_job_problem_names_the_field_out_of_bounds(change: dict[str, object], field: str) -> None:
    assert job_problem(job("ok", gpus=1, duration_s=60.0)) is None
    problem = job_problem(dataclasses.replace(job("bad", gpus=1), **change))  # type: ignore[arg-type]
    assert problem is not None and problem.startswith(f"{field}: ") and len(problem) < 200


def test_the_simulators_queue_fails_a_bad_job_on_submit_and_reports_it_once() -> None:
    queue = MemoryQueue()
    queue.submit(job("bad", gpus=1, duration_s=MAX_DURATION_S + 1))
    queue.submit(job("good", gpus=1, duration_s=60.0))
    active, events = queue.observe(T0 + timedelta(seconds=1), {})
    assert [j.id for j in active] == ["good"] and [f[0] for f in events.failed] == ["bad"]
    assert [j.state for j in queue.finished] == [JobState.FAILED]
    assert queue.observe(T0 + timedelta(seconds=2), {})[1].failed == []


def test_the_readme_lists_every_limit() -> None:
    from burst.bounds import LIMITS

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    for limit in LIMITS:
        assert f"| {limit.what} | {limit.bounds} |" in readme, limit


def test_the_json_schemas_carry_the_bounds() -> None:
    from burst.api.app import JobSubmission
    from burst.bounds import MAX_GPUS_PER_NODE, MAX_JOB_GPUS, MAX_PRIORITY
    from policies import policy_json_schema
    from policies.config import config_json_schema

    policy = policy_json_schema()["properties"]
    assert (policy["priority"]["minimum"], policy["priority"]["maximum"]) == (-MAX_PRIORITY, MAX_PRIORITY)
    assert policy["max_job_runtime"]["anyOf"][0]["maximum"] == MAX_DURATION_S
    assert config_json_schema()["$defs"]["NodeGroupDoc"]["properties"]["gpus_per_node"]["maximum"] == MAX_GPUS_PER_NODE
    api = JobSubmission.model_json_schema()["properties"]
    assert api["gpus"]["maximum"] == MAX_JOB_GPUS and api["command"]["anyOf"][0]["maxItems"] == 256
