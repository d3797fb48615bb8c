"""Services in `burst cost`: their replicas projected from their request-rate forecasts, their history out of the
batch demand. Unit cases are hand-computed; the end-to-end case runs `burst cost` on a config whose tenant declares
a service with a flat synthetic rate and reads `--json` and the table."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from burst.cli import main
from burst.model import DemandPoint, Job, JobState, RateForecast, Service
from burst.projection.services import planned_replicas, rate_at_level, scaled_forecast, without_replicas
from burst.service_loop import Fleet

T0 = datetime(2026, 3, 2, tzinfo=UTC)
H = timedelta(hours=1)
CHAT = Service(tenant="prod", name="chat", gpu_model="A100", requests_per_s=4.0, target_utilisation=0.7,
               min_replicas=1, max_replicas=40, replica_start_s=120.0, ready_within_s=600.0,
               unserved_request_cost_usd=0.001)
FLEET = Fleet(replica_hour_usd=3.0, boot_s=300.0, wake_s=300.0, warm_nodes=0)


def _forecast(rows: list[tuple[float, float, float, float]]) -> RateForecast:
    at = tuple(T0 + timedelta(minutes=5 * k) for k in range(len(rows)))
    return RateForecast(at=at, quantiles={q: tuple(r[i] for r in rows) for i, q in enumerate((0.1, 0.5, 0.9, 0.99))})


def test_a_paths_rate_is_the_forecasts_quantile_at_its_level_extended_below_the_lowest_never_below_0() -> None:
    f = _forecast([(10.0, 20.0, 30.0, 40.0), (1.0, 9.0, 17.0, 20.0)])
    assert rate_at_level(f, 0.5, 0) == 20.0
    assert rate_at_level(f, 0.7, 0) == pytest.approx(25.0)  # half-way from P50 to P90
    assert rate_at_level(f, 0.945, 0) == pytest.approx(35.0)  # half-way from P90 to P99
    assert rate_at_level(f, 0.995, 0) == 40.0  # at most the highest
    assert rate_at_level(f, 0.05, 0) == pytest.approx(10.0 - 10.0 / 0.4 * 0.05)  # P10's slope carried down: 8.75
    assert rate_at_level(f, 0.05, 1) == 0.0  # 1 - 8 / 0.4 * 0.05 < 0
    scaled = scaled_forecast(f, [10.0, 18.0])  # half the median at the first instant, twice it at the second
    assert scaled.quantiles[0.9] == (15.0, 34.0) and scaled.quantiles[0.5] == (10.0, 18.0)


def test_the_planner_sizes_each_step_as_the_daemon_does_and_scales_in_after_the_lead() -> None:
    """A flat forecast of 20 req/s for an hour, then 8: ceil(20 / (4 x 0.7)) = 8 replicas, then ceil(8 / 2.8) = 3
    once neither the rate nor the forecast over the 420 s lead needs more, at most ceil(10%) a step."""
    rows = [(20.0,) * 4] * 12 + [(8.0,) * 4] * 12
    f = _forecast(rows)
    rates = [r[1] for r in rows]
    counts = [n for _, n, _ in planned_replicas(CHAT, f, rates, FLEET, 4.0)]
    assert counts[:11] == [8] * 11  # the forecast over the lead sees the fall from the 11th step (55 min)
    assert counts[-1] == 3 and min(counts) == 3
    assert all(a - b <= 1 for a, b in zip(counts, counts[1:], strict=False))  # down by ceil(10% of 8) = 1 a step


def test_replicas_leave_the_demand_history_from_submission_until_they_ended() -> None:
    points = [DemandPoint(T0 + k * H, "prod", "A100", 10.0, 2.0) for k in range(4)]
    replicas = [
        Job(id="svc:prod/chat:1", tenant="prod", gpus=4, gpu_model="A100", submitted_at=T0, started_at=T0 + H / 2,
            state=JobState.CANCELLED),
        Job(id="svc:prod/chat:2", tenant="prod", gpus=2, gpu_model="A100", submitted_at=T0 + H,
            started_at=T0 + 2 * H, state=JobState.RUNNING),
        Job(id="batch-1", tenant="prod", gpus=8, gpu_model="A100", submitted_at=T0),  # not a replica: stays
    ]
    out = without_replicas(points, replicas, {"svc:prod/chat:1": T0 + 2 * H}, T0 + 4 * H)
    # 00:00: replica 1 pending (4); 01:00: 1 running, 2 pending; 02:00: 2 running (1 ended then); 03:00: 2 running.
    assert [(p.running_gpus, p.pending_gpus) for p in out] == [(10.0, 0.0), (6.0, 0.0), (8.0, 2.0), (8.0, 2.0)]


CONFIG = """cluster: services
policies_dir: policies
node_groups:
  - {id: od, provider: sim, region: us-east-1, tier: elastic, capacity_type: on_demand, instance_type: p4d.24xlarge,
     gpu_model: A100, gpus_per_node: 8, max_size: 6}
