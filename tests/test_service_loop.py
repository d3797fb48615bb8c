"""The daemon's services: the service loop inside the reconcile tick, its replicas as queue jobs, its holds when a
rate cannot be read, its statuses, metrics and `burst services`."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta
from pathlib import Path

from builders import T0, group
from click.testing import CliRunner

from burst.cli import main
from burst.metrics import ControllerMetrics
from burst.model import (
    ActionKind,
    CapacityType,
    Job,
    JobState,
    Policy,
    Service,
    Tier,
    WarmPoolSettings,
    WarmState,
)
from burst.reconcile import Controller
from burst.service_forecasts import ServiceForecasts
from burst.service_loop import ServiceLoop
from burst.state import MetaKey, Store
from burst.workloads.queue import StoreQueue
from burst.workloads.rates import DailyCycle, RateUnavailable, SyntheticRates
from burst.workloads.replicas import QueueReplicas, ReplicaCounts, is_replica, stop_order
from providers.sim import ManualClock, SimProvider

CHAT = Service(tenant="prod", name="chat", gpu_model="A100", max_replicas=40, ready_within_s=300.0,
               unserved_request_cost_usd=0.001, requests_per_s=4.0, min_replicas=1, replica_start_s=120.0)
ONPREM = dataclasses.replace(group("onprem", tier=Tier.STEADY, max_size=2, min_size=2, region="dc1"),
                             boot_latency_s=600.0)
CLOUD = dataclasses.replace(group("cloud", max_size=8), boot_latency_s=300.0)


class Prices:
    def group_price(self, g: object) -> float:
        return {"onprem": 8.0, "cloud": 24.0}[g.id]  # type: ignore[attr-defined]

    def standby_price(self, g: object) -> float:
        return 1.0


class Flaky:
    """A rate source that answers from `inner` until `down` is set, then fails as an unreachable server does."""

    def __init__(self, inner: SyntheticRates) -> None:
        self.inner = inner
        self.down = False

    def rate(self, service: Service, now: datetime) -> float:
        if self.down:
            raise RateUnavailable("sum(rate(requests_total[1m]))", "cannot reach http://127.0.0.1:9: Connection refused")
        return self.inner.rate(service, now)

    def history(self, service: Service, start: datetime, end: datetime, step_s: float) -> list[tuple[datetime, float]]:
        return self.inner.history(service, start, end, step_s)


def controller(store: Store, clock: ManualClock, rates: SyntheticRates | Flaky,
               services: tuple[Service, ...] = (CHAT,)) -> tuple[Controller, ServiceLoop]:
    sim = SimProvider([ONPREM, CLOUD], clock=clock, cluster="test", initial={"onprem": 2})
    loop = ServiceLoop(rates, QueueReplicas(StoreQueue(store)), ServiceForecasts(rates, background=False))
    ctl = Controller(providers={"sim": sim}, source=StoreQueue(store, complete_by_duration=True), store=store,
                     policies=lambda: {"prod": Policy(tenant="prod", priority=10, services=services)},
                     prices=Prices(), clock=clock, cluster="test", services=loop)
    return ctl, loop


def flat(rps: float) -> SyntheticRates:
    return SyntheticRates({"chat": DailyCycle(base_rps=rps, amplitude=0.0, noise=0.0)})


def test_replicas_for_the_observed_rate_are_submitted_and_placed_in_the_same_tick() -> None:
    store, clock = Store(":memory:"), ManualClock(T0)
    ctl, _ = controller(store, clock, flat(20.0))
    report = ctl.tick()
    placed = [a.target for a in report.plan.actions if a.kind is ActionKind.PLACE_JOB]
    assert len(placed) == 8 and all(p.startswith("svc:prod/chat:") for p in placed)  # ceil(20 / (4 x 0.7))
    (status,) = report.services.statuses  # type: ignore[union-attr]
    assert (status.desired, status.ready, status.starting, status.observed_rps) == (8, 0, 0, 20.0)
    clock.advance(121)  # the model loads 120 s after the replica starts
    (status,) = ctl.tick().services.statuses  # type: ignore[union-attr]
    assert (status.ready, status.starting, status.desired) == (8, 0, 8)
    stored = json.loads(store.get_meta(MetaKey.SERVICES) or "[]")
    assert stored[0]["ready"] == 8 and stored[0]["name"] == "chat"
    ups = store.decisions_about("prod/chat")
    assert ups and ups[-1].kind == "scale_service_up" and ups[-1].reason.startswith("0 -> 8 replicas: now: 20 req/s")


def test_a_failed_rate_read_keeps_the_replicas_names_the_query_in_a_hold_and_the_tick_goes_on() -> None:
    store, clock = Store(":memory:"), ManualClock(T0)
    rates = Flaky(flat(20.0))
    ctl, loop = controller(store, clock, rates)
    ctl.tick()
    rates.down = True
    for _ in range(3):
        clock.advance(60)
        report = ctl.tick()
        holds = [h for h in report.plan.holds if h.subject == "service:prod/chat"]
        assert holds and "sum(rate(requests_total[1m]))" in holds[0].reason and "Connection refused" in holds[0].reason
        assert "keeping 8 replicas" in holds[0].reason
        (status,) = report.services.statuses  # type: ignore[union-attr]
        assert status.desired == 8 and status.observed_rps is None and "Connection refused" in (status.error or "")
    live = [j for j in store.jobs(states=[JobState.PENDING, JobState.RUNNING]) if is_replica(j)]
    assert len(live) == 8 and loop.rate_failures == 3  # no scale-in while the rate is unknown
    rates.down = False
    rates.inner = flat(40.0)
    clock.advance(60)  # the rate back, and higher: the service follows it at once
    report = ctl.tick()
    assert not [h for h in report.plan.holds if h.subject == "service:prod/chat"]
    (status,) = report.services.statuses  # type: ignore[union-attr]
    assert status.error is None and status.observed_rps == 40.0 and status.desired == 15  # ceil(40 / 2.8)


def test_the_forecast_starts_replicas_ahead_of_the_morning_ramp() -> None:
    """A daily cycle with two weeks of history: at 08:00, on the ramp, the forecast sizes for the rate one lead
    time (300 s boot + 120 s load) ahead; without history the loop sizes for the rate now (and a 10% margin)."""
    morning = T0.replace(hour=8)
    cycle = SyntheticRates({"chat": DailyCycle(base_rps=40.0, amplitude=0.9, peak_hour=13.0, noise=0.0)})
    small = dataclasses.replace(CHAT, requests_per_s=1.0, max_replicas=200)

    class NoHistory(Flaky):
        def history(self, service: Service, start: datetime, end: datetime, step_s: float) -> list[tuple[datetime, float]]:
            raise RateUnavailable("q", "no series")

    ahead, _ = controller(Store(":memory:"), ManualClock(morning), cycle, (small,))
    blind, _ = controller(Store(":memory:"), ManualClock(morning), NoHistory(cycle), (small,))
    (with_forecast,) = ahead.tick().services.statuses  # type: ignore[union-attr]
    (without,) = blind.tick().services.statuses  # type: ignore[union-attr]
    need_now = -(-without.observed_rps // 0.7)
    assert without.forecast_lead_rps is None and without.desired - without.standby == need_now
    assert "history: rate query 'q' failed: no series" in (without.forecast_error or "")
    assert with_forecast.forecast_lead_rps is not None and with_forecast.forecast_lead_rps > with_forecast.observed_rps
    assert with_forecast.desired - with_forecast.standby > need_now
    assert "ahead: over the 420 s lead" in with_forecast.reason


def test_scale_in_stops_pending_then_loading_then_serving_replicas_latest_first() -> None:
    def replica(n: int, state: JobState, started_s: float | None) -> Job:
        return Job(id=f"svc:prod/chat:{n}", tenant="prod", gpus=1, submitted_at=T0, state=state,
                   started_at=None if started_s is None else T0 + timedelta(seconds=started_s))
    now = T0 + timedelta(seconds=600)
    jobs = [replica(1, JobState.RUNNING, 0), replica(2, JobState.RUNNING, 100), replica(3, JobState.RUNNING, 550),
            replica(4, JobState.PENDING, None)]
    assert [j.id[-1] for j in stop_order(jobs, CHAT, now)] == ["4", "3", "2", "1"]


def test_metrics_count_requests_above_ready_capacity_and_rate_failures() -> None:
    store, clock = Store(":memory:"), ManualClock(T0)
    rates = Flaky(flat(20.0))
    ctl, _ = controller(store, clock, rates)
    metrics = ControllerMetrics()
    metrics.observe_tick(ctl.tick(), seconds=0.1)  # 8 replicas asked, none ready yet
    clock.advance(60)
    metrics.observe_tick(ctl.tick(), seconds=0.1)
    sample = metrics.registry.get_sample_value
    labels = {"tenant": "prod", "service": "chat"}
    assert sample("burst_service_unserved_requests_total", labels) == 20.0 * 60  # nothing served for a minute
    assert sample("burst_service_replicas", {**labels, "state": "starting"}) == 8
    rates.down = True
    clock.advance(60)
    metrics.observe_tick(ctl.tick(), seconds=0.1)
    assert sample("burst_service_rate_query_failures_total", labels) == 1


def test_burst_services_lists_each_service_and_refuses_unknown_tenants(tmp_path: Path) -> None:
    path = tmp_path / "burst.db"
    clock = ManualClock(T0)
    with Store(path) as store:
        ctl, _ = controller(store, clock, flat(20.0))
        ctl.tick()
    runner = CliRunner()
    out = runner.invoke(main, ["services", "--state", str(path), "--json"])
    assert out.exit_code == 0, out.output
    (entry,) = json.loads(out.output)
    assert (entry["tenant"], entry["name"], entry["desired"], entry["observed_rps"]) == ("prod", "chat", 8, 20.0)
    text = runner.invoke(main, ["services", "--state", str(path)])
    assert text.exit_code == 0 and "prod/chat" in text.output and "now: 20 req/s" in text.output
    missing = runner.invoke(main, ["services", "--state", str(path), "--tenant", "nobody"])
    assert missing.exit_code == 1 and "tenant nobody has no service" in missing.output
    absent = runner.invoke(main, ["services", "--state", str(tmp_path / "none.db")])
    assert absent.exit_code == 1 and "no state file" in absent.output
    why = runner.invoke(main, ["explain", "chat", "--state", str(path), "--json"])
    assert why.exit_code == 0 and json.loads(why.output)[0]["subject"] == "service:prod/chat"


def test_burst_forecast_service_forecasts_the_quickstart_chat_rate_up_its_morning_ramp() -> None:
    runner = CliRunner()
    out = runner.invoke(main, ["forecast", "--service", "prod/chat", "--at", "2026-03-03T08:00:00Z", "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["service"] == "prod/chat" and doc["step_s"] == 300
    rows = doc["forecast"]
    assert len(rows) == 12 and rows[0]["at"] == "2026-03-03T08:00:00+00:00"
    assert all(r["p10"] <= r["p50"] <= r["p90"] <= r["p99"] for r in rows)
    assert rows[-1]["p50"] > rows[0]["p50"]  # 08:00 is on the ramp to the 14:00 peak
    assert 10 < rows[0]["p50"] < 30  # the cycle: a mean of 20 req/s, 60% around it
    unknown = runner.invoke(main, ["forecast", "--service", "prod/nope", "--at", "2026-03-03T08:00:00Z"])
    assert unknown.exit_code == 1 and "no service prod/nope" in unknown.output
    neither = runner.invoke(main, ["forecast"])
    assert neither.exit_code == 2 and "--series PATH" in neither.output


def test_the_history_is_read_again_after_a_day_filling_the_steps_the_loop_missed() -> None:
    class Counting(Flaky):
        reads = 0

        def history(self, service: Service, start: datetime, end: datetime, step_s: float) -> list[tuple[datetime, float]]:
            Counting.reads += 1
            return self.inner.history(service, start, end, step_s)

    rates = Counting(flat(20.0))
    forecasts = ServiceForecasts(rates, background=False)
    forecasts.observe(CHAT, T0, 20.0)
    forecasts.observe(CHAT, T0 + timedelta(hours=3), 20.0)  # the loop was down three hours: a gap
    history = forecasts.histories[("prod", "chat")]
    assert Counting.reads == 1 and history.times[-1] == T0  # the step the loop saw, then nothing for 3 h
    forecasts.observe(CHAT, T0 + timedelta(days=1), 20.0)  # a day on: read again, the gap filled from the source
    history = forecasts.histories[("prod", "chat")]
    assert Counting.reads == 2 and history.times[-1] == T0 + timedelta(days=1, minutes=-5)
    steps = [(b - a).total_seconds() for a, b in zip(history.times, history.times[1:], strict=False)]
    assert set(steps) == {300.0}


class Surging:
    """4 req/s now; in its history, every six hours, a 10-minute surge to 40 req/s."""

    def rate(self, service: Service, now: datetime) -> float:
        return 4.0

    def history(self, service: Service, start: datetime, end: datetime, step_s: float) -> list[tuple[datetime, float]]:
        out, at = [], start
        while at <= end:
            out.append((at, 40.0 if at.hour % 6 == 0 and at.minute < 10 else 4.0))
            at += timedelta(seconds=step_s)
        return out


def test_the_services_past_surges_size_the_groups_warm_pool() -> None:
    """A warm A100 node costs $1/h (1/8 of it per replica); it serves 240 s (300 s boot - 60 s wake) sooner, 4 req/s x
    $0.001 a request: the pool covers surges seen in 1.5% of past 420 s windows or more. Every six hours the rate
    rose x10 over the next two steps (2 of 72 windows): 4 x 10 = 40 req/s, 10 replicas at full capacity, 8 beyond
    the 2 the rate needs now: 8 GPUs warm, one 8-GPU node in the cloud group's pool."""
    pooled = dataclasses.replace(CLOUD, warm_pool=WarmPoolSettings(max_prepared=4),
                                 warm_wake_latency_s={WarmState.STOPPED: 60.0})
    store, clock = Store(":memory:"), ManualClock(T0.replace(hour=3))
    sim = SimProvider([ONPREM, pooled], clock=clock, cluster="test", initial={"onprem": 2})
    rates = Surging()
    loop = ServiceLoop(rates, QueueReplicas(StoreQueue(store)), ServiceForecasts(rates, background=False))
    ctl = Controller(providers={"sim": sim}, source=StoreQueue(store, complete_by_duration=True), store=store,
                     policies=lambda: {"prod": Policy(tenant="prod", priority=10, services=(CHAT,))},
                     prices=Prices(), clock=clock, cluster="test", services=loop)
    report = ctl.tick()
    assert report.services is not None and report.services.warm_gpus == {"A100": 8.0}
    assert "surges: " in report.services.statuses[0].reason and "rose over x10" in report.services.statuses[0].reason
    (pool,) = [a for a in report.plan.actions if a.kind is ActionKind.SET_WARM_POOL and a.target == "cloud"]
    assert pool.count == 1 and "services' hot capacity of 8 A100 GPU(s)" in pool.reason


