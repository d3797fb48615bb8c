"""Failover across hosts: two daemons, each a separate process in its own working directory, share one
PostgreSQL database (a real server the tests start) and drive one moto server. The leader is SIGKILLed in the
middle of actuation (by its own actuator's fault hook, between a journaled intent and its provider call, or
between the call and its recorded outcome); the standby takes over within the lease.

Asserted afterwards, against moto's own view and the database: no instance beyond anything planned (0
duplicates), every group converged to its planned size, every generated job present once (0 lost), and every
row committed before the kill (jobs, demand history, cost ledger, decisions, token hashes) still present,
matched by key. The standby's API accepts the dead leader's admin token (tokens are shared, never minted per
replica).
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aws_env import client

from burst.lease import StoreLease
from burst.model import Action, JobState
from burst.runtime import build_runtime, load_run_config
from burst.state import Store
from burst.workloads.synthetic import SyntheticSettings, SyntheticWorkload

from .conftest import CLUSTER, Aws
from .test_chaos import GROUPS, POLICIES, SYNTHETIC, observe, planned_max

pytestmark = pytest.mark.slow

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # inside the synthetic burst window: launches come early
LEASE_S = 4.0
SPEED = 600.0  # simulated seconds per wall second: a 10 min heartbeat is 1 wall second
KILL_AFTER = START + timedelta(hours=3)  # the leader dies at its first provider call from then (simulated)

CONFIG = """
cluster: {cluster}
clock: sim
clock_speed: {speed}
sim_start: {start}
loop_interval: 10m
policies_dir: policies
state_path: {state}
forecasting:
  enabled: false
leader:
  enabled: true
  lease: {lease}s
  holder: {holder}
api:
  tokens_dir: tokens
aws:
  region: us-east-1
  endpoint_url: {url}
  events_queue_url: {queue}
workload:
  synthetic: {synthetic}
"""


class KillAt:
    """An actuator fault hook that SIGKILLs its own process at its first provider call from `after` on its
    clock, alternating between before the call ("sent") and after it ("called") by `where`, noting which."""

    def __init__(self, after: datetime, where: str, clock: Callable[[], datetime], log: Path) -> None:
        self.after = after
        self.where = where
        self.clock = clock
        self.log = log

    def __call__(self, where: str, action: Action) -> None:
        if where == self.where and self.clock() >= self.after:
            self.log.write_text(f"{where} {action.kind.value} {action.target}\n")
            os.kill(os.getpid(), signal.SIGKILL)


def host(tmp_path: Path, name: str, aws: Aws, state: str) -> Path:
    """One replica's working directory (its own config, policies and token files), as on its own host."""
    home = tmp_path / name
    (home / "policies").mkdir(parents=True)
    for tenant, text in POLICIES.items():
        (home / "policies" / f"{tenant}.yaml").write_text(text)
    (home / "burst.yaml").write_text(CONFIG.format(
        cluster=CLUSTER, speed=SPEED, start=START.isoformat(), state=state, lease=LEASE_S, holder=name,
        url=aws.url, queue=aws.queue_url, synthetic=json.dumps(SYNTHETIC)))
    return home


