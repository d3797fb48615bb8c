"""Fuzzing the policy and config loaders: whatever the bytes, the answer is a value or located error lines."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from burst.model import Policy, Service
from policies import BurstConfig, PolicyError, PolicyValidationError, load_config, load_policy_file

LINE = re.compile(r"^[^\n]+:[1-9]\d*: [^\n]+: [^\n]+$")

# ------------------------------------------------------------------ documents from a byte tape
#
# Hypothesis draws one byte string; a `Tape` turns it into a document, choice by
# choice (a spent tape reads as zeros, and zero always means "leave it out / the
# simplest value"), so generation is cheap and shrinking the bytes shrinks the
# document. Most values are plausible for their key; some are anything at all.


class Tape:
    """Reads choices off a byte string."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.i = 0

    def byte(self) -> int:
        b = self.data[self.i] if self.i < len(self.data) else 0
        self.i += 1
        return b

    def below(self, n: int) -> int:
        return self.byte() % n

    def pick(self, options: Sequence[Any]) -> Any:
        return options[self.below(len(options))]


Gen = Callable[[Tape], Any]
CHARS = "abcz019_-. :#&*!|>[]{},'\"\n\t\x00\x7féß😀"
ODD_STRINGS = [
    "",
    "yes",
    "~",
    "null",
    "1e3",
    "0x1f",
    "2026-02-30",
    "1:30",
    "<<",
    "---",
    "...",
    "%TAG",
    "@x",
    "`",
]


def text(t: Tape) -> str:
    return "".join(t.pick(CHARS) for _ in range(t.below(9)))


def anything(t: Tape, depth: int = 0) -> Any:
    kind = t.below(12 if depth < 3 else 9)
    if kind == 0:
        return None
    if kind == 1:
        return t.byte() % 2 == 1
    if kind == 2:
        return t.byte() - 128
    if kind == 3:
        return t.pick([10**30, -(10**30), 2**63, 0])
    if kind == 4:
        return t.pick([0.5, -1.5, 1e308, 1e-308, float("inf"), float("-inf"), float("nan")])
    if kind == 5:
        return text(t)
    if kind == 6:
        return t.pick(ODD_STRINGS)
    if kind == 7:
        return t.pick(["30s", "10m", "2h", "7d", "1h30m", "1m1h", "-5s", "soon", "5x"])
    if kind == 8:
        return t.pick(["steady", "elastic", "spot", "onprem", "aws", "stopped", "A100"])
    if kind == 9:
        return [anything(t, depth + 1) for _ in range(t.below(4))]
    return {text(t): anything(t, depth + 1) for _ in range(t.below(4))}


def one_of(*options: Any) -> Gen:
    return lambda t: t.pick(options)


def ints(low: int, high: int) -> Gen:
    return lambda t: low + t.byte() % (high - low + 1)


def floats(low: float, high: float) -> Gen:
    return lambda t: low + (high - low) * t.byte() / 255


def lists(item: Gen, most: int = 3) -> Gen:
    return lambda t: [item(t) for _ in range(t.below(most + 1))]


durations = one_of(0, 1, 90, 600, 86400, 10**6, "30s", "10m", "2h", "7d", "1h30m", "1.5h", "90", None)
fractions = one_of(0, 0.25, 0.5, 0.8, 1, 1.0, -0.1, 1.5)
providers = one_of("sim", "onprem", "aws", "gcp", "libcloud", "azure")
UNKNOWN_KEYS = ["bogus", "max_shar", "Priority", "priority ", "1", "tenant_name", "<<"]


def section(fields: dict[str, Gen]) -> Gen:
    """A mapping with a tape-chosen subset of a section's real keys, each near-valid, plus the odd unknown key."""

    def build(t: Tape) -> dict[str, Any]:
        doc: dict[str, Any] = {}
        for key, good in fields.items():
            roll = t.byte()
            if roll < 96:
                continue  # left out (a spent tape leaves everything out)
            doc[key] = good(t) if roll < 232 else anything(t)
        if t.byte() >= 240:
            doc[t.pick(UNKNOWN_KEYS)] = anything(t)
        return doc

    return build


