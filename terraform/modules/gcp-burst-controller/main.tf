# The burst controller's identity on GCP: a service account with a custom
# role listing only what the controller calls on managed instance groups.

locals {
  account_id = var.account_id != "" ? var.account_id : substr(replace("burst-${var.cluster}", "_", "-"), 0, 30)
  role_id    = var.role_id != "" ? var.role_id : "burstController_${replace(var.cluster, "-", "_")}"

  # One permission per Compute API method the provider calls
  # (providers.gcp.GCP_IAM_PERMISSIONS): read groups, their managed instances
  # and templates; resize, patch (standby sizes) and deleteInstances; delete
  # VMs no group owns (garbage collection); wait on the operations those calls
  # start; list zone operations (Spot preemptions are compute.instances.preempted
  # operations); the region's zones.
  permissions = [
    "compute.instanceGroupManagers.get",
    "compute.instanceGroupManagers.list",
    "compute.instanceGroupManagers.update",
    "compute.instanceTemplates.get",
    "compute.instances.delete",
    "compute.instances.list",
    "compute.regions.get",
    "compute.zoneOperations.get",
    "compute.zoneOperations.list",
  ]
}

resource "google_service_account" "controller" {
  project      = var.project
  account_id   = local.account_id
  display_name = "burst controller (${var.cluster})"
}

resource "google_project_iam_custom_role" "controller" {
  project     = var.project
  role_id     = local.role_id
  title       = "burst controller (${var.cluster})"
  description = "What the burst controller calls on managed instance groups."
  permissions = local.permissions
}

resource "google_project_iam_member" "controller" {
  project = var.project
  role    = google_project_iam_custom_role.controller.name
  member  = "serviceAccount:${google_service_account.controller.email}"
}
