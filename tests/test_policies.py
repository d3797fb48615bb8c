"""Tenant policy files and burst.yaml: schema, conversion, FILE:LINE errors, last-good reload."""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from burst.model import (
    Budget,
    CapacityType,
    GpuShape,
    NodeGroup,
    Policy,
    SpotPolicy,
    Tier,
    WarmPoolSettings,
    WarmState,
    default_policy,
)
from policies import (
    BurstConfig,
    PolicyError,
    PolicyReloader,
    PolicyValidationError,
    config_json_schema,
    format_duration,
    load_config,
    load_policy_dir,
    load_policy_file,
    parse_duration,
    policy_json_schema,
    validate_policy_dir,
)

FIXTURES = Path(__file__).parent / "fixtures"
GOOD = FIXTURES / "policies" / "good"
BAD = FIXTURES / "policies" / "bad"
CONFIG = FIXTURES / "config"
LINE_FORMAT = re.compile(r"^[^\n]+:\d+: [^\s:]+: [^\n]+$")


def errors_of(path: Path) -> list[PolicyError]:
    with pytest.raises(PolicyValidationError) as info:
        load_policy_file(path)
    return info.value.errors


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def located(errors: list[PolicyError]) -> list[tuple[str, int, str]]:
    return [(Path(e.file).name, e.line, e.field) for e in errors]