SPOT = dataclasses.replace(group("spot", capacity_type=CapacityType.SPOT, max_size=8), boot_latency_s=300.0)


class SpotPrices:
    def group_price(self, g: object) -> float:
        return {"cloud": 24.0, "spot": 8.0}[g.id]  # type: ignore[attr-defined]

    def standby_price(self, g: object) -> float:
        return 1.0


def test_a_spot_share_runs_its_replicas_on_the_spot_group_and_a_reclaimed_one_is_placed_again() -> None:
    """Spot share 0.5 at 20 req/s: the need is ceil(20 / 2.8) = 8, floor(8 x 0.5) = 4 of it on spot plus a hedge
    of ceil(0.1 x 4) = 1, so 5 replica jobs are marked spot and placed on the spot group, the others on demand;
    a reclaimed spot node's replicas are requeued and placed again, still marked spot."""
    store, clock = Store(":memory:"), ManualClock(T0)
    chat = dataclasses.replace(CHAT, spot_share=0.5, gpus_per_replica=8)
    sim = SimProvider([CLOUD, SPOT], clock=clock, cluster="test")
    rates = flat(20.0)
    loop = ServiceLoop(rates, QueueReplicas(StoreQueue(store)), ServiceForecasts(rates, background=False))
    ctl = Controller(providers={"sim": sim}, source=StoreQueue(store, complete_by_duration=True), store=store,
                     policies=lambda: {"prod": Policy(tenant="prod", priority=10, services=(chat,))},
                     prices=SpotPrices(), clock=clock, cluster="test", services=loop)
    report = ctl.tick()
    (status,) = report.services.statuses  # type: ignore[union-attr]
    decision = loop.last[("prod", "chat")]
    assert (decision.replicas, decision.spot, decision.hedge) == (8, 5, 1) and status.spot == 5
    metrics = ControllerMetrics()
    metrics.observe_tick(report, seconds=0.1)
    assert metrics.registry.get_sample_value("burst_service_replicas",
                                             {"tenant": "prod", "service": "chat", "state": "spot"}) == 5
    assert "spot: floor(8 x 0.5) = 4 of the need on spot" in status.reason
    replicas = [j for j in store.jobs(states=[JobState.PENDING]) if is_replica(j)]
    assert len(replicas) == decision.running and sum(j.spot_replica for j in replicas) == 5
    launched = {a.target: a.count for a in report.plan.actions if a.kind is ActionKind.SCALE_UP}
    assert launched == {"spot": 5, "cloud": decision.running - 5}  # one 8-GPU node per replica
    clock.advance(301)  # the nodes boot and the replicas start
    ctl.tick()
    clock.advance(121)
    ctl.tick()
    running = store.jobs(states=[JobState.RUNNING])
    on = {j.id: sim.node(j.node_ids[0]).group_id for j in running if is_replica(j)}  # type: ignore[union-attr]
    assert sorted(on.values()) == ["cloud"] * (decision.running - 5) + ["spot"] * 5
    assert all((on[j.id] == "spot") == j.spot_replica for j in running if is_replica(j))
    counts = loop.backend.counts(chat, running, clock.now)
    assert (counts.ready, counts.spot_ready) == (decision.running, 5)
    victims = [j for j in store.jobs(states=[JobState.RUNNING]) if j.spot_replica][:2]
    for victim in victims:  # two reclaimed: one more than the hedge of 1
        sim.inject_interruption(victim.node_ids[0], notice_s=0.0)
    clock.advance(60)
    ctl.tick()
    requeued = [store.get_job(v.id) for v in victims]
    assert all(j is not None and j.state is JobState.PENDING and j.spot_replica for j in requeued)
    active = [j for j in store.jobs() if is_replica(j) and j.active]
    again = loop.backend.counts(chat, active, clock.now)
    assert (again.spot_ready, again.spot_starting) == (3, 0)  # the two requeued ones served before: lost
    after = loop.last[("prod", "chat")]
    assert after.fallback == 1 and "2 lost to a notice, 1 beyond the hedge replaced on demand" in " ".join(after.reasons)
    assert sum(1 for j in active if not j.spot_replica) == decision.running - 5 + 1  # the on-demand stand-in
    clock.advance(301)  # the group's replacement nodes boot and the requeued replicas are placed on them
    ctl.tick()
    for victim in victims:
        back = store.get_job(victim.id)
        assert back is not None and back.state is JobState.RUNNING and back.node_ids != victim.node_ids
        assert sim.node(back.node_ids[0]).group_id == "spot"  # type: ignore[union-attr]
    clock.advance(121)  # they serve again: the stand-in goes once the serving replicas stay at the total
    ctl.tick()
    clock.advance(60)
    ctl.tick()
    assert loop.last[("prod", "chat")].fallback == 0
    assert sum(1 for j in store.jobs() if is_replica(j) and j.active) == decision.running


