"""How a request-rate series becomes an inference service in the simulator: the default mapping, and
`--service-config` overrides validated as a tenant policy's `services:` entries.

The default mapping, the same for every strategy (printed with the results):

- one replica = one A100 on GCP `a2-highgpu-1g` in us-central1, at the shipped
  catalog's on-demand and spot prices;
- a node boots cold in `BOOT_S` (5 minutes); a stopped warm node wakes in
  `WAKE_S`; a replica then loads its model in 120 s (`Service.replica_start_s`);
- a stopped warm node pays its boot disk only: `ROOT_VOLUME_GB` of pd-ssd, the
  volume the GCP node-group module creates, at the catalog's storage price;
- capacity per replica = the P50 request rate of the series' history / (8 x
  0.7), so the median needs 8 replicas at the 0.7 target; the Azure trace's
  capacity comes from its tokens (`AZURE_TOKEN_COST`);
- the cloud group holds up to 2x the replicas the window's peak needs;
- an unserved request costs `UNSERVED_HOUR_FACTOR` replica-hours per
  replica-hour of requests (the newsvendor ratio 0.9: forecasts read at P90);
  `ready_within` is `READY_WITHIN_S`; spot share 0;
- spot replicas are interrupted at `SPOT_HAZARD_PER_HOUR` (the quickstart's
  hazard), with a 30 s notice (GCP's preemption notice), and replaced on
  on-demand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from burst.catalog import Catalog
from burst.model import Service
from burst.planner.service_sizing import replica_capacity_rps, replicas_for_rate
from burst.sim.service_traces import AZURE_TOKEN_COST, TICK_S, RateSeries, history_p50_rps
from policies.fields import StrictModel
from policies.loader import read_yaml, validate_document
from policies.services import ServiceDoc, services_raw_checks

PROVIDER, INSTANCE_TYPE, REGION = "gcp", "a2-highgpu-1g", "us-central1"
BOOT_S = 300.0
"""Cold boot of a GPU node, seconds (the 5-minute boot the mapping states)."""
WAKE_S = 60.0
"""Start of a stopped GCP VM whose disk already holds the image, drivers and model weights, seconds: the
"wake in about a minute" of a stopped warm pool (DESIGN.md)."""
ROOT_VOLUME_GB = 200.0
"""The boot disk a stopped warm node keeps paying for (the GCP node-group module's boot_disk_size_gb default)."""
VOLUME_TYPE = "pd-ssd"
TARGET = 0.7
P50_REPLICAS = 8
"""Replicas the history's median rate needs at the target utilisation."""
PEAK_HEADROOM = 2.0
"""The cloud group holds this many times the replicas the window's peak needs."""
READY_WITHIN_S = 300.0
UNSERVED_HOUR_FACTOR = 9.0
SPOT_HAZARD_PER_HOUR = 0.02
"""Spot interruptions per replica-hour: the hazard the shipped quickstart configuration gives its spot group."""
NOTICE_S = 30.0
"""GCP's preemption notice, seconds."""
TENANT = "services"


@dataclass(frozen=True)
class ServiceSetup:
    """One series mapped to a service: the `Service`, its capacity per replica and the cloud it runs on."""

    series: RateSeries
    service: Service
    capacity_rps: float
    on_demand_usd_h: float
    spot_usd_h: float
    warm_node_usd_h: float
    boot_s: float = BOOT_S
    wake_s: float = WAKE_S
    notice_s: float = NOTICE_S
    spot_hazard_per_h: float = SPOT_HAZARD_PER_HOUR
    source: str = "default mapping"

    @property
    def replica_hour_usd(self) -> float:
        """The price of one replica-hour on on-demand capacity."""
        return self.on_demand_usd_h * self.service.gpus_per_replica

    def need(self, rate_rps: np.ndarray | float) -> np.ndarray:
        """Replicas a rate needs at the target: ceil(rate / (capacity x target)), elementwise."""
        per = self.capacity_rps * self.service.target_utilisation
        return np.ceil(np.asarray(rate_rps, dtype=float) / per - 1e-9).clip(min=0).astype(int)

    def mapping(self) -> dict[str, Any]:
        """The mapping as printed with the results and in the `--json` `services` object."""
        s = self.service
        out: dict[str, Any] = {
            "file": str(self.series.path), "format": self.series.format, "step_s": self.series.step_s,
            "window": [self.series.window_start.isoformat(), self.series.window_end.isoformat()],
            "history_steps": self.series.start, "source": self.source,
            "capacity_rps": round(self.capacity_rps, 6), "target_utilisation": s.target_utilisation,
            "min_replicas": s.min_replicas, "max_replicas": s.max_replicas, "replica_start_s": s.replica_start_s,
            "ready_within_s": s.ready_within_s, "spot_share": s.spot_share,
            "unserved_request_cost_usd": s.unserved_request_cost_usd,
            "replica": f"{s.gpus_per_replica} x {s.gpu_model} on {PROVIDER} {INSTANCE_TYPE} {REGION}",
            "on_demand_usd_h": self.on_demand_usd_h, "spot_usd_h": self.spot_usd_h,
            "warm_node_usd_h": round(self.warm_node_usd_h, 6), "boot_s": self.boot_s, "wake_s": self.wake_s,
            "spot_hazard_per_h": self.spot_hazard_per_h, "notice_s": self.notice_s,
        }
        if s.token_cost is not None:
            out["tokens"] = {"a": s.token_cost.context_gpu_s, "b": s.token_cost.generated_gpu_s,
                             "mean_context": self.series.mean_context_tokens,
                             "mean_generated": self.series.mean_generated_tokens}
        return out


def prices(catalog: Catalog | None = None) -> tuple[float, float, float]:
    """On-demand and spot USD/h of one a2-highgpu-1g and USD/h of one stopped node's boot disk."""
    cat = catalog or Catalog.load()
    row = cat.row(PROVIDER, INSTANCE_TYPE, REGION)
    spot = row.spot_usd_per_hour if row.spot_usd_per_hour is not None else row.on_demand_usd_per_hour
    disk = next(s for s in cat.storage_rows() if (s.provider, s.region, s.volume_type) == (PROVIDER, REGION, VOLUME_TYPE))
    return row.on_demand_usd_per_hour, spot, disk.usd_per_hour(ROOT_VOLUME_GB)


def peak_rate_rps(series: RateSeries) -> float:
    """The window's peak mean rate over one tick, requests/s (what the peak replica count is sized for)."""
    fine = series.fine_counts()
    return float(fine.sum(axis=1).max()) / TICK_S if fine.size else 0.0


def default_service(series: RateSeries, catalog: Catalog | None = None, *,
                    p50_replicas: int = P50_REPLICAS) -> ServiceSetup:
    """Decide the default mapping of `series` (the module docstring's rules), its history's median rate needing
    `p50_replicas` replicas at the target (the tide runs a service scaled to a given size)."""
    on_demand, spot, disk = prices(catalog)
    token_cost = AZURE_TOKEN_COST if series.format == "azure" else None
    if token_cost is not None:
        probe = Service(TENANT, series.name, "A100", 1, READY_WITHIN_S, 0.0, token_cost=token_cost)
        capacity = replica_capacity_rps(probe, series.mean_context_tokens, series.mean_generated_tokens)
    else:
        capacity = max(history_p50_rps(series), 1e-6) / (p50_replicas * TARGET)
    peak = replicas_for_rate(peak_rate_rps(series), capacity, TARGET)
    unserved_cost = UNSERVED_HOUR_FACTOR * on_demand / (capacity * TARGET * 3600.0)
    service = Service(TENANT, series.name, "A100", max(1, math.ceil(PEAK_HEADROOM * peak)), READY_WITHIN_S,
                      unserved_cost, requests_per_s=None if token_cost else capacity, token_cost=token_cost,
                      target_utilisation=TARGET, min_replicas=1)
    return ServiceSetup(series, service, capacity, on_demand, spot, disk)


class ServiceConfigDoc(StrictModel):
    """A `--service-config` file: `services:`, one entry per replayed series (named by its file stem), with the
    fields of a tenant policy's `services:` entries."""

    services: list[ServiceDoc] = Field(default_factory=list, max_length=64)


def read_service_config(path: Path) -> list[Service]:
    """The services `path` declares, validated as a policy's `services:` (PolicyValidationError: FILE:LINE errors)."""
    doc = validate_document(ServiceConfigDoc, read_yaml(path), what="service config", checks=services_raw_checks)
    return [entry.to_model(TENANT) for entry in doc.services]


def configured(default: ServiceSetup, service: Service) -> ServiceSetup:
    """`default` with its service replaced by a configured one (capacity from the entry's own form)."""
    capacity = replica_capacity_rps(service, default.series.mean_context_tokens, default.series.mean_generated_tokens)
    return replace(default, service=service, capacity_rps=capacity, source="--service-config")


def service_setups(series: list[RateSeries], config: list[Service] | None = None,
                   catalog: Catalog | None = None) -> list[ServiceSetup]:
    """Each series' mapping: the default, or the `--service-config` entry named after it (an entry naming no
    loaded series is a ValueError)."""
    by_name = {s.name: s for s in config or []}
    unknown = sorted(set(by_name) - {s.name for s in series})
    if unknown:
        raise ValueError(f"--service-config names {', '.join(unknown)}, which no --service-trace is "
                         f"(expected one of {', '.join(s.name for s in series)})")
    out = []
    for s in series:
        base = default_service(s, catalog)
        out.append(configured(base, by_name[s.name]) if s.name in by_name else base)
    return out
