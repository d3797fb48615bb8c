variable "cluster" {
  type        = string
  description = "burst cluster id (burst.yaml `cluster`): the controller may change only groups and instances tagged burst:cluster with it."

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_-]{0,62}$", var.cluster))
    error_message = "The cluster must be lower-case letters, digits, '_' or '-', starting with a letter or digit, at most 63 characters."
  }
}

variable "name_prefix" {
  type        = string
  description = "Prefix of the role, policy, queues and rules; empty = \"burst-<cluster>\"."
  default     = ""
}

variable "trusted_services" {
  type        = list(string)
  description = "AWS service principals that may assume the controller role (e.g. ec2.amazonaws.com when the controller runs on EC2)."
  default     = ["ec2.amazonaws.com"]
}

variable "trusted_role_arns" {
  type        = list(string)
  description = "IAM principals (ARNs) that may assume the controller role, e.g. a role used by the controller outside AWS."
  default     = []
}

variable "create_instance_profile" {
  type        = bool
  description = "Also create an instance profile for the role (for a controller running on EC2)."
  default     = true
}

variable "message_retention_s" {
  type        = number
  description = "Seconds an event stays on the queue unread (interruption warnings are useless after two minutes; state changes matter longer)."
  default     = 3600

  validation {
    condition     = var.message_retention_s >= 60 && var.message_retention_s <= 1209600
    error_message = "The message_retention_s must be between 60 and 1209600 (SQS's range)."
  }
}

variable "max_receive_count" {
  type        = number
  description = "Receives of one message before it moves to the dead-letter queue (burst deletes what it has read, so this counts failures)."
  default     = 5

  validation {
    condition     = var.max_receive_count >= 1 && var.max_receive_count <= 1000
    error_message = "The max_receive_count must be between 1 and 1000."
  }
}

variable "tags" {
  type        = map(string)
  description = "Extra tags on every resource the module creates."
  default     = {}
}