# ------------------------------------------------------------------ durations


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (30, 30.0),
        (1.5, 1.5),
        (0, 0.0),
        ("30s", 30.0),
        ("10m", 600.0),
        ("2h", 7200.0),
        ("7d", 604800.0),
        ("1h30m", 5400.0),
        ("1d2h3m4s", 93784.0),
        ("1.5h", 5400.0),
        ("90", 90.0),
        (" 10M ", 600.0),
    ],
)
def test_parse_duration_accepts(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize(
    "value",
    [
        "",
        "abc",
        "10 minutes",
        "1m1h",
        "1h1h",
        "-5s",
        "5x",
        "1e3",
        "inf",
        "nan",
        "h",
        True,
        None,
        [],
        -1,
        float("inf"),
    ],
)
def test_parse_duration_rejects(value: object) -> None:
    with pytest.raises(ValueError, match=r"duration|boolean"):
        parse_duration(value)


@pytest.mark.parametrize("seconds", [0.0, 1.0, 59.0, 60.0, 90.0, 3600.0, 5400.0, 86400.0, 93784.0, 1.5])
def test_format_duration_round_trips(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


# ------------------------------------------------------------------ good fixtures


def test_good_fixtures_validate_clean() -> None:
    assert validate_policy_dir(GOOD) == []


def test_good_dir_loads_tenants_by_file_stem_and_skips_ignored_files() -> None:
    policies = load_policy_dir(GOOD)
    # _notes.yaml and .hidden.yaml are broken on purpose: they must be ignored
    assert sorted(policies) == ["batch", "prod", "research"]


def test_only_yaml_and_yml_files_are_tenant_files(tmp_path: Path) -> None:
    write(tmp_path, "notes.txt", "not: [yaml")
    write(tmp_path, "ops.yaml.bak", "not: [yaml")
    write(tmp_path, "_draft.yml", "not: [yaml")
    write(tmp_path, "ops.yml", "{}")
    (tmp_path / "sub.yaml").mkdir()
    assert located(validate_policy_dir(tmp_path)) == [("sub.yaml", 1, "-")]
    (tmp_path / "sub.yaml").rmdir()
    assert list(load_policy_dir(tmp_path)) == ["ops"]


def test_prod_policy_values() -> None:
    prod = load_policy_file(GOOD / "prod.yaml")
    assert prod.tenant == "prod"
    assert prod.priority == 100
    assert prod.spot == SpotPolicy(allowed=False)
    assert prod.steady_quota_gpus == 64 and prod.burst_quota_gpus == 128
    assert prod.budget == Budget(usd_per_hour=400.0)
    assert prod.allowed_providers == ("onprem", "aws")
    assert prod.queue_wait_slo_s == 120.0
    assert prod.fair_share_weight == 4.0


def test_research_policy_converts_every_field() -> None:
    assert load_policy_file(GOOD / "research.yaml") == Policy(
        tenant="research",
        priority=10,
        steady_quota_gpus=32,
        burst_quota_gpus=96,
        budget=Budget(usd_per_hour=200.0, usd_per_month=50000.0),
        spot=SpotPolicy(
            allowed=True, max_share=0.8, required_checkpoint_interval_s=1800.0, fault_tolerant_fraction=0.0
        ),
        allowed_providers=("sim", "aws", "gcp"),
        allowed_regions=("us-east-1", "us-central1"),
        queue_wait_slo_s=600.0,
        preemptible_by=("prod",),
        fair_share_weight=2.0,
        max_job_runtime_s=86400.0,
    )


def test_batch_policy_values() -> None:
    batch = load_policy_file(GOOD / "batch.yaml")
    assert batch.priority == 10
    assert batch.spot.allowed and batch.spot.fault_tolerant_fraction == 0.8
    assert batch.spot.required_checkpoint_interval_s == 3600.0
    assert batch.fair_share_weight == 1.0
    assert batch.budget == Budget(usd_per_hour=50.0, usd_per_month=10000.0)
    assert batch.queue_wait_slo_s == 5400.0
    assert batch.max_job_runtime_s == 7 * 86400.0
    assert batch.preemptible_by == ("prod", "research")


def test_an_empty_file_is_refused_and_braces_are_the_default_policy(tmp_path: Path) -> None:
    for name, text in (("ops.yaml", ""), ("dev.yaml", "# only a comment\n")):
        with pytest.raises(PolicyValidationError) as exc:
            load_policy_file(write(tmp_path, name, text))
        assert located(exc.value.errors) == [(name, 1, "-")] and "write `{}`" in exc.value.errors[0].message
    assert load_policy_file(write(tmp_path, "ops.yaml", "{}\n")) == default_policy("ops")


def test_empty_sections_mean_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "ops.yaml", "quota:\nbudget:\nspot:\nallowed_providers:\n")
    assert load_policy_file(path) == default_policy("ops")


def test_yml_suffix_is_a_tenant_file(tmp_path: Path) -> None:
    write(tmp_path, "ops.yml", "priority: 3\n")
    assert load_policy_dir(tmp_path)["ops"].priority == 3


def test_tenant_key_equal_to_stem_is_accepted(tmp_path: Path) -> None:
    assert load_policy_file(write(tmp_path, "ops.yaml", "tenant: ops\n")).tenant == "ops"


def test_merge_keys_work_and_own_keys_win(tmp_path: Path) -> None:
    path = write(tmp_path, "ops.yaml", "<<: {priority: 3, fair_share_weight: 2}\npriority: 4\n")
    policy = load_policy_file(path)
    assert (policy.priority, policy.fair_share_weight) == (4, 2.0)


# ------------------------------------------------------------------ bad fixtures


@pytest.mark.parametrize(
    ("name", "line", "field", "message"),
    [
        ("unknown_key.yaml", 4, "spot.max_shar", "unknown key 'max_shar' (did you mean 'max_share'?)"),
        ("wrong_type.yaml", 3, "budget.usd_per_hour", "input should be a valid number (got 'lots')"),
        (
            "other_tenant.yaml",
            3,
            "tenant",
            "file is for tenant 'other_tenant' (its name) but says tenant: 'prod'",
        ),
        ("syntax_error.yaml", 4, "-", "invalid YAML: while parsing a flow sequence"),
        ("duplicate_key.yaml", 3, "priority", "duplicate key 'priority' (first given on line 1)"),
        ("bad_duration.yaml", 1, "queue_wait_slo", "invalid duration '10 minutes'"),
    ],
)
def test_bad_fixture_gives_one_located_line(name: str, line: int, field: str, message: str) -> None:
    path = BAD / name
    errors = errors_of(path)
    assert errors[0].file == str(path)
    assert (Path(errors[0].file).name, errors[0].line, errors[0].field) == (name, line, field)
    assert errors[0].message.startswith(message)
    assert str(errors[0]) == f"{path}:{line}: {field}: {errors[0].message}"
    assert LINE_FORMAT.match(str(errors[0]))


def test_bad_dir_reports_every_error_of_every_file_and_loads_nothing() -> None:
    errors = validate_policy_dir(BAD)
    assert located(errors) == [
        ("bad_duration.yaml", 1, "queue_wait_slo"),
        ("bad_duration.yaml", 3, "spot.required_checkpoint_interval"),
        ("duplicate_key.yaml", 3, "priority"),
        ("other_tenant.yaml", 3, "tenant"),
        ("syntax_error.yaml", 4, "-"),
        ("unknown_key.yaml", 4, "spot.max_shar"),
        ("wrong_type.yaml", 3, "budget.usd_per_hour"),
    ]
    with pytest.raises(PolicyValidationError) as info:
        load_policy_dir(BAD)
    assert info.value.errors == errors
    assert str(info.value).splitlines() == [str(e) for e in errors]


def test_one_bad_file_fails_the_whole_dir(tmp_path: Path) -> None:
    shutil.copytree(GOOD, tmp_path / "p")
    write(tmp_path / "p", "extra.yaml", "priority: high\n")
    with pytest.raises(PolicyValidationError) as info:
        load_policy_dir(tmp_path / "p")
    assert located(info.value.errors) == [("extra.yaml", 1, "priority")]


def test_missing_directory_is_one_error(tmp_path: Path) -> None:
    errors = validate_policy_dir(tmp_path / "nope")
    assert len(errors) == 1
    assert errors[0].file == str(tmp_path / "nope") and errors[0].field == "-"
    assert "does not exist" in errors[0].message


def test_file_instead_of_directory_is_one_error(tmp_path: Path) -> None:
    errors = validate_policy_dir(write(tmp_path, "x.yaml", ""))
    assert [e.message for e in errors] == ["policy directory is not a directory"]


def test_same_tenant_twice_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "ops.yaml", "priority: 1\n")
    write(tmp_path, "ops.yml", "priority: 2\n")
    assert located(validate_policy_dir(tmp_path)) == [("ops.yml", 1, "-")]


