"""Providers are registered in one place: config validation, the schema and the runtime walk the registry.

The toy provider below is everything a new backend needs besides its own
package: a factory and a `ProviderSpec` (what `register` takes). Nothing in
policies/, burst/runtime.py or burst/reconcile.py changes for it.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import job

from burst.model import ActionKind
from burst.provider_registry import provider_names
from burst.provider_specs import PROVIDERS, ConfigError, ProviderContext, ProviderSpec, register, unregister
from burst.runtime import build_runtime
from policies import load_config
from policies.config import BurstConfig
from providers.base import Provider
from providers.sim import SimProvider


# ---- the toy provider: its package would hold the class, its spec these lines
class ToyProvider(SimProvider):
    """A toy backend (the simulated cloud under another name)."""


def build_toy(ctx: ProviderContext) -> Provider:
    return ToyProvider(ctx.listed, clock=ctx.clock, cluster=ctx.config.cluster,
                       prices={g.id: ctx.catalog.group_price(g) for g in ctx.listed})


TOY = ProviderSpec("toy", build_toy)
# ---- end of the toy provider

TOY_LINES = sum(len(inspect.getsource(x).splitlines()) for x in (ToyProvider, build_toy)) + 1

CONFIG = """\
cluster: toy
clock: sim
sim_start: 2026-03-02T07:00:00Z
state_path: burst.db
catalog:
  overrides:
    - {provider: toy, instance_type: toy.8gpu, region: r1, on_demand_usd_per_hour: 10, gpu_model: A100, gpus: 8,
       read_on: 2026-03-01}
node_groups:
  - {id: toys, provider: toy, region: r1, tier: elastic, capacity_type: on_demand, instance_type: toy.8gpu,
     gpu_model: A100, gpus_per_node: 8, max_size: 2, boot_latency: 1m}
"""


@pytest.fixture
def toy() -> Iterator[ProviderSpec]:
    register(TOY)
    try:
        yield TOY
    finally:
        unregister(TOY.name)


def test_the_registry_and_the_names_configs_may_use_are_one_list() -> None:
    assert list(PROVIDERS) == provider_names() == ["sim", "onprem", "aws", "gcp", "libcloud"]
    assert all(spec.section is None or spec.section in BurstConfig.model_fields for spec in PROVIDERS.values())


def test_a_toy_provider_is_its_class_and_a_spec(toy: ProviderSpec, tmp_path: Path) -> None:
    assert TOY_LINES <= 12, f"the toy provider took {TOY_LINES} lines"
    path = tmp_path / "burst.yaml"
    path.write_text(CONFIG)
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "default.yaml").write_text("{}\n")
    schema = BurstConfig.model_json_schema()["$defs"]["NodeGroupDoc"]["properties"]["provider"]
    assert "toy" in schema["enum"]
    runtime = build_runtime(load_config(path), config_file=path)
    try:
        assert isinstance(runtime.providers["toy"], ToyProvider)
        runtime.store.add_job(job("j", gpus=8, duration_s=600.0, submitted=runtime.now()), at=runtime.now())
        report = runtime.controller.tick()
        assert [(a.kind, a.target) for a in report.plan.actions] == [(ActionKind.SCALE_UP, "toys")]
        assert all(o.ok for o in report.outcomes) and runtime.providers["toy"].group_state("toys").target == 1
    finally:
        runtime.close()


def test_an_unregistered_provider_is_refused_where_the_config_names_it(tmp_path: Path) -> None:
    path = tmp_path / "burst.yaml"
    path.write_text(CONFIG)
    with pytest.raises(Exception, match="input should be 'sim', 'onprem', 'aws', 'gcp' or 'libcloud'") as caught:
        load_config(path)
    assert "node_groups.0.provider" in str(caught.value) and not isinstance(caught.value, ConfigError)
