#!/bin/bash
# First-boot bootstrap of a burst GPU node (rendered by the aws-gpu-node-group module).
# The launch lifecycle hook holds the instance in Pending:Wait until burst completes it;
# if nothing does, the hook CONTINUEs after its timeout, so a slow bootstrap never loses the node.
set -euo pipefail
exec > >(tee -a /var/log/burst-bootstrap.log) 2>&1

imds() {
  local token
  token=$(curl -sf -X PUT http://169.254.169.254/latest/api/token -H "X-aws-ec2-metadata-token-ttl-seconds: 300")
  curl -sf -H "X-aws-ec2-metadata-token: $token" "http://169.254.169.254/latest/meta-data/$1"
}
INSTANCE_ID=$(imds instance-id)
REGION=$(imds placement/region)

${extra_user_data}

%{ if bootstrap == "agent" ~}
# burst's node id for an AWS node is its instance id.
python3 -m venv /opt/burst
/opt/burst/bin/pip install --quiet '${burst_package}'
install -d -m 0700 /etc/burst /var/lib/burst-agent
aws ssm get-parameter --region "$REGION" --with-decryption --name '${agent_token_ssm_parameter}' \
  --query Parameter.Value --output text > /etc/burst/agent.token
chmod 0600 /etc/burst/agent.token
cat > /etc/systemd/system/burst-agent.service <<UNIT
[Unit]
Description=burst node agent (cluster ${cluster}, group ${group})
After=network-online.target nvidia-persistenced.service
Wants=network-online.target

[Service]
ExecStart=/opt/burst/bin/burst agent --controller '${controller_url}' --node-id $INSTANCE_ID --token-file /etc/burst/agent.token --workdir /var/lib/burst-agent
Restart=always
RestartSec=5
KillMode=mixed
TimeoutStopSec=120

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now burst-agent.service
%{ else ~}
# Join the user's cluster (its scheduler places the jobs; burst sizes the group).
${join_command}
%{ endif ~}
