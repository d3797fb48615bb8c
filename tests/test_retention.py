"""Retention on both store backends (a SQLite file, a real PostgreSQL server): the old cost ledger rolls up into
hourly rows that meter exactly as before, finished rows are pruned, live ones never are."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from builders import T0, group, job, ready_node
from click.testing import CliRunner

from burst import retention
from burst.cli import main
from burst.model import JobState, NodeState, ServiceEvent
from burst.state import CostEntry, IntentStatus, JobLoss, Store
from policies.config import RetentionDoc

MONTH = datetime(2026, 3, 1, tzinfo=UTC)


def ticks(start: datetime, hours: int) -> list[CostEntry]:
    """A ledger as the daemon writes it: rows every minute per tenant and line (amounts exact in binary)."""
    rows = []
    for minute in range(hours * 60):
        at = start + timedelta(minutes=minute, seconds=7)
        rows += [CostEntry(at, "steady", 0.25, 0.125, "a", "onprem"),
                 CostEntry(at, "elastic_spot", 0.5, 0.0625, "b", "spot"),
                 CostEntry(at, "hot_pool", 0.75, 0.0, None, "od")]
    return rows


def metered(store: Store, since: datetime, until: datetime) -> tuple[object, ...]:
    return (store.spend_by_tenant(since, until), store.gpu_hours_by_tenant(since, until),
            store.cost_by_line(since, until), store.tenant_usage(since, until)[0])


def test_the_old_ledger_rolls_up_to_hourly_rows_that_meter_exactly(state_location: Path | str) -> None:
    with Store.open(state_location) as store:
        store.record_costs(ticks(MONTH, 72))
        windows = [(MONTH, MONTH + timedelta(days=3)), (MONTH + timedelta(hours=5), MONTH + timedelta(hours=30)),
                   (MONTH + timedelta(days=1), MONTH + timedelta(days=2, hours=13))]
        before = [metered(store, *w) for w in windows]
        read, written = store.roll_up_costs(MONTH + timedelta(days=2, minutes=30))  # whole hours only: to 48:00
        assert (read, written) == (48 * 60 * 3, 48 * 3)
        assert [metered(store, *w) for w in windows] == before
        assert len(store.costs()) == 48 * 3 + 24 * 60 * 3
        assert store.costs(until=MONTH + timedelta(hours=1)) == [  # overhead (no tenant) first on either backend
            CostEntry(MONTH, "hot_pool", 45.0, 0.0, None, "od"), CostEntry(MONTH, "steady", 15.0, 7.5, "a", "onprem"),
            CostEntry(MONTH, "elastic_spot", 30.0, 3.75, "b", "spot")]
        assert min(c.at for c in store.costs(since=MONTH + timedelta(days=2))).minute == 0  # raw rows from 48:00 on
        assert store.roll_up_costs(MONTH + timedelta(days=2, minutes=59)) == (0, 0), "hours rolled up stay rolled up"
        store.roll_up_costs(MONTH + timedelta(days=3))
        assert [metered(store, *w) for w in windows] == before
        assert len(store.costs()) == 72 * 3


def test_finished_rows_are_pruned_and_live_ones_kept_whatever_their_age(state_location: Path | str) -> None:
    old, new = T0 - timedelta(days=40), T0
    g = group("g")
    with Store.open(state_location) as store:
        store.put_jobs([job("done"), job("running"), job("pending")], at=old)
        store.put_job(job("done", state=JobState.RUNNING, nodes=("n1",), started=old), at=old)
        store.put_job(job("done", state=JobState.SUCCEEDED), at=old)
        store.put_job(job("running", state=JobState.RUNNING, nodes=("n2",), started=old), at=old)
        store.put_job(job("fresh"), at=new)
        store.put_node(ready_node("gone", g), at=old)
        store.put_node(ready_node("gone", g).transition(NodeState.DRAINING, old), at=old)
        store.put_node(ready_node("n2", g), at=old)
        settled = store.record_intent("k1", "p1", {"kind": "scale_up"}, old)
        store.mark_intent(settled, IntentStatus.FAILED, old)
        waiting = store.record_intent("k2", "p1", {"kind": "scale_up"}, old)
        store.record_decisions("p1", old, [("group:g", "hold", "old", {})])
        store.record_losses([JobLoss(old, "done", "a", "eviction", 1.0, lost_gpu_s=60.0),
                             JobLoss(new, "running", "a", "checkpoint", 1.0, checkpoint_gpu_s=30.0)])
        store.record_decisions("p2", new, [("group:g", "scale_up", "new", {})])
        for state in (NodeState.TERMINATING, NodeState.TERMINATED):
            node = store.get_node("gone")
            assert node is not None
            store.put_node(node.transition(state, old) if node.state is not state else node, at=old)
        gone = store.prune_finished(T0 - timedelta(days=35))
        assert gone == {"jobs": 1, "decisions": 1, "intents": 1, "nodes": 1, "job_losses": 1}
        assert [loss.job_id for loss in store.job_losses()] == ["running"]
        assert sorted(j.id for j in store.jobs()) == ["fresh", "pending", "running"]
        assert [d.reason for d in store.decisions()] == ["new"]
        assert [i.id for i in store.intents()] == [waiting]
        assert [n.id for n in store.nodes(include_terminated=True)] == ["n2"]


def test_usage_reads_the_same_after_the_roll_up(tmp_path: Path) -> None:
    state = tmp_path / "burst.db"
    with Store.open(state) as store:
        store.record_costs(ticks(MONTH, 30))

    def usage() -> object:
        out = CliRunner().invoke(main, ["usage", "--state", str(state), "--since", MONTH.isoformat(), "--json"])
        assert out.exit_code == 0, out.output
        return json.loads(out.output)

    before = usage()
    with Store.open(state) as store:
        report = retention.apply(store, RetentionDoc(), MONTH + timedelta(days=37))  # 35 d: all 30 h
        assert report.ledger_read == 30 * 60 * 3 and report.ledger_written == 30 * 3
    assert usage() == before


def test_cutoffs_follow_the_settings() -> None:
    settings = RetentionDoc(ledger_rollup_after=32 * 86400.0, finished_after=86400.0, demand_history=40 * 86400.0)
    cut = retention.cutoffs(settings, T0)
    assert (cut.ledger, cut.finished, cut.demand) == (T0 - timedelta(days=32), T0 - timedelta(days=1),
                                                      T0 - timedelta(days=40))
    assert cut.service_events == T0 - timedelta(days=14), "never while the rate forecaster still reads an event"
    assert retention.cutoffs(RetentionDoc(), T0).service_events == T0 - timedelta(days=35)


def test_service_events_go_once_ended_past_their_retention_and_not_while_forecasts_read_them(
        state_location: Path | str) -> None:
    def event(name: str, ended_days_ago: float) -> ServiceEvent:
        end = T0 - timedelta(days=ended_days_ago)
        return ServiceEvent(start=end - timedelta(hours=6), end=end, multiplier=2.0, name=name)

    with Store.open(state_location) as store:
        for tenant, name, ago in (("a", "long-over", 40), ("b", "long-over-too", 36), ("a", "last-week", 7),
                                  ("a", "coming", -3)):
            store.add_service_event(tenant, "chat", event(name, ago), at=T0 - timedelta(days=50))
        assert store.row_counts()["service_events"] == 4
        report = retention.apply(store, RetentionDoc(), T0)  # events ended over 35 days ago go
        assert report.deleted["service_events"] == 2
        assert [e.event.name for e in store.service_events("a")] == ["last-week", "coming"]
        assert store.service_events("b") == []
        short = RetentionDoc(finished_after=86400.0)  # a day, but the forecaster reads an event 14 days after its end
        assert retention.apply(store, short, T0).deleted["service_events"] == 0
        assert retention.apply(store, short, T0 + timedelta(days=8)).deleted["service_events"] == 1
        assert [e.event.name for e in store.service_events("a")] == ["coming"]
