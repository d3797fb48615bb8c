"""Cancelling a running job through the daemon's API stops its process on the node agent at once."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import httpx
from builders import job

from burst.agent.channel import Assignment, JobPhase
from burst.agent.hub import AgentHub
from burst.agent.node import NodeAgent
from burst.agent.runner import JobRunner
from burst.api.app import DaemonView, api_app
from burst.api.tokens import load_api_tokens
from burst.model import JobState
from burst.state import Store
from providers.sim import ManualClock

from .conftest import TOKENS, serve
from .test_agent import env_of, group_gone, inventory, script, wait_for

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_cancelling_a_running_job_evicts_it_on_its_agent_and_a_pending_one_sends_nothing(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    hub = AgentHub(TOKENS)
    with Store.open(tmp_path / "s.db") as store:
        store.add_job(job("train", tenant="prod", gpus=1, state=JobState.RUNNING, nodes=("node-a",), started=NOW), at=NOW)
        store.add_job(job("waiting", tenant="prod", gpus=1), at=NOW)
    tokens = load_api_tokens(tmp_path / "tokens", ["prod", "batch"])
    app = api_app(store_path=tmp_path / "s.db", tokens=tokens, view=DaemonView(60.0), clock=clock,
                  tenants=lambda: {"prod", "batch"}, hub=hub)
    with serve(app) as url:
        agent = NodeAgent(url, "node-a", TOKENS["node-a"], JobRunner(tmp_path / "agent", clock=clock), inventory,
                          clock=clock)
        hub.assign("node-a", Assignment(job_id="train", command=[sys.executable, script(tmp_path), "plain"]))
        assert agent.tick().delivered
        pgid = int(env_of(tmp_path, "train")["pgid"])  # type: ignore[call-overload]
        hub.drain()

        def cancel(job_id: str, tenant: str) -> httpx.Response:
            return httpx.delete(f"{url}/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {tokens.tenants[tenant]}"})

        assert cancel("train", "batch").status_code == 404  # another tenant's job, as an unknown one: nothing sent
        assert hub.take_work("node-a").evictions == []
        assert cancel("waiting", "prod").status_code == 200
        assert hub.take_work("node-a").evictions == []  # never placed: no agent to tell
        response = cancel("train", "prod")
        assert response.status_code == 200 and response.json()["state"] == "cancelled"
        agent.tick()  # fetches the eviction and kills the job's process group
        statuses, _ = hub.drain()
        assert [(s.job_id, s.phase) for s in statuses] == [("train", JobPhase.KILLED)]
        assert "cancelled through the API by prod" in statuses[0].detail
        wait_for(lambda: group_gone(pgid))
    with Store.open(tmp_path / "s.db") as store:
        assert store.get_job("train").state is JobState.CANCELLED  # type: ignore[union-attr]
