"""The `services:` section of tenant policies: FILE:LINE errors, conversion to `Service`, the JSON schema, the docs."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from burst import codec
from burst.bounds import MAX_EVENT_MULTIPLIER, MAX_REPLICAS
from burst.model import Policy, Service, ServiceEvent, TokenCost, WorkKind
from policies import PolicyError, PolicyValidationError, load_policy_file, policy_json_schema

README = Path(__file__).resolve().parent.parent / "README.md"

GOOD = """\
services:
  - name: chat
    gpu_model: H100
    gpu_s_per_request: {a: 0.0001, b: 0.01}
    min_replicas: 1
    max_replicas: 8
    replica_start: 3m
    ready_within: 2m
    spot_share: 0.25
    unserved_request_cost: 0.002
    events:
      - {name: promo, start: 2026-11-27T00:00:00Z, end: 2026-11-28T00:00:00Z, multiplier: 3}
      - {start: 2026-12-01, end: 2026-12-02}
  - name: embed
    gpu_model: A100
    gpus_per_replica: 2
    requests_per_s: 40
    target_utilisation: 0.5
    max_replicas: 4
    ready_within: 30
    unserved_request_cost: 0
"""

# one service entry with every required key, on lines 2-7; a case replaces or adds lines below it
BASE = """\
services:
  - name: chat
    gpu_model: H100
    requests_per_s: 2
    max_replicas: 4
    ready_within: 1m
    unserved_request_cost: 0.01
