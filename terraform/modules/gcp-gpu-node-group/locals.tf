# Values derived from the variables alone (no resources or data sources), so
# the checks and the discovery labels can be evaluated without a cloud provider.

locals {
  spot = var.capacity_type == "spot"

  # Cross-variable checks (Terraform 1.0 has no preconditions): tonumber() of
  # the message fails the plan with the message in the error.
  min_size      = var.min_size <= var.max_size ? var.min_size : tonumber("min_size (${var.min_size}) is above max_size (${var.max_size})")
  standby_count = var.warm_pool == null ? 0 : (local.spot ? tonumber("warm_pool is for on_demand groups only: spot groups get no standby pool") : 1)
  standby_size  = local.standby_count == 1 ? var.warm_pool.min_size : 0

  # The labels burst discovers its groups by (DESIGN.md, "discovery tags"): lower-case values.
  discovery_labels = {
    burst-cluster       = lower(var.cluster)
    burst-tier          = "elastic"
    burst-capacity-type = lower(var.capacity_type)
    burst-gpu-model     = lower(var.gpu_model)
    burst-group         = lower(var.name)
    # A MIG has no size bounds of its own: burst reads them from the labels.
    burst-min-size = tostring(local.min_size)
    burst-max-size = tostring(var.max_size)
  }
  boot_latency_label = var.boot_latency_s == null ? {} : { burst-boot-latency = tostring(var.boot_latency_s) }
  labels             = merge(var.labels, local.boot_latency_label, local.discovery_labels)

  metadata = merge(
    { enable-oslogin = "TRUE" },
    var.startup_script == "" ? {} : { startup-script = var.startup_script },
    var.shutdown_script == "" ? {} : { shutdown-script = var.shutdown_script },
  )
}
