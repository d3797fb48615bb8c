# A GPU node group burst scales on GCP: instance template (GPUs, Spot option,
# shutdown script hook), zonal MIG whose target size and standby pool burst
# owns, and the discovery labels burst reads.

resource "google_compute_instance_template" "this" {
  project      = var.project
  name_prefix  = "${var.name}-"
  description  = "burst ${var.cluster} node group ${var.name}"
  machine_type = var.machine_type
  region       = var.region
  labels       = local.labels
  tags         = var.network_tags
  metadata     = local.metadata

  disk {
    source_image = var.image
    boot         = true
    auto_delete  = true
    disk_size_gb = var.boot_disk_size_gb
    disk_type    = "pd-ssd"
    labels       = local.labels
  }

  dynamic "guest_accelerator" {
    for_each = var.gpu_type == null ? [] : [var.gpu_type]
    content {
      type  = guest_accelerator.value
      count = var.gpus_per_node
    }
  }

  network_interface {
    subnetwork = var.subnetwork
  }

  scheduling {
    provisioning_model          = local.spot ? "SPOT" : "STANDARD"
    preemptible                 = local.spot
    automatic_restart           = !local.spot
    on_host_maintenance         = "TERMINATE"
    instance_termination_action = local.spot ? "STOP" : null
  }

  service_account {
    email  = var.node_service_account
    scopes = ["cloud-platform"]
  }

  lifecycle {
    create_before_destroy = true
  }
}

resource "google_compute_instance_group_manager" "zonal" {
  project            = var.project
  name               = var.name
  zone               = var.zones[0]
  base_instance_name = var.name
  target_size        = local.min_size

  version {
    instance_template = google_compute_instance_template.this.id
  }

  # A new template reaches new instances only: running GPU jobs are not replaced.
  update_policy {
    type                  = "OPPORTUNISTIC"
    minimal_action        = "REPLACE"
    max_surge_fixed       = 0
    max_unavailable_fixed = 1
  }

  dynamic "standby_policy" {
    for_each = range(local.standby_count)
    content {
      initial_delay_sec = var.standby_initial_delay_s
      mode              = "MANUAL"
    }
  }
  target_stopped_size = local.standby_count == 1 ? local.standby_size : null

  lifecycle {
    # burst owns the target size and resizes the standby pool (standby policy
    # and target stopped/suspended size); an apply must not reset them.
    ignore_changes = [target_size, standby_policy, target_stopped_size, target_suspended_size]
  }
}
