"""Run service strategies over mapped series: one `ServiceMetrics` per (strategy, service), and the JSON the
CLI adds to `burst simulate --json` (each strategy's `services` object and the top-level mapping)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from burst.sim.service_engine import Replay, ServiceMetrics, metrics, replay
from burst.sim.service_setup import ServiceSetup
from burst.sim.service_strategies import Context, service_strategy
from burst.sim.service_traces import AZURE_TOKEN_SOURCE


def run_service(name: str, setup: ServiceSetup, *, seed: int = 0) -> ServiceMetrics:
    """Strategy `name`'s figures on one service (a bound is computed; a controller is replayed with `seed`)."""
    return metrics(setup, service_replay(name, setup, seed=seed))


def service_replay(name: str, setup: ServiceSetup, *, seed: int = 0) -> Replay:
    """What strategy `name` ran on one service, tick by tick."""
    strategy = service_strategy(name)
    if strategy.bound is not None:
        return strategy.bound(setup)
    assert strategy.build is not None
    track = strategy.track(setup.series, setup.service) if strategy.track is not None else None
    controller = strategy.build(setup, Context(track))
    initial = strategy.initial(setup) if strategy.initial is not None else None
    return replay(setup, controller, seed=seed, initial=initial)


def run_services(names: Sequence[str], setups: Sequence[ServiceSetup], *, seed: int = 0,
                 on_progress: Callable[[str, str], None] | None = None,
                 replays: dict[str, dict[str, Replay]] | None = None) -> dict[str, dict[str, ServiceMetrics]]:
    """Every strategy in `names` on every service: {strategy: {service: metrics}}; each replay is also kept in
    `replays` ({strategy: {service: replay}}) when it is given."""
    for name in names:
        service_strategy(name)
    out: dict[str, dict[str, ServiceMetrics]] = {}
    for name in names:
        out[name] = {}
        for setup in setups:
            run = service_replay(name, setup, seed=seed)
            out[name][setup.series.name] = metrics(setup, run)
            if replays is not None:
                replays.setdefault(name, {})[setup.series.name] = run
            if on_progress is not None:
                on_progress(name, setup.series.name)
    return out


def services_json(setups: Sequence[ServiceSetup]) -> dict[str, Any]:
    """The top-level `services` object: each service's mapping, and where the token arithmetic comes from."""
    out: dict[str, Any] = {s.series.name: s.mapping() for s in setups}
    for s in setups:
        if s.service.token_cost is not None and s.source == "default mapping":
            out[s.series.name]["tokens"]["source"] = AZURE_TOKEN_SOURCE
    return out


def strategy_services_json(results: dict[str, dict[str, ServiceMetrics]]) -> dict[str, dict[str, Any]]:
    """{strategy: {"services": {service: figures}}}: what each strategy's `--json` object gains."""
    return {name: {"services": {svc: m.to_json() for svc, m in per.items()}} for name, per in results.items()}
