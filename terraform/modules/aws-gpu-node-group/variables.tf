variable "cluster" {
  type        = string
  description = "burst cluster id (burst.yaml `cluster`); tags the group and its instances as burst:cluster."

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_-]{0,62}$", var.cluster))
    error_message = "The cluster must be lower-case letters, digits, '_' or '-', starting with a letter or digit, at most 63 characters."
  }
}

variable "name" {
  type        = string
  description = "Node group id: the Auto Scaling group's name and burst's group id."

  validation {
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$", var.name))
    error_message = "The name must be letters, digits, '_', '.' or '-', starting with a letter or digit, at most 63 characters."
  }
}

variable "capacity_type" {
  type        = string
  description = "on_demand or spot. Spot groups get a mixed instances policy over instance_types (price-capacity-optimized, capacity rebalance) and never a warm pool."

  validation {
    condition     = contains(["on_demand", "spot"], var.capacity_type)
    error_message = "The capacity_type must be on_demand or spot."
  }
}

variable "instance_types" {
  type        = list(string)
  description = "GPU instance types. On-demand groups launch the first one; spot groups spread over all of them (the first is the launch template's)."

  validation {
    condition     = length(var.instance_types) >= 1 && length(var.instance_types) <= 20
    error_message = "Give between 1 and 20 instance types."
  }
}

variable "gpu_model" {
  type        = string
  description = "GPU model the instances carry, as burst names it (e.g. A100, H100); tags the group as burst:gpu-model."

  validation {
    condition     = length(var.gpu_model) > 0
    error_message = "The gpu_model must not be empty."
  }
}

variable "gpus_per_node" {
  type        = number
  description = "GPUs per instance (the same for every instance type of the group)."

  validation {
    condition     = var.gpus_per_node >= 1 && floor(var.gpus_per_node) == var.gpus_per_node
    error_message = "The gpus_per_node must be a whole number >= 1."
  }
}

variable "min_size" {
  type        = number
  description = "Fewest instances the group keeps (burst never scales below it)."
  default     = 0

  validation {
    condition     = var.min_size >= 0 && floor(var.min_size) == var.min_size
    error_message = "The min_size must be a whole number >= 0."
  }
}

variable "max_size" {
  type        = number
  description = "Most instances the group may have (burst never asks for more); must be >= min_size."

  validation {
    condition     = var.max_size >= 1 && floor(var.max_size) == var.max_size
    error_message = "The max_size must be a whole number >= 1."
  }
}

variable "ami_id" {
  type        = string
  description = "GPU AMI the instances boot (with the NVIDIA driver, e.g. an AWS Deep Learning Base GPU AMI)."

  validation {
    condition     = can(regex("^ami-[0-9a-f]{8,17}$", var.ami_id))
    error_message = "The ami_id must look like ami-0123456789abcdef0."
  }
}

variable "subnet_ids" {
  type        = list(string)
  description = "Subnets the group launches into; their availability zones are the group's zones."

  validation {
    condition     = length(var.subnet_ids) >= 1
    error_message = "Give at least one subnet."
  }
}

variable "security_group_ids" {
  type        = list(string)
  description = "Security groups of the instances."
  default     = []
}

variable "instance_profile_name" {
  type        = string
  description = "IAM instance profile of the instances (it must allow reading agent_token_ssm_parameter in agent mode); null = none."
  default     = null
}

variable "root_volume_size_gib" {
  type        = number
  description = "Size of the encrypted gp3 root volume, GiB."
  default     = 200

  validation {
    condition     = var.root_volume_size_gib >= 8 && var.root_volume_size_gib <= 16384
    error_message = "The root_volume_size_gib must be between 8 and 16384."
  }
}

variable "root_device_name" {
  type        = string
  description = "Device name of the AMI's root volume."
  default     = "/dev/xvda"
}

variable "kms_key_id" {
  type        = string
  description = "KMS key ARN encrypting the root volume; null = the account's default EBS key."
  default     = null
}

variable "bootstrap" {
  type        = string
  description = "What the user data does: agent (install and start `burst agent`, linked to controller_url) or join (run join_command, e.g. a Kubernetes or Slurm join)."
  default     = "agent"

  validation {
    condition     = contains(["agent", "join"], var.bootstrap)
    error_message = "The bootstrap must be agent or join."
  }
}

variable "controller_url" {
  type        = string
  description = "agent mode: URL of the controller's agent link, e.g. http://10.0.0.5:8470."
  default     = ""
}

variable "agent_token_ssm_parameter" {
  type        = string
  description = "agent mode: SSM SecureString parameter holding the nodes' agent token."
  default     = ""
}

variable "burst_package" {
  type        = string
  description = "agent mode: pip requirement installing burst on the node."
  default     = "burst-controller"
}

variable "join_command" {
  type        = string
  description = "join mode: shell command that joins the instance to the user's cluster (run as root once, at first boot)."
  default     = ""
}

variable "extra_user_data" {
  type        = string
  description = "Shell run as root at first boot before the bootstrap (e.g. mounting local NVMe)."
  default     = ""
}

variable "warm_pool" {
  type = object({
    state             = string
    min_size          = number
    max_prepared      = number
    reuse_on_scale_in = bool
  })
  description = "on_demand groups only: hot pool of pre-initialised instances. state is stopped, running or hibernated (GPU families cannot hibernate); max_prepared 0 = only min_size; reuse_on_scale_in returns scaled-in instances to the pool. null = no warm pool."
  default     = null

  validation {
    condition     = var.warm_pool == null ? true : contains(["stopped", "running", "hibernated"], var.warm_pool.state)
    error_message = "The warm_pool.state must be stopped, running or hibernated."
  }

  validation {
    condition     = var.warm_pool == null ? true : var.warm_pool.min_size >= 0 && var.warm_pool.max_prepared >= 0
    error_message = "The warm_pool.min_size and warm_pool.max_prepared must be >= 0."
  }
}

variable "launch_hook_timeout_s" {
  type        = number
  description = "Seconds a launching instance waits on the burst-launch lifecycle hook before CONTINUE (burst completes it when the node is ready)."
  default     = 300

  validation {
    condition     = var.launch_hook_timeout_s >= 30 && var.launch_hook_timeout_s <= 7200
    error_message = "The launch_hook_timeout_s must be between 30 and 7200 (AWS's range)."
  }
}

variable "terminate_hook_timeout_s" {
  type        = number
  description = "Seconds a terminating instance waits on the burst-terminate lifecycle hook before CONTINUE (burst heartbeats it while jobs checkpoint, then completes it)."
  default     = 120

  validation {
    condition     = var.terminate_hook_timeout_s >= 30 && var.terminate_hook_timeout_s <= 7200
    error_message = "The terminate_hook_timeout_s must be between 30 and 7200 (AWS's range)."
  }
}

variable "boot_latency_s" {
  type        = number
  description = "Seconds from launch to ready burst assumes for this group (tag burst:boot-latency); null = burst's default."
  default     = null
}

variable "tags" {
  type        = map(string)
  description = "Extra tags on the group, its instances and volumes (the burst: discovery tags win on conflict)."
  default     = {}
}
