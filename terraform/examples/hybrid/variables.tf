variable "cluster" {
  type        = string
  description = "burst cluster id (burst.yaml `cluster`)."
  default     = "hybrid"
}

variable "aws_region" {
  type        = string
  description = "AWS region of the AWS groups and the events queue."
  default     = "us-east-1"
}

variable "aws_gpu_ami" {
  type        = string
  description = "GPU AMI of the AWS groups (NVIDIA driver installed)."
}

variable "aws_subnet_ids" {
  type        = list(string)
  description = "Subnets of the AWS groups (one per availability zone)."
}

variable "aws_security_group_ids" {
  type        = list(string)
  description = "Security groups of the AWS instances."
  default     = []
}

variable "aws_node_instance_profile" {
  type        = string
  description = "Instance profile of the AWS nodes (reads the agent token parameter)."
  default     = null
}

variable "gcp_project" {
  type        = string
  description = "GCP project of the GCP group."
}

variable "gcp_region" {
  type        = string
  description = "GCP region of the GCP group."
  default     = "us-central1"
}

variable "gcp_zones" {
  type        = list(string)
  description = "Zone of the GCP group, as a one-element list: the module makes a zonal MIG, the only kind burst's GCP provider manages."
  default     = ["us-central1-a"]
}

variable "gcp_image" {
  type        = string
  description = "GPU boot image of the GCP group."
  default     = "projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11"
}

variable "gcp_subnetwork" {
  type        = string
  description = "Subnetwork of the GCP instances."
}

variable "gcp_node_service_account" {
  type        = string
  description = "Service account the GCP instances run as."
}

variable "controller_url" {
  type        = string
  description = "URL of the controller's agent link the cloud nodes' `burst agent` connects to."
}

variable "agent_token_ssm_parameter" {
  type        = string
  description = "SSM SecureString parameter holding the AWS nodes' agent token."
  default     = "/burst/hybrid/agent-token"
}
