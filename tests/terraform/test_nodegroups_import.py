"""`burst nodegroups import` on `terraform output -json` of the hybrid example (tests/terraform/fixtures, checked
against the example's .tf files in test_terraform_modules), and the AWS provider finding the same groups in a
moto server by the tags Terraform evaluates from the node-group module."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from tfhcl import (
    EXAMPLE,
    FIXTURE,
    MODULES,
    config,
    dynamic,
    example_scope,
    module_arguments,
    run_locals,
    unquote,
)

from burst.cli import main
from burst.nodegroups_cli import read_outputs
from policies.config import load_config

EXPECTED = {  # id -> what the example declares for it
    "onprem-a100": {"provider": "onprem", "region": "dc1", "tier": "steady", "capacity_type": "onprem",
                    "instance_type": "dgx-a100", "min_size": 4, "max_size": 4},
    "aws-spot-a100": {"provider": "aws", "region": "us-east-1", "tier": "elastic", "capacity_type": "spot",
                      "instance_type": "p4d.24xlarge", "min_size": 0, "max_size": 8},
    "aws-od-a100": {"provider": "aws", "region": "us-east-1", "tier": "elastic", "capacity_type": "on_demand",
                    "instance_type": "p4d.24xlarge", "min_size": 0, "max_size": 4},
    "gcp-spot-a100": {"provider": "gcp", "region": "us-central1", "tier": "elastic", "capacity_type": "spot",
                      "instance_type": "a2-highgpu-8g", "min_size": 0, "max_size": 6},
}


def fixture() -> dict[str, Any]:
    return dict(json.loads(FIXTURE.read_text()))


def run_import(tmp_path: Path, *args: str, outputs: dict[str, Any] | None = None) -> Result:
    source = FIXTURE
    if outputs is not None:
        source = tmp_path / "outputs.json"
        source.write_text(json.dumps(outputs))
    return CliRunner().invoke(main, ["nodegroups", "import", "--terraform-output", str(source),
                                     "--config", str(tmp_path / "burst.yaml"), *args])


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# ---------------------------------------------------------------- import


def test_import_writes_the_examples_groups_into_a_valid_burst_yaml(tmp_path: Path) -> None:
    result = run_import(tmp_path)
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "4 added, 0 updated, 0 unchanged" in result.output
    for gid in EXPECTED:
        assert gid in result.output
    cfg = load_config(tmp_path / "burst.yaml")
    assert cfg.cluster == "hybrid"
    groups = {g.id: g for g in cfg.node_groups}
    assert list(groups) == ["aws-od-a100", "aws-spot-a100", "gcp-spot-a100", "onprem-a100"]  # the outputs' order
    for gid, want in EXPECTED.items():
        got = groups[gid].model_dump(mode="json")
        assert {k: got[k] for k in want} == want, gid
        assert (got["gpu_model"], got["gpus_per_node"]) == ("A100", 8)
    od = groups["aws-od-a100"]
    assert (od.warm_pool.min_size, od.warm_pool.max_prepared, od.warm_pool.state.value, od.warm_pool.reuse_on_scale_in) \
        == (1, 2, "stopped", True)
    assert groups["aws-spot-a100"].warm_pool.min_size == 0 and groups["aws-spot-a100"].zone == ""  # two zones
    assert cfg.aws is not None and cfg.aws.region == "us-east-1"
    assert cfg.aws.events_queue_url == fixture()["burst_controller"]["value"]["events_queue_url"]
    assert cfg.gcp is not None and (cfg.gcp.project, cfg.gcp.zones) == ("my-gpu-project", ["us-central1-a"])
    models = {g.id: g for g in cfg.node_groups_model()}
    assert models["onprem-a100"].shape.gpus_per_node == 8 and models["aws-od-a100"].warm_pool.max_prepared == 2
    assert leftovers(tmp_path) == []
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "burst.yaml").stat().st_mode & 0o777 == 0o666 & ~umask


def test_json_output_and_a_second_import_changes_nothing(tmp_path: Path) -> None:
    first = run_import(tmp_path, "--json")
    assert first.exit_code == 0, first.output
    doc = json.loads(first.output)
    assert doc["written"] is True and doc["dry_run"] is False and doc["ignored_outputs"] == []
    assert doc["controller"]["role_arn"].startswith("arn:aws:iam::")
    assert {g["id"]: g["change"] for g in doc["groups"]} == dict.fromkeys(EXPECTED, "added")
    spot = next(g for g in doc["groups"] if g["id"] == "aws-spot-a100")
    assert spot["instance_types"] == ["p4d.24xlarge", "p4de.24xlarge"] and spot["zones"] == ["us-east-1a", "us-east-1b"]
    assert next(g for g in doc["groups"] if g["id"] == "onprem-a100")["output"] == "onprem_node_groups[0]"
    text = (tmp_path / "burst.yaml").read_text()
    second = json.loads(run_import(tmp_path, "--json").output)
    assert {g["change"] for g in second["groups"]} == {"unchanged"}
    assert (tmp_path / "burst.yaml").read_text() == text


def test_import_merges_into_an_existing_config_by_id(tmp_path: Path) -> None:
    existing = {
        "cluster": "hybrid",
        "loop_interval": "30s",
        "node_groups": [
            {"id": "sim-a100", "provider": "sim", "region": "lab", "tier": "elastic", "capacity_type": "spot",
             "instance_type": "p4d.24xlarge", "gpu_model": "A100", "gpus_per_node": 8, "max_size": 2},
            {"id": "aws-od-a100", "provider": "aws", "region": "us-east-1", "zone": "us-east-1c", "tier": "elastic",
             "capacity_type": "on_demand", "instance_type": "p5.48xlarge", "gpu_model": "H100", "gpus_per_node": 8,
             "max_size": 2, "boot_latency": "7m", "warm_pool": {"min_size": 0, "max_age": "7d"}},
        ],
        "aws": {"region": "us-east-1", "endpoint_url": "http://127.0.0.1:5000"},
        "gcp": {"project": "gpu-prod", "zones": ["us-central1-f"], "endpoint": "http://127.0.0.1:8080"},
    }
    (tmp_path / "burst.yaml").write_text(yaml.safe_dump(existing, sort_keys=False))
    result = run_import(tmp_path, "--json")
    assert result.exit_code == 0, result.output
    changes = {g["id"]: g["change"] for g in json.loads(result.output)["groups"]}
    assert changes == {"aws-od-a100": "updated", "aws-spot-a100": "added", "gcp-spot-a100": "added",
                       "onprem-a100": "added"}
    cfg = load_config(tmp_path / "burst.yaml")
    assert [g.id for g in cfg.node_groups] == ["sim-a100", "aws-od-a100", "aws-spot-a100", "gcp-spot-a100",
                                               "onprem-a100"]
    od = cfg.node_groups[1]
    assert (od.instance_type, od.gpu_model, od.max_size, od.zone) == ("p4d.24xlarge", "A100", 4, "")  # Terraform's
    assert od.boot_latency == 420.0 and od.warm_pool.max_age == 7 * 86400.0  # burst.yaml's own settings stay
    assert od.warm_pool.min_size == 1
    assert cfg.node_groups[0].max_size == 2 and cfg.loop_interval == 30.0
    assert cfg.aws is not None and cfg.aws.endpoint_url == "http://127.0.0.1:5000"
    assert cfg.aws.events_queue_url is not None and cfg.aws.events_queue_url.endswith("/burst-hybrid-events")
    assert cfg.gcp is not None and (cfg.gcp.project, cfg.gcp.zones, cfg.gcp.endpoint) == (
        "gpu-prod", ["us-central1-a", "us-central1-f"], "http://127.0.0.1:8080")


def test_dry_run_shows_the_groups_and_writes_nothing(tmp_path: Path) -> None:
    result = run_import(tmp_path, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "would write" in result.output and "aws-od-a100" in result.output
    assert not (tmp_path / "burst.yaml").exists()
    (tmp_path / "burst.yaml").write_text("cluster: hybrid\n")
    doc = json.loads(run_import(tmp_path, "--dry-run", "--json").output)
    assert doc["written"] is False and doc["dry_run"] is True
    assert (tmp_path / "burst.yaml").read_text() == "cluster: hybrid\n" and leftovers(tmp_path) == []


def _drop(output: str, key: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        del doc[output]["value"][key]
    return mutate


def _set(output: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        target = doc[output]["value"]
        (target[0] if isinstance(target, list) else target)[key] = value
    return mutate


BAD_OUTPUTS = [
    ("missing max_size", _drop("aws_od_a100", "max_size"), ["output aws_od_a100", "`max_size` is missing"]),
    ("missing capacity_type", _drop("aws_spot_a100", "capacity_type"), ["output aws_spot_a100", "`capacity_type` is missing"]),
    ("min above max", _set("gcp_spot_a100", "min_size", 7), ["output gcp_spot_a100", "`min_size`: 7 is above max_size 6"]),
    ("unknown provider", _set("gcp_spot_a100", "provider", "azure"), ["output gcp_spot_a100", "`provider`: unknown provider 'azure'"]),
    ("unknown capacity type", _set("aws_spot_a100", "capacity_type", "preemptible"),
     ["output aws_spot_a100", "`capacity_type`: unknown capacity type 'preemptible'", "on_demand"]),
    ("duplicate ids", _set("gcp_spot_a100", "id", "aws-od-a100"),
     ["output gcp_spot_a100", "duplicate node group id 'aws-od-a100' (also output aws_od_a100)"]),
    ("warm pool on spot", _set("aws_spot_a100", "warm_pool", {"state": "stopped", "min_size": 1, "max_prepared": 1,
                                                               "reuse_on_scale_in": True}),
     ["output aws_spot_a100", "`warm_pool`: spot groups have no warm pool"]),
    ("regional gcp group", _set("gcp_spot_a100", "zones", ["us-central1-a", "us-central1-b"]),
     ["output gcp_spot_a100", "`zones`: gcp group 'gcp-spot-a100' spans 2 zones (us-central1-a, us-central1-b)",
      "zonal MIGs only", "give the gcp-gpu-node-group module one zone"]),
    ("onprem tier", _set("onprem_node_groups", "tier", "elastic"),
     ["output onprem_node_groups[0]", "`tier`", "its tier must be steady"]),
    ("fractional gpus", _set("aws_od_a100", "gpus_per_node", 1.5), ["output aws_od_a100", "`gpus_per_node`: 1.5 is not a whole number"]),
    ("not terraform's shape", lambda d: d.update(stray=[1, 2]), ["output stray", "not in `terraform output -json` shape"]),
    ("controller without cluster", lambda d: d["burst_controller"]["value"].pop("cluster"),
     ["output burst_controller", "`cluster` is missing"]),
]


@pytest.fixture
def existing_config(tmp_path: Path) -> Iterator[bytes]:
    text = b"cluster: hybrid\nnode_groups: []\n"
    (tmp_path / "burst.yaml").write_bytes(text)
    yield text


@pytest.mark.parametrize("mutate,expected", [(m, e) for _, m, e in BAD_OUTPUTS], ids=[n for n, _, _ in BAD_OUTPUTS])
def test_inconsistent_outputs_name_the_output_and_field_and_write_nothing(
    tmp_path: Path, existing_config: bytes, mutate: Callable[[dict[str, Any]], None], expected: list[str]
) -> None:
    outputs = copy.deepcopy(fixture())
    mutate(outputs)
    result = run_import(tmp_path, outputs=outputs)
    assert result.exit_code == 1
    line = result.output.strip()
    assert line.startswith("Error: ") and line.count("\n") == 0, line
    for part in expected:
        assert part in line, (part, line)
    assert line.endswith("; nothing written")
    assert (tmp_path / "burst.yaml").read_bytes() == existing_config and leftovers(tmp_path) == []


def test_a_controller_of_another_cluster_is_refused(tmp_path: Path) -> None:
    (tmp_path / "burst.yaml").write_text("cluster: prod\n")
    result = run_import(tmp_path)
    assert result.exit_code == 1
    assert "output burst_controller: field `cluster`: 'hybrid' is not" in result.output and "'prod'" in result.output
    assert (tmp_path / "burst.yaml").read_text() == "cluster: prod\n"


def test_a_merged_config_the_schema_rejects_is_not_written(tmp_path: Path) -> None:
    """The file's own error (found by load_config on the merged document) comes back with its line."""
    text = "cluster: hybrid\nloop_interval: 10s\nloop_jitter: 20s\n"
    (tmp_path / "burst.yaml").write_text(text)
    result = run_import(tmp_path)
    assert result.exit_code == 1
    assert f"{tmp_path / 'burst.yaml'}: the merged config is invalid" in result.output
    assert "loop_jitter" in result.output and "nothing written" in result.output
    assert (tmp_path / "burst.yaml").read_text() == text and leftovers(tmp_path) == []


