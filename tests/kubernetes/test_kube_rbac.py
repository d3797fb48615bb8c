"""deploy/kubernetes/overlays/kubernetes-jobs/rbac.yaml grants exactly what the suite's API servers saw burst
do: the ClusterRole the cluster-wide calls, the leader-election Role the Lease calls. This test runs after the
others (conftest), and every PATCH burst sent was a strategic merge patch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from apiserver import API_CALLS, SMP
from conftest import PATCH_TYPES, SEEN
from kubernetes.client import ApiClient

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "overlays" / "kubernetes-jobs" / "rbac.yaml"
MODELS = {"ServiceAccount": "V1ServiceAccount", "ClusterRole": "V1ClusterRole", "ClusterRoleBinding": "V1ClusterRoleBinding",
          "Role": "V1Role", "RoleBinding": "V1RoleBinding"}


def docs() -> list[dict]:
    return [d for d in yaml.safe_load_all(RBAC.read_text()) if d]


def grants(kind: str) -> set[tuple[str, str, str]]:
    (role,) = [d for d in docs() if d["kind"] == kind]
    return {(verb, group, resource) for rule in role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def test_rbac_manifests_load_into_the_clients_models_and_bind_the_controllers_account() -> None:
    api = ApiClient()
    for doc in docs():
        obj = api.deserialize(json.dumps(doc), MODELS[doc["kind"]], "application/json")
        assert obj.metadata.name
        if doc["kind"].endswith("Binding"):
            assert [(s.kind, s.name, s.namespace) for s in obj.subjects] == [
                ("ServiceAccount", "burst-controller", "burst-system")]
            assert obj.role_ref.name in {"burst-controller", "burst-leader-election"}


def test_cluster_role_grants_exactly_the_calls_the_suite_made() -> None:
    if not SEEN:
        pytest.skip("run with the rest of tests/kubernetes: it compares what those tests made burst call")
    assert SEEN == API_CALLS, (sorted(SEEN - API_CALLS), sorted(API_CALLS - SEEN))
    leases = {c for c in SEEN if c[1] == "coordination.k8s.io"}
    assert grants("ClusterRole") == SEEN - leases
    assert grants("Role") == leases
    assert PATCH_TYPES == {SMP}
