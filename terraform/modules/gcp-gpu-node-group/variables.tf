variable "project" {
  type        = string
  description = "GCP project the group lives in."
}

variable "cluster" {
  type        = string
  description = "burst cluster id (burst.yaml `cluster`); labels the instances as burst-cluster."

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_-]{0,62}$", var.cluster))
    error_message = "The cluster must be lower-case letters, digits, '_' or '-', starting with a letter or digit, at most 63 characters."
  }
}

variable "name" {
  type        = string
  description = "Node group id: the managed instance group's name and burst's group id."

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,50}[a-z0-9])?$", var.name))
    error_message = "The name must be a GCP resource name: lower-case letters, digits and '-', starting with a letter, at most 52 characters."
  }
}

variable "region" {
  type        = string
  description = "Region of the group, e.g. us-central1."
}

variable "zones" {
  type        = list(string)
  description = "The group's zone, as a one-element list: burst manages zonal MIGs only (for several zones, make one group per zone)."

  validation {
    condition     = length(var.zones) == 1
    error_message = "Give exactly one zone: burst manages zonal MIGs only; make one group per zone."
  }
}

variable "capacity_type" {
  type        = string
  description = "on_demand or spot (Spot provisioning model, instance_termination_action STOP: a preempted VM stays TERMINATED, which is how burst's GCP provider detects a preemption it missed the operation of). Spot groups never get a standby pool."

  validation {
    condition     = contains(["on_demand", "spot"], var.capacity_type)
    error_message = "The capacity_type must be on_demand or spot."
  }
}

variable "machine_type" {
  type        = string
  description = "Machine type, e.g. a2-highgpu-8g (GPUs attached) or n1-standard-8 (with gpu_type)."
}

variable "gpu_model" {
  type        = string
  description = "GPU model as burst names it (e.g. A100); labelled lower-case as burst-gpu-model."

  validation {
    condition     = length(var.gpu_model) > 0
    error_message = "The gpu_model must not be empty."
  }
}

variable "gpu_type" {
  type        = string
  description = "Accelerator type to attach, e.g. nvidia-tesla-t4 (N1 machine types); null = the machine type comes with its GPUs (A2, A3, G2)."
  default     = null
}

variable "gpus_per_node" {
  type        = number
  description = "GPUs per instance (the accelerator count when gpu_type is set)."

  validation {
    condition     = var.gpus_per_node >= 1 && floor(var.gpus_per_node) == var.gpus_per_node
    error_message = "The gpus_per_node must be a whole number >= 1."
  }
}

variable "min_size" {
  type        = number
  description = "Fewest instances burst keeps (the MIG's initial target size)."
  default     = 0

  validation {
    condition     = var.min_size >= 0 && floor(var.min_size) == var.min_size
    error_message = "The min_size must be a whole number >= 0."
  }
}

variable "max_size" {
  type        = number
  description = "Most instances burst asks for; must be >= min_size."

  validation {
    condition     = var.max_size >= 1 && floor(var.max_size) == var.max_size
    error_message = "The max_size must be a whole number >= 1."
  }
}

variable "image" {
  type        = string
  description = "Boot image with the NVIDIA driver, e.g. projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11."
}

variable "boot_disk_size_gb" {
  type        = number
  description = "Boot disk size, GB."
  default     = 200

  validation {
    condition     = var.boot_disk_size_gb >= 10 && var.boot_disk_size_gb <= 65536
    error_message = "The boot_disk_size_gb must be between 10 and 65536."
  }
}

variable "subnetwork" {
  type        = string
  description = "Subnetwork (self link or name) the instances attach to."
}

variable "node_service_account" {
  type        = string
  description = "Service account the instances run as (not the controller's)."
}

variable "network_tags" {
  type        = list(string)
  description = "Network tags of the instances (firewall rules)."
  default     = []
}

variable "startup_script" {
  type        = string
  description = "Startup script (install and start `burst agent`, or join the user's cluster)."
  default     = ""
}

variable "shutdown_script" {
  type        = string
  description = "Shutdown script hook: runs on stop, delete and Spot preemption (about 30 s), e.g. to signal jobs to checkpoint."
  default     = ""
}

variable "warm_pool" {
  type = object({
    state             = string
    min_size          = number
    max_prepared      = number
    reuse_on_scale_in = bool
  })
  description = "on_demand groups only: standby pool of stopped instances (GPU VMs cannot be suspended, so state must be stopped); min_size is the initial standby size. null = no standby pool."
  default     = null

  validation {
    condition     = var.warm_pool == null ? true : var.warm_pool.state == "stopped"
    error_message = "The warm_pool.state must be stopped: VMs with GPUs cannot be suspended."
  }

  validation {
    condition     = var.warm_pool == null ? true : var.warm_pool.min_size >= 0 && var.warm_pool.max_prepared >= 0
    error_message = "The warm_pool.min_size and warm_pool.max_prepared must be >= 0."
  }
}

variable "standby_initial_delay_s" {
  type        = number
  description = "Seconds a new standby instance runs (its startup script initialises it) before the MIG stops it."
  default     = 600

  validation {
    condition     = var.standby_initial_delay_s >= 0 && var.standby_initial_delay_s <= 3600
    error_message = "The standby_initial_delay_s must be between 0 and 3600."
  }
}

variable "boot_latency_s" {
  type        = number
  description = "Seconds from resize to ready burst assumes for this group (label burst-boot-latency); null = burst's default."
  default     = null
}

variable "labels" {
  type        = map(string)
  description = "Extra labels on the instances (the burst- discovery labels win on conflict)."
  default     = {}
}