def test_outputs_without_node_groups_are_an_error_and_others_are_ignored(tmp_path: Path) -> None:
    outputs = {"vpc_id": {"sensitive": False, "type": "string", "value": "vpc-1"}}
    result = run_import(tmp_path, outputs=outputs)
    assert result.exit_code == 1 and "no burst_node_group outputs (outputs: vpc_id)" in result.output
    mixed = {**fixture(), **outputs}
    doc = json.loads(run_import(tmp_path, "--json", outputs=mixed).output)
    assert doc["ignored_outputs"] == ["vpc_id"] and len(doc["groups"]) == 4


def test_unreadable_outputs_say_how_to_make_them(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    result = CliRunner().invoke(main, ["nodegroups", "import", "--terraform-output", str(missing),
                                       "--config", str(tmp_path / "burst.yaml")])
    assert result.exit_code == 1 and f"run `terraform output -json > {missing}`" in result.output


# ---------------------------------------------------------------- the same groups by tags, in moto


@pytest.mark.slow
def test_the_aws_provider_discovers_the_imported_groups_by_the_modules_tags(tmp_path: Path) -> None:
    """The ASGs are created in moto with the tags Terraform 1.0.3 evaluates from aws-gpu-node-group's .tf files
    for the example's module calls (and the allocation strategy its main.tf sets); the provider's tag
    discovery then finds exactly the aws groups `burst nodegroups import` reads from the outputs, and so does
    its `aws.terraform_outputs` discovery of the same file."""
    from aws_env import AMI, REGION, client, fake_credentials, moto_server

    from providers.aws import AwsProvider
    from providers.sim import ManualClock

    module = MODULES / "aws-gpu-node-group"
    asg_block = config(module).resources[("aws_autoscaling_group", "this")]
    mixed = dynamic(asg_block, "mixed_instances_policy")
    assert mixed is not None
    strategy = unquote(mixed["content"][0]["instances_distribution"][0]["spot_allocation_strategy"])
    ex = config(EXAMPLE)
    scope = example_scope(ex, {"aws_gpu_ami": "ami-0123456789abcdef0", "aws_subnet_ids": ["subnet-0aaaaaaaaaaaaaaaa"],
                               "gcp_project": "p", "gcp_subnetwork": "s", "gcp_node_service_account": "sa",
                               "controller_url": "http://10.0.0.5:8470"})
    calls = {n: module_arguments(c, scope) for n, c in ex.modules.items()
             if unquote(c["source"]).endswith("/aws-gpu-node-group")}
    zones = fixture()["aws_od_a100"]["value"]["zones"]
    with fake_credentials():
        moto = moto_server()
        moto.reset()
        ec2, autoscaling = client("ec2", moto.url), client("autoscaling", moto.url)
        for name, args in calls.items():
            run = run_locals(module, args, ["tags", "min_size"], tmp_path / name)
            assert run.ok, run.error
            tags = run.outputs["tags"]
            lt = f"{args['name']}-lt"
            ec2.create_launch_template(LaunchTemplateName=lt, LaunchTemplateData={
                "ImageId": AMI, "InstanceType": args["instance_types"][0],
                "TagSpecifications": [{"ResourceType": "instance",
                                       "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]})
            params: dict[str, Any] = {
                "AutoScalingGroupName": args["name"], "MinSize": run.outputs["min_size"], "MaxSize": args["max_size"],
                "DesiredCapacity": run.outputs["min_size"], "AvailabilityZones": zones,
                "Tags": [{"Key": k, "Value": v, "PropagateAtLaunch": True, "ResourceId": args["name"],
                          "ResourceType": "auto-scaling-group"} for k, v in tags.items()],
            }
            spec = {"LaunchTemplateName": lt, "Version": "$Latest"}
            if args["capacity_type"] == "spot":
                params["MixedInstancesPolicy"] = {
                    "LaunchTemplate": {"LaunchTemplateSpecification": spec,
                                       "Overrides": [{"InstanceType": t} for t in args["instance_types"]]},
                    "InstancesDistribution": {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 0,
                                              "SpotAllocationStrategy": strategy}}
            else:
                params["LaunchTemplate"] = spec
            autoscaling.create_auto_scaling_group(**params)

        cluster = scope["var"]["cluster"]
        by_tags = AwsProvider(cluster=cluster, region=REGION, clock=ManualClock(), endpoint_url=moto.url, sqs_wait_s=0)
        by_outputs = AwsProvider(cluster=cluster, region=REGION, clock=ManualClock(), endpoint_url=moto.url,
                                 sqs_wait_s=0, terraform_outputs=FIXTURE)
        someone_else = AwsProvider(cluster="other", region=REGION, clock=ManualClock(), endpoint_url=moto.url,
                                   sqs_wait_s=0)

    imported = {g.entry["id"]: g.entry for g in read_outputs(FIXTURE).groups if g.entry["provider"] == "aws"}
    assert set(imported) == {"aws-spot-a100", "aws-od-a100"}

    def seen(provider: AwsProvider) -> dict[str, tuple[Any, ...]]:
        return {g.id: (g.tier.value, g.capacity_type.value, g.instance_type, g.shape.gpu_model, g.shape.gpus_per_node,
                       g.min_size, g.max_size) for g in provider.node_groups()}

    want = {gid: (e["tier"], e["capacity_type"], e["instance_type"], e["gpu_model"], e["gpus_per_node"], e["min_size"],
                  e["max_size"]) for gid, e in imported.items()}
    assert seen(by_tags) == want
    assert seen(by_outputs) == want
    assert by_outputs.events_queue_url == fixture()["burst_controller"]["value"]["events_queue_url"]
    assert {g.id: g.warm_pool.min_size for g in by_outputs.node_groups()} == {"aws-spot-a100": 0, "aws-od-a100": 1}
    assert someone_else.node_groups() == []


@pytest.mark.slow
def test_the_gcp_provider_discovers_the_imported_group_by_the_modules_labels(tmp_path: Path) -> None:
    """The example's GCP group as a template labelled with what Terraform 1.0.3 evaluates from
    gcp-gpu-node-group's .tf files, and a zonal MIG, on the local Compute API: the GCP provider's label
    discovery finds the group `burst nodegroups import` reads from the outputs."""
    from gcp_env import compute_server

    from providers.gcp import GcpProvider
    from providers.sim import ManualClock

    module = MODULES / "gcp-gpu-node-group"
    ex = config(EXAMPLE)
    scope = example_scope(ex, {"aws_gpu_ami": "ami-0123456789abcdef0", "aws_subnet_ids": ["subnet-0aaaaaaaaaaaaaaaa"],
                               "gcp_project": "burst-test", "gcp_subnetwork": "s", "gcp_node_service_account": "sa",
                               "controller_url": "http://10.0.0.5:8470"})
    ((name, args),) = [(n, module_arguments(c, scope)) for n, c in ex.modules.items()
                       if unquote(c["source"]).endswith("/gcp-gpu-node-group")]
    run = run_locals(module, args, ["labels", "min_size", "spot"], tmp_path / name)
    assert run.ok, run.error
    (zone,) = args["zones"]
    clock = ManualClock()
    with compute_server(clock, project=args["project"]) as server:
        server.add_template(f"{args['name']}-t", args["machine_type"], labels=run.outputs["labels"],
                            spot=run.outputs["spot"])
        server.add_mig(zone, args["name"], f"{args['name']}-t", target_size=run.outputs["min_size"])
        provider = GcpProvider(cluster=scope["var"]["cluster"], project=args["project"], clock=clock, zones=[zone],
                               endpoint=server.url)
        groups = provider.node_groups()
    (imported,) = [g.entry for g in read_outputs(FIXTURE).groups if g.entry["provider"] == "gcp"]
    (group,) = groups
    assert (group.id, group.tier.value, group.capacity_type.value, group.instance_type, group.shape.gpu_model,
            group.shape.gpus_per_node, group.min_size, group.max_size, group.zone) == (
        imported["id"], imported["tier"], imported["capacity_type"], imported["instance_type"], imported["gpu_model"],
        imported["gpus_per_node"], imported["min_size"], imported["max_size"], imported["zone"])
