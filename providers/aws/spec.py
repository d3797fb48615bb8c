"""Registers the AWS provider; boto3 is imported by its factory, only when a config uses AWS."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from burst.model import Tier
from burst.provider_registry import ProviderContext, ProviderSpec, configured, register

if TYPE_CHECKING:
    from providers.base import Provider


def build(ctx: ProviderContext) -> Provider:
    """The AWS provider for the config's aws section: the listed aws groups, else those it discovers."""
    from providers.aws import AwsProvider
    from providers.aws.discovery import DiscoveryError
    from providers.base import ProviderError

    config, aws = ctx.config, ctx.config.aws
    return configured("aws", lambda: AwsProvider(
        cluster=config.cluster, region=aws.region, clock=ctx.clock, endpoint_url=aws.endpoint_url,
        groups=ctx.listed or None, terraform_outputs=config.aws_terraform_outputs(),
        events_queue_url=aws.events_queue_url, prices=ctx.price("aws"),
        sqs_wait_s=0 if config.clock == "sim" else 1,  # no long poll on a simulated clock
        launch_hook=aws.launch_hook, terminate_hook=aws.terminate_hook,
    ), ProviderError, DiscoveryError)


def discovers(config: Any) -> bool:
    """Whether the aws section asks for discovery and no node group lists an aws group."""
    return config.aws is not None and config.aws.discover and not any(g.provider == "aws" for g in config.node_groups)


SPEC = register(ProviderSpec(
    "aws", build, section="aws", section_fix="an aws: section with at least its region", discovers=discovers,
    none_found="aws: no node groups found: tag Auto Scaling groups with burst:cluster {cluster} or set "
               "aws.terraform_outputs",
    tier=Tier.ELASTIC, min_billed_s=60.0, root_volume_type="gp3", storage_region="us-east-1"))
