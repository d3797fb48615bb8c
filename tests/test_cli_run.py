"""The daemon commands (`burst run`, live `burst plan`, `burst submit`, `burst jobs`) as a user runs them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
ACTION = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d) ([+-]) (scale_up|scale_down) (\S+) -> (\d+): (.+)$")


def burst(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burst.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def readme_run_command() -> str:
    """The daemon command of the README's first set-up line: what follows its last `&&`."""
    block = (ROOT / "README.md").read_text().split("```")[1]
    first = block.strip().splitlines()[0]
    command = first.split("&&")[-1].strip()
    assert command.startswith("burst run"), command
    return command


@pytest.mark.slow
def test_readme_quickstart_bursts_to_cloud_and_back() -> None:
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "burst").exists(), "the test runs the installed console script, as the README does"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    out = subprocess.run(["bash", "-c", readme_run_command()], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("burst: cluster quickstart;")
    actions = [m.groups() for m in map(ACTION.match, lines) if m]
    ups = [(datetime.fromisoformat(t), group) for t, sign, kind, group, _, _ in actions if kind == "scale_up"]
    downs = [(datetime.fromisoformat(t), group) for t, sign, kind, group, _, _ in actions if kind == "scale_down"]
    burst_ups = [g for t, g in ups if 9 <= t.hour < 11]
    assert {"cloud-a100-od", "cloud-a100-spot"} <= set(burst_ups)
    assert len(burst_ups) >= 5
    assert not [g for t, g in ups if t.hour < 9], "nothing bursts before the 09:00 burst"
    assert any(t.hour >= 11 for t, _ in downs)
    assert all(g.startswith("cloud-") for _, g in ups + downs), "the steady tier is never scaled"
    for _, sign, kind, _, _, reason in actions:
        assert (sign == "+") == (kind == "scale_up") and reason
    cloud_sizes: dict[str, int] = {}
    peaks: dict[str, int] = {}
    for _, _, _, group, size, _ in actions:
        cloud_sizes[group] = int(size)
        peaks[group] = max(peaks.get(group, 0), int(size))
    # on-demand drains to nothing; spot may still carry a fault-tolerant job of the base load, never the burst's peak
    assert cloud_sizes["cloud-a100-od"] == 0, f"on-demand drains back after the burst: {cloud_sizes}"
    assert all(cloud_sizes[g] <= peaks[g] // 2 for g in cloud_sizes), f"cloud groups drain back: {cloud_sizes} of {peaks}"
    summary = lines[-1]
    # a tick every minute (the 720-tick heartbeat) and more when events wake the loop between them
    match = re.match(r"burst: stopped at 2026-03-02T19:00:00\+00:00 after (\d+) tick\(s\), 0 failed;", summary)
    assert match and int(match.group(1)) >= 720, summary


def test_run_json_prints_one_object_per_event() -> None:
    out = burst("run", "--duration", "3h", "--json")
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert events[0]["event"] == "start" and events[-1]["event"] == "stop"
    # a tick at least every minute (the heartbeat), and more when finishes wake the loop between them
    assert events[-1]["ticks"] > 180 and events[-1]["errors"] == 0 and events[-1]["placed"] > 0
    actions = [e for e in events if e["event"] == "action"]
    assert actions and all(e["plan_id"] and e["id"].startswith(e["plan_id"]) and e["reason"] for e in actions)
    assert {e["kind"] for e in actions} <= {"scale_up", "scale_down", "terminate_node"}
    statuses = [e for e in events if e["event"] == "status"]
    assert len(statuses) == 3
    served = statuses[-1]["forecasts"]  # the 07:00 refit had no history; the one due at 13:00 has not come
    assert all(model.startswith("seasonal_naive") for model in served.values())
    assert statuses[-1]["forecast_scores"] == dict.fromkeys(served), "no backtest chose the fallback: no score"
    (chat,) = statuses[-1]["services"]  # the quickstart's synthetic service, forecast from its history
    assert (chat["tenant"], chat["name"], chat["error"]) == ("prod", "chat", None)
    assert chat["ready"] >= 1 and chat["forecast_lead_rps"] is not None and chat["observed_rps"] > 0
    late = [json.loads(line) for line in burst("run", "--duration", "7h", "--json").stdout.splitlines()]
    last = [e for e in late if e["event"] == "status"][-1]["forecasts"]
    assert last and all(k.count("/") == 1 for k in last)
    assert all(v.startswith("seasonal_naive (history") for v in last.values()), "under 24 h: the fallback serves, and says why"


def test_the_quickstart_service_scales_up_ahead_of_its_morning_ramp(tmp_path: Path) -> None:
    """`burst run` on the quickstart from 07:00, on the chat service's morning ramp (its synthetic cycle peaks at
    14:00): the decisions it records show every scale-up after the first sized by the forecast over the
    replica's lead, above what the observed rate needs then, and no replica released while the rate rises."""
    state = tmp_path / "state.db"
    out = burst("run", "--duration", "4h", "--state", str(state))
    assert out.returncode == 0, out.stderr
    explained = burst("explain", "prod/chat", "--json", "--limit", "500", "--state", str(state))
    assert explained.returncode == 0, explained.stderr
    decisions = list(reversed(json.loads(explained.stdout)))
    ups = [d for d in decisions if d["kind"] == "scale_service_up"]
    assert not [d for d in decisions if d["kind"] == "scale_service_down"], "the rate only rises from 07:00 to 11:00"
    counts = [tuple(map(int, re.search(r"(\d+) -> (\d+) replicas", d["reason"]).groups())) for d in ups]
    assert counts[0][0] == 0 and all(a[1] == b[0] for a, b in zip(counts, counts[1:], strict=False)), counts
    ramp = ups[1:]  # the first sizes the service from nothing, at 07:00
    assert len(ramp) >= 3, [d["reason"][:60] for d in ups]
    for d in ramp:
        now, ahead = map(int, re.search(r"max\(now (\d+), ahead (\d+)\)", d["reason"]).groups())
        assert ahead > now, d["reason"]  # the observed rate alone would not start this replica yet
        assert "ahead: over the 420 s lead (boot 300 s + load 120 s), P50 peaks at" in d["reason"]


def test_plan_at_the_burst_shows_a_scale_up_with_its_reason() -> None:
    out = burst("plan", "--at", "2026-03-02T09:20:00Z", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["at"] == "2026-03-02T09:20:00+00:00"
    ups = [a for a in data["actions"] if a["kind"] == "scale_up"]
    assert ups and all(a["target"].startswith("cloud-a100-") for a in ups)
    for action in data["actions"]:
        assert {"kind", "target", "count", "reason"} <= set(action) and action["reason"]
    assert "pending job(s)" in ups[0]["reason"] and "cheapest feasible group" in ups[0]["reason"]


@pytest.mark.slow
def test_plan_a_day_in_gives_steady_tier_advice_for_the_quickstart_rack() -> None:
    out = burst("plan", "--at", "2026-03-03T10:00:00Z", "--json")
    assert out.returncode == 0, out.stderr
    (advice,) = json.loads(out.stdout)["steady_tier"]
    assert advice["gpu_model"] == "any" and advice["steady_gpus"] == 32  # the rack's 4 x 8 A100
    assert advice["recommended_gpus"] > 0 and advice["status"] in ("green", "yellow", "red")
    assert advice["window_start"] >= "2026-03-03T10:00:00+00:00"
    text = burst("plan", "--at", "2026-03-03T10:00:00Z").stdout
    assert f"steady tier (any): own {advice['recommended_gpus']} GPU(s)" in text and f": {advice['status']}" in text
    # on-prem is cheaper than on-demand: the cost-optimal size is a quantile above the median, and costs no more
    assert 0.5 < advice["cost_optimal_quantile"] < 1 and advice["cost_optimal_gpus"] >= advice["recommended_gpus"]
    assert advice["year_usd_at_cost_optimal"] <= advice["year_usd_at_recommended"]
    assert f"cost-optimal (any): own {advice['cost_optimal_gpus']} GPU(s)" in text


def test_plan_at_before_the_start_is_refused() -> None:
    out = burst("plan", "--at", "2026-03-01T00:00:00Z")
    assert out.returncode == 2 and "before the simulation's start" in out.stderr


def test_submit_then_run_then_jobs(tmp_path: Path) -> None:
    state = tmp_path / "burst.db"
    sub = burst("submit", "--state", str(state), "--tenant", "prod", "--gpus", "2", "--duration", "20m",
                "--id", "mine", "--json")
    assert sub.returncode == 0, sub.stderr
    job = json.loads(sub.stdout)
    assert job["id"] == "mine" and job["state"] == "pending"
    assert job["submitted_at"] == "2026-03-02T07:00:00+00:00", "stamped with the sim clock, not wall time"
    again = burst("submit", "--state", str(state), "--tenant", "prod", "--gpus", "2", "--id", "mine")
    assert again.returncode == 1 and "mine" in again.stderr
    run = burst("run", "--state", str(state), "--duration", "1h", "--quiet")
    assert run.returncode == 0, run.stderr
    listed = json.loads(burst("jobs", "--state", str(state), "--json", "--tenant", "prod").stdout)
    mine = next(j for j in listed if j["id"] == "mine")
    assert mine["state"] == "succeeded" and mine["work_done_s"] == pytest.approx(1200, abs=60)
    assert all(j["tenant"] == "prod" for j in listed)
    table = burst("jobs", "--state", str(state), "--status", "succeeded")
    assert table.returncode == 0 and "mine" in table.stdout and "succeeded" in table.stdout


def test_submit_rejects_an_unknown_tenant_and_writes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "burst.db"
    out = burst("submit", "--state", str(state), "--tenant", "nobody", "--gpus", "1")
    assert out.returncode == 2 and "no policy for tenant 'nobody'" in out.stderr
    assert "batch, prod, research" in out.stderr
    assert not state.exists()


def test_jobs_without_a_state_file_says_so(tmp_path: Path, private_state_home: Path) -> None:
    out = burst("jobs", "--state", str(tmp_path / "none.db"))
    assert out.returncode == 1 and "no state file" in out.stderr
    quick = burst("jobs")  # the quickstart's saved state, which no run has made yet
    assert quick.returncode == 1 and f"{private_state_home}/burst/quickstart/burst.db: no state file" in quick.stderr


GROUP = "node_groups:\n  - id: g\n    provider: aws\n    tier: elastic\n    capacity_type: on_demand\n" \
    "    instance_type: p4d.24xlarge\n    region: us-east-1\n"


def test_run_with_missing_group_keys_names_each_with_its_line(tmp_path: Path) -> None:
    config = tmp_path / "burst.yaml"
    config.write_text("cluster: x\n" + GROUP)
    out = burst("run", "--config", str(config), "--duration", "1h")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    for key in ("gpu_model", "gpus_per_node", "max_size"):
        assert f"burst.yaml:3: node_groups.0.{key}: required key is missing" in out.stderr, out.stderr


def test_run_with_an_unavailable_provider_is_one_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "burst.yaml"
    rest = "    gpu_model: A100\n    gpus_per_node: 8\n    max_size: 2\n"
    config.write_text("cluster: x\n" + GROUP.replace("provider: aws", "provider: azure") + rest)
    out = burst("run", "--config", str(config), "--duration", "1h")  # a provider burst does not have
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "burst.yaml:4: node_groups.0.provider: input should be 'sim', 'onprem', 'aws', 'gcp' or 'libcloud' " \
        "(got 'azure')" in out.stderr, out.stderr
    onprem = GROUP.replace("provider: aws", "provider: onprem").replace("tier: elastic", "tier: steady") \
        .replace("on_demand", "onprem").replace("p4d.24xlarge", "dgx-a100").replace("us-east-1", "dc1")
    config.write_text("cluster: x\n" + onprem + rest)  # onprem is built in, but needs its inventory
    out = burst("run", "--config", str(config), "--duration", "1h")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "provider onprem needs an onprem: section with its inventory file" in out.stderr, out.stderr
    for cloud in ("gcp", "libcloud"):  # built in, but each needs its connection settings
        config.write_text("cluster: x\n" + GROUP.replace("provider: aws", f"provider: {cloud}") + rest)
        out = burst("run", "--config", str(config), "--duration", "1h")
        assert out.returncode == 1 and "Traceback" not in out.stderr
        assert f"provider {cloud} needs a {cloud}: section" in out.stderr, out.stderr
    config.write_text("cluster: x\n" + GROUP + rest)  # aws is built in, but needs its connection settings
    out = burst("run", "--config", str(config), "--duration", "1h")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "provider aws needs an aws: section" in out.stderr, out.stderr


def test_run_with_a_bad_synthetic_section_names_the_key(tmp_path: Path) -> None:
    quick = (ROOT / "burst" / "data" / "quickstart" / "burst.yaml").read_text()
    config = tmp_path / "burst.yaml"
    config.write_text(quick.replace("base_jobs_per_hour:", "base_jobs_per_houre:"))
    (tmp_path / "policies").symlink_to(ROOT / "burst" / "data" / "quickstart" / "policies")
    out = burst("run", "--config", str(config), "--duration", "1h")
    assert out.returncode == 1 and "workload.synthetic.base_jobs_per_houre: unknown setting" in out.stderr, out.stderr


def test_submit_refuses_a_job_no_group_could_ever_run(tmp_path: Path) -> None:
    state = tmp_path / "burst.db"
    h100 = burst("submit", "--state", str(state), "--tenant", "prod", "--gpus", "2", "--gpu-model", "H100", "--id", "h")
    assert h100.returncode == 1
    assert "job h refused: no node group allowed for tenant prod has GPU model H100" in h100.stderr
    huge = burst("submit", "--state", str(state), "--tenant", "prod", "--gpus", "65", "--id", "huge")
    assert huge.returncode == 1 and "65 GPUs exceed the largest group tenant prod may use" in huge.stderr
    fits = burst("submit", "--state", str(state), "--tenant", "prod", "--gpus", "64", "--gpu-model", "A100", "--id", "ok")
    assert fits.returncode == 0, fits.stderr
    listed = json.loads(burst("jobs", "--state", str(state), "--json").stdout)
    assert [j["id"] for j in listed] == ["ok"], "a refused job is not queued"
