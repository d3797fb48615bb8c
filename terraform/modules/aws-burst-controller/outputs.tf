output "burst_controller" {
  description = "The controller in burst's handshake shape (DESIGN.md): cluster, events queue, role."
  value = {
    cluster          = var.cluster
    events_queue_url = aws_sqs_queue.events.id
    role_arn         = aws_iam_role.controller.arn
  }
}

output "instance_profile_name" {
  description = "Instance profile of the controller role (null when create_instance_profile is false)."
  value       = var.create_instance_profile ? aws_iam_instance_profile.controller[0].name : null
}

output "events_queue_arn" {
  description = "ARN of the events queue."
  value       = aws_sqs_queue.events.arn
}

output "dead_letter_queue_url" {
  description = "URL of the dead-letter queue (events that failed delivery or processing)."
  value       = aws_sqs_queue.dead_letter.id
}
