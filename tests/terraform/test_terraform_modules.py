"""The Terraform modules and the hybrid example, read with python-hcl2 (every .tf file), and their checks and
discovery tags evaluated by the bundled Terraform 1.0.3 (`terraform validate` needs the providers, which
cannot be downloaded here; see terraform/README.md)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tfhcl import (
    EXAMPLE,
    FIXTURE,
    MODULES,
    TERRAFORM,
    TERRAFORM_DIR,
    blocks,
    config,
    dynamic,
    example_scope,
    load,
    module_arguments,
    run_locals,
    statements,
    tf_files,
    unquote,
)

from providers.aws import AWS_IAM_PERMISSIONS
from providers.aws import discovery as aws_discovery
from providers.aws import events as aws_events

HANDSHAKE_GROUP_KEYS = {"id", "provider", "region", "zones", "tier", "capacity_type", "gpu_model", "gpus_per_node",
                        "instance_types", "min_size", "max_size", "warm_pool"}
"""DESIGN.md's burst_node_group (zone(s) written as `zones`, a list, which discovery and import both read)."""
DISCOVERY_TAGS = {aws_discovery.CLUSTER_TAG, aws_discovery.TIER_TAG, aws_discovery.CAPACITY_TAG,
                  aws_discovery.GPU_MODEL_TAG}
DISCOVERY_LABELS = {"burst-cluster", "burst-tier", "burst-capacity-type", "burst-gpu-model"}


EXAMPLE_INPUTS = {  # the example's required variables, as a terraform.tfvars would give them
    "aws_gpu_ami": "ami-0123456789abcdef0", "aws_subnet_ids": ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"],
    "gcp_project": "my-gpu-project", "gcp_subnetwork": "gpu", "gcp_node_service_account": "nodes@p.iam",
    "controller_url": "http://10.0.0.5:8470",
}
MODULE_DIRS = sorted(p for p in MODULES.iterdir() if p.is_dir())


def example_calls(source: str) -> dict[str, dict[str, Any]]:
    """The example's calls of one module, with their arguments evaluated."""
    ex = config(EXAMPLE)
    scope = example_scope(ex, EXAMPLE_INPUTS)
    return {name: module_arguments(call, scope) for name, call in ex.modules.items()
            if unquote(call["source"]) == f"../../modules/{source}"}


# ---------------------------------------------------------------- layout, variables, versions