def test_each_kind_of_replica_moves_to_its_count_and_a_swap_keeps_the_old_replica_until_the_new_one_serves() -> None:
    store = Store(":memory:")
    backend = QueueReplicas(StoreQueue(store))
    jobs = backend.scale(CHAT, 3, [], T0)
    assert [j.spot_replica for j in jobs] == [False] * 3
    serving_at = T0 + timedelta(seconds=CHAT.replica_start_s)

    def started(js: list[Job], at: datetime) -> list[Job]:
        return [dataclasses.replace(j, state=JobState.RUNNING, started_at=at) if j.started_at is None else j
                for j in js]

    jobs = started(jobs, T0)
    later = serving_at + timedelta(seconds=60)
    jobs = backend.scale(CHAT, 3, jobs, later, spot=2)  # 2 of 3 on spot: the spot ones start, none stops yet
    assert sum(j.spot_replica for j in jobs) == 2 and len(jobs) == 5
    assert backend.counts(CHAT, jobs, later) == ReplicaCounts(ready=3, starting=2, spot_ready=0, spot_starting=2)
    jobs = started(jobs, later)
    loaded = later + timedelta(seconds=CHAT.replica_start_s)
    jobs = backend.scale(CHAT, 3, jobs, loaded, spot=2)  # the spot ones serve: 2 on-demand ones go
    assert sorted(j.spot_replica for j in jobs) == [False, True, True]
    cancelled = [j for j in store.jobs(states=[JobState.CANCELLED])]
    assert len(cancelled) == 2 and not any(j.spot_replica for j in cancelled)
    jobs = backend.scale(CHAT, 1, jobs, loaded, spot=2)  # spot capped at the total: 1 spot, 0 on demand
    assert [j.spot_replica for j in jobs] == [True]