def test_bad_file_name_is_an_error(tmp_path: Path) -> None:
    errors = errors_of(write(tmp_path, "my tenant.yaml", ""))
    assert (errors[0].line, errors[0].field) == (1, "-")
    assert "invalid name 'my tenant'" in errors[0].message


@pytest.mark.parametrize(
    ("text", "line", "field", "fragment"),
    [
        (b"- a\n- b\n", 1, "-", "expected a mapping of tenant policy keys, got a list"),
        (b"just a string\n", 1, "-", "expected a mapping"),
        (b"priority: 1\nnote: \xff\xfe\n", 2, "-", "not UTF-8"),
        (b"priority: 1\n\x00\n", 2, "-", "unacceptable character"),
        (
            b"\n\npriority: !!python/object/apply:os.system [echo]\n",
            3,
            "-",
            "could not determine a constructor",
        ),
        (b"priority: !custom 3\n", 1, "priority", "could not determine a constructor for the tag '!custom'"),
        (b"a: &a [*a]\n", 1, "-", "nested deeper"),
        (b"x: " + b"[" * 500 + b"]" * 500 + b"\n", 1, "-", "nested deeper"),
        (b"priority: 1\n---\npriority: 2\n", 2, "-", "expected a single document"),
        (b"spot:\n  allowed: true\n  allowed: false\n", 3, "spot.allowed", "duplicate key 'allowed'"),
        (b"priority: 2026-02-30\n", 1, "priority", "invalid value '2026-02-30'"),
        (b"priority: yes\n", 1, "priority", "input should be a valid integer (got True)"),
        (b"fair_share_weight: .nan\n", 1, "fair_share_weight", "finite"),
        (b"fair_share_weight: 0\n", 1, "fair_share_weight", "greater than 0"),
        (b"spot:\n  max_share: 1.5\n", 2, "spot.max_share", "less than or equal to 1"),
        (b"spot: yes\n", 1, "spot", "expected a mapping, got bool True"),
        (b"allowed_providers: [aws, azure]\n", 1, "allowed_providers.1", "input should be 'sim', 'onprem'"),
        (b"allowed_regions: [a, a]\n", 1, "allowed_regions", "'a' is listed twice"),
        (b"preemptible_by: [prod, 'bad name']\n", 1, "preemptible_by.1", "invalid name 'bad name'"),
        (b"queue_wait_slo: 0s\n", 1, "queue_wait_slo", "must be greater than 0"),
        (b"max_job_runtime: -1\n", 1, "max_job_runtime", "must not be negative"),
        (b"quota:\n  steady_gpus: -4\n", 2, "quota.steady_gpus", "greater than or equal to 0"),
        (b"1: 2\n", 1, "1", "keys must be strings"),
        (b"budget:\n  usd_per_day: 5\n", 2, "budget.usd_per_day", "unknown key 'usd_per_day'"),
        (b"prioirty: 5\n", 1, "prioirty", "did you mean 'priority'?"),
    ],
)
def test_hostile_and_broken_documents_give_located_lines(
    tmp_path: Path, text: bytes, line: int, field: str, fragment: str
) -> None:
    errors = errors_of(write(tmp_path, "ops.yaml", text))
    assert (errors[0].line, errors[0].field) == (line, field), errors
    assert fragment in errors[0].message
    assert all(LINE_FORMAT.match(str(e)) for e in errors)


