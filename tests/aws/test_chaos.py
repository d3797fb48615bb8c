"""Chaos test: the daemon, SIGKILLed 100 times during actuation against moto behind the fault proxy, loses nothing.

Each life of the daemon is a forked process running the real daemon loop
(`build_runtime` + `Runtime.run`, as `burst run` does) on one SQLite state
file, against the moto server through the fault-injecting proxy, with
eventual consistency (new instances missing from Describe answers for a
while) and lost responses (the call happens, the answer never arrives) on.
The workload is the seeded synthetic generator (bursty 8-GPU jobs). A life
is killed with SIGKILL, by its own actuator's fault hook, at a seeded
provider-call step: either just before a call ("sent") or just after it,
before its outcome is recorded ("called"). The next life recovers from the
same state file. An untracked, cluster-tagged instance is planted first.

At the end, with one clean life run to convergence, the test checks and
prints: instances beyond the plan (0), untracked instances after GC (0),
jobs in exactly one state (all of them, none lost or duplicated), and every
group at its planned size with that many instances.
"""

from __future__ import annotations

import json
import os
import random
import signal
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aws_env import FaultProxy, client, launch_untracked

from burst.model import Action, JobState
from burst.runtime import build_runtime, load_run_config
from burst.state import MetaKey, Store
from burst.workloads.synthetic import SyntheticSettings, SyntheticWorkload

from .conftest import CLUSTER, Aws

pytestmark = pytest.mark.slow

SEED = 20261203
KILLS = 100
START = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
HORIZON = timedelta(days=5)  # room for 100 kills whatever the machine's speed (the proxy hides new instances for wall seconds)
GROUPS = ("od-a100", "spot-a100")

SYNTHETIC: dict[str, Any] = {
    "seed": 11,
    "base_jobs_per_hour": 2.0,
    "daily_amplitude": 0.9,
    "peak_hour": 14,
    "weekend_factor": 1.0,
    "burst_probability": 1.0,
    "burst_factor": 4,
    "burst_hours": 2,
    "burst_window": [9, 17],
    "tenants": {
        "research": {"share": 0.5, "gpus": [8], "mean_duration": "40m"},
        "batch": {"share": 0.5, "gpus": [8], "mean_duration": "30m", "fault_tolerant": True,
                  "checkpoint_interval": "10m"},
    },
}

CONFIG = """
cluster: {cluster}
clock: sim
sim_start: {start}
loop_interval: 10m
policies_dir: policies
state_path: burst.db
forecasting:
  enabled: false
aws:
  region: us-east-1
  endpoint_url: {url}
  events_queue_url: {queue}
workload:
  synthetic: {synthetic}
"""

POLICIES = {
    "research": "tenant: research\npriority: 10\nspot:\n  allowed: false\n",
    "batch": "tenant: batch\npriority: 5\nspot:\n  allowed: true\n  max_share: 1.0\n",
}


class KillAt:
    """An actuator fault hook that SIGKILLs its own process at provider-call step `at` of this life.

    Before dying it appends where ("sent" or "called") and the action to `log`.
    """

    def __init__(self, at: int, log: Path) -> None:
        self.at = at
        self.log = log
        self.steps = 0

    def __call__(self, where: str, action: Action) -> None:
        if self.steps == self.at:
            with self.log.open("a") as f:
                f.write(f"{where} {action.kind.value}\n")
            os.kill(os.getpid(), signal.SIGKILL)
        self.steps += 1


def life(config_path: Path, kill_at: int | None, until: datetime) -> int:
    """One daemon process: fork, run the daemon loop until `until` (or the kill); the exit status."""
    pid = os.fork()
    if pid == 0:  # the daemon
        code = 1
        try:
            runtime = build_runtime(load_run_config(config_path))
            if kill_at is not None:
                runtime.controller.actuator.fault = KillAt(kill_at, config_path.parent / "kills.log")
            runtime.run(until=until, realtime=False)
            runtime.close()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return status


@pytest.fixture
def daemon_dir(aws: Aws, tmp_path: Path) -> Iterator[tuple[Path, FaultProxy]]:
    proxy = FaultProxy(aws.url, lambda: datetime.now(UTC))  # wall time: the proxy outlives every daemon life
    aws.proxies.append(proxy)
    proxy.faults.hide_new_s = 0.5
    (tmp_path / "policies").mkdir()
    for tenant, text in POLICIES.items():
        (tmp_path / "policies" / f"{tenant}.yaml").write_text(text)
    config = tmp_path / "burst.yaml"
    config.write_text(CONFIG.format(cluster=CLUSTER, start=START.isoformat(), url=proxy.url, queue=aws.queue_url,
                                    synthetic=json.dumps(SYNTHETIC)))
    yield config, proxy


def observe(aws: Aws) -> dict[str, tuple[int, set[str]]]:
    """moto's own view, past the proxy: each group's desired capacity and its live instances."""
    out = {}
    groups = client("autoscaling", aws.url).describe_auto_scaling_groups(AutoScalingGroupNames=list(GROUPS))
    for g in groups["AutoScalingGroups"]:
        live = {i["InstanceId"] for i in g["Instances"] if i["LifecycleState"] not in ("Terminating", "Terminated")}
        out[g["AutoScalingGroupName"]] = (g["DesiredCapacity"], live)
    return out