def test_a_swap_from_spot_to_on_demand_holds_the_count_and_ends_with_the_on_demand_replicas() -> None:
    """Spot stops being cheaper once 9 replicas serve (8 + a hedge of 1, 5 on spot): the planner asks for 8 on
    demand; the backend keeps the spot replicas until the on-demand ones serve, and the planner does not count
    those kept ones against the need (so it never asks for more), then stops them."""
    store, clock = Store(":memory:"), ManualClock(T0)
    chat = dataclasses.replace(CHAT, spot_share=0.5, gpus_per_replica=8)
    sim = SimProvider([dataclasses.replace(CLOUD, max_size=20), dataclasses.replace(SPOT, max_size=20)], clock=clock,
                      cluster="test")
    prices = {"cloud": 24.0, "spot": 8.0}

    class Moving:
        def group_price(self, g: object) -> float:
            return prices[g.id]  # type: ignore[attr-defined]

        def standby_price(self, g: object) -> float:
            return 1.0

    rates = flat(20.0)
    loop = ServiceLoop(rates, QueueReplicas(StoreQueue(store)), ServiceForecasts(rates, background=False))
    ctl = Controller(providers={"sim": sim}, source=StoreQueue(store, complete_by_duration=True), store=store,
                     policies=lambda: {"prod": Policy(tenant="prod", priority=10, services=(chat,))},
                     prices=Moving(), clock=clock, cluster="test", services=loop)
    seen: list[tuple[int, int, int]] = []
    for t in range(30):
        if t == 10:
            prices["spot"] = 30.0  # spot now dearer than on demand
        ctl.tick()
        active = [j for j in store.jobs() if is_replica(j) and j.active]
        seen.append((loop.last[("prod", "chat")].running, len(active), sum(j.spot_replica for j in active)))
        clock.advance(60)
    assert seen[9] == (9, 9, 5)
    assert all(running == 8 for running, _, _ in seen[10:])  # the need, never inflated by the kept spot replicas
    assert max(active for _, active, _ in seen[10:]) <= 8 + 4  # at most the 4 spot ones kept beside the new 8
    assert seen[-1] == (8, 8, 0)