"""


def errors_of(tmp_path: Path, text: str) -> list[PolicyError]:
    path = tmp_path / "team.yaml"
    path.write_text(text)
    with pytest.raises(PolicyValidationError) as info:
        load_policy_file(path)
    return info.value.errors


def with_line(key: str, value: str) -> str:
    """BASE with `key` set to `value`: its line replaced where BASE has the key, else added at the end."""
    lines = BASE.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip(" -").startswith(f"{key}:"):
            lines[i] = f"{line[:line.index(key)]}{key}: {value}"
            return "\n".join(lines) + "\n"
    return BASE + f"    {key}: {value}\n"


@pytest.mark.parametrize(
    ("text", "line", "field", "says"),
    [
        (with_line("replicas", "3"), 8, "services.0.replicas", "unknown key 'replicas'"),
        (with_line("gpu_s_per_request", "{a: 0.0001, b: 0.01}"), 8, "services.0.gpu_s_per_request", "not both"),
        (BASE.replace("    requests_per_s: 2\n", ""), 2, "services.0.gpu_s_per_request",
         "requests_per_s (requests one replica serves per second) or gpu_s_per_request"),
        (with_line("min_replicas", "5"), 5, "services.0.max_replicas", "max_replicas 4 is below min_replicas 5"),
        (with_line("ready_within", "2 minutes"), 6, "services.0.ready_within", "invalid duration '2 minutes'"),
        (with_line("replica_start", "-5"), 8, "services.0.replica_start", "must not be negative"),
        (with_line("replica_start", "400d"), 8, "services.0.replica_start", "longer than the limit of 366 days"),
        (with_line("name", "'bad name'"), 2, "services.0.name", "invalid name 'bad name'"),
        (with_line("gpu_model", "''"), 3, "services.0.gpu_model", "must not be empty"),
        (with_line("gpus_per_replica", "0"), 8, "services.0.gpus_per_replica", "greater than or equal to 1"),
        (with_line("requests_per_s", "0"), 4, "services.0.requests_per_s", "greater than 0"),
        (with_line("target_utilisation", "0"), 8, "services.0.target_utilisation", "greater than 0"),
        (with_line("target_utilisation", "1.2"), 8, "services.0.target_utilisation", "less than or equal to 1"),
        (with_line("spot_share", "1.5"), 8, "services.0.spot_share", "less than or equal to 1"),
        (with_line("unserved_request_cost", "-1"), 7, "services.0.unserved_request_cost", "greater than or equal to 0"),
        (with_line("unserved_request_cost", "yes"), 7, "services.0.unserved_request_cost", "valid number"),
        (with_line("max_replicas", str(MAX_REPLICAS + 1)), 5, "services.0.max_replicas",
         f"less than or equal to {MAX_REPLICAS}"),
        (with_line("max_replicas", "0"), 5, "services.0.max_replicas", "greater than or equal to 1"),
        (BASE.replace("    max_replicas: 4\n", ""), 2, "services.0.max_replicas", "required key is missing"),
        (with_line("events", "[{start: 2026-11-27T00:00:00Z, end: 2026-11-26T00:00:00Z}]"), 8,
         "services.0.events.0.end", "end 2026-11-26T00:00:00+00:00 is not after start 2026-11-27T00:00:00+00:00"),
        (with_line("events", "[{start: 2026-11-27T00:00:00, end: 2026-11-28T00:00:00Z}]"), 8,
         "services.0.events.0.start", "needs a timezone"),
        (with_line("events", "[{start: 1700000000, end: 2026-11-28T00:00:00Z}]"), 8,
         "services.0.events.0.start", "got the number 1700000000"),
        (with_line("events", "[{start: 2026-11-27, end: 2026-11-28, multiplier: 0}]"), 8,
         "services.0.events.0.multiplier", "greater than 0"),
        (with_line("events", f"[{{start: 2026-11-27, end: 2026-11-28, multiplier: {MAX_EVENT_MULTIPLIER * 2:g}}}]"), 8,
         "services.0.events.0.multiplier", f"less than or equal to {MAX_EVENT_MULTIPLIER:g}"),
        (with_line("events", "[{start: 2026-11-27, end: 2026-11-28, multiplyer: 2}]"), 8,
         "services.0.events.0.multiplyer", "did you mean 'multiplier'?"),
        (BASE.replace("requests_per_s: 2", "gpu_s_per_request: {a: 0, b: 0}"), 4, "services.0.gpu_s_per_request.b",
         "a and b are both 0"),
        (BASE.replace("requests_per_s: 2", "gpu_s_per_request: {a: 0.001}"), 4, "services.0.gpu_s_per_request.b",
         "required key is missing"),
        ("services:\n  - chat\n", 2, "services.0", "expected a mapping"),
        ("services: {chat: {}}\n", 1, "services", "valid list"),
    ],
)
def test_a_bad_service_entry_is_one_located_error(
    tmp_path: Path, text: str, line: int, field: str, says: str
) -> None:
    errors = errors_of(tmp_path, text)
    assert [(e.line, e.field) for e in errors] == [(line, field)], errors
    assert says in errors[0].message
    assert str(errors[0]).startswith(f"{tmp_path / 'team.yaml'}:{line}: {field}: ")


def test_a_duplicate_name_is_reported_on_its_line_beside_other_errors(tmp_path: Path) -> None:
    second = BASE.split("\n", 1)[1].replace("max_replicas: 4", "max_replicas: -1")
    errors = errors_of(tmp_path, BASE + second)
    assert [(e.line, e.field) for e in errors] == [(8, "services.1.name"), (11, "services.1.max_replicas")]
    assert errors[0].message == "duplicate service name 'chat' (also item 0)"


def test_both_capacity_forms_are_reported_even_when_one_is_also_invalid(tmp_path: Path) -> None:
    errors = errors_of(tmp_path, with_line("gpu_s_per_request", "{a: -1, b: 0.01}"))
    assert [(e.line, e.field) for e in errors] == [
        (8, "services.0.gpu_s_per_request"), (8, "services.0.gpu_s_per_request.a")
    ]


def test_a_good_policy_converts_every_field(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(GOOD)
    policy = load_policy_file(path)
    assert policy.services == (
        Service(
            tenant="team", name="chat", gpu_model="H100", max_replicas=8, ready_within_s=120.0,
            unserved_request_cost_usd=0.002, token_cost=TokenCost(context_gpu_s=0.0001, generated_gpu_s=0.01),
            min_replicas=1, replica_start_s=180.0, spot_share=0.25,
            events=(
                ServiceEvent(datetime(2026, 11, 27, tzinfo=UTC), datetime(2026, 11, 28, tzinfo=UTC), 3.0, "promo"),
                ServiceEvent(datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC)),
            ),
        ),
        Service(
            tenant="team", name="embed", gpu_model="A100", max_replicas=4, ready_within_s=30.0,
            unserved_request_cost_usd=0.0, gpus_per_replica=2, requests_per_s=40.0, target_utilisation=0.5,
        ),
    )
    assert all(s.kind is WorkKind.SERVICE for s in policy.services)
    assert codec.loads(Policy, codec.dumps(policy)) == policy  # the JSON every boundary speaks keeps them


def test_defaults_and_an_empty_section(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(BASE)
    (chat,) = load_policy_file(path).services
    assert (chat.gpus_per_replica, chat.target_utilisation, chat.min_replicas) == (1, 0.7, 0)
    assert (chat.replica_start_s, chat.spot_share, chat.events, chat.token_cost) == (120.0, 0.0, (), None)
    path.write_text("services:\n")
    assert load_policy_file(path).services == ()


def test_event_times_in_other_offsets_are_stored_in_utc(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(with_line("events", "[{start: '2026-11-27T01:00:00+01:00', end: 2026-11-27T02:00:00Z}]"))
    (event,) = load_policy_file(path).services[0].events
    assert event.start == datetime(2026, 11, 27, 0, 0, tzinfo=UTC) and event.start.tzinfo is UTC


def test_the_domain_service_refuses_what_the_loader_refuses() -> None:
    common: dict[str, Any] = dict(tenant="t", name="s", gpu_model="A100", ready_within_s=60.0,
                                  unserved_request_cost_usd=0.01)
    with pytest.raises(ValueError, match="exactly one"):
        Service(max_replicas=2, **common)
    with pytest.raises(ValueError, match="exactly one"):
        Service(max_replicas=2, requests_per_s=1.0, token_cost=TokenCost(0.1, 0.1), **common)
    with pytest.raises(ValueError, match="min_replicas <= max_replicas"):
        Service(max_replicas=2, min_replicas=3, requests_per_s=1.0, **common)
    with pytest.raises(ValueError, match="not after start"):
        ServiceEvent(datetime(2026, 1, 2, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC))


def test_services_come_before_batch_on_the_steady_tier() -> None:
    assert sorted(WorkKind, key=lambda k: k.steady_rank) == [WorkKind.SERVICE, WorkKind.JOB]
    assert WorkKind.__doc__ is not None and "never stopped for a service" in WorkKind.__doc__


# ------------------------------------------------------------------ JSON schema and docs


def as_editor_sees(text: str) -> Any:
    """The YAML as a JSON-schema validator in an editor sees it: timestamps stay strings."""
    return json.loads(json.dumps(yaml.safe_load(text), default=lambda v: v.isoformat()))


def test_the_json_schema_accepts_a_good_policy_and_describes_every_service_field() -> None:
    schema = policy_json_schema()
    jsonschema.validate(as_editor_sees(GOOD), schema)
    service = schema["$defs"]["ServiceDoc"]
    assert service["additionalProperties"] is False
    assert set(service["required"]) == {"name", "gpu_model", "max_replicas", "ready_within", "unserved_request_cost"}
    for name in ("ServiceDoc", "TokenCostDoc", "ServiceEventDoc"):
        props = schema["$defs"][name]["properties"]
        assert all(p.get("description") for p in props.values()), name
    assert service["properties"]["max_replicas"]["maximum"] == MAX_REPLICAS


@pytest.mark.parametrize(
    "text",
    [
        with_line("gpu_s_per_request", "{a: 0.0001, b: 0.01}"),  # both capacity forms
        BASE.replace("    requests_per_s: 2\n", ""),  # neither
        with_line("replicas", "3"),  # unknown key
        with_line("target_utilisation", "0"),
        with_line("events", "[{start: 2026-11-27, multiplier: 2}]"),  # no end
    ],
)
def test_the_json_schema_refuses_what_the_loader_refuses(text: str) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(as_editor_sees(text), policy_json_schema())


def readme_example() -> str:
    section = README.read_text().split("## Services (online inference) in a tenant policy", 1)[1]
    match = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert match, "the README's services section has a YAML example"
    return match.group(1)


def test_the_readme_example_loads_and_matches_the_schema(tmp_path: Path) -> None:
    text = readme_example()
    jsonschema.validate(as_editor_sees(text), policy_json_schema())
    path = tmp_path / "chat.yaml"
    path.write_text(text)
    (service,) = load_policy_file(path).services
    assert service.token_cost == TokenCost(0.0001, 0.01) and service.events[0].multiplier == 3.0
    assert "The daemon runs them where `burst.yaml` names where their" in README.read_text()