def tagged_running(aws: Aws) -> set[str]:
    """Running or pending instances carrying the cluster's tag."""
    found = client("ec2", aws.url).describe_instances(Filters=[
        {"Name": "tag:burst:cluster", "Values": [CLUSTER]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]},
    ])
    return {i["InstanceId"] for r in found["Reservations"] for i in r["Instances"]}


def planned_max(store: Store) -> dict[str, int]:
    """The largest size any journaled action (sent or not) asked of each group."""
    out: dict[str, int] = {}
    for intent in store.intents():
        action = intent.action
        if action.get("kind") in ("scale_up", "scale_down") and action.get("size") is not None:
            out[action["target"]] = max(out.get(action["target"], 0), int(action["size"]))
    return out


def sim_now(config_path: Path) -> datetime:
    with Store.open(config_path.parent / "burst.db") as store:
        last = store.get_meta(MetaKey.LAST_TICK)
    return datetime.fromisoformat(last) if last else START


def test_sigkilled_100_times_during_actuation_nothing_is_lost_or_doubled(
    aws: Aws, daemon_dir: tuple[Path, FaultProxy], capsys: pytest.CaptureFixture[str]
) -> None:
    config_path, proxy = daemon_dir
    orphan = launch_untracked(aws.url, CLUSTER)
    rng = random.Random(SEED)
    end = START + HORIZON
    kills = lives = 0
    beyond = 0
    ever: dict[str, set[str]] = {g: set() for g in GROUPS}
    while kills < KILLS:
        proxy.faults.lose = {"SetDesiredCapacity": rng.choice((0, 1)),
                             "TerminateInstanceInAutoScalingGroup": rng.choice((0, 1))}
        status = life(config_path, rng.randrange(0, 4), end)
        lives += 1
        if os.WIFSIGNALED(status):
            assert os.WTERMSIG(status) == signal.SIGKILL
            kills += 1
        else:
            assert os.WEXITSTATUS(status) == 0, "a daemon life failed (not killed)"
            pytest.fail(f"the workload's horizon ended after {kills} kills; lengthen it")
        with Store.open(config_path.parent / "burst.db") as store:
            planned = planned_max(store)
        for group, (desired, live) in observe(aws).items():
            ever[group] |= live
            beyond += max(0, len(live) - planned.get(group, 0))
            assert desired <= planned.get(group, 0), f"{group}: desired {desired} beyond anything planned {planned}"

    proxy.faults.lose = {}
    proxy.faults.hide_new_s = 0.0
    assert life(config_path, None, sim_now(config_path) + timedelta(hours=1)) == 0  # a clean life converges
    with Store.open(config_path.parent / "burst.db") as store:
        targets = store.targets()
        counts = store.job_counts()
        jobs = store.jobs()
        unsettled = store.unconfirmed_intents()
        last = datetime.fromisoformat(store.get_meta(MetaKey.LAST_TICK) or "")
    final = observe(aws)
    in_groups = set().union(*(live for _, live in final.values()))
    untracked = tagged_running(aws) - in_groups
    generated = SyntheticWorkload(SyntheticSettings.from_mapping(SYNTHETIC)).jobs_between(START, last)
    ids = [j.id for j in jobs]
    running_nodes = {n for j in jobs if j.state is JobState.RUNNING for n in j.node_ids}
    converged = {g: (desired, len(live), targets.get(g, 0)) for g, (desired, live) in final.items()}
    kill_points = Counter((config_path.parent / "kills.log").read_text().splitlines())
    with capsys.disabled():
        print(f"\nchaos: {lives} daemon lives, {kills} SIGKILLs during actuation {dict(sorted(kill_points.items()))}; "
              f"lost responses {proxy.count('lost')}; instances launched {sum(len(v) for v in ever.values())}; "
              f"instances beyond the plan {beyond}; untracked after GC {len(untracked)}; "
              f"jobs {len(ids)} of {len(generated)} generated, by state "
              f"{ {s.value: n for s, n in sorted(counts.items(), key=lambda kv: kv[0].value) if n} }; "
              f"groups (desired, instances, planned) {converged}; unsettled intents {len(unsettled)}")
    assert kills == KILLS == sum(kill_points.values())
    assert {k.split()[0] for k in kill_points} == {"sent", "called"}
    assert proxy.count("lost") > 0
    assert beyond == 0
    assert orphan not in tagged_running(aws) and not untracked
    assert len(ids) == len(set(ids)) == len({j.id for j in generated if j.submitted_at < last}), "a job was lost or duplicated"
    assert sum(counts.values()) == len(ids)
    assert counts.get(JobState.SUCCEEDED, 0) > 0
    assert running_nodes <= in_groups, "a running job sits on an instance that is gone"
    assert unsettled == []
    for group, (desired, n_live, target) in converged.items():
        assert desired == n_live == target, f"{group} did not converge to the plan: {converged[group]}"
