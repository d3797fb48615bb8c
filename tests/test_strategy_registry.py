"""The simulator's strategy registry: one table that the CLI, comparisons and benchmarks read, and a strategy that
is one module and one registration call."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import click
import pytest
from builders import job
from click.testing import CliRunner

from burst.cli import main
from burst.planner import PIPELINE
from burst.sim import registry
from burst.sim.compare import compare
from burst.sim.registry import Availability, Strategy, StrategyRequest, StrategyRun
from burst.sim.setup import default_setup
from burst.sim.traces import Trace

DEFAULTS = ("burst", "burst-no-forecast", "reactive", "reactive-hotpool", "karpenter", "karpenter-do-not-disrupt",
            "karpenter-balanced", "karpenter-ml", "karpenter-balanced-ml", "static-peak", "static-p50", "floor",
            "oracle")
BY_NAME = ("burst-no-pool", "burst-fixed-pool", "burst-periodic-only", "burst-victims-most-recent",
           "burst-victims-random")

TOY = '''"""A toy strategy: burst's planner without forecasts, polling every 5 minutes instead of woken by events."""

import dataclasses

from burst.planner import PIPELINE
from burst.sim.registry import Availability, Strategy, StrategyRequest, StrategyRun, register


def build(request: StrategyRequest) -> StrategyRun:
    return StrategyRun(request.name, dataclasses.replace(request.setup, loop_interval_s=300.0), PIPELINE)


register(Strategy("toy", "burst's planner polling every 5 min", build=build, availability=Availability.ON_REQUEST))
'''


def tiny_trace(tmp_path: Path) -> Path:
    """Two 8-GPU jobs at t=0: one fits on-prem, the other needs a cloud node."""
    path = tmp_path / "tiny.csv"
    path.write_text("job_id,submit_time,duration_s,gpus,tenant\n"
                    "a,2026-03-02T12:00:00Z,3600,8,t\n"
                    "b,2026-03-02T12:00:00Z,1800,8,t\n")
    return path


@pytest.fixture
def toy_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The toy strategy's module, written to its own file and imported; afterwards the registry is as it was."""
    before = registry.registered()
    (tmp_path / "toy_strategy.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield importlib.import_module("toy_strategy")
    finally:
        if "toy" in {s.name for s in registry.registered()}:
            registry.unregister("toy")
        sys.modules.pop("toy_strategy", None)
        assert registry.registered() == before


def test_a_toy_strategy_is_one_module(toy_module: ModuleType, tmp_path: Path) -> None:
    """Importing one module that registers itself is all it takes: `burst simulate` offers it and runs it."""
    assert "toy" in registry.offered_names() and "toy" not in registry.default_names()
    runner = CliRunner()
    shown = runner.invoke(main, ["simulate", "--help"])
    assert shown.exit_code == 0, shown.output
    assert "|burst-clairvoyant|toy]" in shown.output
    assert "toy, burst's planner polling every 5 min" in " ".join(shown.output.split())
    ran = runner.invoke(main, ["simulate", "--trace", str(tiny_trace(tmp_path)), "--strategy", "toy",
                               "--strategy", "oracle", "--json"])
    assert ran.exit_code == 0, ran.output
    results = json.loads(ran.stdout)["strategies"]
    assert list(results) == ["toy", "oracle"]
    assert results["toy"]["jobs_completed"] == 2 and results["toy"]["cost_usd"] >= results["oracle"]["cost_usd"]


def test_the_default_set_the_offered_set_and_the_rest_come_from_the_table() -> None:
    assert registry.default_names() == DEFAULTS
    assert registry.offered_names() == (*DEFAULTS, "burst-clairvoyant")
    assert [s.name for s in registry.registered()] == [*DEFAULTS, *BY_NAME, "burst-clairvoyant"]
    assert {s.name for s in registry.registered() if s.availability is Availability.BY_NAME} == set(BY_NAME)
    assert {s.name for s in registry.registered() if s.bound is not None} == {"floor", "oracle"}
    assert all(s.description and "\n" not in s.description for s in registry.registered())


def test_every_simulated_strategy_builds_and_burst_variants_alone_are_event_driven() -> None:
    stats = Trace(path=Path("scripted.csv"), format="csv", jobs=(job("t-a", gpus=8),)).stats()
    setup = default_setup(stats)
    for strategy in registry.registered():
        if strategy.bound is not None:
            with pytest.raises(ValueError, match="bound"):
                registry.strategy_run(strategy.name, setup, stats)
            continue
        run = registry.strategy_run(strategy.name, setup, stats, fixed_pool_nodes=1)
        assert run.name == strategy.name
        assert run.event_driven == strategy.name.startswith("burst"), strategy.name


def test_a_name_is_registered_once_and_an_unknown_one_is_named_with_the_known_ones() -> None:
    build = registry.get("burst").build
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Strategy("burst", "a second burst", build=build))
    with pytest.raises(ValueError, match=r"unknown strategy 'nope': expected one of burst, burst-no-forecast, "):
        registry.get("nope")
    with pytest.raises(ValueError, match="unknown strategy 'nope'"):
        compare(Trace(path=Path("scripted.csv"), format="csv", jobs=(job("t-a", gpus=8),)), ["burst", "nope"])
    with pytest.raises(ValueError, match="not registered"):
        registry.unregister("nope")


def test_a_strategy_is_built_or_computed_and_described_in_one_line() -> None:
    def build(request: StrategyRequest) -> StrategyRun:
        return StrategyRun(request.name, request.setup, PIPELINE)

    with pytest.raises(ValueError, match="exactly one"):
        Strategy("neither", "nothing to run")
    with pytest.raises(ValueError, match="exactly one"):
        Strategy("both", "two ways to run", build=build, bound=registry.get("oracle").bound)
    with pytest.raises(ValueError, match="one non-empty line"):
        Strategy("two-lines", "first\nsecond", build=build)
    with pytest.raises(ValueError, match="one word"):
        Strategy("two words", "a name with a space", build=build)


def test_the_simulate_command_refuses_a_strategy_it_does_not_offer(tmp_path: Path) -> None:
    ran = CliRunner().invoke(main, ["simulate", "--trace", str(tiny_trace(tmp_path)), "--strategy", "burst-no-pool"])
    assert ran.exit_code == 2 and "'burst-no-pool' is not one of" in ran.output


def test_the_cost_command_simulates_registered_strategies() -> None:
    """`burst cost` keeps its own subset (the burst planner with or without forecasts); each is registered."""
    from burst.projection.cli import cost_cmd

    (option,) = [p for p in cost_cmd.params if p.name == "strategy"]
    assert isinstance(option.type, click.Choice)
    registry.check(option.type.choices)
