"""On-prem GPU nodes: NVML discovery and health (`discovery`, `health`), the static inventory fallback, and the
`OnPremProvider` (`provider`) that switches racked hosts on and off.

pynvml (the `nvidia-ml-py` distribution) stays inside this package; callers get
`burst.model` types (`NodeGpus`, `Gpu`, `GpuHealth`, `GpuLink`) and the plain
readings of `readings.py`.
"""
