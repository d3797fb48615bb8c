# A hybrid fleet burst manages: an on-prem DGX rack (declared inventory), an
# AWS spot group, an AWS on-demand group with a warm pool and a GCP spot group,
# all wired to one controller (an AWS role and events queue, a GCP service
# account). `terraform output -json > outputs.json` then
# `burst nodegroups import --terraform-output outputs.json`.

provider "aws" {
  region = var.aws_region
}

provider "google" {
  project = var.gcp_project
  region  = var.gcp_region
}

locals {
  # On-prem capacity is not provisioned by Terraform: it is declared here so
  # that one `terraform output -json` describes the whole fleet.
  onprem_node_groups = [
    {
      id             = "onprem-a100"
      provider       = "onprem"
      region         = "dc1"
      zones          = []
      tier           = "steady"
      capacity_type  = "onprem"
      gpu_model      = "A100"
      gpus_per_node  = 8
      instance_types = ["dgx-a100"]
      min_size       = 4
      max_size       = 4
      warm_pool      = null
    },
  ]
}

module "aws_controller" {
  source  = "../../modules/aws-burst-controller"
  cluster = var.cluster
}

module "gcp_controller" {
  source  = "../../modules/gcp-burst-controller"
  project = var.gcp_project
  cluster = var.cluster
}

module "aws_spot_a100" {
  source                    = "../../modules/aws-gpu-node-group"
  cluster                   = var.cluster
  name                      = "aws-spot-a100"
  capacity_type             = "spot"
  instance_types            = ["p4d.24xlarge", "p4de.24xlarge"]
  gpu_model                 = "A100"
  gpus_per_node             = 8
  min_size                  = 0
  max_size                  = 8
  ami_id                    = var.aws_gpu_ami
  subnet_ids                = var.aws_subnet_ids
  security_group_ids        = var.aws_security_group_ids
  instance_profile_name     = var.aws_node_instance_profile
  controller_url            = var.controller_url
  agent_token_ssm_parameter = var.agent_token_ssm_parameter
}

module "aws_od_a100" {
  source                    = "../../modules/aws-gpu-node-group"
  cluster                   = var.cluster
  name                      = "aws-od-a100"
  capacity_type             = "on_demand"
  instance_types            = ["p4d.24xlarge"]
  gpu_model                 = "A100"
  gpus_per_node             = 8
  min_size                  = 0
  max_size                  = 4
  ami_id                    = var.aws_gpu_ami
  subnet_ids                = var.aws_subnet_ids
  security_group_ids        = var.aws_security_group_ids
  instance_profile_name     = var.aws_node_instance_profile
  controller_url            = var.controller_url
  agent_token_ssm_parameter = var.agent_token_ssm_parameter

  warm_pool = {
    state             = "stopped"
    min_size          = 1
    max_prepared      = 2
    reuse_on_scale_in = true
  }
}

module "gcp_spot_a100" {
  source               = "../../modules/gcp-gpu-node-group"
  project              = var.gcp_project
  cluster              = var.cluster
  name                 = "gcp-spot-a100"
  region               = var.gcp_region
  zones                = var.gcp_zones
  capacity_type        = "spot"
  machine_type         = "a2-highgpu-8g"
  gpu_model            = "A100"
  gpus_per_node        = 8
  min_size             = 0
  max_size             = 6
  image                = var.gcp_image
  subnetwork           = var.gcp_subnetwork
  node_service_account = var.gcp_node_service_account
  shutdown_script      = "systemctl stop burst-agent.service"
}
