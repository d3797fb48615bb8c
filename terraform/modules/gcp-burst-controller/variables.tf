variable "project" {
  type        = string
  description = "GCP project of the node groups."
}

variable "cluster" {
  type        = string
  description = "burst cluster id (burst.yaml `cluster`)."

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9_-]{0,62}$", var.cluster))
    error_message = "The cluster must be lower-case letters, digits, '_' or '-', starting with a letter or digit, at most 63 characters."
  }
}

variable "account_id" {
  type        = string
  description = "Service account id of the controller; empty = \"burst-<cluster>\" with '_' as '-'."
  default     = ""

  validation {
    condition     = var.account_id == "" || can(regex("^[a-z]([-a-z0-9]{4,28}[a-z0-9])$", var.account_id))
    error_message = "The account_id must be 6-30 lower-case letters, digits or '-', starting with a letter."
  }
}

variable "role_id" {
  type        = string
  description = "Id of the custom role holding the controller's permissions; empty = \"burstController_<cluster>\"."
  default     = ""
}