def daemon(home: Path, until: datetime, kill: tuple[datetime, str] | None) -> int:
    """Fork one daemon: the real loop (as `burst run` runs it) with its API, in `home`; its pid."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            from burst.api.server import start_api

            os.chdir(home)
            runtime = build_runtime(load_run_config(home / "burst.yaml"), config_file=home / "burst.yaml")
            api = start_api(runtime, "127.0.0.1:0", tokens_dir=home / "tokens")
            (home / "api.url").write_text(api.url)
            if kill is not None:
                runtime.controller.actuator.fault = KillAt(*kill, runtime.controller.clock, home / "killed.log")
            signal.signal(signal.SIGTERM, lambda *_: runtime.stop.set())
            runtime.run(until=until, realtime=True)
            api.stop()
            runtime.close()
            code = 0
        finally:
            os._exit(code)
    return pid


def wait_for(what: str, check: Callable[[], Any], timeout_s: float) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` after `timeout_s` wall seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")


def committed(url: str) -> dict[str, dict[Any, Any]]:
    """Every row the store holds, by key: what must survive a failover."""
    with Store.open(url) as store:
        return {
            "jobs": {j.id: j.tenant for j in store.jobs()},
            "demand": {(p.at, p.tenant, p.gpu_model): (p.running_gpus, p.pending_gpus) for p in store.demand_history()},
            "ledger": {row[0]: tuple(row[1:]) for row in store._query(
                "SELECT id, at, tenant, line, group_id, usd, gpu_hours FROM cost_ledger")},
            "decisions": {d.id: (d.at, d.plan_id, d.subject, d.kind, d.reason) for d in store.decisions(limit=None)},
            "tokens": store.token_hashes(),
        }


@pytest.mark.parametrize("where", ["sent", "called"])
def test_the_standby_takes_over_from_a_leader_killed_mid_actuation_and_nothing_is_lost_or_doubled(
    where: str, aws: Aws, pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = host(tmp_path, "host-a", aws, pg_url), host(tmp_path, "host-b", aws, pg_url)
    end = START + timedelta(days=2)
    watcher = StoreLease(pg_url, "watcher")

    def held_by(name: str) -> Any:
        state = watcher.current()
        return state if state is not None and state.holder == name else None

    leader = daemon(a, end, (KILL_AFTER, where))
    standby = None
    try:
        wait_for("host-a to lead", lambda: held_by("host-a"), 60)
        wait_for("host-a's API", lambda: (a / "api.url").exists(), 30)
        standby = daemon(b, end, None)
        wait_for("host-b's API", lambda: (b / "api.url").exists(), 60)
        _, status = os.waitpid(leader, 0)
        killed_at = time.monotonic()
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, "the leader died mid-actuation"
        before = committed(pg_url)
        epoch_a = watcher.current().epoch  # type: ignore[union-attr]
        taken = wait_for("host-b to take over", lambda: held_by("host-b"), LEASE_S + 30)
        took_s = time.monotonic() - killed_at
        assert taken.epoch == epoch_a + 1, "a takeover is a new epoch: host-a's late writes are fenced"
        # Let host-b act on what host-a left (it resolves the interrupted intent, then keeps reconciling).
        took_over_at = last_tick(pg_url)
        wait_for("host-b to settle the journal and tick on", lambda: settled(pg_url, took_over_at + timedelta(hours=1)),
                 120)
        token = (a / "tokens" / "admin.token").read_text().strip()
        request = urllib.request.Request(f"{(b / 'api.url').read_text()}/v1/status",
                                         headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200, "the standby accepts the dead leader's admin token"
        assert not (b / "tokens" / "admin.token").exists(), "the standby minted no admin token of its own"
    finally:
        if standby is not None:
            os.kill(standby, signal.SIGTERM)
            _, status = os.waitpid(standby, 0)
        else:
            os.kill(leader, signal.SIGKILL)
            os.waitpid(leader, 0)
        watcher.close()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "host-b stopped cleanly"

    after = committed(pg_url)
    with Store.open(pg_url) as store:
        planned = planned_max(store)
        targets = store.targets()
        jobs = store.jobs()
        last = datetime.fromisoformat(store.get_meta("reconcile.last_tick") or "")
    final = observe(aws)
    ec2 = client("ec2", aws.url).describe_instances(Filters=[{"Name": "tag:burst:cluster", "Values": [CLUSTER]}])
    launched = {i["InstanceId"] for r in ec2["Reservations"] for i in r["Instances"]}
    beyond = {g: max(0, len(live) - planned.get(g, 0)) for g, (_, live) in final.items()}
    generated = SyntheticWorkload(SyntheticSettings.from_mapping(SYNTHETIC)).jobs_between(START, last)
    ids = [j.id for j in jobs]
    missing = {kind: [k for k in rows if k not in after[kind] or after[kind][k] != rows[k]]
               for kind, rows in before.items()}
    with capsys.disabled():
        print(f"\nfailover: leader killed at {(a / 'killed.log').read_text().strip()!r}; standby led after "
              f"{took_s:.1f} s (lease {LEASE_S:g} s); rows before the kill "
              f"{ {k: len(v) for k, v in before.items()} }, missing after {sum(map(len, missing.values()))}; "
              f"instances launched {len(launched)}, beyond the plan {sum(beyond.values())}; jobs {len(ids)} of "
              f"{len([j for j in generated if j.submitted_at < last])} generated, by state "
              f"{ {s.value: n for s in JobState if (n := sum(j.state is s for j in jobs))} }")
    assert all(before.values()), f"every kind of row was committed before the kill: {before.keys()}"
    assert missing == {kind: [] for kind in before}, "rows committed before the kill are gone"
    assert beyond == dict.fromkeys(GROUPS, 0), f"duplicate instances: {beyond}"
    for group, (desired, live) in final.items():
        assert desired == len(live) == targets.get(group, 0), f"{group}: desired, live, target {final[group]}"
    assert len(ids) == len(set(ids)) == len({j.id for j in generated if j.submitted_at < last}), "a job lost or doubled"
    assert took_s <= LEASE_S + 30  # polled bound; the figure printed above is what to read


def last_tick(url: str) -> datetime:
    with Store.open(url) as store:
        return datetime.fromisoformat(store.get_meta("reconcile.last_tick") or START.isoformat())


def settled(url: str, tick: datetime) -> bool:
    """Whether the leader has ticked to `tick` (simulated) with no intent left unconfirmed."""
    with Store.open(url) as store:
        return not store.unconfirmed_intents() and last_tick(url) >= tick