def test_alias_bomb_is_rejected_quickly(tmp_path: Path) -> None:
    rows = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        rows.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    errors = errors_of(write(tmp_path, "ops.yaml", "\n".join(rows) + "\n"))
    assert errors[0].field == "-" and "document too large" in errors[0].message


def test_several_errors_in_one_file_are_all_reported_in_line_order(tmp_path: Path) -> None:
    text = "priority: high\nspot:\n  allowed: maybe\n  max_share: 2\nbogus: 1\n"
    assert located(errors_of(write(tmp_path, "ops.yaml", text))) == [
        ("ops.yaml", 1, "priority"),
        ("ops.yaml", 3, "spot.allowed"),
        ("ops.yaml", 4, "spot.max_share"),
        ("ops.yaml", 5, "bogus"),
    ]


# ------------------------------------------------------------------ schema


def _properties(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = list(schema.get("properties", {}).items())
    for definition in schema.get("$defs", {}).values():
        out.extend(definition.get("properties", {}).items())
    return out


def test_policy_json_schema_describes_every_field_and_who_reads_it() -> None:
    schema = policy_json_schema()
    assert schema["additionalProperties"] is False
    props = _properties(schema)
    assert props and all("read by" in p.get("description", "") for _, p in props)
    top = schema["properties"]
    assert "read by the planner's priority preemption step" in top["preemptible_by"]["description"]
    spot = schema["$defs"]["SpotDoc"]["properties"]
    assert "read by spot placement" in spot["required_checkpoint_interval"]["description"]
    assert "read by the planner" in top["priority"]["description"]
    assert all(d.get("additionalProperties") is False for d in schema["$defs"].values())


def test_config_json_schema_forbids_unknown_keys() -> None:
    schema = config_json_schema()
    assert schema["additionalProperties"] is False
    assert "node_groups" in schema["properties"]
    assert all(d.get("additionalProperties") is False for d in schema["$defs"].values() if "properties" in d)


# ------------------------------------------------------------------ reloader


def test_reloader_keeps_last_good_set_then_picks_up_a_good_edit(tmp_path: Path) -> None:
    pdir = tmp_path / "policies"
    shutil.copytree(GOOD, pdir)
    reloader = PolicyReloader(pdir)
    assert reloader.last_errors == []
    before = reloader.current
    assert sorted(before) == ["batch", "prod", "research"]

    (pdir / "research.yaml").write_text("priority: 20\nspot:\n  allowed: true\n  max_share: lots\n")
    errors = reloader.reload()
    assert located(errors) == [("research.yaml", 4, "spot.max_share")]
    assert reloader.current == before
    assert reloader.current["research"].priority == 10

    (pdir / "research.yaml").write_text("priority: 20\nspot:\n  allowed: true\n  max_share: 0.5\n")
    assert reloader.reload() == []
    assert reloader.current["research"].priority == 20
    assert reloader.current["research"].spot.max_share == 0.5
    assert reloader.current["prod"] == before["prod"]

    (pdir / "batch.yaml").unlink()
    assert reloader.reload() == []
    assert sorted(reloader.current) == ["prod", "research"]


def test_reloader_starting_on_a_bad_dir_is_empty_until_fixed(tmp_path: Path) -> None:
    write(tmp_path, "ops.yaml", "priority: [\n")
    reloader = PolicyReloader(tmp_path)
    assert reloader.current == {}
    assert located(reloader.last_errors) == [("ops.yaml", 2, "-")]
    write(tmp_path, "ops.yaml", "priority: 1\n")
    assert reloader.reload() == []
    assert reloader.current == {"ops": Policy(tenant="ops", priority=1)}


def test_current_is_a_copy(tmp_path: Path) -> None:
    write(tmp_path, "ops.yaml", "{}")
    reloader = PolicyReloader(tmp_path)
    reloader.current.clear()
    assert list(reloader.current) == ["ops"]


# ------------------------------------------------------------------ burst.yaml


def test_full_config_loads() -> None:
    config = load_config(CONFIG / "full.yaml")
    assert config.cluster == "demo"
    assert config.loop_interval == 10.0 and config.loop_jitter == 1.0
    assert config.clock == "sim" and config.clock_speed == 60.0
    assert config.sim_start == datetime(2026, 3, 2, tzinfo=UTC)
    assert config.policies_path() == GOOD.resolve()
    assert config.state_file() == (CONFIG / "state" / "burst.db").resolve()
    assert config.catalog_path() == (CONFIG / "prices.csv").resolve()
    assert config.policies_path().is_absolute() and config.state_file().is_absolute()
    assert config.catalog.overrides[0].spot_usd_per_hour == 12.0
    assert config.catalog.onprem is not None and config.catalog.onprem.pue == 1.4
    assert config.forecasting.horizon == 48 * 3600.0 and config.forecasting.step == 900.0
    assert config.forecasting.refit_interval == 6 * 3600.0 and config.forecasting.min_history == 86400.0
    assert config.workload.synthetic == {"seed": 7, "base_jobs_per_hour": 20, "burst_factor": 4}
    assert [g.effective_initial_size for g in config.node_groups] == [4, 0, 0]
    assert load_policy_dir(config.policies_path()).keys() == {"prod", "research", "batch"}


def test_full_config_builds_domain_node_groups() -> None:
    onprem, aws, sim = load_config(CONFIG / "full.yaml").node_groups_model()
    assert onprem == NodeGroup(
        id="onprem-a100",
        provider="onprem",
        region="dc1",
        zone="dc1-a",
        tier=Tier.STEADY,
        capacity_type=CapacityType.ONPREM,
        shape=GpuShape("A100", 8, 80.0),
        instance_type="dgx-a100",
        min_size=4,
        max_size=4,
        boot_latency_s=300.0,
        warm_wake_latency_s={WarmState.POWERED_OFF: 600.0},
        warm_pool=WarmPoolSettings(
            min_size=0, max_prepared=0, state=WarmState.POWERED_OFF, reuse_on_scale_in=True
        ),
        scale_down_cooldown_s=600.0,
    )
    assert aws.tier is Tier.ELASTIC and aws.capacity_type is CapacityType.ON_DEMAND
    assert aws.boot_latency_s == 360.0 and aws.max_gpus == 128
    assert aws.warm_wake_latency_s == {WarmState.STOPPED: 60.0, WarmState.RUNNING: 5.0}
    assert aws.warm_pool == WarmPoolSettings(min_size=2, max_prepared=4, state=WarmState.STOPPED)
    assert sim.capacity_type is CapacityType.SPOT and sim.shape.gpu_memory_gib == 0.0
    assert load_config(CONFIG / "full.yaml").node_groups[2].spot_hazard_per_hour == 0.05


def test_empty_config_is_all_defaults(tmp_path: Path) -> None:
    config = load_config(CONFIG / "empty.yaml")
    assert config.cluster == "burst" and config.clock == "real"
    assert config.loop_interval == 10.0 and config.loop_jitter == 0.0
    assert config.node_groups == [] and config.node_groups_model() == ()
    assert config.state_file() == (CONFIG / "burst.db").resolve()
    assert config.policies_path() == (CONFIG / "policies").resolve()
    assert config.catalog_path() is None and config.sim_start is None


def test_config_built_in_code_resolves_against_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert BurstConfig().state_file() == (tmp_path / "burst.db").resolve()
    assert BurstConfig(state_path="/var/lib/burst.db").state_file() == Path("/var/lib/burst.db")


def config_errors(path: Path) -> list[PolicyError]:
    with pytest.raises(PolicyValidationError) as info:
        load_config(path)
    return info.value.errors


def test_node_group_errors_point_at_their_lines() -> None:
    errors = config_errors(CONFIG / "bad_groups.yaml")
    assert [(Path(e.file).name, e.line, e.field, e.message) for e in errors] == [
        (
            "bad_groups.yaml",
            7,
            "node_groups.0.capacity_type",
            "tier steady needs capacity_type onprem, got spot",
        ),
        ("bad_groups.yaml", 13, "node_groups.0.initial_size", "initial_size 6 is above max_size 4"),
        ("bad_groups.yaml", 14, "node_groups.1.id", "duplicate node group id 'onprem-a100' (also item 0)"),
        ("bad_groups.yaml", 21, "node_groups.1.gpus_per_node", "input should be greater than or equal to 1"),
        ("bad_groups.yaml", 23, "node_groups.2.id", "required key is missing"),
        (
            "bad_groups.yaml",
            31,
            "node_groups.2.boot_latency",
            "invalid duration 'soon'; use seconds (e.g. 90) or a duration like 30s, 10m, 2h, 7d, 1h30m",
        ),
    ]


def test_top_level_config_errors_point_at_their_lines() -> None:
    errors = config_errors(CONFIG / "bad_top.yaml")
    assert located(errors) == [
        ("bad_top.yaml", 1, "cluster"),
        ("bad_top.yaml", 3, "loop_jiter"),
        ("bad_top.yaml", 4, "clock"),
        ("bad_top.yaml", 7, "forecasting.step"),
    ]
    assert errors[1].message == "unknown key 'loop_jiter' (did you mean 'loop_jitter'?)"
    assert errors[2].message == "input should be 'real' or 'sim' (got 'wall')"


GROUP = """node_groups:
  - id: g
    provider: {provider}
    region: r
    tier: {tier}
    capacity_type: {capacity}
    instance_type: t
    gpu_model: A100
    gpus_per_node: 8
    max_size: 4
"""


@pytest.mark.parametrize(
    ("provider", "tier", "capacity", "field", "fragment"),
    [
        (
            "aws",
            "elastic",
            "onprem",
            "node_groups.0.capacity_type",
            "capacity_type onprem is only for tier steady",
        ),
        ("aws", "steady", "onprem", "node_groups.0.tier", "provider aws is cloud capacity"),
        ("onprem", "elastic", "spot", "node_groups.0.tier", "provider onprem is owned capacity"),
        (
            "sim",
            "steady",
            "on_demand",
            "node_groups.0.capacity_type",
            "tier steady needs capacity_type onprem",
        ),
        ("azure", "elastic", "spot", "node_groups.0.provider", "got 'azure'"),
        (
            "sim",
            "cloudy",
            "spot",
            "node_groups.0.tier",
            "input should be 'steady' or 'elastic' (got 'cloudy')",
        ),
    ],
)
def test_tier_capacity_and_provider_must_agree(
    tmp_path: Path, provider: str, tier: str, capacity: str, field: str, fragment: str
) -> None:
    errors = config_errors(
        write(tmp_path, "burst.yaml", GROUP.format(provider=provider, tier=tier, capacity=capacity))
    )
    assert [e.field for e in errors] == [field]
    assert fragment in errors[0].message
    line = {"provider": 3, "tier": 5, "capacity_type": 6}[field.rsplit(".", 1)[1]]
    assert errors[0].line == line


@pytest.mark.parametrize(
    ("extra", "line", "field", "fragment"),
    [
        ("    min_size: 5\n", 10, "node_groups.0.max_size", "max_size 4 is below min_size 5"),
        ("    initial_size: 9\n", 11, "node_groups.0.initial_size", "above max_size 4"),
        (
            "    warm_pool: {min_size: 6}\n",
            11,
            "node_groups.0.warm_pool.min_size",
            "exceeds the group's max_size 4",
        ),
        (
            "    warm_pool:\n      state: warm\n",
            12,
            "node_groups.0.warm_pool.state",
            "input should be 'stopped'",
        ),
        (
            "    warm_wake_latency: {frozen: 5s}\n",
            11,
            "node_groups.0.warm_wake_latency.frozen",
            "input should be",
        ),
        ("    spot_hazard_per_hour: 0.1\n", 11, "node_groups.0.spot_hazard_per_hour", "provider sim only"),
        ("    colour: red\n", 11, "node_groups.0.colour", "unknown key 'colour'"),
    ],
)
def test_node_group_field_errors(tmp_path: Path, extra: str, line: int, field: str, fragment: str) -> None:
    text = GROUP.format(provider="aws", tier="elastic", capacity="spot") + extra
    errors = config_errors(write(tmp_path, "burst.yaml", text))
    assert [(e.line, e.field) for e in errors] == [(line, field)], errors
    assert fragment in errors[0].message


def test_a_warm_pool_on_a_spot_group_is_an_error_naming_the_group(tmp_path: Path) -> None:
    pool = "    warm_pool: {max_prepared: 2}\n"
    errors = config_errors(write(tmp_path, "burst.yaml", GROUP.format(provider="aws", tier="elastic", capacity="spot")
                                 + pool))
    assert [(e.line, e.field) for e in errors] == [(11, "node_groups.0.warm_pool")], errors
    assert "node group g is capacity_type spot: spot groups have no warm pool" in errors[0].message
    on_demand = GROUP.format(provider="aws", tier="elastic", capacity="on_demand") + pool
    (group,) = load_config(write(tmp_path, "burst.yaml", on_demand)).node_groups_model()
    assert group.warm_pool.max_prepared == 2
    empty = GROUP.format(provider="aws", tier="elastic", capacity="spot") + "    warm_pool:\n"
    (spot,) = load_config(write(tmp_path, "burst.yaml", empty)).node_groups_model()
    assert spot.warm_pool == WarmPoolSettings(), "an empty warm_pool section asks for nothing"


def test_missing_required_key_points_at_the_mapping(tmp_path: Path) -> None:
    text = "cluster: c\nnode_groups:\n  - id: g\n    provider: aws\n"
    errors = config_errors(write(tmp_path, "burst.yaml", text))
    assert {e.line for e in errors} == {3}
    assert {e.field for e in errors} == {
        "node_groups.0.region",
        "node_groups.0.tier",
        "node_groups.0.capacity_type",
        "node_groups.0.instance_type",
        "node_groups.0.gpu_model",
        "node_groups.0.gpus_per_node",
        "node_groups.0.max_size",
    }
    assert all(e.message == "required key is missing" for e in errors)


def test_config_anchors_and_merges_keep_own_lines(tmp_path: Path) -> None:
    text = GROUP.format(provider="aws", tier="elastic", capacity="spot").replace(
        "  - id: g", "  - &base\n    id: g"
    )
    text += "  - <<: *base\n    id: h\n    max_size: many\n"
    errors = config_errors(write(tmp_path, "burst.yaml", text))
    assert [(e.line, e.field) for e in errors] == [(14, "node_groups.1.max_size")]
    ok = text.replace("max_size: many", "max_size: 2")
    groups = load_config(write(tmp_path, "burst.yaml", ok)).node_groups_model()
    assert [(g.id, g.max_size, g.instance_type) for g in groups] == [("g", 4, "t"), ("h", 2, "t")]


@pytest.mark.parametrize(
    ("text", "line", "field", "fragment"),
    [
        ("loop_jitter: 20s\n", 1, "loop_jitter", "must be shorter than loop_interval"),
        ("loop_interval: 0\n", 1, "loop_interval", "must be greater than 0"),
        ("sim_start: 2026-03-02T00:00:00\n", 1, "sim_start", "needs a timezone"),
        ("clock_speed: -1\n", 1, "clock_speed", "greater than or equal to 0.01"),
        ("catalog:\n  onprem:\n    pue: 0.5\n", 3, "catalog.onprem.pue", "greater than or equal to 1"),
        (
            "catalog:\n  overrides:\n    - {provider: aws, instance_type: a, region: r, on_demand_usd_per_hour: 1}\n"
            "    - {provider: aws, instance_type: a, region: r, on_demand_usd_per_hour: 2}\n",
            4,
            "catalog.overrides.1",
            "duplicate price row aws/a/r",
        ),
        (
            "catalog:\n  overrides:\n    - {provider: aws, instance_type: a, region: r}\n",
            3,
            "catalog.overrides.0.on_demand_usd_per_hour",
            "required key",
        ),
        ("forecasting:\n  enabled: sometimes\n", 2, "forecasting.enabled", "valid boolean"),
        ("workload:\n  trace: x.csv\n", 2, "workload.trace", "unknown key 'trace'"),
        ("- a\n", 1, "-", "expected a mapping of burst config keys, got a list"),
        ("cluster: a\ncluster: b\n", 2, "cluster", "duplicate key 'cluster'"),
    ],
)
def test_config_errors(tmp_path: Path, text: str, line: int, field: str, fragment: str) -> None:
    errors = config_errors(write(tmp_path, "burst.yaml", text))
    assert [(e.line, e.field) for e in errors] == [(line, field)], errors
    assert fragment in errors[0].message


def test_date_only_sim_start_is_midnight_utc(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "burst.yaml", "clock: sim\nsim_start: 2026-03-02\n"))
    assert config.sim_start == datetime(2026, 3, 2, tzinfo=UTC)