event = section({
    "start": one_of("2026-11-27T00:00:00Z", "2026-11-27T00:00:00Z", "2026-11-27", "2026-11-27T00:00:00", 1700000000),
    "end": one_of("2026-11-28T00:00:00+01:00", "2026-11-29", "2026-11-29", "2026-11-26T00:00:00Z", "soon"),
    "multiplier": one_of(3, 0.5, 0, None),
    "name": one_of("promo", "", None),
})
SERVICE_FIELDS: dict[str, Gen] = {
    "name": one_of("chat", "chat", "embed", "embed", "bad name"),
    "gpu_model": one_of("H100", "A100", "A100", ""),
    "gpus_per_replica": ints(0, 9),
    "requests_per_s": one_of(1, 0.5, 40, 40, 0),
    "gpu_s_per_request": one_of({"a": 0.0001, "b": 0.01}, {"a": 0, "b": 0.01}, {"a": 0, "b": 0}, {"a": 0.001}),
    "target_utilisation": one_of(0.7, 0.7, 1, 0),
    "min_replicas": ints(0, 6),
    "max_replicas": ints(0, 12),
    "replica_start": durations,
    "ready_within": durations,
    "spot_share": fractions,
    "unserved_request_cost": one_of(0, 0.01, 0.01, -1),
    "events": lists(event),
}
SERVICE_REQUIRED = ("name", "gpu_model", "max_replicas", "ready_within", "unserved_request_cost")


def service_entry(t: Tape) -> dict[str, Any]:
    """A service with its required keys and one capacity form (each drawn near-valid), then other keys drawn."""
    doc = {key: SERVICE_FIELDS[key](t) for key in SERVICE_REQUIRED}
    form = t.pick(["requests_per_s", "gpu_s_per_request"])
    doc[form] = SERVICE_FIELDS[form](t)
    doc.update(section(SERVICE_FIELDS)(t))
    return doc


POLICY_FIELDS: dict[str, Gen] = {
    "tenant": one_of("fuzz", "fuzz", "fuzz", "fuzz", "fuzz", "other", "bad name"),
    "priority": ints(-100, 1000),
    "quota": section({"steady_gpus": one_of(0, 8, 512, -1, None), "burst_gpus": one_of(0, 64, None, 1.5)}),
    "budget": section(
        {"usd_per_hour": one_of(1, 200.5, 0, -5, None), "usd_per_month": one_of(50000, 0.1, None)}
    ),
    "spot": section(
        {
            "allowed": one_of(True, False),
            "max_share": fractions,
            "required_checkpoint_interval": durations,
            "fault_tolerant_fraction": fractions,
        }
    ),
    "allowed_providers": lists(providers),
    "allowed_regions": lists(one_of("us-east-1", "us-central1", "", "eu-west-1")),
    "queue_wait_slo": durations,
    "preemptible_by": lists(one_of("prod", "research", "batch", "bad name", "", "x" * 70)),
    "fair_share_weight": floats(-1, 10),
    "max_job_runtime": durations,
    "services": lists(lambda t: service_entry(t)),
}
policy_doc = section(POLICY_FIELDS)