rates:
  synthetic:
    seed: 1
    services:
      prod/chat: {base_rps: 20, amplitude: 0.0, noise: 0.0}
"""
POLICY = """tenant: prod
services:
  - name: chat
    gpu_model: A100
    requests_per_s: 4
    target_utilisation: 0.7
    min_replicas: 1
    max_replicas: 24
    replica_start: 2m
    ready_within: 10m
    unserved_request_cost: 0.001
"""


def test_burst_cost_projects_a_services_replicas_from_its_rate_and_bills_them_to_its_tenant(tmp_path: Path) -> None:
    """20 req/s flat: ceil(20 / (4 x 0.7)) = 8 one-GPU replicas on every path for the whole 12 h horizon, so 96
    replica GPU-hours; their tenant pays for their GPUs from when the node is up (one 8-GPU p4d, after its 5 min
    boot) to the end: 11 h 55 min x 21.957642 $ at least, and the batch trace's own jobs on top."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "prod.yaml").write_text(POLICY)
    config = tmp_path / "burst.yaml"
    config.write_text(CONFIG)
    start = T0 + timedelta(hours=48)
    rows = ["submit_time,duration_s,gpus,tenant"]
    rows += [f"{(T0 + timedelta(hours=h, minutes=5)).isoformat()},3600,8,prod" for h in range(48)]
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join(rows) + "\n")
    args = ["cost", "--config", str(config), "--history", str(trace), "--horizon", "12h", "--strategy",
            "burst-no-forecast", "--workers", "1", "--paths", "20", "--at", start.isoformat()]
    runner = CliRunner(env={"COLUMNS": "250"})
    out = runner.invoke(main, [*args, "--json"])
    assert out.exit_code == 0, out.output
    body = json.loads(out.stdout)
    (chat,) = body["services"]["projected"]
    assert (chat["tenant"], chat["name"], chat["peak_replicas_p50"]) == ("prod", "chat", 8.0)
    assert chat["forecast_mean_rps"] == pytest.approx(20.0, rel=1e-6)
    assert chat["replica_gpu_hours"] == {"p10": 96.0, "p50": 96.0, "p90": 96.0}
    assert body["services"]["skipped"] == []
    assert body["by_tenant"]["prod"]["p10"] >= (12 - 5 / 60) * 21.957642 * 0.999
    table = runner.invoke(main, args)
    assert table.exit_code == 0, table.output
    assert "prod/chat" in table.stdout and "96.0" in table.stdout


class _Prices:
    def group_price(self, g: object) -> float:
        return 24.0

    def standby_price(self, g: object) -> float:
        return 1.0


def test_a_declared_event_raises_the_projected_replicas_over_its_window() -> None:
    """20 req/s flat, a promotion x3 from 04:00 to 06:00 of a 12 h horizon: 8 replicas outside it,
    ceil(60 / 2.8) = 22 inside, on every path (a flat history leaves no spread)."""
    from builders import group

    from burst.model import Policy, ServiceEvent
    from burst.projection.services import service_paths
    from burst.workloads.rates import DailyCycle, SyntheticRates

    start = T0 + timedelta(days=20)
    promo = ServiceEvent(start=start + 4 * H, end=start + 6 * H, multiplier=3.0, name="promo")
    chat = Service(**{**CHAT.__dict__, "events": (promo,)})
    rates = SyntheticRates({"chat": DailyCycle(base_rps=20.0, amplitude=0.0, noise=0.0)})
    out = service_paths({"prod": Policy(tenant="prod", services=(chat,))}, [group("od", max_size=8)], _Prices(), rates,
                        start=start, horizon_s=12 * 3600.0, paths=3)
    assert out.skipped == ()
    (outlook,) = out.outlooks
    assert outlook.peak_replicas == (22, 22, 22)
    def running(jobs: tuple[Job, ...], t: datetime) -> int:
        return sum(1 for j in jobs if j.submitted_at <= t < j.submitted_at + timedelta(seconds=j.duration_s or 0))

    for jobs in out.jobs:
        assert running(jobs, start + 2 * H) == 8 and running(jobs, start + 5 * H) == 22
        assert running(jobs, start + 9 * H) == 8
        assert all(j.id.startswith("svc:prod/chat:") and j.priority is not None and not j.fault_tolerant for j in jobs)
    # the replicas start before the window opens: the forecast sees it a lead time (420 s) ahead
    assert min(j.submitted_at for j in out.jobs[0] if j.submitted_at > start) < promo.start


