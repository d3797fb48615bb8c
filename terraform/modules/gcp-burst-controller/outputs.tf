output "burst_controller" {
  description = "The controller in burst's handshake shape (DESIGN.md): cluster and service account (GCP has no events queue: null)."
  value = {
    cluster          = var.cluster
    events_queue_url = null
    service_account  = google_service_account.controller.email
  }
}

output "custom_role" {
  description = "Name of the custom role granted to the service account."
  value       = google_project_iam_custom_role.controller.name
}