def test_missing_config_file_is_one_error(tmp_path: Path) -> None:
    errors = config_errors(tmp_path / "burst.yaml")
    assert len(errors) == 1 and errors[0].line == 1 and errors[0].field == "-"
    assert errors[0].message.startswith("cannot read file")


def test_home_relative_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    config = load_config(write(tmp_path, "burst.yaml", "state_path: ~/burst.db\n"))
    assert config.state_file() == (tmp_path / "burst.db").resolve()
    errors = config_errors(write(tmp_path, "burst.yaml", "policies_dir: ~nosuchuser-xyz/p\n"))
    assert [(e.line, e.field) for e in errors] == [(1, "policies_dir")]
    assert "cannot expand '~nosuchuser-xyz'" in errors[0].message


def test_prescale_section_sets_the_forecast_quantile_and_buffer(tmp_path: Path) -> None:
    policy = load_policy_file(write(tmp_path, "ops.yaml", "prescale:\n  quantile: 0.99\n  buffer: 10m\n"))
    assert (policy.prescale.quantile, policy.prescale.buffer_s) == (0.99, 600.0)
    assert load_policy_file(write(tmp_path, "off.yaml", "prescale:\n  quantile: null\n")).prescale.quantile is None
    assert default_policy("x").prescale.quantile == 0.9
    (error,) = errors_of(write(tmp_path, "bad.yaml", "priority: 1\nprescale:\n  quantile: 0.8\n"))
    assert (error.line, error.field) == (3, "prescale.quantile")
    assert "one of the forecast quantiles 0.1, 0.5, 0.9, 0.99" in error.message
    valued = load_policy_file(write(tmp_path, "wait.yaml", "prescale:\n  wait_usd_per_gpu_hour: 20\n"))
    assert valued.prescale.wait_usd_per_gpu_hour == 20.0 and default_policy("x").prescale.wait_usd_per_gpu_hour is None
    (negative,) = errors_of(write(tmp_path, "neg.yaml", "prescale:\n  wait_usd_per_gpu_hour: -1\n"))
    assert (negative.line, negative.field) == (2, "prescale.wait_usd_per_gpu_hour")


def test_forecasting_events_load_as_special_events_and_bad_dates_point_at_their_line(tmp_path: Path) -> None:
    from datetime import date

    from burst.model import SpecialEvent

    good = write(tmp_path, "burst.yaml", "forecasting:\n  events:\n    - name: holiday\n      start: 2026-12-25\n      days: 2\n")
    (event,) = load_config(good).forecasting.events
    assert event.to_event() == SpecialEvent("holiday", date(2026, 12, 25), 2)
    bad = write(tmp_path, "bad.yaml", "forecasting:\n  events:\n    - name: holiday\n      start: soon\n")
    (error,) = config_errors(bad)
    assert (error.line, error.field) == (4, "forecasting.events.0.start")


def test_forecast_step_and_horizon_are_bounded(tmp_path: Path) -> None:
    (error,) = config_errors(write(tmp_path, "a.yaml", "forecasting:\n  step: 1m\n"))
    assert (error.line, error.field) == (2, "forecasting.step") and "outside 5 min .. 1 day" in error.message
    (error,) = config_errors(write(tmp_path, "b.yaml", "forecasting:\n  horizon: 31d\n"))
    assert error.field == "forecasting.horizon" and "longer than 30 days" in error.message
