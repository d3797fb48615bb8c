"""A provider is its package: a package that registers itself is all a new backend adds.

The toy package below is written to a folder outside the repository and put on
the path; importing it registers the provider. After that a `burst.yaml` may
name `provider: toy`, carry a `toy:` section, price the toy's instance type from
the package's own CSV, and `burst run` runs on it. Nothing in burst/, policies/
or providers/ changes for it; unregistered, every schema is as it was.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from burst.catalog import MIN_BILLED_S, Catalog, min_billed_s
from burst.provider_registry import ENV, PROVIDERS, provider_names, unregister
from policies import load_config
from policies.config import config_json_schema
from policies.loader import PolicyValidationError, policy_json_schema

TOY_INIT = '''\
"""A toy backend: the simulated cloud under another name, with a settings section and its own price list."""

from pathlib import Path

from burst.model import Tier
from burst.provider_registry import ProviderContext, ProviderSpec, register
from policies.fields import StrictModel
from providers.sim import SimProvider


class ToySettings(StrictModel):
    """The toy's section of burst.yaml."""

    interruption_notice_s: float = 120.0


class ToyProvider(SimProvider):
    """The toy cloud."""


def build(ctx: ProviderContext) -> ToyProvider:
    return ToyProvider(ctx.listed, clock=ctx.clock, cluster=ctx.config.cluster,
                       prices={g.id: ctx.catalog.group_price(g) for g in ctx.listed},
                       interruption_notice_s=ctx.config.toy.interruption_notice_s)


SPEC = register(ProviderSpec("toy", build, section="toy", settings_model=ToySettings, tier=Tier.ELASTIC,
                             section_fix="a toy: section", min_billed_s=120.0,
                             price_csv=Path(__file__).with_name("prices.csv")))
'''

TOY_PRICES = """\
provider,instance_type,region,gpu_model,gpus,gpu_memory_gib,on_demand_usd_per_hour,spot_usd_per_hour,source,read_on
toy,toy.8gpu,r1,A100,8,80,12.5,,the toy's list price,2026-03-01
"""

CONFIG = """\
cluster: toy
policies_dir: tenants
clock: sim
clock_speed: 7200
sim_start: 2026-03-02T09:00:00Z
loop_interval: 1m
toy: {interruption_notice_s: 90}
node_groups:
  - {id: toys, provider: toy, region: r1, tier: elastic, capacity_type: on_demand, instance_type: toy.8gpu,
     gpu_model: A100, gpus_per_node: 8, max_size: 4, boot_latency: 5m}
workload:
  synthetic:
    seed: 7
    base_jobs_per_hour: 6
    burst_probability: 1.0
    burst_factor: 5
    burst_hours: 2
    burst_window: [9, 11]
    tenants:
      research: {share: 1.0, gpus: [4, 8], mean_duration: 1h}
"""

ACTION = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d \+ scale_up (\S+) -> (\d+): ")


def write_toy(root: Path) -> Path:
    """The toy provider's package under `root`: its whole diff."""
    package = root / "burst_toy"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(TOY_INIT)
    (package / "prices.csv").write_text(TOY_PRICES)
    return package


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    before = config_json_schema(), policy_json_schema()
    package = write_toy(tmp_path / "site")
    monkeypatch.syspath_prepend(str(package.parent))
    importlib.import_module("burst_toy")
    try:
        yield package
    finally:
        unregister("toy")
        sys.modules.pop("burst_toy", None)
        assert (config_json_schema(), policy_json_schema()) == before, "unregistered, the schemas are as they were"


def test_a_toy_provider_is_its_package(toy: Path, tmp_path: Path) -> None:
    assert sorted(p.name for p in toy.iterdir() if p.is_file()) == ["__init__.py", "prices.csv"]
    assert provider_names() == ["sim", "onprem", "aws", "gcp", "libcloud", "toy"]
    assert PROVIDERS["toy"].section == "toy"
    # the schema enum and the config section come from the registry
    schema = config_json_schema()
    assert schema["$defs"]["NodeGroupDoc"]["properties"]["provider"]["enum"][-1] == "toy"
    assert "toy" in schema["properties"] and "toy" in str(policy_json_schema())
    # the catalog's tables and prices come from the package
    assert MIN_BILLED_S["toy"] == 120.0
    assert Catalog.load().find("toy", "toy.8gpu", "r1").on_demand_usd_per_hour == 12.5  # type: ignore[union-attr]

    work = tmp_path / "work"
    (work / "tenants").mkdir(parents=True)
    (work / "tenants" / "research.yaml").write_text("{}\n")
    config_file = work / "burst.yaml"
    config_file.write_text(CONFIG)
    config = load_config(config_file)
    assert config.toy.interruption_notice_s == 90.0  # type: ignore[attr-defined]
    [group] = config.node_groups_model()
    assert min_billed_s(group) == 120.0
    config_file.write_text(CONFIG.replace("tier: elastic", "tier: steady").replace("on_demand", "onprem"))
    with pytest.raises(PolicyValidationError, match="provider toy is cloud capacity"):
        load_config(config_file)  # the tier the spec declares is checked like the built-ins'
    config_file.write_text(CONFIG)

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(toy.parent), os.environ.get("PYTHONPATH", "")]),
           ENV: "burst_toy"}
    out = subprocess.run([sys.executable, "-m", "burst.cli", "run", "--duration", "1h", "--config", str(config_file),
                          "--state", str(work / "burst.db")], capture_output=True, text=True, cwd=work, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    ups = [m.groups() for m in map(ACTION.match, out.stdout.splitlines()) if m]
    assert ups and all(group == "toys" for group, _ in ups), out.stdout
    assert "stopped at" in out.stdout


def test_a_config_naming_an_unregistered_provider_is_refused(tmp_path: Path) -> None:
    config_file = tmp_path / "burst.yaml"
    config_file.write_text(CONFIG.replace("toy: {interruption_notice_s: 90}\n", ""))
    with pytest.raises(PolicyValidationError, match="input should be 'sim', 'onprem', 'aws', 'gcp' or 'libcloud'"):
        load_config(config_file)
    config_file.write_text(CONFIG)
    with pytest.raises(PolicyValidationError, match="toy"):
        load_config(config_file)  # nor is its section known
