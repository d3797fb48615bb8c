# What the burst controller needs in AWS: a role granting exactly the API
# actions the provider calls (providers.aws.AWS_API_ACTIONS), and the EC2
# events it reads (spot interruption warnings, rebalance recommendations,
# instance state changes) routed by EventBridge to an SQS queue.

data "aws_caller_identity" "current" {}

data "aws_partition" "current" {}

data "aws_region" "current" {}

locals {
  prefix = var.name_prefix != "" ? var.name_prefix : "burst-${var.cluster}"
  tags   = merge(var.tags, { "burst:cluster" = var.cluster })

  # EventBridge detail-types burst reads (providers/aws/events.py); source aws.ec2.
  event_types = {
    spot-interruption = "EC2 Spot Instance Interruption Warning"
    rebalance         = "EC2 Instance Rebalance Recommendation"
    state-change      = "EC2 Instance State-change Notification"
  }
}

# ------------------------------------------------------------------ IAM

data "aws_iam_policy_document" "assume" {
  statement {
    sid     = "AssumeController"
    actions = ["sts:AssumeRole"]

    dynamic "principals" {
      for_each = length(var.trusted_services) > 0 ? [var.trusted_services] : []
      content {
        type        = "Service"
        identifiers = principals.value
      }
    }

    dynamic "principals" {
      for_each = length(var.trusted_role_arns) > 0 ? [var.trusted_role_arns] : []
      content {
        type        = "AWS"
        identifiers = principals.value
      }
    }
  }
}

data "aws_iam_policy_document" "controller" {
  # Describe and List calls cannot be scoped to resources or tags in IAM.
  statement {
    sid    = "Read"
    effect = "Allow"
    actions = [
      "autoscaling:DescribeAutoScalingGroups",
      "autoscaling:DescribeAutoScalingInstances",
      "autoscaling:DescribeScalingActivities",
      "autoscaling:DescribeWarmPool",
      "ec2:DescribeInstanceTypes",
      "ec2:DescribeInstances",
      "ec2:DescribeLaunchTemplateVersions",
      "ec2:DescribeSpotPriceHistory",
    ]
    resources = ["*"]
  }

  # Scaling, warm pools, targeted termination and lifecycle hooks: only on
  # Auto Scaling groups tagged with this cluster.
  statement {
    sid    = "ScaleClusterGroups"
    effect = "Allow"
    actions = [
      "autoscaling:CompleteLifecycleAction",
      "autoscaling:PutWarmPool",
      "autoscaling:RecordLifecycleActionHeartbeat",
      "autoscaling:SetDesiredCapacity",
      "autoscaling:TerminateInstanceInAutoScalingGroup",
    ]
    resources = ["arn:${data.aws_partition.current.partition}:autoscaling:${data.aws_region.current.name}:${data.aws_caller_identity.current.account_id}:autoScalingGroup:*:autoScalingGroupName/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/burst:cluster"
      values   = [var.cluster]
    }
  }

  # Garbage collection of instances tagged with this cluster that no group owns.
  statement {
    sid       = "TerminateClusterInstances"
    effect    = "Allow"
    actions   = ["ec2:TerminateInstances"]
    resources = ["arn:${data.aws_partition.current.partition}:ec2:${data.aws_region.current.name}:${data.aws_caller_identity.current.account_id}:instance/*"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/burst:cluster"
      values   = [var.cluster]
    }
  }

  # The events queue. The provider calls DeleteMessageBatch, whose IAM
  # permission is sqs:DeleteMessage (SQS has no separate batch permissions).
  statement {
    sid    = "ReadEvents"
    effect = "Allow"
    actions = [
      "sqs:DeleteMessage",
      "sqs:ReceiveMessage",
    ]
    resources = [aws_sqs_queue.events.arn]
  }
}

resource "aws_iam_role" "controller" {
  name               = "${local.prefix}-controller"
  description        = "burst controller of cluster ${var.cluster}"
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = local.tags
}

resource "aws_iam_role_policy" "controller" {
  name   = "${local.prefix}-controller"
  role   = aws_iam_role.controller.id
  policy = data.aws_iam_policy_document.controller.json
}

resource "aws_iam_instance_profile" "controller" {
  count = var.create_instance_profile ? 1 : 0
  name  = "${local.prefix}-controller"
  role  = aws_iam_role.controller.name
  tags  = local.tags
}

# ------------------------------------------------------------------ events

resource "aws_sqs_queue" "dead_letter" {
  name                      = "${local.prefix}-events-dlq"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
  tags                      = local.tags
}

resource "aws_sqs_queue" "events" {
  name                      = "${local.prefix}-events"
  message_retention_seconds = var.message_retention_s
  receive_wait_time_seconds = 1
  sqs_managed_sse_enabled   = true

  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dead_letter.arn
    maxReceiveCount     = var.max_receive_count
  })

  tags = local.tags
}

resource "aws_cloudwatch_event_rule" "ec2" {
  for_each    = local.event_types
  name        = "${local.prefix}-${each.key}"
  description = "${each.value} events for burst cluster ${var.cluster}"

  event_pattern = jsonencode({
    source        = ["aws.ec2"]
    "detail-type" = [each.value]
  })

  tags = local.tags
}

resource "aws_cloudwatch_event_target" "ec2" {
  for_each  = aws_cloudwatch_event_rule.ec2
  rule      = each.value.name
  target_id = "burst-events"
  arn       = aws_sqs_queue.events.arn

  # Events EventBridge could not deliver go to the dead-letter queue too.
  dead_letter_config {
    arn = aws_sqs_queue.dead_letter.arn
  }

  retry_policy {
    maximum_event_age_in_seconds = 300
    maximum_retry_attempts       = 10
  }
}

data "aws_iam_policy_document" "events_queue" {
  statement {
    sid       = "EventBridgeSends"
    effect    = "Allow"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.events.arn]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [for r in aws_cloudwatch_event_rule.ec2 : r.arn]
    }
  }
}

resource "aws_sqs_queue_policy" "events" {
  queue_url = aws_sqs_queue.events.id
  policy    = data.aws_iam_policy_document.events_queue.json
}

data "aws_iam_policy_document" "dead_letter_queue" {
  statement {
    sid       = "EventBridgeDeadLetters"
    effect    = "Allow"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.dead_letter.arn]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [for r in aws_cloudwatch_event_rule.ec2 : r.arn]
    }
  }
}

resource "aws_sqs_queue_policy" "dead_letter" {
  queue_url = aws_sqs_queue.dead_letter.id
  policy    = data.aws_iam_policy_document.dead_letter_queue.json
}
