"""The `burst.yaml` sections of the providers burst ships: each provider's connection or racks.

`policies.config.BurstConfig` declares these as its optional `aws`, `gcp`,
`libcloud` and `onprem` keys (null: the config has no groups of that provider);
a provider registered from outside brings its own section model instead
(`burst.provider_registry.ProviderSpec.settings_model`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, Strict, StrictBool, ValidationInfo, field_validator

from policies.fields import NonEmptyStr, PathStr, PositiveDuration, StrictModel


class AwsDoc(StrictModel):
    """The AWS provider's connection. Read by the runtime when a node group has provider aws, or to discover them."""

    region: NonEmptyStr = Field(description="AWS region of the node groups, e.g. us-east-1.")
    endpoint_url: NonEmptyStr | None = Field(
        default=None, description="API endpoint to use instead of AWS's (an emulator such as moto); null = AWS."
    )
    events_queue_url: NonEmptyStr | None = Field(
        default=None,
        description="SQS queue carrying the EventBridge EC2 events (interruptions, rebalance, state changes); "
        "null = the terraform outputs' burst_controller.events_queue_url, else no events.",
    )
    terraform_outputs: PathStr | None = Field(
        default=None,
        description="`terraform output -json` file whose burst_node_group outputs name the groups (relative to "
        "this file); null = discover Auto Scaling groups by their burst:cluster tag.",
    )
    discover: StrictBool = Field(
        default=True,
        description="When no node group lists provider aws, manage the groups found by tags or terraform outputs.",
    )
    launch_hook: NonEmptyStr | None = Field(
        default="burst-launch",
        description="Launch lifecycle hook burst completes (CONTINUE) once an instance is Pending:Wait; the "
        "Terraform node-group module's name by default; null = leave launch hooks to their timeout.",
    )
    terminate_hook: NonEmptyStr | None = Field(
        default="burst-terminate",
        description="Termination lifecycle hook burst heartbeats and completes; the Terraform node-group "
        "module's name by default; null = leave termination hooks to their timeout.",
    )


class LibcloudGroupDoc(StrictModel):
    """How the libcloud provider creates one node group's nodes."""

    size: NonEmptyStr = Field(description="Driver size (flavor, VM size, plan) id or name, e.g. p4d.24xlarge.")
    image: NonEmptyStr = Field(description="Driver image id or name the nodes boot.")
    location: NonEmptyStr | None = Field(
        default=None, description="Driver location (zone, region, facility) id or name; null = the driver's default."
    )
    create_args: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra create_node arguments, e.g. {ex_spot: true} (EC2) or {ex_keyname: ops, networks: [...]}.",
    )


class LibcloudDoc(StrictModel):
    """The libcloud provider's driver. Read by the runtime when a node group has provider libcloud."""

    driver: NonEmptyStr = Field(
        description="libcloud compute driver name: ec2, openstack, azure_arm, equinixmetal, gce, ... (Provider.*)."
    )
    key_env: NonEmptyStr | None = Field(
        default=None, description="Environment variable holding the driver's key (user, access key, client id)."
    )
    secret_env: NonEmptyStr | None = Field(
        default=None, description="Environment variable holding the driver's secret (password, secret key)."
    )
    driver_args: dict[str, Any] = Field(
        default_factory=dict,
        description="Other driver constructor arguments (region, ex_force_auth_url, host, port, ...); no secrets.",
    )
    metadata_arg: NonEmptyStr | None = Field(
        default="ex_metadata",
        description="create_node argument that carries node metadata (ex_metadata: EC2, OpenStack; ex_tags: Azure); "
        "null = nodes are known by name only.",
    )
    groups: dict[str, LibcloudGroupDoc] = Field(
        default_factory=dict, description="Per node group id (provider libcloud): size, image, location."
    )


class GcpDoc(StrictModel):
    """The GCP provider's connection. Read by the runtime when a node group has provider gcp, or to discover them."""

    project: NonEmptyStr = Field(description="GCP project id of the managed instance groups.")
    zones: Annotated[list[NonEmptyStr], Strict()] = Field(
        default_factory=list, description="Zones to find zonal managed instance groups in, e.g. [us-central1-a]."
    )
    region: NonEmptyStr | None = Field(
        default=None, description="Region whose zones are searched when zones is empty, e.g. us-central1."
    )
    endpoint: NonEmptyStr | None = Field(
        default=None,
        description="Compute API endpoint to use instead of Google's (a local emulator); a plain http:// one is "
        "called without credentials. null = compute.googleapis.com with Application Default Credentials.",
    )
    discover: StrictBool = Field(
        default=True,
        description="When no node group lists provider gcp, manage the groups whose instance template is labelled "
        "burst-cluster with this cluster.",
    )


class OnPremDoc(StrictModel):
    """The onprem provider's racks. Read by the runtime when a node group has provider onprem."""

    inventory: PathStr = Field(
        description="YAML file of each onprem group's hosts (groups: {<id>: {hosts: [name | {name, address, gpus}]}}), "
        "relative to this file; a group's size is its host count."
    )
    power_on: Annotated[list[NonEmptyStr], Strict()] | None = Field(
        default=None,
        description="argv that powers a host on, no shell; {host} (address, else name), {node} and {group} are "
        "substituted, e.g. [ipmitool, -H, '{host}', chassis, power, on]. null with power_off null = declared only.",
    )
    power_off: Annotated[list[NonEmptyStr], Strict()] | None = Field(
        default=None, validate_default=True,
        description="argv that powers a host off, e.g. [scontrol, power, down, '{node}'].",
    )
    command_timeout: PositiveDuration = Field(
        default=60.0, description="Duration a power command may run before it counts as failed (default 60 s)."
    )
    heartbeat_timeout: PositiveDuration = Field(
        default=60.0, description="Duration without an agent heartbeat after which a ready host is lost (default 60 s)."
    )
    resume_timeout: PositiveDuration = Field(
        default=600.0,
        description="Duration a powered-on host may take to heartbeat before it is failed (default 600 s).",
    )

    @field_validator("power_off")
    @classmethod
    def _both_commands(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        power_on = info.data.get("power_on")
        if (power_on is None) != (value is None):
            raise ValueError("give both power_on and power_off, or neither (declared only)")
        if power_on == [] or value == []:
            raise ValueError("an argv needs at least the command")
        return value


__all__ = ["AwsDoc", "GcpDoc", "LibcloudDoc", "LibcloudGroupDoc", "OnPremDoc"]
