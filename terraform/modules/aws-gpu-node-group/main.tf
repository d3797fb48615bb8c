# A GPU node group burst scales: launch template, Auto Scaling group (mixed
# instances for spot, optional warm pool for on-demand), lifecycle hooks burst
# completes, and the discovery tags burst reads.

data "aws_region" "current" {}

data "aws_subnet" "this" {
  for_each = toset(var.subnet_ids)
  id       = each.value
}

locals {
  zones = sort(distinct([for s in data.aws_subnet.this : s.availability_zone]))

  user_data = templatefile("${path.module}/templates/user-data.sh.tpl", {
    bootstrap                 = local.agent_inputs_ok ? var.bootstrap : ""
    cluster                   = var.cluster
    group                     = var.name
    controller_url            = var.controller_url
    agent_token_ssm_parameter = var.agent_token_ssm_parameter
    burst_package             = var.burst_package
    join_command              = var.join_command
    extra_user_data           = var.extra_user_data
  })
}

resource "aws_launch_template" "this" {
  name_prefix   = "${var.name}-"
  description   = "burst ${var.cluster} node group ${var.name}"
  image_id      = var.ami_id
  instance_type = var.instance_types[0]
  user_data     = base64encode(local.user_data)

  vpc_security_group_ids = var.security_group_ids
  update_default_version = true

  dynamic "iam_instance_profile" {
    for_each = var.instance_profile_name == null ? [] : [var.instance_profile_name]
    content {
      name = iam_instance_profile.value
    }
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
    instance_metadata_tags      = "enabled"
  }

  block_device_mappings {
    device_name = var.root_device_name
    ebs {
      volume_size           = var.root_volume_size_gib
      volume_type           = "gp3"
      encrypted             = true
      kms_key_id            = var.kms_key_id
      delete_on_termination = true
    }
  }

  tag_specifications {
    resource_type = "instance"
    tags          = local.tags
  }

  tag_specifications {
    resource_type = "volume"
    tags          = local.tags
  }

  tags = local.tags
}

resource "aws_autoscaling_group" "this" {
  name                      = var.name
  min_size                  = local.min_size
  max_size                  = var.max_size
  desired_capacity          = local.min_size
  vpc_zone_identifier       = var.subnet_ids
  capacity_rebalance        = local.spot
  health_check_type         = "EC2"
  wait_for_capacity_timeout = "0"

  dynamic "launch_template" {
    for_each = local.spot ? [] : [aws_launch_template.this]
    content {
      id      = launch_template.value.id
      version = launch_template.value.latest_version
    }
  }

  dynamic "mixed_instances_policy" {
    for_each = local.spot ? [aws_launch_template.this] : []
    content {
      instances_distribution {
        on_demand_base_capacity                  = 0
        on_demand_percentage_above_base_capacity = 0
        spot_allocation_strategy                 = "price-capacity-optimized"
      }
      launch_template {
        launch_template_specification {
          launch_template_id = mixed_instances_policy.value.id
          version            = mixed_instances_policy.value.latest_version
        }
        dynamic "override" {
          for_each = var.instance_types
          content {
            instance_type = override.value
          }
        }
      }
    }
  }

  dynamic "warm_pool" {
    for_each = local.warm_pool_count == 1 ? [var.warm_pool] : []
    content {
      pool_state                  = local.pool_states[warm_pool.value.state]
      min_size                    = warm_pool.value.min_size
      max_group_prepared_capacity = max(warm_pool.value.min_size, warm_pool.value.max_prepared)
      instance_reuse_policy {
        reuse_on_scale_in = warm_pool.value.reuse_on_scale_in
      }
    }
  }

  initial_lifecycle_hook {
    name                 = local.launch_hook
    lifecycle_transition = "autoscaling:EC2_INSTANCE_LAUNCHING"
    heartbeat_timeout    = var.launch_hook_timeout_s
    default_result       = "CONTINUE"
  }

  initial_lifecycle_hook {
    name                 = local.terminate_hook
    lifecycle_transition = "autoscaling:EC2_INSTANCE_TERMINATING"
    heartbeat_timeout    = var.terminate_hook_timeout_s
    default_result       = "CONTINUE"
  }

  dynamic "tag" {
    for_each = local.tags
    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = true
    }
  }

  lifecycle {
    # burst owns the desired capacity and resizes the warm pool (PutWarmPool);
    # an apply must not reset them.
    ignore_changes = [desired_capacity, warm_pool]
  }
}