GROUP_FIELDS: dict[str, Gen] = {
    "id": one_of("g1", "g2", "bad id"),
    "provider": providers,
    "region": one_of("dc1", "us-east-1", ""),
    "zone": one_of("", "a"),
    "tier": one_of("steady", "elastic", "cloud"),
    "capacity_type": one_of("onprem", "on_demand", "spot", "reserved"),
    "instance_type": one_of("p4d.24xlarge", "dgx-a100"),
    "gpu_model": one_of("A100", "H100"),
    "gpus_per_node": ints(-1, 16),
    "gpu_memory_gib": one_of(80, 40.5, 0, None),
    "min_size": ints(-1, 8),
    "max_size": ints(-1, 16),
    "initial_size": one_of(0, 2, 9, None),
    "boot_latency": durations,
    "warm_wake_latency": section({"stopped": durations, "running": durations, "frozen": durations}),
    "warm_pool": section(
        {
            "min_size": ints(0, 8),
            "max_prepared": ints(0, 8),
            "state": one_of("stopped", "running", "hibernated", "powered_off", "warm"),
            "reuse_on_scale_in": one_of(True, False),
        }
    ),
    "scale_down_cooldown": durations,
    "spot_hazard_per_hour": one_of(0, 0.05, -1),
}
CONFIG_FIELDS: dict[str, Gen] = {
    "cluster": one_of("demo", "Demo", "burst"),
    "policies_dir": one_of("policies", "", "/abs", "a\x00b", "~/p", "~nosuchuser/p", "~"),
    "state_path": one_of("burst.db", ""),
    "loop_interval": durations,
    "loop_jitter": durations,
    "clock": one_of("real", "sim", "wall"),
    "clock_speed": one_of(60, 0.5, -1, 0),
    "sim_start": one_of("2026-03-02T00:00:00Z", "2026-03-02", "yesterday"),
    "node_groups": lists(section(GROUP_FIELDS)),
    "catalog": section(
        {
            "path": one_of("prices.csv", None),
            "overrides": lists(
                section(
                    {
                        "provider": providers,
                        "instance_type": one_of("a", "b"),
                        "region": one_of("r"),
                        "on_demand_usd_per_hour": one_of(1.0, -1),
                        "spot_usd_per_hour": one_of(0.5, None),
                    }
                )
            ),
            "onprem": section({"pue": one_of(1.4, 0.5), "depreciation_years": one_of(4, 0)}),
        }
    ),
    "forecasting": section({"enabled": one_of(True, "yes"), "horizon": durations, "step": durations}),
    "workload": section({"synthetic": lambda t: {text(t): anything(t) for _ in range(t.below(3))}}),
}
config_doc = section(CONFIG_FIELDS)

CORRUPTION = b":-[]{}&*!|>'\"#\n\t %@\x00\xff\xc3"


def dumped(tape: bytes, doc: Gen) -> bytes:
    """A near-valid document dumped to YAML; the tape's first byte says whether a few bytes get mangled."""
    t = Tape(tape[1:])
    value = doc(t)
    style = t.pick([False, None, True])
    data = bytearray(yaml.safe_dump(value, default_flow_style=style, allow_unicode=True).encode())
    damage = Tape(tape[::-1])  # read from the other end, so damage does not depend on the document's size
    for _ in range([0, 0, 0, 1, 2, 5][tape[0] % 6] if tape else 0):
        if not data:
            break
        at = (damage.byte() * 256 + damage.byte()) % len(data)
        op = damage.below(3)
        byte = damage.pick(CORRUPTION) if damage.byte() < 200 else damage.byte()
        if op == 0:
            data[at] = byte
        elif op == 1:
            data.insert(at, byte)
        else:
            del data[at]
    return bytes(data)


tapes = st.binary(max_size=300)


# ------------------------------------------------------------------ the property


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("fuzz")


def check_errors(errors: list[PolicyError], path: Path) -> None:
    assert errors, "a PolicyValidationError must carry at least one error"
    for err in errors:
        assert err.file == str(path)
        assert err.line >= 1
        assert LINE.match(str(err)), str(err)
        assert str(err) == f"{path}:{err.line}: {err.field}: {err.message}"
        assert err.field and err.message and "\n" not in err.field + err.message


