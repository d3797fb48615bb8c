output "burst_node_group" {
  description = "The group in burst's handshake shape (DESIGN.md): what `burst nodegroups import` and aws.terraform_outputs read."
  value = {
    id             = aws_autoscaling_group.this.name
    provider       = "aws"
    region         = data.aws_region.current.name
    zones          = local.zones
    tier           = "elastic"
    capacity_type  = var.capacity_type
    gpu_model      = var.gpu_model
    gpus_per_node  = var.gpus_per_node
    instance_types = var.instance_types
    min_size       = aws_autoscaling_group.this.min_size
    max_size       = aws_autoscaling_group.this.max_size
    warm_pool      = local.warm_pool_count == 1 ? var.warm_pool : null
  }
}

output "autoscaling_group_arn" {
  description = "ARN of the Auto Scaling group."
  value       = aws_autoscaling_group.this.arn
}

output "launch_template_id" {
  description = "ID of the launch template."
  value       = aws_launch_template.this.id
}

output "lifecycle_hooks" {
  description = "Names of the launch and terminate lifecycle hooks burst completes."
  value = {
    launch    = local.launch_hook
    terminate = local.terminate_hook
  }
}
