output "burst_node_group" {
  description = "The group in burst's handshake shape (DESIGN.md): what `burst nodegroups import` reads."
  value = {
    id             = var.name
    provider       = "gcp"
    region         = var.region
    zones          = var.zones
    tier           = "elastic"
    capacity_type  = var.capacity_type
    gpu_model      = var.gpu_model
    gpus_per_node  = var.gpus_per_node
    instance_types = [var.machine_type]
    min_size       = local.min_size
    max_size       = var.max_size
    warm_pool      = local.standby_count == 1 ? var.warm_pool : null
  }
}

output "instance_group_manager" {
  description = "Self link of the zonal managed instance group."
  value       = google_compute_instance_group_manager.zonal.self_link
}

output "instance_template" {
  description = "Self link of the instance template."
  value       = google_compute_instance_template.this.self_link
}