def policy_outcome(path: Path, data: bytes) -> Policy | list[PolicyError]:
    path.write_bytes(data)
    try:
        policy = load_policy_file(path)
    except PolicyValidationError as exc:
        check_errors(exc.errors, path)
        return exc.errors
    assert isinstance(policy, Policy) and policy.tenant == path.stem
    check_sane(policy)
    return policy


def check_sane(policy: Policy) -> None:
    """Whatever validated must be usable by the planner as is."""
    assert isinstance(policy.priority, int) and not isinstance(policy.priority, bool)
    assert 0 <= policy.spot.max_share <= 1 and 0 <= policy.spot.fault_tolerant_fraction <= 1
    assert isinstance(policy.spot.allowed, bool)
    assert math.isfinite(policy.fair_share_weight) and policy.fair_share_weight > 0
    assert math.isfinite(policy.queue_wait_slo_s) and policy.queue_wait_slo_s > 0
    for cap in (policy.budget.usd_per_hour, policy.budget.usd_per_month):
        assert cap is None or (math.isfinite(cap) and cap > 0)
    for quota in (policy.steady_quota_gpus, policy.burst_quota_gpus):
        assert quota is None or (isinstance(quota, int) and quota >= 0)
    for seconds in (policy.max_job_runtime_s, policy.spot.required_checkpoint_interval_s):
        assert seconds is None or (math.isfinite(seconds) and seconds > 0)
    assert all(isinstance(x, str) and x for x in policy.allowed_providers + policy.allowed_regions)
    assert all(isinstance(x, str) and x for x in policy.preemptible_by)
    assert len({s.name for s in policy.services}) == len(policy.services)
    for service in policy.services:
        check_sane_service(service)


def check_sane_service(service: Service) -> None:
    """A validated service can be sized as is: one capacity form, bounds in order, events forward in UTC."""
    assert (service.requests_per_s is None) != (service.token_cost is None)
    assert service.requests_per_s is None or (math.isfinite(service.requests_per_s) and service.requests_per_s > 0)
    cost = service.token_cost
    assert cost is None or (cost.context_gpu_s >= 0 and cost.generated_gpu_s >= 0
                            and cost.context_gpu_s + cost.generated_gpu_s > 0)
    assert 0 <= service.min_replicas <= service.max_replicas and service.gpus_per_replica >= 1
    assert 0 < service.target_utilisation <= 1 and 0 <= service.spot_share <= 1
    assert 0 <= service.unserved_request_cost_usd <= 1e9
    assert math.isfinite(service.replica_start_s) and math.isfinite(service.ready_within_s)
    for event in service.events:
        assert event.start.tzinfo is UTC and event.end.tzinfo is UTC and event.start < event.end
        assert event.multiplier is None or event.multiplier > 0


def config_outcome(path: Path, data: bytes) -> BurstConfig | list[PolicyError]:
    path.write_bytes(data)
    try:
        config = load_config(path)
    except PolicyValidationError as exc:
        check_errors(exc.errors, path)
        return exc.errors
    groups = config.node_groups_model()
    assert len(groups) == len(config.node_groups)
    assert config.state_file().is_absolute() and config.policies_path().is_absolute()
    return config


SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=2000, deadline=None, suppress_health_check=SLOW_OK)
@given(tape=tapes)
def test_near_valid_policy_documents_never_raise_anything_else(workdir: Path, tape: bytes) -> None:
    policy_outcome(workdir / "fuzz.yaml", dumped(tape, policy_doc))


@settings(max_examples=500, deadline=None, suppress_health_check=SLOW_OK)
@given(data=st.binary(max_size=512))
def test_random_bytes_as_a_policy_never_raise_anything_else(workdir: Path, data: bytes) -> None:
    policy_outcome(workdir / "fuzz.yaml", data)


@settings(max_examples=300, deadline=None, suppress_health_check=SLOW_OK)
@given(data=st.text(alphabet=":-[]{}&*!|>'\"#\n\t ab1.~<", max_size=80))
def test_yaml_punctuation_soup_never_raises_anything_else(workdir: Path, data: str) -> None:
    policy_outcome(workdir / "fuzz.yaml", data.encode())


