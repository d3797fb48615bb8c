"""The daemon's HTTP API over a real uvicorn server on 127.0.0.1, beside a real runtime (quickstart, sim clock)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from burst.api.server import ApiServer, ApiStartError, start_api
from burst.cli import main
from burst.runtime import Runtime, build_runtime, load_run_config, quickstart_config_path
from policies import PolicyValidationError, load_config
from policies.config import listen_address


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Runtime, ApiServer]]:
    runtime = build_runtime(load_run_config(None), state_path=tmp_path / "burst.db")
    api = start_api(runtime, "127.0.0.1:0", tokens_dir=tmp_path / "tokens")
    runtime.run(until=runtime.now() + timedelta(minutes=30), realtime=False)
    yield runtime, api
    api.stop()
    runtime.close()


def token(api: ApiServer, who: str) -> dict[str, str]:
    name = "admin.token" if who == "admin" else f"tenant-{who}.token"
    return {"Authorization": f"Bearer {(api.tokens_dir / name).read_text().strip()}"}


def test_health_needs_no_token_and_readiness_follows_the_ticks(daemon) -> None:
    runtime, api = daemon
    assert httpx.get(f"{api.url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{api.url}/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    assert runtime.sim_clock is not None
    runtime.sim_clock.advance(3600)  # an hour with no tick: not ready any more
    assert httpx.get(f"{api.url}/readyz").status_code == 503


def test_tokens_are_generated_private_and_guard_every_other_endpoint(daemon) -> None:
    _, api = daemon
    files = sorted(p.name for p in api.tokens_dir.iterdir())
    assert files == ["admin.token", "tenant-batch.token", "tenant-prod.token", "tenant-research.token"]
    assert all((api.tokens_dir / f).stat().st_mode & 0o077 == 0 for f in files)
    for path in ("/v1/status", "/v1/plan", "/v1/jobs", "/metrics"):
        assert httpx.get(f"{api.url}{path}").status_code == 401
        assert httpx.get(f"{api.url}{path}", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert httpx.post(f"{api.url}/v1/jobs", json={"tenant": "prod", "gpus": 1}).status_code == 401
    assert httpx.get(f"{api.url}/v1/status", headers=token(api, "prod")).status_code == 403


def test_auth_failures_keep_their_status_and_message(daemon) -> None:
    _, api = daemon
    cases = [
        ({}, 401, "missing bearer token"),
        ({"Authorization": "Basic YWRtaW46eA=="}, 401, "missing bearer token"),
        ({"Authorization": "Bearer"}, 401, "missing bearer token"),
        ({"Authorization": "Bearer nope"}, 401, "unknown token"),
        (token(api, "prod"), 403, "this endpoint needs the admin token"),
    ]
    for headers, code, detail in cases:
        response = httpx.get(f"{api.url}/v1/status", headers=headers)
        assert (response.status_code, response.json()["detail"]) == (code, detail), headers
        assert (response.headers.get("www-authenticate") == "Bearer") == (code == 401)
    assert httpx.get(f"{api.url}/v1/status", headers={"Authorization": "bearer " + token(api, "admin")[
        "Authorization"].split()[1]}).status_code == 200  # the scheme is case-insensitive


def test_openapi_declares_bearer_auth_on_every_route_but_health_and_readiness(daemon) -> None:
    _, api = daemon
    schema = httpx.get(f"{api.url}/openapi.json").json()
    scheme = schema["components"]["securitySchemes"]
    assert list(scheme) == ["bearerAuth"]
    assert (scheme["bearerAuth"]["type"], scheme["bearerAuth"]["scheme"]) == ("http", "bearer")
    operations = [(path, method, op) for path, ops in schema["paths"].items() for method, op in ops.items()]
    assert {path for path, _, _ in operations} >= {"/healthz", "/readyz", "/v1/status", "/v1/plan", "/v1/jobs",
                                                  "/v1/jobs/{job_id}", "/metrics"}
    for path, method, op in operations:
        assert not any(p["name"].lower() == "authorization" for p in op.get("parameters", [])), (path, method)
        if path in ("/healthz", "/readyz"):
            assert "security" not in op and not {"401", "403"} & set(op["responses"]), (path, method)
        else:
            assert op.get("security") == [{"bearerAuth": []}], (path, method)
            assert {"401", "403"} <= set(op["responses"]), (path, method)


@pytest.mark.parametrize(("given", "bound"), [
    ("8460", "127.0.0.1:8460"), (8460, "127.0.0.1:8460"), (":8460", "127.0.0.1:8460"), (" 8460 ", "127.0.0.1:8460"),
    ("0.0.0.0:8460", "0.0.0.0:8460"), ("[::1]:8460", "[::1]:8460"), ("localhost:80", "localhost:80"),
    ("0", "127.0.0.1:0"),
])
def test_a_bare_port_listens_on_localhost(given: str | int, bound: str) -> None:
    assert listen_address(given) == bound


@pytest.mark.parametrize("given", ["", ":", "nowhere", "host:", "host:http", "8460:", "65536", "-1", "١٢٣", True])
def test_a_listen_address_without_a_port_is_refused(given: str | bool) -> None:
    with pytest.raises(ValueError, match="is not HOST:PORT or a port"):
        listen_address(given)


@pytest.mark.parametrize(("line", "bound"), [
    ("listen: 8460", "127.0.0.1:8460"), ("listen: ':8460'", "127.0.0.1:8460"), ("listen: :8460", "127.0.0.1:8460"),
    ("listen: 0.0.0.0:8460", "0.0.0.0:8460"), ("listen: null", None),
])
def test_api_listen_in_burst_yaml_takes_a_bare_port(tmp_path: Path, line: str, bound: str | None) -> None:
    path = tmp_path / "burst.yaml"
    path.write_text(quickstart_config_path().read_text() + f"api:\n  {line}\n")
    assert load_config(path).api.listen == bound


@pytest.mark.parametrize("line", ["listen: 0", "listen: nowhere", "listen: [8460]", "listen: true"])
def test_api_listen_in_burst_yaml_refuses_what_is_not_an_address(tmp_path: Path, line: str) -> None:
    path = tmp_path / "burst.yaml"
    path.write_text(quickstart_config_path().read_text() + f"api:\n  {line}\n")
    with pytest.raises(PolicyValidationError) as info:
        load_config(path)
    assert "api.listen" in str(info.value)


def test_start_api_on_a_bare_port_binds_localhost(tmp_path: Path) -> None:
    runtime = build_runtime(load_run_config(None), state_path=tmp_path / "burst.db")
    try:
        api = start_api(runtime, "0", tokens_dir=tmp_path / "tokens")
        try:
            assert api.url.startswith("http://127.0.0.1:")
            assert httpx.get(f"{api.url}/healthz").json() == {"status": "ok"}
        finally:
            api.stop()
        with pytest.raises(ApiStartError, match="is not HOST:PORT or a port"):
            start_api(runtime, "localhost", tokens_dir=tmp_path / "tokens")
    finally:
        runtime.close()


def test_status_and_plan_describe_the_last_tick(daemon) -> None:
    _, api = daemon
    status = httpx.get(f"{api.url}/v1/status", headers=token(api, "admin")).json()
    assert {g["id"] for g in status["groups"]} == {"onprem-a100", "cloud-a100-od", "cloud-a100-spot"}
    assert status["tiers"]["steady"]["ready_gpus"] == 32
    assert set(status["queue"]) <= {"batch", "prod", "research"}
    plan = httpx.get(f"{api.url}/v1/plan", headers=token(api, "admin")).json()
    assert plan["id"] == status["plan_id"] and "actions" in plan and "holds" in plan


def test_jobs_submit_list_cancel_per_tenant(daemon) -> None:
    _, api = daemon
    url = f"{api.url}/v1/jobs"
    made = httpx.post(url, json={"tenant": "prod", "gpus": 2, "duration": "1h", "id": "p-1"}, headers=token(api, "prod"))
    assert made.status_code == 201 and made.json()["state"] == "pending" and made.json()["id"] == "prod:p-1"
    other = httpx.post(url, json={"tenant": "batch", "gpus": 1, "id": "b-1"}, headers=token(api, "admin"))
    assert other.status_code == 201
    assert httpx.post(url, json={"tenant": "batch", "gpus": 1}, headers=token(api, "prod")).status_code == 403
    assert httpx.post(url, json={"tenant": "prod", "gpus": 2, "id": "p-1"}, headers=token(api, "prod")).status_code == 409

    mine = httpx.get(url, headers=token(api, "prod")).json()["jobs"]
    assert mine and {j["tenant"] for j in mine} == {"prod"}
    assert httpx.get(url, params={"tenant": "batch"}, headers=token(api, "prod")).status_code == 403
    assert httpx.get(f"{url}/p-1", headers=token(api, "prod")).json()["id"] == "prod:p-1"  # by its ID or TENANT:ID
    unknown = httpx.get(f"{url}/no-such-job", headers=token(api, "prod"))
    for theirs in ("b-1", "batch:b-1"):  # another tenant's job reads exactly as an unknown one
        reply = httpx.get(f"{url}/{theirs}", headers=token(api, "prod"))
        assert (reply.status_code, reply.json()) == (404, {"detail": f"no job {theirs}"})
    assert unknown.status_code == 404
    assert {j["id"] for j in httpx.get(url, params={"tenant": "batch"}, headers=token(api, "admin")).json()["jobs"]} >= {
        "batch:b-1"}

    cancelled = httpx.delete(f"{url}/p-1", headers=token(api, "prod"))
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    assert httpx.delete(f"{url}/prod:p-1", headers=token(api, "prod")).status_code == 409
    assert httpx.delete(f"{url}/b-1", headers=token(api, "prod")).status_code == 404
    assert httpx.get(f"{url}/b-1", headers=token(api, "batch")).json()["state"] == "pending"  # untouched


def test_tenants_cannot_probe_each_others_job_ids(daemon) -> None:
    # A submit reusing another tenant's id answered 409 and a read answered 403: both told the id existed.
    _, api = daemon
    url = f"{api.url}/v1/jobs"
    assert httpx.post(url, json={"tenant": "batch", "gpus": 1, "id": "train"}, headers=token(api, "batch")).status_code == 201
    mine = httpx.post(url, json={"tenant": "prod", "gpus": 1, "id": "train"}, headers=token(api, "prod"))
    assert mine.status_code == 201 and mine.json()["id"] == "prod:train", "the same id, each tenant's own"
    assert httpx.get(f"{url}/train", headers=token(api, "prod")).json()["tenant"] == "prod"
    assert httpx.get(f"{url}/train", headers=token(api, "batch")).json()["tenant"] == "batch"
    long = httpx.get(f"{url}/{'x' * 5000}", headers=token(api, "prod"))
    assert long.status_code == 404 and len(long.text) < 100


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"tenant": "prod", "gpus": -1}, "gpus"),
        ({"tenant": "prod", "gpus": 1, "duration": "soon"}, "duration"),
        ({"tenant": "prod", "gpus": 1, "colour": "red"}, "colour"),
        ({"tenant": "nobody", "gpus": 1}, "tenant"),
        ({"tenant": "prod", "gpus": 1, "id": "has space"}, "id"),
        # out of bounds (burst.bounds): each used to be accepted (201) or to answer 500
        ({"tenant": "prod", "gpus": 1, "duration": "99999999999d"}, "duration"),
        ({"tenant": "prod", "gpus": 1, "duration": "9" * 400}, "duration"),
        ({"tenant": "prod", "gpus": 1, "gpu_model": "x" * 1000}, "gpu_model"),
        ({"tenant": "prod", "gpus": 1, "command": ["x"] * 1000}, "command"),
        ({"tenant": "prod", "gpus": 1, "priority": 2**63}, "priority"),
        ({"tenant": "prod", "gpus": 2000}, "gpus"),
    ],
)
def test_bad_payloads_are_422_naming_the_field(daemon, body: dict[str, object], field: str) -> None:
    _, api = daemon
    reply = httpx.post(f"{api.url}/v1/jobs", json=body, headers=token(api, "admin"))
    assert reply.status_code == 422
    assert any(field in [str(part) for part in d["loc"]] for d in reply.json()["detail"]), reply.json()


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999", "9" * 400])
def test_non_finite_and_huge_numbers_are_422_not_500(daemon, number: str) -> None:
    _, api = daemon
    body = '{"tenant": "prod", "gpus": 0, "gpu_share": ' + number + "}"
    reply = httpx.post(f"{api.url}/v1/jobs", content=body, headers={**token(api, "admin"),
                                                                     "Content-Type": "application/json"})
    assert reply.status_code == 422, reply.text
    assert any("gpu_share" in d["loc"] for d in reply.json()["detail"])


def test_a_body_over_the_limit_is_413_unread_and_the_next_tick_runs(daemon) -> None:
    runtime, api = daemon
    huge = '{"tenant": "prod", "gpus": 1, "gpu_model": "' + "x" * 10_000_000 + '"}'
    reply = httpx.post(f"{api.url}/v1/jobs", content=huge, headers={**token(api, "admin"),
                                                                     "Content-Type": "application/json"})
    assert reply.status_code == 413 and "larger than 65536 bytes" in reply.json()["detail"]

    def chunks():  # no Content-Length: counted as it arrives
        yield b'{"tenant": "prod", "gpus": 1, "gpu_model": "'
        for _ in range(200):
            yield b"x" * 1000
        yield b'"}'

    chunked = httpx.post(f"{api.url}/v1/jobs", content=chunks(), headers={**token(api, "admin"),
                                                                           "Content-Type": "application/json"})
    assert chunked.status_code == 413
    assert all(len(j.gpu_model or "") < 100 for j in runtime.store.jobs())
    assert runtime.controller.tick().plan.id  # the next tick runs


def test_metrics_scrape_parses_and_counts_the_ticks(daemon) -> None:
    _, api = daemon
    text = httpx.get(f"{api.url}/metrics", headers=token(api, "admin")).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    ticks = next(s.value for s in families["burst_ticks"].samples if s.name == "burst_ticks_total")
    assert ticks == 30  # 30 minutes at the quickstart's 1-minute interval
    ready = {s.labels["group"]: s.value for s in families["burst_capacity_gpus"].samples if s.labels["state"] == "ready"}
    assert ready["onprem-a100"] == 32
    calls = [s for s in families["burst_provider_call_seconds"].samples if s.name.endswith("_count")]
    assert {s.labels["method"] for s in calls} >= {"refresh", "nodes", "group_state"}
    for name in ("burst_demand_gpus", "burst_pending_jobs", "burst_tick_seconds", "burst_spend_usd", "burst_leader",
                 "burst_build_info", "burst_lost_gpu_seconds", "burst_month_to_date_spend_usd"):
        assert name in families
    assert [s.value for s in families["burst_leader"].samples] == [1.0], "no lease: this replica acts"
    (info,) = families["burst_build_info"].samples
    assert info.value == 1.0 and info.labels["version"] == "0.1.0"
    spent = {s.labels["tenant"]: s.value for s in families["burst_spend_usd"].samples if s.name == "burst_spend_usd_total"}
    assert spent and all(v >= 0 for v in spent.values())


def test_metrics_usage_gauges_match_the_daemons_cost_ledger(daemon) -> None:
    runtime, api = daemon
    text = httpx.get(f"{api.url}/metrics", headers=token(api, "admin")).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    month = runtime.now().replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    spend = {s.labels["tenant"]: s.value for s in families["burst_month_to_date_spend_usd"].samples}
    gpu_hours: dict[str, float] = {}
    for s in families["burst_month_to_date_gpu_seconds"].samples:
        assert s.labels["line"] in ("steady", "elastic_on_demand", "elastic_spot") and s.labels["gpu_model"] == "A100"
        gpu_hours[s.labels["tenant"]] = gpu_hours.get(s.labels["tenant"], 0.0) + s.value / 3600.0
    ledger_usd = runtime.store.spend_by_tenant(since=month)
    assert ledger_usd and set(spend) == set(ledger_usd)
    assert spend == pytest.approx(ledger_usd, rel=1e-12)
    assert gpu_hours == pytest.approx(runtime.store.gpu_hours_by_tenant(since=month), rel=1e-12)


def test_burst_run_serves_the_api_and_refuses_a_bad_address(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--duration", "5m", "--quiet", "--api", "127.0.0.1:0",
                                       "--state", str(tmp_path / "s.db")])
    assert result.exit_code == 0, result.output
    assert "API on http://127.0.0.1:" in result.output
    bare = CliRunner().invoke(main, ["run", "--duration", "5m", "--quiet", "--api", "0",
                                     "--state", str(tmp_path / "bare.db")])
    assert bare.exit_code == 0, bare.output
    assert "API on http://127.0.0.1:" in bare.output
    bad = CliRunner().invoke(main, ["run", "--duration", "5m", "--quiet", "--api", "nowhere"])
    assert bad.exit_code != 0 and "is not HOST:PORT" in bad.output
