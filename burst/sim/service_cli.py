"""What `burst simulate --service-trace` runs and prints: the series loaded and mapped, the service strategies
chosen from `--strategy`, their figures as a table or merged into the `--json` object."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from burst.sim.service_compare import run_services, services_json, strategy_services_json
from burst.sim.service_engine import Replay, ServiceMetrics
from burst.sim.service_report import write_service_report
from burst.sim.service_setup import ServiceSetup, read_service_config, service_setups
from burst.sim.service_strategies import NOT_RUN, SERVICE_DEFAULT, SERVICE_STRATEGIES
from burst.sim.service_traces import load_rate_series


def service_names(requested: Sequence[str], batch_defaults: Sequence[str]) -> tuple[list[str], list[str]]:
    """Decide which service strategies run: those `requested` that have a service form (none requested: the
    service defaults, then the batch defaults that have one); and the requested ones that have none."""
    if requested:
        return [n for n in requested if n in SERVICE_STRATEGIES], [n for n in requested if n not in SERVICE_STRATEGIES]
    names = list(SERVICE_DEFAULT) + [n for n in batch_defaults if n in SERVICE_STRATEGIES and n not in SERVICE_DEFAULT]
    return names, []


@dataclass(frozen=True)
class ServiceRun:
    """The mapped services, each strategy's figures, and the strategies asked for with no service form."""

    setups: list[ServiceSetup]
    results: dict[str, dict[str, ServiceMetrics]]
    not_run: list[str]
    replays: dict[str, dict[str, Replay]] | None = None

    def write_report(self, directory: Path) -> Path:
        """The services page of `--report` (the run must have kept its replays)."""
        return write_service_report(self.setups, self.results, self.replays or {}, directory)

    def merge_json(self, data: dict[str, Any]) -> dict[str, Any]:
        """`data` (a `burst simulate --json` object, or {}) with each strategy's `services` and the top-level
        `services` mapping added."""
        strategies = data.setdefault("strategies", {})
        for name, extra in strategy_services_json(self.results).items():
            strategies.setdefault(name, {}).update(extra)
        data["services"] = services_json(self.setups)
        if self.not_run:
            data["services_not_run"] = {n: NOT_RUN.get(n, "no service form") for n in self.not_run}
        return data

    def tables(self) -> list[Table]:
        """One table per service: each strategy's figures, and its cost over the oracle's where it ran."""
        out = []
        for setup in self.setups:
            name = setup.series.name
            table = Table(title=f"service {name}: {setup.series.window_start:%Y-%m-%d %H:%M} .. "
                                f"{setup.series.window_end:%Y-%m-%d %H:%M} UTC, {setup.capacity_rps:.4g} req/s per "
                                f"replica, up to {setup.service.max_replicas} replicas")
            for col in ("strategy", "unserved", "SLO min missed", "cost $", "vs oracle", "GPU-h", "TTC p95"):
                table.add_column(col, justify="left" if col == "strategy" else "right")
            oracle = self.results.get("oracle", {}).get(name)
            for strategy, per in self.results.items():
                m = per[name]
                vs = f"{m.cost_usd / oracle.cost_usd:.2f}x" if oracle and oracle.cost_usd else "n/a"
                table.add_row(strategy, f"{m.unserved_request_share:.3%}", f"{m.slo_minutes_missed_share:.2%}",
                              f"{m.cost_usd:,.0f}", vs, f"{m.replica_gpu_hours:,.1f}", f"{m.ttc_p95_s:,.0f}s")
            out.append(table)
        return out

    def mapping_lines(self) -> list[str]:
        """The mapping of each service, one line each, as printed above the tables."""
        lines = []
        for name, m in services_json(self.setups).items():
            tokens = m.get("tokens")
            extra = f"; tokens: {tokens['source']}" if tokens and "source" in tokens else ""
            lines.append(f"  service {name} ({m['source']}): {m['capacity_rps']:g} req/s per replica at target "
                         f"{m['target_utilisation']:g}, {m['min_replicas']}..{m['max_replicas']} replicas of "
                         f"{m['replica']} (${m['on_demand_usd_h']:g}/h, spot ${m['spot_usd_h']:g}/h), boot "
                         f"{m['boot_s']:g} s, wake {m['wake_s']:g} s (stopped node ${m['warm_node_usd_h']:.4f}/h), "
                         f"model load {m['replica_start_s']:g} s, ready_within {m['ready_within_s']:g} s, spot share "
                         f"{m['spot_share']:g} (hazard {m['spot_hazard_per_h']:g}/h, notice {m['notice_s']:g} s)"
                         f"{extra}")
        return lines


def run_from_cli(paths: Sequence[Path], config: Path | None, requested: Sequence[str], batch_defaults: Sequence[str],
                 seed: int, *, keep_replays: bool = False) -> ServiceRun:
    """Load and map the series (`config` overriding the default mapping), and run the chosen strategies (keeping
    each replay for a report when asked)."""
    series = [load_rate_series(p) for p in paths]
    names = [s.name for s in series]
    if len(set(names)) != len(names):
        raise ValueError(f"--service-trace: two series share a name ({', '.join(names)}); each file's stem names it")
    setups = service_setups(series, read_service_config(config) if config is not None else None)
    run_names, not_run = service_names(requested, batch_defaults)
    replays: dict[str, dict[str, Replay]] | None = {} if keep_replays else None
    return ServiceRun(setups, run_services(run_names, setups, seed=seed, replays=replays), not_run, replays)