def test_a_spot_replica_keeps_its_services_priority_over_batch_that_cannot_move() -> None:
    """No spot node can be had and the cloud group holds one node: the service's spot replica takes it ahead of
    a priority-0 batch job that cannot move (a spot replica is not held back like batch that can)."""
    store, clock = Store(":memory:"), ManualClock(T0)
    chat = dataclasses.replace(CHAT, spot_share=1.0, gpus_per_replica=8)
    sim = SimProvider([dataclasses.replace(CLOUD, max_size=1), dataclasses.replace(SPOT, max_size=0)], clock=clock,
                      cluster="test")
    source = StoreQueue(store, complete_by_duration=True)
    source.submit(Job(id="batch-1", tenant="prod", gpus=8, gpu_model="A100", submitted_at=T0, priority=0,
                      duration_s=36000.0))
    rates = flat(1.0)
    loop = ServiceLoop(rates, QueueReplicas(StoreQueue(store)), ServiceForecasts(rates, background=False))
    ctl = Controller(providers={"sim": sim}, source=source, store=store,
                     policies=lambda: {"prod": Policy(tenant="prod", priority=10, services=(chat,))},
                     prices=SpotPrices(), clock=clock, cluster="test", services=loop)
    for _ in range(8):
        ctl.tick()
        clock.advance(60)
    running = store.jobs(states=[JobState.RUNNING])
    assert [j.id for j in running if is_replica(j)] and all(j.spot_replica for j in running)
    assert store.get_job("batch-1").state is JobState.PENDING  # type: ignore[union-attr]