def test_replicas_start_at_the_projections_start_when_it_falls_inside_a_step() -> None:
    """The forecast's first instant is the start of the 5-minute step holding the start: no replica runs
    before the start, so 8 replicas over 12 h are 96 GPU-hours exactly, 2 minutes into a step as on one."""
    from builders import group

    from burst.model import Policy
    from burst.projection.services import service_paths
    from burst.workloads.rates import DailyCycle, SyntheticRates

    rates = SyntheticRates({"chat": DailyCycle(base_rps=20.0, amplitude=0.0, noise=0.0)})
    start = T0 + timedelta(days=20, seconds=120)
    out = service_paths({"prod": Policy(tenant="prod", services=(CHAT,))}, [group("od", max_size=8)], _Prices(), rates,
                        start=start, horizon_s=12 * 3600.0, paths=2)
    assert out.outlooks[0].gpu_hours == (96.0, 96.0)
    assert min(j.submitted_at for j in out.jobs[0]) == start


class _SpotPrices:
    def group_price(self, g: object) -> float:
        return {"od": 24.0, "spot": 8.0}[g.id]  # type: ignore[attr-defined]

    def standby_price(self, g: object) -> float:
        return 1.0


def test_a_services_spot_share_is_projected_as_spot_replicas() -> None:
    """Spot share 0.5 at a flat 20 req/s with a spot group a third of the on-demand price: of the 8 replicas
    needed, floor(8 x 0.5) = 4 run on spot plus a hedge of ceil(0.1 x 4) = 1, the other 4 on demand, on every
    path for the whole horizon; without a spot group all 8 run on demand."""
    from builders import group

    from burst.model import CapacityType, Policy
    from burst.projection.services import service_paths
    from burst.workloads.rates import DailyCycle, SyntheticRates

    rates = SyntheticRates({"chat": DailyCycle(base_rps=20.0, amplitude=0.0, noise=0.0)})
    start = T0 + timedelta(days=20)
    chat = Service(**{**CHAT.__dict__, "spot_share": 0.5})
    groups = [group("od", max_size=8), group("spot", capacity_type=CapacityType.SPOT, max_size=8)]
    out = service_paths({"prod": Policy(tenant="prod", services=(chat,))}, groups, _SpotPrices(), rates, start=start,
                        horizon_s=12 * 3600.0, paths=2)
    for jobs in out.jobs:
        assert sorted(j.spot_replica for j in jobs) == [False] * 4 + [True] * 5
        assert all(j.submitted_at == start and j.duration_s == 12 * 3600.0 for j in jobs)
    assert out.outlooks[0].gpu_hours == (108.0, 108.0)  # 9 replicas x 12 h
    no_spot = service_paths({"prod": Policy(tenant="prod", services=(chat,))}, groups[:1], _SpotPrices(), rates,
                            start=start, horizon_s=12 * 3600.0, paths=2)
    assert [j.spot_replica for j in no_spot.jobs[0]] == [False] * 8


def test_burst_cost_runs_a_services_spot_replicas_on_the_spot_group(tmp_path: Path) -> None:
    """The end-to-end case with a spot group and a spot share of 0.5: the tenant's batch may not use spot, so
    everything on the spot line is the service's 5 spot replicas (an 8-GPU node holds them all)."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "prod.yaml").write_text(POLICY + "    spot_share: 0.5\n")
    config = tmp_path / "burst.yaml"
    config.write_text(CONFIG.replace("rates:", """  - {id: spot, provider: sim, region: us-east-1, tier: elastic, capacity_type: spot,
     instance_type: p4d.24xlarge, gpu_model: A100, gpus_per_node: 8, max_size: 6}
rates:"""))
    start = T0 + timedelta(hours=48)
    trace = tmp_path / "trace.csv"
    trace.write_text("submit_time,duration_s,gpus,tenant\n" + "".join(
        f"{(T0 + timedelta(hours=h, minutes=5)).isoformat()},3600,8,prod\n" for h in range(48)))
    out = CliRunner().invoke(main, ["cost", "--config", str(config), "--history", str(trace), "--horizon", "12h",
                                    "--strategy", "burst-no-forecast", "--workers", "1", "--paths", "20", "--at",
                                    start.isoformat(), "--json"])
    assert out.exit_code == 0, out.output
    body = json.loads(out.stdout)
    assert body["services"]["projected"][0]["replica_gpu_hours"]["p50"] == 108.0  # 4 on demand + 5 on spot, 12 h
    spot_line = body["by_tier"]["elastic_spot"]
    assert spot_line["p10"] > 0 and spot_line["p10"] == pytest.approx(spot_line["p90"], rel=1e-6)  # the same each path