def test_every_tf_file_parses_and_terraform_1_0_3_formats_them() -> None:
    files = tf_files()
    assert len(files) >= 20
    for path in files:
        assert load(path), path
    version = subprocess.run([str(TERRAFORM), "version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith("Terraform v1.0.3")
    fmt = subprocess.run([str(TERRAFORM), "fmt", "-check", "-recursive", "-list=true", str(TERRAFORM_DIR)],
                         capture_output=True, text=True)
    assert fmt.returncode == 0 and fmt.stdout == "", fmt.stdout + fmt.stderr


@pytest.mark.parametrize("module", MODULE_DIRS, ids=lambda p: p.name)
def test_modules_have_the_registry_layout(module: Path) -> None:
    for name in ("main.tf", "variables.tf", "outputs.tf", "versions.tf", "README.md"):
        assert (module / name).is_file(), f"{module.name}/{name}"
    readme = (module / "README.md").read_text()
    c = config(module)
    assert "## Inputs" in readme and "## Outputs" in readme
    for name in list(c.variables) + list(c.outputs):
        assert f"| `{name}` |" in readme, f"{module.name}/README.md does not list {name}"


@pytest.mark.parametrize("directory", [*MODULE_DIRS, EXAMPLE], ids=lambda p: p.name)
def test_every_variable_has_a_type_and_a_description(directory: Path) -> None:
    c = config(directory)
    assert c.variables
    for name, body in c.variables.items():
        assert body.get("type"), f"{directory.name}: variable {name} has no type"
        assert unquote(body.get("description", "")).strip(), f"{directory.name}: variable {name} has no description"
        for rule in blocks(body, "validation"):
            assert rule["condition"] and unquote(rule["error_message"]).endswith("."), (name, rule)


@pytest.mark.parametrize("directory", [*MODULE_DIRS, EXAMPLE], ids=lambda p: p.name)
def test_terraform_and_provider_versions_are_pinned_to_ranges(directory: Path) -> None:
    (block,) = config(directory).terraform
    assert unquote(block["required_version"]) == ">= 1.0.3"
    providers = block["required_providers"][0] if isinstance(block["required_providers"], list) else block["required_providers"]
    assert providers
    for name, spec in providers.items():
        if name.startswith("__"):
            continue
        assert unquote(spec["source"]).startswith("hashicorp/")
        assert re.fullmatch(r">= [0-9.]+, < [0-9]+\.0", unquote(spec["version"])), (name, spec)


@pytest.mark.slow
@pytest.mark.parametrize("directory", [*MODULE_DIRS, EXAMPLE], ids=lambda p: p.name)
def test_terraform_1_0_3_loads_the_configuration(directory: Path, tmp_path: Path) -> None:
    """`terraform init` reads and checks the whole configuration (block types, arguments of modules, core
    syntax: a `precondition` or `optional()` of later versions fails here) before it installs providers;
    with an empty plugin directory the providers are the only thing it reports missing."""
    empty = tmp_path / "plugins"
    empty.mkdir()
    work = tmp_path / "terraform"
    import shutil

    shutil.copytree(TERRAFORM_DIR, work)
    target = work / directory.relative_to(TERRAFORM_DIR)
    run = subprocess.run([str(TERRAFORM), "init", "-backend=false", "-input=false", "-no-color", f"-plugin-dir={empty}"],
                         cwd=target, capture_output=True, text=True, timeout=120,
                         env={"HOME": str(tmp_path), "CHECKPOINT_DISABLE": "1", "PATH": str(TERRAFORM.parent)})
    out = run.stdout + run.stderr
    assert "problems with the configuration" not in out, out
    errors = re.findall(r"Error: (.+)", out)
    assert errors and set(errors) == {"Failed to query available provider packages"}, out


# ---------------------------------------------------------------- handshake outputs


@pytest.mark.parametrize("module", ["aws-gpu-node-group", "gcp-gpu-node-group"])
def test_node_group_modules_output_the_handshake_shape(module: str) -> None:
    out = config(MODULES / module).outputs["burst_node_group"]["value"]
    assert set(out) - {"__is_block__"} == HANDSHAKE_GROUP_KEYS
    assert unquote(out["provider"]) == module.split("-")[0] and unquote(out["tier"]) == "elastic"


@pytest.mark.parametrize("module,identity", [("aws-burst-controller", "role_arn"), ("gcp-burst-controller", "service_account")])
def test_controller_modules_output_the_handshake_shape(module: str, identity: str) -> None:
    out = config(MODULES / module).outputs["burst_controller"]["value"]
    assert set(out) - {"__is_block__"} == {"cluster", "events_queue_url", identity}


def test_the_fixture_is_the_examples_outputs() -> None:
    """tests/terraform/fixtures/hybrid-outputs.json is `terraform output -json` of the example as its module
    calls and locals say: same outputs, and each group's values are the arguments it is called with."""
    ex = config(EXAMPLE)
    scope = example_scope(ex, EXAMPLE_INPUTS)
    fixture = json.loads(FIXTURE.read_text())
    assert set(fixture) == set(ex.outputs)
    for output in fixture.values():
        assert set(output) == {"sensitive", "type", "value"} and output["sensitive"] is False
    assert fixture["onprem_node_groups"]["value"] == scope["local"]["onprem_node_groups"]
    calls = {**example_calls("aws-gpu-node-group"), **example_calls("gcp-gpu-node-group")}
    assert set(calls) == {"aws_spot_a100", "aws_od_a100", "gcp_spot_a100"}
    for name, args in calls.items():
        assert unquote(ex.outputs[name]["value"]) == f"${{module.{name}.burst_node_group}}"
        value = fixture[name]["value"]
        assert set(value) == HANDSHAKE_GROUP_KEYS
        assert value["id"] == args["name"] and value["capacity_type"] == args["capacity_type"]
        assert value["instance_types"] == args.get("instance_types", [args.get("machine_type")])
        for key in ("gpu_model", "gpus_per_node", "min_size", "max_size"):
            assert value[key] == args[key], (name, key)
        assert value["warm_pool"] == args.get("warm_pool")
        if "zones" in args:
            assert value["zones"] == args["zones"]
    assert fixture["burst_controller"]["value"]["cluster"] == scope["var"]["cluster"]


# ---------------------------------------------------------------- AWS node group


AWS_GROUP = MODULES / "aws-gpu-node-group"


def test_aws_group_propagates_the_discovery_tags_at_launch() -> None:
    c = config(AWS_GROUP)
    assert set(c.locals["discovery_tags"]) >= {f'"{t}"' for t in DISCOVERY_TAGS}
    assert c.locals["tags"].endswith("local.discovery_tags)}")  # the discovery tags win a merge
    tag = dynamic(c.resources[("aws_autoscaling_group", "this")], "tag")
    assert tag is not None and tag["for_each"] == "${local.tags}"
    (content,) = tag["content"]
    assert content["propagate_at_launch"] is True
    specs = {unquote(s["resource_type"]): s["tags"] for s in blocks(c.resources[("aws_launch_template", "this")],
                                                                      "tag_specifications")}
    assert specs == {"instance": "${local.tags}", "volume": "${local.tags}"}


def test_aws_group_ignores_desired_capacity_and_warm_pool_and_secures_the_instances() -> None:
    """burst sets the desired capacity and resizes the warm pool (PutWarmPool): an apply must leave both."""
    c = config(AWS_GROUP)
    asg = c.resources[("aws_autoscaling_group", "this")]
    (lifecycle,) = asg["lifecycle"]
    assert lifecycle["ignore_changes"] == ["desired_capacity", "warm_pool"]
    assert dynamic(asg, "warm_pool") is not None  # the ignored name is the block the module sets
    lt = c.resources[("aws_launch_template", "this")]
    (metadata,) = lt["metadata_options"]
    assert unquote(metadata["http_tokens"]) == "required"
    (device,) = lt["block_device_mappings"]
    (ebs,) = device["ebs"]
    assert ebs["encrypted"] is True
    hooks = {unquote(h["lifecycle_transition"]): h for h in blocks(asg, "initial_lifecycle_hook")}
    assert set(hooks) == {"autoscaling:EC2_INSTANCE_LAUNCHING", "autoscaling:EC2_INSTANCE_TERMINATING"}
    for hook in hooks.values():
        assert unquote(hook["default_result"]) == "CONTINUE"
        timeout = hook["heartbeat_timeout"].removeprefix("${var.").removesuffix("}")
        assert int(c.variables[timeout]["default"]) <= 300


def test_aws_spot_groups_are_mixed_instances_and_on_demand_groups_get_the_warm_pool() -> None:
    asg = config(AWS_GROUP).resources[("aws_autoscaling_group", "this")]
    mixed = dynamic(asg, "mixed_instances_policy")
    assert mixed is not None and mixed["for_each"].startswith("${local.spot ?")
    (content,) = mixed["content"]
    (dist,) = content["instances_distribution"]
    assert unquote(dist["spot_allocation_strategy"]) == "price-capacity-optimized"
    assert dist["on_demand_percentage_above_base_capacity"] == 0
    (template,) = content["launch_template"]
    override = dynamic(template, "override")
    assert override is not None and override["for_each"] == "${var.instance_types}"
    assert asg["capacity_rebalance"] == "${local.spot}"
    pool = dynamic(asg, "warm_pool")
    assert pool is not None and pool["for_each"] == "${local.warm_pool_count == 1 ? [var.warm_pool] : []}"
    (pool_content,) = pool["content"]
    assert pool_content["instance_reuse_policy"][0]["reuse_on_scale_in"] == "${warm_pool.value.reuse_on_scale_in}"


@pytest.mark.slow
def test_terraform_evaluates_the_aws_groups_checks_and_tags(tmp_path: Path) -> None:
    """Terraform 1.0.3 itself: the example's groups get their discovery tags and warm-pool counts; a warm pool
    on a spot group, min_size above max_size, a hibernating GPU pool or an unknown capacity type fail the plan
    with a message that says so."""
    calls = example_calls("aws-gpu-node-group")
    names = ["tags", "warm_pool_count", "min_size"]
    spot = run_locals(AWS_GROUP, calls["aws_spot_a100"], names, tmp_path / "spot")
    od = run_locals(AWS_GROUP, calls["aws_od_a100"], names, tmp_path / "od")
    assert spot.ok and od.ok, spot.error + od.error
    assert spot.outputs["tags"] == {"burst:cluster": "hybrid", "burst:tier": "elastic", "burst:capacity-type": "spot",
                                    "burst:gpu-model": "A100", "burst:group": "aws-spot-a100"}
    assert od.outputs["tags"]["burst:capacity-type"] == "on_demand"
    assert (spot.outputs["warm_pool_count"], od.outputs["warm_pool_count"]) == (0, 1)

    pool = {"state": "stopped", "min_size": 1, "max_prepared": 2, "reuse_on_scale_in": True}
    bad = run_locals(AWS_GROUP, {**calls["aws_spot_a100"], "warm_pool": pool}, names, tmp_path / "spot")
    assert not bad.ok and "warm_pool is for on_demand groups only" in bad.error
    bad = run_locals(AWS_GROUP, {**calls["aws_od_a100"], "min_size": 5}, names, tmp_path / "od")
    assert not bad.ok and "min_size (5) is above max_size (4)" in bad.error
    bad = run_locals(AWS_GROUP, {**calls["aws_od_a100"], "warm_pool": {**pool, "state": "hibernated"}}, names,
                     tmp_path / "od")
    assert not bad.ok and "cannot hibernate" in bad.error
    bad = run_locals(AWS_GROUP, {**calls["aws_od_a100"], "capacity_type": "preemptible"}, names, tmp_path / "od")
    assert not bad.ok and "The capacity_type must be on_demand or spot." in bad.error
    user_tags = run_locals(AWS_GROUP, {**calls["aws_od_a100"], "tags": {"burst:cluster": "other", "team": "ml"}},
                           names, tmp_path / "od")
    assert user_tags.outputs["tags"]["burst:cluster"] == "hybrid" and user_tags.outputs["tags"]["team"] == "ml"


# ---------------------------------------------------------------- AWS controller


AWS_CONTROLLER = MODULES / "aws-burst-controller"


def test_controller_policy_grants_exactly_the_providers_api_actions_without_wildcards() -> None:
    c = config(AWS_CONTROLLER)
    policy = c.data[("aws_iam_policy_document", "controller")]
    granted: list[str] = []
    for st in statements(policy):
        assert unquote(st["effect"]) == "Allow"
        actions = [unquote(a) for a in st["actions"]]
        assert all("*" not in a and "?" not in a for a in actions), actions
        granted.extend(actions)
        reads = all(a.split(":")[1].startswith("Describe") for a in actions)
        conditions = blocks(st, "condition")
        if reads:
            assert not conditions and [unquote(r) for r in st["resources"]] == ["*"]
        elif not all(a.startswith("sqs:") for a in actions):
            (cond,) = conditions
            assert (unquote(cond["test"]), unquote(cond["variable"])) == ("StringEquals", "aws:ResourceTag/burst:cluster")
            assert cond["values"] == ["${var.cluster}"]
            assert all(unquote(r).startswith("arn:") for r in st["resources"])
        else:
            assert st["resources"] == ["${aws_sqs_queue.events.arn}"]
    assert len(granted) == len(set(granted))
    assert set(granted) == AWS_IAM_PERMISSIONS  # SQS batch actions are granted by the single ones
    assert "NotAction" not in json.dumps(policy)


def test_the_events_queue_receives_the_three_ec2_event_types() -> None:
    c = config(AWS_CONTROLLER)
    types = {unquote(v) for k, v in c.locals["event_types"].items()}
    assert types == set(aws_events.EVENT_KINDS) == {aws_events.INTERRUPTION, aws_events.REBALANCE, aws_events.STATE_CHANGE}
    rule = c.resources[("aws_cloudwatch_event_rule", "ec2")]
    assert rule["for_each"] == "${local.event_types}"
    pattern = rule["event_pattern"]
    assert '["aws.ec2"]' in pattern and '"detail-type" = [each.value]' in pattern
    target = c.resources[("aws_cloudwatch_event_target", "ec2")]
    assert target["for_each"] == "${aws_cloudwatch_event_rule.ec2}"
    assert target["arn"] == "${aws_sqs_queue.events.arn}"
    assert target["dead_letter_config"][0]["arn"] == "${aws_sqs_queue.dead_letter.arn}"
    queue = c.resources[("aws_sqs_queue", "events")]
    assert "aws_sqs_queue.dead_letter.arn" in queue["redrive_policy"]
    for name, queue_ref in (("events_queue", "events"), ("dead_letter_queue", "dead_letter")):
        (st,) = statements(c.data[("aws_iam_policy_document", name)])
        assert [unquote(a) for a in st["actions"]] == ["sqs:SendMessage"]
        assert st["resources"] == [f"${{aws_sqs_queue.{queue_ref}.arn}}"]
        (principal,) = st["principals"]
        assert principal["identifiers"] == ['"events.amazonaws.com"'] or principal["identifiers"] == ["events.amazonaws.com"]
        (cond,) = st["condition"]
        assert unquote(cond["variable"]) == "aws:SourceArn" and "aws_cloudwatch_event_rule.ec2" in cond["values"]
    policies = {unquote(p["queue_url"]) for (t, _), p in c.resources.items() if t == "aws_sqs_queue_policy"}
    assert policies == {"${aws_sqs_queue.events.id}", "${aws_sqs_queue.dead_letter.id}"}


# ---------------------------------------------------------------- GCP


GCP_GROUP = MODULES / "gcp-gpu-node-group"


def test_gcp_group_labels_the_instances_and_ignores_the_target_size_and_standby_pool() -> None:
    """One zonal MIG (the GCP provider manages no regional ones); burst owns its target size and resizes its
    standby pool, so an apply leaves them; Spot VMs stop on preemption, as the provider's detection expects."""
    c = config(GCP_GROUP)
    assert set(c.locals["discovery_labels"]) >= DISCOVERY_LABELS
    assert c.locals["labels"].endswith("local.discovery_labels)}")
    template = c.resources[("google_compute_instance_template", "this")]
    assert template["labels"] == "${local.labels}"
    (scheduling,) = template["scheduling"]
    assert scheduling["provisioning_model"] == '${local.spot ? "SPOT" : "STANDARD"}'
    assert scheduling["instance_termination_action"] == '${local.spot ? "STOP" : null}'
    assert "shutdown-script" in c.locals["metadata"] and template["metadata"] == "${local.metadata}"
    assert [t for t, _ in c.resources if t.endswith("instance_group_manager")] == ["google_compute_instance_group_manager"]
    mig = c.resources[("google_compute_instance_group_manager", "zonal")]
    assert "count" not in mig and mig["zone"] == "${var.zones[0]}"
    (lifecycle,) = mig["lifecycle"]
    assert lifecycle["ignore_changes"] == ["target_size", "standby_policy", "target_stopped_size",
                                           "target_suspended_size"]
    standby = dynamic(mig, "standby_policy")
    assert standby is not None and standby["for_each"] == "${range(local.standby_count)}"


@pytest.mark.slow
def test_terraform_evaluates_the_gcp_groups_labels_and_checks(tmp_path: Path) -> None:
    (args,) = example_calls("gcp-gpu-node-group").values()
    names = ["labels", "standby_count"]
    run = run_locals(GCP_GROUP, args, names, tmp_path / "gcp")
    assert run.ok, run.error
    assert run.outputs["labels"] == {"burst-cluster": "hybrid", "burst-tier": "elastic", "burst-capacity-type": "spot",
                                     "burst-gpu-model": "a100", "burst-group": "gcp-spot-a100",
                                     "burst-min-size": "0", "burst-max-size": "6"}
    assert all(v == v.lower() for v in run.outputs["labels"].values())
    assert run.outputs["standby_count"] == 0
    for zones in (["us-central1-a", "us-central1-b"], []):
        bad = run_locals(GCP_GROUP, {**args, "zones": zones}, names, tmp_path / "gcp")
        assert not bad.ok and "Give exactly one zone: burst manages zonal MIGs only" in bad.error, zones
    pool = {"state": "stopped", "min_size": 1, "max_prepared": 2, "reuse_on_scale_in": True}
    bad = run_locals(GCP_GROUP, {**args, "warm_pool": pool}, names, tmp_path / "gcp")
    assert not bad.ok and "warm_pool is for on_demand groups only" in bad.error
    od = run_locals(GCP_GROUP, {**args, "capacity_type": "on_demand", "warm_pool": pool, "zones": ["us-central1-a"]},
                    names, tmp_path / "gcp")
    assert od.ok and od.outputs["standby_count"] == 1
    bad = run_locals(GCP_GROUP, {**args, "capacity_type": "on_demand", "warm_pool": {**pool, "state": "running"}},
                     names, tmp_path / "gcp")
    assert not bad.ok and "GPUs cannot be suspended" in bad.error


def test_gcp_controller_role_grants_exactly_the_providers_permissions_without_wildcards() -> None:
    from providers.gcp import GCP_IAM_PERMISSIONS

    c = config(MODULES / "gcp-burst-controller")
    permissions = [unquote(p) for p in c.locals["permissions"]]
    assert permissions == sorted(set(permissions)) and all("*" not in p for p in permissions)
    assert set(permissions) == set(GCP_IAM_PERMISSIONS.values())
    role = c.resources[("google_project_iam_custom_role", "controller")]
    assert role["permissions"] == "${local.permissions}"
    member = c.resources[("google_project_iam_member", "controller")]
    assert member["role"] == "${google_project_iam_custom_role.controller.name}"
    assert not any(t == "google_project_iam_member" and "roles/" in json.dumps(b) for (t, _), b in c.resources.items())
