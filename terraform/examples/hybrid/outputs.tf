output "burst_controller" {
  description = "The one controller of the fleet: cluster, AWS events queue and role, GCP service account."
  value = {
    cluster          = var.cluster
    events_queue_url = module.aws_controller.burst_controller.events_queue_url
    role_arn         = module.aws_controller.burst_controller.role_arn
    service_account  = module.gcp_controller.burst_controller.service_account
  }
}

output "onprem_node_groups" {
  description = "The declared on-prem groups, in the burst_node_group shape."
  value       = local.onprem_node_groups
}

output "aws_spot_a100" {
  description = "AWS spot group (mixed instances over p4d/p4de)."
  value       = module.aws_spot_a100.burst_node_group
}

output "aws_od_a100" {
  description = "AWS on-demand group with a warm pool."
  value       = module.aws_od_a100.burst_node_group
}

output "gcp_spot_a100" {
  description = "GCP spot group (zonal MIG)."
  value       = module.gcp_spot_a100.burst_node_group
}
