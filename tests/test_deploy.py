"""Packaging in deploy/: Kubernetes manifests load into the kubernetes client's models, the systemd units
verify where systemd-analyze exists, the dashboard queries only metrics burst exports, and the shipped
config and policies validate."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client import ApiClient
from prometheus_client.parser import text_string_to_metric_families

from burst.runtime import build_runtime, load_run_config
from policies import validate_policy_dir
from policies.config import BurstConfig

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
MODELS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
    ("v1", "Service"): "V1Service",
    ("apps/v1", "Deployment"): "V1Deployment",
}


def manifests() -> list[dict[str, object]]:
    """The sqlite-pvc overlay's objects as written (its Deployment is the base's; the overlay's is a patch)."""
    kube = DEPLOY / "kubernetes"
    files = [*sorted((kube / "base").glob("*.yaml")), kube / "overlays" / "sqlite-pvc" / "config.yaml",
             kube / "overlays" / "sqlite-pvc" / "pvc.yaml"]
    return [d for f in files if f.name != "kustomization.yaml" for d in yaml.safe_load_all(f.read_text()) if d]


def test_kubernetes_manifests_load_into_the_clients_models() -> None:
    api = ApiClient()
    kinds = []
    for doc in manifests():
        model = MODELS[(str(doc["apiVersion"]), str(doc["kind"]))]
        obj = api.deserialize(json.dumps(doc), model, "application/json")
        assert obj.metadata.name
        kinds.append(doc["kind"])
        if isinstance(obj, client.V1Deployment):
            container = obj.spec.template.spec.containers[0]
            assert container.readiness_probe.http_get.path == "/readyz"
            assert container.liveness_probe.http_get.path == "/healthz"
            assert obj.spec.template.spec.security_context.run_as_non_root is True
    assert sorted(kinds) == sorted(["Namespace", "ServiceAccount", "ConfigMap", "ConfigMap", "PersistentVolumeClaim",
                                    "Deployment", "Service"])


def test_the_manifests_config_and_policies_validate(tmp_path: Path) -> None:
    maps = {d["metadata"]["name"]: d["data"] for d in manifests() if d["kind"] == "ConfigMap"}  # type: ignore[index]
    config = BurstConfig.model_validate(yaml.safe_load(maps["burst-config"]["burst.yaml"]))
    assert config.api.listen == "0.0.0.0:8460"
    policies = tmp_path / "policies"
    policies.mkdir()
    for name, text in maps["burst-policies"].items():
        (policies / name).write_text(text)
    assert validate_policy_dir(policies) == []


BURST_BIN = "/opt/burst/bin/burst"
"""Where the units run burst from: absent on a test machine, which `systemd-analyze verify` reports."""
needs_systemd_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here"
)


def verify_problems(unit: Path) -> list[str]:
    """Every line `systemd-analyze verify` reports about `unit` except that BURST_BIN is missing on this machine,
    and a non-zero exit that no line explains."""
    result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    missing_bin = f"{unit.name}: Command {BURST_BIN} is not executable: No such file or directory"
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    problems = [line for line in lines if line != missing_bin]
    if result.returncode != 0 and not problems and missing_bin not in lines:
        problems.append(f"systemd-analyze verify {unit.name} exited {result.returncode} without saying why")
    return problems


@needs_systemd_analyze
def test_systemd_units_verify() -> None:
    units = sorted((DEPLOY / "systemd").glob("*.service"))
    assert [u.name for u in units] == ["burst-agent.service", "burst.service"]
    for unit in units:
        assert f"ExecStart={BURST_BIN} " in unit.read_text()
        problems = verify_problems(unit)
        assert not problems, problems


@needs_systemd_analyze
def test_systemd_verify_check_catches_a_broken_unit(tmp_path: Path) -> None:
    text = (DEPLOY / "systemd" / "burst.service").read_text()
    broken = tmp_path / "burst.service"
    broken.write_text(text.replace("RestartSec=5", "RestartSec=five\nKillMode\nTimeoutStopSec=2x"))
    problems = verify_problems(broken)
    assert any("Missing '='" in line for line in problems), problems
    assert sum("Failed to parse" in line for line in problems) == 2, problems
    assert not any(BURST_BIN in line for line in problems)  # the missing binary alone is not a problem


def test_systemd_units_run_burst_and_reload_with_sighup() -> None:
    unit = (DEPLOY / "systemd" / "burst.service").read_text()
    assert "ExecStart=/opt/burst/bin/burst run" in unit and "ExecReload=/bin/kill -HUP $MAINPID" in unit
    assert "burst agent --controller" in (DEPLOY / "systemd" / "burst-agent.service").read_text()


def test_dashboard_queries_only_metrics_burst_exports(tmp_path: Path) -> None:
    runtime = build_runtime(load_run_config(None), state_path=tmp_path / "s.db")
    try:
        runtime.run(until=runtime.now() + timedelta(minutes=5), realtime=False)
        from prometheus_client import generate_latest

        exported = set()
        for family in text_string_to_metric_families(generate_latest(runtime.metrics.registry).decode()):
            suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}.get(family.type, ("",))
            exported |= {family.name + suffix for suffix in suffixes} | {family.name}
    finally:
        runtime.close()
    dashboard = json.loads((DEPLOY / "grafana" / "burst-dashboard.json").read_text())
    used = {m for p in dashboard["panels"] for t in p["targets"] for m in re.findall(r"\bburst_[a-z_]+", t["expr"])}
    assert used and used <= exported, used - exported


def test_every_dashboard_panel_has_a_unit_and_follows_the_replica_filter() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "burst-dashboard.json").read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["instance"]["label"] == "replica" and variables["instance"]["includeAll"] is True
    for panel in dashboard["panels"]:
        assert panel["fieldConfig"]["defaults"].get("unit"), f"{panel['title']}: no unit"
        for target in panel["targets"]:
            selectors = re.findall(r"\bburst_[a-z_]+(\{[^}]*\})?", target["expr"])
            assert selectors and all('instance=~"$instance"' in s for s in selectors), target["expr"]
    names = {m for p in dashboard["panels"] for t in p["targets"] for m in re.findall(r"\bburst_[a-z_]+", t["expr"])}
    assert not any(n.endswith(("_hours_total", "_per_hour", "_month")) for n in names), "base units, counters, to-date"