@settings(max_examples=1000, deadline=None, suppress_health_check=SLOW_OK)
@given(tape=tapes)
def test_near_valid_configs_never_raise_anything_else(workdir: Path, tape: bytes) -> None:
    config_outcome(workdir / "burst.yaml", dumped(tape, config_doc))


@settings(max_examples=200, deadline=None, suppress_health_check=SLOW_OK)
@given(data=st.binary(max_size=512))
def test_random_bytes_as_a_config_never_raise_anything_else(workdir: Path, data: bytes) -> None:
    config_outcome(workdir / "burst.yaml", data)


valid_services = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["chat", "embed", "rank", "asr"]),
            "gpu_model": st.sampled_from(["H100", "A100"]),
            "max_replicas": st.integers(4, 100),
            "ready_within": st.integers(0, 3600),
            "unserved_request_cost": st.floats(0, 10),
        },
        optional={
            "min_replicas": st.integers(0, 4),
            "target_utilisation": st.floats(0.05, 1),
            "spot_share": st.floats(0, 1),
            "replica_start": st.sampled_from(["30s", "2m", "1h30m", 45]),
        },
    ).flatmap(
        lambda doc: st.one_of(
            st.builds(lambda r: {**doc, "requests_per_s": r}, st.floats(0.01, 1000)),
            st.builds(lambda a, b: {**doc, "gpu_s_per_request": {"a": a, "b": b}},
                      st.floats(0, 1), st.floats(0.001, 1)),
        )
    ),
    max_size=3,
    unique_by=lambda s: str(s["name"]),
)
valid_policies = st.fixed_dictionaries(
    {},
    optional={
        "services": valid_services,
        "priority": st.integers(-100, 1000),
        "fair_share_weight": st.floats(0.01, 100, allow_nan=False),
        "quota": st.fixed_dictionaries(
            {}, optional={"steady_gpus": st.integers(0, 512), "burst_gpus": st.none()}
        ),
        "spot": st.fixed_dictionaries(
            {"allowed": st.booleans()},
            optional={"max_share": st.floats(0, 1), "fault_tolerant_fraction": st.floats(0, 1)},
        ),
        "queue_wait_slo": st.integers(1, 10**6),
        "allowed_providers": st.lists(st.sampled_from(["sim", "aws", "gcp"]), unique=True),
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=SLOW_OK)
@given(doc=valid_policies)
def test_valid_documents_convert_faithfully(workdir: Path, doc: dict[str, Any]) -> None:
    outcome = policy_outcome(workdir / "fuzz.yaml", yaml.safe_dump(doc).encode())
    assert isinstance(outcome, Policy), outcome
    assert outcome.priority == doc.get("priority", 0)
    assert outcome.fair_share_weight == doc.get("fair_share_weight", 1.0)
    assert outcome.steady_quota_gpus == doc.get("quota", {}).get("steady_gpus")
    assert outcome.spot.allowed == doc.get("spot", {}).get("allowed", False)
    assert outcome.spot.max_share == doc.get("spot", {}).get("max_share", 1.0)
    assert outcome.queue_wait_slo_s == doc.get("queue_wait_slo", 600)
    assert outcome.allowed_providers == tuple(doc.get("allowed_providers", ()))
    services = doc.get("services", [])
    assert [s.name for s in outcome.services] == [s["name"] for s in services]
    for got, written in zip(outcome.services, services, strict=True):
        assert (got.max_replicas, got.min_replicas) == (written["max_replicas"], written.get("min_replicas", 0))
        assert got.requests_per_s == written.get("requests_per_s")
        assert got.unserved_request_cost_usd == written["unserved_request_cost"]
        assert got.target_utilisation == written.get("target_utilisation", 0.7)
