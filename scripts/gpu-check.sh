#!/usr/bin/env bash
# On a machine with NVIDIA GPUs: NVML discovery and health (burst gpus), then a short placement demo of the
# local GPU scheduler on the GPUs found. Exits non-zero, with one clear line, when NVML is unavailable.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python -c 'import pynvml; pynvml.nvmlInit(); pynvml.nvmlShutdown()' 2>/dev/null; then
  echo "gpu-check: NVML unavailable (no NVIDIA driver or no GPU here); nothing to check" >&2
  exit 1
fi
burst gpus
burst gpus --json > "${OUT:-.}/gpus.json"
python - <<'PY'
from burst.planner.gpu_scheduler import GpuRequest, schedule
from providers.onprem.discovery import discover

found = discover()
assert found.node is not None, found.status
n = len(found.node.gpus)
sizes = [s for s in (1, 2, max(1, n // 2), n) if s <= n]
requests = [GpuRequest(job_id=f"demo-{i}-{k}", tenant="demo", gpus=k) for i, k in enumerate(sizes)]
result = schedule(requests, [found.node])
for b in result.bindings:
    print(f"{b.job_id}: {b.reason}")
for u in result.unplaced:
    print(f"{u.job_id}: not placed: {u.reason}")
PY
