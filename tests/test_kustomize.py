"""deploy/kubernetes as Kustomize: each overlay renders with `kubectl kustomize` and its core kinds validate
against the Kubernetes schemas (kubernetes-validate, offline); the ServiceMonitor (a CRD, which those schemas
do not have) validates against the bundled deploy/kubernetes/monitoring/servicemonitor.schema.json.

CI renders with Debian's kubernetes-client (kubectl 1.20, kustomize v2.0.3), so the kustomizations are held
to v2.0.3's keys here too, whatever kubectl this machine has. Without kubectl the rendering tests skip,
unless BURST_REQUIRE_KUBECTL=1 (set by .ci/run), which makes them fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies import validate_policy_dir
from policies.config import BurstConfig

KUBE = Path(__file__).resolve().parent.parent / "deploy" / "kubernetes"
OVERLAYS = tuple(sorted(p.parent.name for p in (KUBE / "overlays").glob("*/kustomization.yaml")))
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
VALIDATE_VERSIONS = ("1.25.0", "1.32.0")  # the oldest schemas kubernetes-validate bundles, and a recent release
V2_0_3_KEYS = {"namespace", "namePrefix", "nameSuffix", "commonLabels", "commonAnnotations", "resources", "bases",
               "patchesStrategicMerge", "patchesJson6902", "configMapGenerator", "secretGenerator",
               "generatorOptions", "images", "vars", "crds", "apiVersion", "kind"}


def render(path: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        if os.environ.get("BURST_REQUIRE_KUBECTL") == "1":
            pytest.fail("BURST_REQUIRE_KUBECTL=1 but kubectl is not installed (apt-get install kubernetes-client)")
        pytest.skip("kubectl is not installed (apt-get install kubernetes-client)")
    out = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def by_kind(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_renders_and_its_core_kinds_validate(overlay: str, tmp_path: Path) -> None:
    import kubernetes_validate

    docs = render(KUBE / "overlays" / overlay)
    for doc in docs:
        for version in VALIDATE_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)  # raises on any error, unknown fields too
    objects = by_kind(docs)
    assert all(d["metadata"].get("namespace") == "burst-system" for d in docs if d["kind"] not in CLUSTER_SCOPED)
    deployment = objects[("Deployment", "burst-controller")]
    pod = deployment["spec"]["template"]["spec"]
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["tokens"]["secret"]["secretName"] == "burst-tokens" and mounts["tokens"]["readOnly"] is True
    config = BurstConfig.model_validate(yaml.safe_load(objects[("ConfigMap", "burst-config")]["data"]["burst.yaml"]))
    assert config.api.tokens_dir == mounts["tokens"]["mountPath"], "burst reads its tokens from the Secret"
    policies = tmp_path / "policies"
    policies.mkdir()
    for name, text in objects[("ConfigMap", "burst-policies")]["data"].items():
        (policies / name).write_text(text)
    assert validate_policy_dir(policies) == []
    if overlay == "sqlite-pvc":
        assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
        assert volumes["state"] == {"name": "state", "persistentVolumeClaim": {"claimName": "burst-state"}}
        assert config.state_path.startswith(mounts["state"]["mountPath"] + "/")
        assert ("PersistentVolumeClaim", "burst-state") in objects
    elif overlay in ("postgres-2-replica", "kubernetes-jobs"):
        assert deployment["spec"]["replicas"] == 2
        assert config.state_path.startswith("postgresql://") and config.leader.enabled
        env = {e["name"]: e for e in pod["containers"][0]["env"]}
        assert env["PGPASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "burst-postgres", "key": "password"}
        assert objects[("PodDisruptionBudget", "burst-controller")]["spec"]["minAvailable"] == 1
        assert config.leader.kind == ("kubernetes" if overlay == "kubernetes-jobs" else "store")
        assert (config.workload.kubernetes is not None) == (overlay == "kubernetes-jobs")
    else:
        pytest.fail(f"overlay {overlay}: nothing here says what it must render")
    if overlay == "kubernetes-jobs":
        assert_pods_as_jobs_rbac_and_placement(objects, config)


def assert_pods_as_jobs_rbac_and_placement(objects: dict[tuple[str, str], dict[str, Any]], config: BurstConfig) -> None:
    """With workload.kubernetes the controller's own ServiceAccount holds the ClusterRole (pods, evictions, nodes)
    and the leader-election Role on the Lease its config names, and its pods stay off the nodes burst scales."""
    pod = objects[("Deployment", "burst-controller")]["spec"]["template"]["spec"]
    account = [{"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": "burst-system"}]
    assert ("ServiceAccount", pod["serviceAccountName"]) in objects
    for kind, role_kind, name in (("ClusterRoleBinding", "ClusterRole", "burst-controller"),
                                  ("RoleBinding", "Role", "burst-leader-election")):
        binding = objects[(kind, name)]
        assert binding["subjects"] == account and (binding["roleRef"]["kind"], binding["roleRef"]["name"]) == (
            role_kind, name)
    lease_role = objects[("Role", "burst-leader-election")]
    assert lease_role["metadata"]["namespace"] == config.leader.namespace
    assert {r for rule in lease_role["rules"] for r in rule["resources"]} == {"leases"}
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "burst.dev/node-group", "operator": "DoesNotExist"}]


def test_the_servicemonitor_scrapes_with_the_admin_token_and_validates_against_its_bundled_schema() -> None:
    import jsonschema

    (monitor,) = render(KUBE / "monitoring")
    schema = json.loads((KUBE / "monitoring" / "servicemonitor.schema.json").read_text())
    jsonschema.validate(monitor, schema)
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["bearerTokenSecret"] == {"name": "burst-tokens", "key": "admin.token"}
    assert endpoint["path"] == "/metrics" and endpoint["port"] == "http"
    broken = json.loads(json.dumps(monitor))
    broken["spec"]["endpoints"][0]["bearerTokenSecret"]["keys"] = "admin.token"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_the_kustomizations_use_only_kustomize_v2_0_3_syntax() -> None:
    found = sorted(KUBE.rglob("kustomization.yaml"))
    assert len(found) == 2 + len(OVERLAYS)  # base, the overlays, monitoring
    assert {"sqlite-pvc", "postgres-2-replica", "kubernetes-jobs"} <= set(OVERLAYS)
    for path in found:
        doc = yaml.safe_load(path.read_text())
        assert set(doc) <= V2_0_3_KEYS, f"{path}: {set(doc) - V2_0_3_KEYS} is not kustomize v2.0.3 syntax"
        for entry in doc.get("resources", []) + doc.get("patchesStrategicMerge", []):
            assert (path.parent / entry).is_file(), f"{path}: {entry}: v2.0.3 takes files in resources (bases: dirs)"
        for base in doc.get("bases", []):
            assert (path.parent / base / "kustomization.yaml").is_file()


def restricted_problems(pod: dict[str, Any]) -> list[str]:
    """What keeps a pod spec from the Pod Security Standards' "restricted" profile (its checks on a controller
    pod: non-root, no privilege escalation, every capability dropped, a RuntimeDefault or Localhost seccomp
    profile, no host namespaces or hostPath volumes)."""
    problems: list[str] = []
    pod_ctx = pod.get("securityContext", {})
    if any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")):
        problems.append("host namespaces")
    if any("hostPath" in v for v in pod.get("volumes", [])):
        problems.append("hostPath volume")
    for c in pod.get("initContainers", []) + pod["containers"]:
        ctx = c.get("securityContext", {})
        seccomp = (ctx.get("seccompProfile") or pod_ctx.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{c['name']}: seccompProfile {seccomp}")
        if ctx.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{c['name']}: allowPrivilegeEscalation not false")
        if ctx.get("capabilities", {}).get("drop") != ["ALL"] or set(ctx.get("capabilities", {}).get("add", [])) - {
                "NET_BIND_SERVICE"}:
            problems.append(f"{c['name']}: capabilities not drop [ALL]")
        if ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")) is not True:
            problems.append(f"{c['name']}: runAsNonRoot not true")
        if ctx.get("privileged"):
            problems.append(f"{c['name']}: privileged")
    return problems


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_overlay_meets_the_restricted_pod_security_profile(overlay: str) -> None:
    pods = [d["spec"]["template"]["spec"] for d in render(KUBE / "overlays" / overlay)
            if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job")]
    assert pods
    assert [p for pod in pods for p in restricted_problems(pod)] == []
