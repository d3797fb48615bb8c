"""The AWS provider against a real moto server: discovery, scaling, warm pools, termination, offerings,
lifecycle hooks (botocore Stubber: moto answers HTTP 500 for them), credentials, and the IAM action list."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aws_env import ON_DEMAND, REGION, FaultProxy, GroupDef, client, create_groups, launch_untracked
from botocore.stub import Stubber

from burst.model import CapacityType, EventKind, NodeState, Tier, WarmState
from providers.aws import AWS_API_ACTIONS, AwsProvider, client_token
from providers.aws.prices import latest_spot_prices
from providers.base import (
    CredentialsError,
    GroupState,
    InsufficientCapacity,
    InvalidTarget,
    NotFound,
    NotSupported,
)

from .conftest import CLUSTER, Aws


def asg_of(aws: Aws, name: str) -> dict:
    return client("autoscaling", aws.url).describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]


def test_discovers_tagged_groups_with_their_gpu_shape(aws: Aws) -> None:
    create_groups(aws.url, "someone-else", (GroupDef("not-ours", "on_demand"),))
    p = aws.provider()
    groups = {g.id: g for g in p.node_groups()}
    assert set(groups) == {"od-a100", "spot-a100"}
    od, spot = groups["od-a100"], groups["spot-a100"]
    assert (od.provider, od.region, od.tier, od.capacity_type) == ("aws", REGION, Tier.ELASTIC, CapacityType.ON_DEMAND)
    assert (od.shape.gpu_model, od.shape.gpus_per_node, od.shape.gpu_memory_gib) == ("A100", 8, 40.0)
    assert (od.instance_type, od.min_size, od.max_size, od.zone) == ("p4d.24xlarge", 0, 4, "us-east-1a")
    assert spot.capacity_type is CapacityType.SPOT and spot.instance_type == "p4d.24xlarge"


def test_discovers_groups_from_terraform_outputs(aws: Aws, tmp_path: Path) -> None:
    outputs = {
        "od_a100": {"sensitive": False, "type": ["object", {}], "value": {
            "id": "od-a100", "provider": "aws", "region": REGION, "zones": ["us-east-1a"], "tier": "elastic",
            "capacity_type": "on_demand", "gpu_model": "A100", "gpus_per_node": 8,
            "instance_types": ["p4d.24xlarge"], "min_size": 0, "max_size": 3,
            "warm_pool": {"min_size": 1, "max_prepared": 2, "state": "stopped", "reuse_on_scale_in": True}}},
        "burst_controller": {"sensitive": False, "type": "object", "value": {
            "cluster": CLUSTER, "events_queue_url": aws.queue_url, "role_arn": "arn:aws:iam::123456789012:role/burst"}},
    }
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs))
    p = aws.provider(terraform_outputs=path, events_queue_url=None)
    (g,) = p.node_groups()
    assert (g.id, g.max_size, g.warm_pool.min_size, g.warm_pool.max_prepared) == ("od-a100", 3, 1, 2)
    assert p.events_queue_url == aws.queue_url


def test_scale_up_and_down(aws: Aws) -> None:
    p = aws.provider()
    p.set_target("od-a100", 3, key="up")
    assert p.group_state("od-a100").target == 3 and asg_of(aws, "od-a100")["DesiredCapacity"] == 3
    p.refresh()
    nodes = [n for n in p.nodes().values() if n.group_id == "od-a100"]
    assert len(nodes) == 3 and all(n.state is NodeState.READY for n in nodes)  # moto: InService at once
    assert all(n.tags["burst:cluster"] == CLUSTER for n in nodes)
    assert [s.state for s in nodes[0].history] == [NodeState.REQUESTED, NodeState.BOOTING, NodeState.READY]
    p.set_target("od-a100", 1, key="down")
    p.refresh()
    assert len([n for n in p.nodes().values() if n.group_id == "od-a100"]) == 1
    with pytest.raises(InvalidTarget):
        p.set_target("od-a100", 5, key="too-big")  # moto would accept it: the provider checks
    assert asg_of(aws, "od-a100")["DesiredCapacity"] == 1


def test_warm_pool_put_and_describe(aws: Aws) -> None:
    """moto keeps the warm pool's settings but never creates warm instances, and does not reject a warm pool
    on a Spot group: burst rejects it itself."""
    p = aws.provider()
    assert p.group_state("od-a100").warm_pool == (0, WarmState.STOPPED)
    p.set_warm_pool("od-a100", 2, WarmState.RUNNING, key="warm-2")
    conf = client("autoscaling", aws.url).describe_warm_pool(AutoScalingGroupName="od-a100")["WarmPoolConfiguration"]
    assert conf["MinSize"] == 2 and conf["PoolState"] == "Running" and conf["InstanceReusePolicy"]["ReuseOnScaleIn"]
    p.refresh()
    assert p.group_state("od-a100") == GroupState(0, 2, WarmState.RUNNING)
    again = aws.provider()  # a restarted controller reads the pool back
    again.refresh()
    assert again.group_state("od-a100").warm_pool == (2, WarmState.RUNNING)
    with pytest.raises(NotSupported):
        p.set_warm_pool("spot-a100", 1, WarmState.STOPPED, key="warm-spot")
    with pytest.raises(NotSupported):
        p.set_warm_pool("od-a100", 1, WarmState.HIBERNATED, key="warm-hib")  # GPU instances cannot hibernate
    with pytest.raises(NotSupported):
        aws.provider(warm_pools=False).set_warm_pool("od-a100", 1, WarmState.STOPPED, key="off")


def test_warm_pool_instances_are_warm_nodes(aws: Aws) -> None:
    """moto never creates warm-pool instances, so describe_warm_pool's answer is AWS's shape via Stubber."""
    p = aws.provider()
    p.set_target("od-a100", 1, key="one")
    p.refresh()
    asgs = client("autoscaling", aws.url).describe_auto_scaling_groups(AutoScalingGroupNames=["od-a100", "spot-a100"])
    pool = {
        "WarmPoolConfiguration": {"MinSize": 1, "PoolState": "Stopped", "Status": "",
                                  "InstanceReusePolicy": {"ReuseOnScaleIn": True}},
        "Instances": [{"InstanceId": "i-0aaaaaaaaaaaaaaa1", "InstanceType": "p4d.24xlarge", "AvailabilityZone": "us-east-1a",
                       "LifecycleState": "Warmed:Stopped", "HealthStatus": "Healthy", "ProtectedFromScaleIn": False,
                       "LaunchTemplate": {"LaunchTemplateId": "lt-0123456789abcdef0", "LaunchTemplateName": "lt-od-a100", "Version": "1"}}],
    }
    asgs.pop("ResponseMetadata")
    with Stubber(p.autoscaling) as stub:
        stub.add_response("describe_auto_scaling_groups", asgs)
        stub.add_response("describe_warm_pool", pool, {"AutoScalingGroupName": "od-a100"})
        p.refresh()
    warm = p.nodes()["i-0aaaaaaaaaaaaaaa1"]
    assert (warm.state, warm.warm_state, warm.group_id) == (NodeState.WARM, WarmState.STOPPED, "od-a100")
    assert p.group_state("od-a100").target == 1  # warm nodes are beyond the target
    pool["Instances"][0]["LifecycleState"] = "Warmed:Pending"
    asgs["AutoScalingGroups"][0]["Instances"].append(
        {**pool["Instances"][0], "LifecycleState": "Pending", "ProtectedFromScaleIn": False})
    pool["Instances"] = []
    with Stubber(p.autoscaling) as stub:
        stub.add_response("describe_auto_scaling_groups", asgs)
        stub.add_response("describe_warm_pool", pool, {"AutoScalingGroupName": "od-a100"})
        p.refresh()
    assert p.nodes()["i-0aaaaaaaaaaaaaaa1"].state is NodeState.WAKING  # taken from the pool into service


def test_targeted_termination(aws: Aws) -> None:
    p = aws.provider()
    p.set_target("od-a100", 3, key="up")
    p.refresh()
    victim = sorted(n for n in p.nodes() if p.nodes()[n].group_id == "od-a100")[1]
    p.terminate([victim], key="kill")
    assert p.group_state("od-a100").target == 2 and asg_of(aws, "od-a100")["DesiredCapacity"] == 2
    p.refresh()
    assert victim not in p.nodes() and len(p.nodes()) == 2
    with pytest.raises(NotFound):
        p.terminate([victim, "i-0123456789abcdef0"], key="again")
    assert asg_of(aws, "od-a100")["DesiredCapacity"] == 2


def test_offerings_per_type_and_zone_with_prices_and_ice(aws: Aws) -> None:
    """Spot prices come from describe_spot_price_history, not the catalog: moto's history holds one fixed
    placeholder price (0.00001) per type and zone (the newest-price rule is tested on AWS's shape below)."""
    p = aws.provider(ice_cooldown_s=600.0)
    od = p.offerings("od-a100")
    assert [(o.instance_type, o.zone, o.price_per_hour, o.available) for o in od] == [
        ("p4d.24xlarge", "us-east-1a", 21.957642, True)
    ]
    spot = p.offerings("spot-a100")
    assert {(o.instance_type, o.zone) for o in spot} == {
        (t, z) for t in ("p4d.24xlarge", "p4de.24xlarge") for z in ("us-east-1a", "us-east-1b")
    }
    assert all(o.capacity_type is CapacityType.SPOT for o in spot)
    assert {o.instance_type: o.price_per_hour for o in spot} == {"p4d.24xlarge": 0.00001, "p4de.24xlarge": 0.00001}
    proxy = aws.proxy()
    proxy.faults.ice_groups = {"od-a100"}
    behind = aws.provider(url=proxy.url, ice_cooldown_s=600.0)
    with pytest.raises(InsufficientCapacity):
        behind.set_target("od-a100", 1, key="ice")
    assert [o.available for o in behind.offerings("od-a100")] == [False]
    proxy.faults.ice_groups = set()
    with pytest.raises(InsufficientCapacity):  # cooling down: not even sent
        behind.set_target("od-a100", 1, key="ice-2")
    assert proxy.count("ice") == 1
    aws.clock.advance(601)
    assert [o.available for o in behind.offerings("od-a100")] == [True]
    behind.set_target("od-a100", 1, key="ice-3")
    assert behind.group_state("od-a100").target == 1


def test_spot_price_is_the_newest_per_type_and_zone() -> None:
    history = [  # describe_spot_price_history's SpotPriceHistory entries
        {"AvailabilityZone": "us-east-1a", "InstanceType": "p4d.24xlarge", "ProductDescription": "Linux/UNIX",
         "SpotPrice": "9.100000", "Timestamp": datetime(2026, 12, 3, 9, tzinfo=UTC)},
        {"AvailabilityZone": "us-east-1a", "InstanceType": "p4d.24xlarge", "ProductDescription": "Linux/UNIX",
         "SpotPrice": "8.200000", "Timestamp": datetime(2026, 12, 3, 10, tzinfo=UTC)},
        {"AvailabilityZone": "us-east-1b", "InstanceType": "p4d.24xlarge", "ProductDescription": "Linux/UNIX",
         "SpotPrice": "7.300000", "Timestamp": datetime(2026, 12, 3, 8, tzinfo=UTC)},
    ]
    assert latest_spot_prices(history) == {("p4d.24xlarge", "us-east-1a"): 8.2, ("p4d.24xlarge", "us-east-1b"): 7.3}


def test_failed_scaling_activities_are_launch_failures(aws: Aws) -> None:
    """moto records no failed scaling activities: the activity below is AWS's shape for an ICE launch."""
    p = aws.provider()
    activity = {
        "ActivityId": "f9f2d65b-f1f2-43e7-b46d-d86756459699",
        "AutoScalingGroupName": "od-a100",
        "Description": "Launching a new EC2 instance.  Status Reason: Could not launch On-Demand Instances. "
        "InsufficientInstanceCapacity - We currently do not have sufficient p4d.24xlarge capacity in the "
        "Availability Zone you requested (us-east-1a). Launching EC2 instance failed.",
        "Cause": "At 2026-12-03T10:00:00Z an instance was started in response to a difference between desired and actual capacity.",
        "StartTime": datetime.now(UTC),
        "EndTime": datetime.now(UTC),
        "StatusCode": "Failed",
        "StatusMessage": "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have "
        "sufficient p4d.24xlarge capacity in the Availability Zone you requested (us-east-1a).",
        "Progress": 100,
    }
    with Stubber(p.autoscaling) as stub:
        stub.add_response("describe_scaling_activities", {"Activities": [activity]},
                          {"AutoScalingGroupName": "od-a100", "MaxRecords": 20})
        stub.add_response("describe_scaling_activities", {"Activities": []},
                          {"AutoScalingGroupName": "spot-a100", "MaxRecords": 20})
        stub.add_response("describe_scaling_activities", {"Activities": [activity]},
                          {"AutoScalingGroupName": "od-a100", "MaxRecords": 20})
        stub.add_response("describe_scaling_activities", {"Activities": []},
                          {"AutoScalingGroupName": "spot-a100", "MaxRecords": 20})
        (event,) = p.poll_events()
        assert p.poll_events() == []  # each activity once
    assert (event.kind, event.group_id) == (EventKind.LAUNCH_FAILED, "od-a100")
    assert "InsufficientInstanceCapacity" in event.detail
    assert [o.available for o in p.offerings("od-a100")] == [False]


def test_lifecycle_hooks_with_stubber(aws: Aws) -> None:
    """moto answers HTTP 500 for complete_lifecycle_action and record_lifecycle_action_heartbeat (not
    implemented), so these calls are checked against botocore's Stubber with AWS's request shapes."""
    p = aws.provider(launch_hook="burst-launch", terminate_hook="burst-terminate")
    p.set_target("od-a100", 1, key="one")
    p.refresh()
    (iid,) = p.nodes()
    base = {"AutoScalingGroupName": "od-a100", "InstanceId": iid}
    with Stubber(p.autoscaling) as stub:
        stub.add_response("complete_lifecycle_action", {},
                          {**base, "LifecycleHookName": "burst-launch", "LifecycleActionResult": "CONTINUE"})
        stub.add_response("record_lifecycle_action_heartbeat", {}, {**base, "LifecycleHookName": "burst-terminate"})
        stub.add_response("complete_lifecycle_action", {},
                          {**base, "LifecycleHookName": "burst-terminate", "LifecycleActionResult": "CONTINUE"})
        stub.add_client_error("record_lifecycle_action_heartbeat", "ValidationError",
                              "No active Lifecycle Action found with instance ID " + iid, 400)
        p.complete_launch(iid)
        p.heartbeat_termination(iid)
        p.complete_termination(iid)
        with pytest.raises(NotFound):
            p.heartbeat_termination(iid)
        stub.assert_no_pending_responses()
    with pytest.raises(NotSupported):
        aws.provider().complete_launch(iid)


def test_instances_waiting_on_the_launch_hook_are_completed_and_a_foreign_hook_is_left_alone(aws: Aws) -> None:
    p = aws.provider(launch_hook="burst-launch")
    p.set_target("od-a100", 2, key="two")
    p.refresh()
    first, second = sorted(p.nodes())
    group = p._groups["od-a100"]  # moto never holds an instance in Pending:Wait: put two there as AWS would
    group.instances[first] = group.instances[second] = "Pending:Wait"
    with Stubber(p.autoscaling) as stub:
        stub.add_response("complete_lifecycle_action", {}, {
            "AutoScalingGroupName": "od-a100", "InstanceId": first, "LifecycleHookName": "burst-launch",
            "LifecycleActionResult": "CONTINUE"})
        stub.add_client_error("complete_lifecycle_action", "ValidationError",
                              "No active Lifecycle Action found with instance ID " + second, 400)
        p._complete_launch_hooks()  # the second waits on a hook of the user's: no error, nothing retried
        stub.assert_no_pending_responses()


def test_missing_credentials_are_one_clear_error(aws: Aws, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(CredentialsError) as err:
        AwsProvider(cluster=CLUSTER, region=REGION, clock=aws.clock, endpoint_url=aws.url)
    assert "credentials not found" in str(err.value) and "AWS_ACCESS_KEY_ID" in str(err.value)


def test_rejected_credentials_are_one_clear_error_without_secrets(aws: Aws, caplog: pytest.LogCaptureFixture) -> None:
    proxy = aws.proxy()
    proxy.faults.auth_error = "AuthFailure"
    with caplog.at_level(logging.DEBUG, logger="burst"), pytest.raises(CredentialsError) as err:
        aws.provider(url=proxy.url)
    message = str(err.value)
    assert "AuthFailure" in message and "AWS_PROFILE" in message and "\n" not in message
    assert "testing" not in message and "testing" not in caplog.text  # the fake key and secret are "testing"
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_client_token_is_a_uuid5_of_the_key() -> None:
    assert client_token("c:p1:scale_up:g:size=2") == client_token("c:p1:scale_up:g:size=2")
    assert client_token("a") != client_token("b") and len(client_token("a")) == 36


def test_the_api_actions_called_are_exactly_the_declared_ones(aws: Aws) -> None:
    """Every path that calls AWS, once: the recorded `service:Operation` set is AWS_API_ACTIONS (the IAM policy)."""
    p = aws.provider(launch_hook="burst-launch", terminate_hook="burst-terminate")
    p.offerings("spot-a100")
    p.set_target("od-a100", 2, key="up")
    p.set_warm_pool("od-a100", 1, WarmState.STOPPED, key="warm")
    p.refresh()
    orphan = launch_untracked(aws.url, CLUSTER)
    p.refresh()
    first, _ = sorted(n for n in p.nodes() if p.nodes()[n].group_id == "od-a100")
    p.terminate([first, orphan], key="kill")
    p.poll_events()
    p.poll_events()
    with Stubber(p.autoscaling) as stub:
        stub.add_response("complete_lifecycle_action", {})
        stub.add_response("record_lifecycle_action_heartbeat", {})
        p.complete_launch(first)
        p.heartbeat_termination(first)
    from aws_env import new_event_id, send_event

    from providers.aws.events import REBALANCE, event_body

    send_event(aws.url, aws.queue_url, event_body(REBALANCE, first, aws.clock(), event_id=new_event_id()))
    p.poll_events()
    p.poll_events()  # deletes what the previous poll returned
    assert aws.actions == AWS_API_ACTIONS


def test_a_proxy_passes_calls_through_unchanged(aws: Aws) -> None:
    proxy: FaultProxy = aws.proxy()
    p = aws.provider(url=proxy.url)
    p.set_target(ON_DEMAND.name, 1, key="one")
    p.refresh()
    assert len(p.nodes()) == 1 and proxy.count("ok") >= 4
