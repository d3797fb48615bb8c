# Values derived from the variables alone (no resources or data sources), so
# the checks and the discovery tags can be evaluated without a cloud provider.

locals {
  spot = var.capacity_type == "spot"

  # Cross-variable checks (Terraform 1.0 has no preconditions): tonumber() of
  # the message fails the plan with the message in the error.
  min_size = var.min_size <= var.max_size ? var.min_size : tonumber("min_size (${var.min_size}) is above max_size (${var.max_size})")
  warm_pool_count = var.warm_pool == null ? 0 : (
    local.spot ? tonumber("warm_pool is for on_demand groups only: AWS has no warm pools for spot or mixed-instances groups") : (
      var.warm_pool.state == "hibernated" && length(regexall("^[pg][0-9]", var.instance_types[0])) > 0
      ? tonumber("warm_pool.state hibernated: ${var.instance_types[0]} is a GPU instance type and cannot hibernate; use stopped or running")
      : 1
    )
  )
  agent_inputs_ok = var.bootstrap == "join" ? (var.join_command != "" ? true : tobool("bootstrap join needs join_command")) : (
    var.controller_url != "" && var.agent_token_ssm_parameter != "" ? true : tobool("bootstrap agent needs controller_url and agent_token_ssm_parameter")
  )

  pool_states = {
    stopped    = "Stopped"
    running    = "Running"
    hibernated = "Hibernated"
  }

  # The tags burst discovers its groups by (DESIGN.md, "discovery tags").
  discovery_tags = {
    "burst:cluster"       = var.cluster
    "burst:tier"          = "elastic"
    "burst:capacity-type" = var.capacity_type
    "burst:gpu-model"     = var.gpu_model
    "burst:group"         = var.name
  }
  boot_latency_tag = var.boot_latency_s == null ? {} : { "burst:boot-latency" = tostring(var.boot_latency_s) }
  tags             = merge(var.tags, local.boot_latency_tag, local.discovery_tags)

  launch_hook    = "burst-launch"
  terminate_hook = "burst-terminate"
}
