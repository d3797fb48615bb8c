"""The GCP provider against the local Compute API (tests/gcp_env.py), through google-cloud-compute's real REST
client: discovery by template labels, scaling, requestIds, operations, retries, errors, credentials, and the
Compute API methods called equal GCP_API_METHODS."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from gcp_env import PROJECT, REGION, ZONES, labels
from google.api_core import exceptions as core
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

from burst.model import CapacityType, GpuShape, NodeGroup, NodeState, Tier, WarmState
from providers.base import CredentialsError, InvalidTarget, NotFound
from providers.gcp import GCP_API_METHODS, GCP_IAM_PERMISSIONS, BackendUnavailable, GcpProvider, request_id
from providers.gcp.discovery import DiscoveryError

from .conftest import CLUSTER, Gcp

RESIZE = "compute.instanceGroupManagers.resize"


def members(gcp: Gcp, mig: str, zone: str = ZONES[0]) -> list[str]:
    return sorted(v.name for v in gcp.server.members(zone, mig) if v.action != "DELETING")


def test_discovers_labelled_groups_with_their_gpu_shape(gcp: Gcp, caplog: pytest.LogCaptureFixture) -> None:
    s = gcp.server
    s.add_template("t4-t", "n1-standard-8", labels=labels(CLUSTER, "on_demand", "t4", burst_max_size="6"),
                   accelerators=(("nvidia-tesla-t4", 1),))
    s.add_mig(ZONES[1], "od-t4", "t4-t")
    s.add_template("l4-t", "g2-standard-4", labels={k: v for k, v in labels(CLUSTER, "on_demand").items()
                                                    if k != "burst-gpu-model"})
    s.add_mig(ZONES[1], "od-l4", "l4-t")
    s.add_template("other-t", "a2-highgpu-8g", labels=labels("someone-else", "on_demand"))
    s.add_mig(ZONES[1], "not-ours", "other-t")
    s.add_template("liar-t", "a2-highgpu-8g", labels=labels(CLUSTER, "spot"))  # label says spot, template standard
    s.add_mig(ZONES[1], "liar", "liar-t")
    s.add_template("cpu-t", "n2-standard-8", labels=labels(CLUSTER, "on_demand"))
    s.add_mig(ZONES[1], "cpu-only", "cpu-t")
    s.add_template("nomax-t", "a2-highgpu-1g", labels={k: v for k, v in labels(CLUSTER, "on_demand").items()
                                                       if k != "burst-max-size"})
    s.add_mig(ZONES[1], "no-max", "nomax-t")
    with caplog.at_level(logging.WARNING, logger="burst.providers.gcp"):
        p = gcp.provider()
    groups = {g.id: g for g in p.node_groups()}
    assert set(groups) == {"od-a100", "spot-a100", "od-t4", "od-l4"}
    od, spot, t4, l4 = groups["od-a100"], groups["spot-a100"], groups["od-t4"], groups["od-l4"]
    assert (od.provider, od.region, od.zone, od.tier, od.capacity_type) == (
        "gcp", REGION, ZONES[0], Tier.ELASTIC, CapacityType.ON_DEMAND)
    assert (od.instance_type, od.shape, od.min_size, od.max_size) == ("a2-highgpu-8g", GpuShape("A100", 8, 40.0), 0, 4)
    assert spot.capacity_type is CapacityType.SPOT
    assert (t4.instance_type, t4.shape, t4.max_size, t4.zone) == ("n1-standard-8+1xT4", GpuShape("T4", 1, 16.0), 6, ZONES[1])
    assert (l4.instance_type, l4.shape) == ("g2-standard-4", GpuShape("L4", 1, 24.0))  # model from the machine type
    assert od.warm_pool.max_age_s < 60 * 86400  # rotated before Compute Engine recreates standby VMs
    skipped = {getattr(r, "group", None) for r in caplog.records}
    assert {"liar", "cpu-only", "no-max"} <= skipped and "not-ours" not in skipped
    assert [o.price_per_hour for o in p.offerings("od-t4")] == [0.73]


def test_zones_come_from_the_region_when_not_listed(gcp: Gcp) -> None:
    p = gcp.provider(zones=(), region=REGION)
    assert p.zones == ZONES and {g.id for g in p.node_groups()} == {"od-a100", "spot-a100"}
    with pytest.raises(DiscoveryError, match="zones or a region"):
        gcp.provider(zones=())


def test_listed_groups_are_read_by_name(gcp: Gcp) -> None:
    listed = NodeGroup(id="od-a100", provider="gcp", region=REGION, tier=Tier.ELASTIC,
                       capacity_type=CapacityType.ON_DEMAND, shape=GpuShape("A100", 8, 40.0),
                       instance_type="a2-highgpu-8g", min_size=0, max_size=2)
    p = gcp.provider(groups=[listed])
    (g,) = p.node_groups()
    assert (g.id, g.zone, g.max_size) == ("od-a100", ZONES[0], 2)
    missing = NodeGroup(**{**listed.__dict__, "id": "nope"})
    with pytest.raises(DiscoveryError, match="no managed instance group of that name"):
        gcp.provider(groups=[missing])


def test_scale_up_and_down_carries_uuid5_request_ids_and_awaits_operations(gcp: Gcp) -> None:
    p = gcp.provider()
    p.set_target("od-a100", 3, key="plan-1/scale od-a100")
    assert p.group_state("od-a100").target == 3 and gcp.server.migs[(ZONES[0], "od-a100")]["targetSize"] == 3
    (query, _, status), = gcp.server.calls(RESIZE)
    assert status == 200 and query == {"size": "3", "requestId": request_id("plan-1/scale od-a100")}
    op = next(o for o in gcp.server.operations.values() if o["operationType"] == RESIZE)
    assert op["status"] == "DONE"  # PENDING, then RUNNING and DONE on the provider's two waits
    assert len(gcp.server.calls("compute.zoneOperations.wait")) == 2
    p.refresh()
    nodes = [n for n in p.nodes().values() if n.group_id == "od-a100"]
    assert len(nodes) == 3 and all(n.state is NodeState.BOOTING for n in nodes)
    gcp.clock.advance(60)
    p.refresh()
    nodes = [n for n in p.nodes().values() if n.group_id == "od-a100"]
    assert all(n.state is NodeState.READY for n in nodes)
    assert [s.state for s in nodes[0].history] == [NodeState.REQUESTED, NodeState.BOOTING, NodeState.READY]
    assert nodes[0].created_at == gcp.clock() - timedelta(seconds=60)  # creationTimestamp
    assert all(n.tags["burst:cluster"] == CLUSTER and n.tags["burst-capacity-type"] == "on_demand" for n in nodes)
    p.set_target("od-a100", 1, key="down")
    gcp.clock.advance(10)
    p.refresh()
    assert len([n for n in p.nodes().values() if n.group_id == "od-a100"]) == 1
    with pytest.raises(InvalidTarget):
        p.set_target("od-a100", 5, key="too-big")
    assert gcp.server.migs[(ZONES[0], "od-a100")]["targetSize"] == 1


def test_the_same_request_id_is_resent_after_a_503_and_only_one_vm_is_created(gcp: Gcp) -> None:
    """The first resize is applied but its answer is lost (503), and the retries meet 503s too: every attempt
    carries the same requestId. Meanwhile the VM it created is deleted (target 0). When the action is retried
    after a restart with the same key, the Compute API recognises the requestId and applies nothing again: without
    it, a second VM would be created."""
    s = gcp.server
    s.faults.lose_after_apply[RESIZE] = 1
    s.faults.errors[RESIZE] = [503, 503, 503]
    p = gcp.provider()
    with pytest.raises(BackendUnavailable, match="HTTP 503"):
        p.set_target("od-a100", 1, key="up")
    sent = s.calls(RESIZE)
    assert [st for _, _, st in sent] == [503, 503, 503, 503]
    assert {q["requestId"] for q, _, _ in sent} == {request_id("up")}
    assert s.migs[(ZONES[0], "od-a100")]["targetSize"] == 1  # the first attempt did apply
    (vm,) = members(gcp, "od-a100")
    p.refresh()
    p.terminate([vm], key="kill")
    assert s.migs[(ZONES[0], "od-a100")]["targetSize"] == 0
    restarted = gcp.provider()
    restarted.set_target("od-a100", 1, key="up")  # the actuator's retry of the journaled action
    assert {q["requestId"] for q, _, _ in s.calls(RESIZE)} == {request_id("up")}
    assert len([o for o in s.operations.values() if o["operationType"] == RESIZE]) == 1
    gcp.clock.advance(120)
    restarted.refresh()
    assert restarted.group_state("od-a100").target == 0 and members(gcp, "od-a100") == []
    assert s.created == [vm]


def test_the_compute_api_rejects_bad_request_ids_and_unknown_fields(gcp: Gcp) -> None:
    migs = compute_v1.InstanceGroupManagersClient(credentials=AnonymousCredentials(), transport="rest",
                                                  client_options=ClientOptions(api_endpoint=gcp.url))
    bad = compute_v1.ResizeInstanceGroupManagerRequest(project=PROJECT, zone=ZONES[0], instance_group_manager="od-a100",
                                                       size=1, request_id="plan-1/scale")
    with pytest.raises(core.BadRequest, match="requestId"):
        migs.resize_unary(request=bad, retry=None)
    good = compute_v1.ResizeInstanceGroupManagerRequest(project=PROJECT, zone=ZONES[0], instance_group_manager="od-a100",
                                                        size=1, request_id=request_id("k"))
    op = migs.resize_unary(request=good, retry=None)
    ops = compute_v1.ZoneOperationsClient(credentials=AnonymousCredentials(), transport="rest",
                                          client_options=ClientOptions(api_endpoint=gcp.url))
    statuses = [op.status]
    for _ in range(2):
        statuses.append(ops.wait(project=PROJECT, zone=ZONES[0], operation=op.name, retry=None).status)
    s = compute_v1.Operation.Status
    assert statuses == [s.PENDING, s.RUNNING, s.DONE]
    base = f"{gcp.url}/compute/v1/projects/{PROJECT}/zones/{ZONES[0]}/instanceGroupManagers/od-a100"
    for url, body in ((f"{base}/deleteInstances?requestId={request_id('x')}", {"instances": [], "force": True}),
                      (f"{base}/resize?size=1&count=2", None)):
        req = urllib.request.Request(url, data=json.dumps(body).encode() if body else b"", method="POST",
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert err.value.code == 400
        assert "Unknown name" in json.loads(err.value.read())["error"]["message"]


def test_429_and_503_are_retried_then_typed(gcp: Gcp) -> None:
    p = gcp.provider()
    get = "compute.instanceGroupManagers.get"
    gcp.server.faults.errors[get] = [429, 503]
    p.refresh()
    assert [st for _, _, st in gcp.server.calls(get)] == [429, 503, 200, 200]  # retried, then the second group
    gcp.server.faults.errors[get] = [429] * 10
    with pytest.raises(BackendUnavailable, match="HTTP 429"):
        p.refresh()
    gcp.server.faults.errors[get] = []
    p.refresh()


def test_terminate_deletes_exactly_those_vms_and_unknown_ids_are_not_found(gcp: Gcp) -> None:
    p = gcp.provider()
    p.set_target("od-a100", 2, key="up")
    gcp.clock.advance(60)
    p.refresh()
    victim, survivor = members(gcp, "od-a100")
    with pytest.raises(NotFound, match="nope-1"):
        p.terminate([victim, "nope-1"], key="kill")
    (query, body, _), = gcp.server.calls("compute.instanceGroupManagers.deleteInstances")
    assert query == {"requestId": request_id("kill/od-a100")}
    assert [u.rsplit("/", 1)[-1] for u in body["instances"]] == [victim] and body["skipInstancesOnValidationError"]
    assert p.group_state("od-a100").target == 1 and p.nodes()[victim].state is NodeState.TERMINATING
    p.terminate([victim], key="kill-again")  # still deleting: a no-op, not a second request
    assert len(gcp.server.calls("compute.instanceGroupManagers.deleteInstances")) == 1
    gcp.clock.advance(60)
    p.refresh()
    assert members(gcp, "od-a100") == [survivor] and victim not in p.nodes()


def test_an_orphan_vm_labelled_with_the_cluster_is_listed_and_deleted(gcp: Gcp) -> None:
    gcp.server.add_vm(ZONES[0], "leftover-1", labels=labels(CLUSTER, "on_demand"))
    gcp.server.add_vm(ZONES[0], "not-ours-1", labels=labels("other", "on_demand"))
    p = gcp.provider()
    p.refresh()
    assert p.nodes()["leftover-1"].group_id == "" and "not-ours-1" not in p.nodes()
    p.terminate(["leftover-1"], key="gc")
    (query, _, status), = gcp.server.calls("compute.instances.delete")
    assert status == 200 and query == {"requestId": request_id("gc/leftover-1")}
    gcp.clock.advance(30)
    p.refresh()
    assert "leftover-1" not in p.nodes()


def test_missing_credentials_are_one_clear_error_without_secrets(
    gcp: Gcp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    key = tmp_path / "key.json"
    key.write_text(json.dumps({"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----SECRETXYZ",
                               "private_key_id": "SECRETID"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    with caplog.at_level(logging.DEBUG), pytest.raises(CredentialsError) as err:
        GcpProvider(cluster=CLUSTER, project=PROJECT, zones=ZONES, clock=gcp.clock,
                    endpoint="https://compute.example.invalid")
    assert "Application Default Credentials" in str(err.value) and "gcloud auth application-default login" in str(err.value)
    assert "SECRET" not in str(err.value) and "SECRET" not in caplog.text
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(CredentialsError, match="GOOGLE_APPLICATION_CREDENTIALS"):
        GcpProvider(cluster=CLUSTER, project=PROJECT, zones=ZONES, clock=gcp.clock)


def test_rejected_credentials_and_missing_permissions_are_credentials_errors(gcp: Gcp) -> None:
    p = gcp.provider()
    gcp.server.faults.unauthorized = True
    with pytest.raises(CredentialsError, match="rejected the credentials"):
        p.refresh()
    gcp.server.faults.unauthorized = False
    gcp.server.faults.errors[RESIZE] = [403]
    with pytest.raises(CredentialsError, match="GCP_API_METHODS"):
        p.set_target("od-a100", 1, key="up")
    p.set_target("od-a100", 1, key="up")  # the failed call did not consume its key
    assert p.group_state("od-a100").target == 1


def test_the_methods_called_are_exactly_gcp_api_methods(gcp: Gcp) -> None:
    gcp.server.add_vm(ZONES[0], "leftover-1", labels=labels(CLUSTER, "on_demand"))
    p = gcp.provider(zones=(), region=REGION)
    p.set_target("od-a100", 1, key="up")
    p.set_target("spot-a100", 1, key="spot-up")
    p.set_warm_pool("od-a100", 1, WarmState.STOPPED, key="warm")
    gcp.clock.advance(60)
    p.refresh()
    spot_vm = next(n.id for n in p.nodes().values() if n.group_id == "spot-a100")
    gcp.server.preempt(spot_vm)
    assert [e.node_id for e in p.poll_events()] == [spot_vm]
    od_vm = next(n.id for n in p.nodes().values() if n.group_id == "od-a100" and n.state is NodeState.READY)
    p.terminate([od_vm, "leftover-1"], key="kill")
    assert gcp.methods() == set(GCP_API_METHODS) == p.called == set(GCP_IAM_PERMISSIONS)
    assert all(st == 200 for _, _, _, st in gcp.server.log)
