"""On-prem GPU nodes: NVML discovery and health (`discovery`, `health`), and the static inventory fallback.

pynvml (the `nvidia-ml-py` distribution) stays inside this package; callers get
`burst.model` types (`NodeGpus`, `Gpu`, `GpuHealth`, `GpuLink`) and the plain
readings of `readings.py`.
"""
