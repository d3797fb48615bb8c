"""The JSON codec and the store contract, against real SQLite files under tmp_path and a real PostgreSQL
server the tests start (tests/pg_server.py): every test taking `store`, `ledger_store` or `state_location`
runs on both backends (no mocks)."""

from __future__ import annotations

import dataclasses
import json
import socket
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from builders import T0, group, job, ready_node
from hypothesis import given, settings
from hypothesis import strategies as st

from burst import codec
from burst.model import (
    CapacityType,
    DemandPoint,
    Forecast,
    GpuShape,
    Job,
    JobState,
    Node,
    NodeGroup,
    NodeState,
    Snapshot,
    Tier,
    Transition,
    WarmPoolSettings,
    WarmState,
)
from burst.state import (
    COST_LINES,
    LATEST_VERSION,
    MIGRATIONS,
    CostEntry,
    IntentStatus,
    InvalidIntentTransition,
    InvalidJobTransition,
    JobExists,
    JobLoss,
    LossTotals,
    MetaKey,
    SchemaTooNew,
    Store,
)
from burst.store import ledger as ledger_module

IST = timezone(timedelta(hours=5, minutes=30))


# ------------------------------------------------------------------ fixtures / builders


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "burst.db"


@pytest.fixture
def store(state_location: str | Path) -> Iterator[Store]:
    """A new store, once on SQLite and once on PostgreSQL."""
    with Store.open(state_location) as s:
        yield s


def rich_group() -> NodeGroup:
    return NodeGroup(
        id="aws-spot-a100",
        provider="aws",
        region="us-east-1",
        tier=Tier.ELASTIC,
        capacity_type=CapacityType.SPOT,
        shape=GpuShape("A100", 8, 80.0),
        instance_type="p4d.24xlarge",
        min_size=0,
        max_size=16,
        zone="us-east-1a",
        boot_latency_s=420.0,
        warm_wake_latency_s={WarmState.STOPPED: 45.0, WarmState.HIBERNATED: 20.0, WarmState.RUNNING: 1.0},
        warm_pool=WarmPoolSettings(
            min_size=2, max_prepared=4, state=WarmState.HIBERNATED, reuse_on_scale_in=False
        ),
        scale_down_cooldown_s=300.0,
    )


def warm_node() -> Node:
    n = Node.requested(
        "i-0abc", "aws-spot-a100", 8, T0, tags={"burst:cluster": "prod"}, key="scale_up:g:size=3"
    )
    n = n.transition(NodeState.BOOTING, T0 + timedelta(seconds=5))
    return n.transition(NodeState.WARM, T0 + timedelta(minutes=6), warm_state=WarmState.HIBERNATED)


def full_job() -> Job:
    return Job(
        id="train-42",
        tenant="research",
        gpus=8,
        submitted_at=T0,
        state=JobState.RUNNING,
        gpu_model="A100",
        priority=5,
        fault_tolerant=True,
        checkpoint_interval_s=900.0,
        checkpoint_duration_s=60.0,
        last_checkpoint_at=T0 + timedelta(minutes=15),
        deadline=T0 + timedelta(days=1),
        started_at=T0 + timedelta(minutes=1),
        node_ids=("n1", "n2"),
        duration_s=7200.0,
        work_done_s=840.5,
    )


# ------------------------------------------------------------------ codec: round trips

finite = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)
aware = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)).flatmap(
    lambda d: st.sampled_from([UTC, IST, timezone(-timedelta(hours=8))]).map(lambda tz: d.replace(tzinfo=tz))
)
ident = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)


@st.composite
def jobs_strategy(draw: st.DrawFn) -> Job:
    fractional = draw(st.booleans())
    return Job(
        id=draw(ident),
        tenant=draw(ident),
        gpus=0 if fractional else draw(st.integers(1, 64)),
        gpu_share=draw(st.floats(min_value=0.01, max_value=1.0)) if fractional else None,
        submitted_at=draw(aware),
        state=draw(st.sampled_from(JobState)),
        gpu_model=draw(st.none() | ident),
        priority=draw(st.none() | st.integers(-100, 100)),
        fault_tolerant=draw(st.booleans()),
        checkpoint_interval_s=draw(st.none() | finite),
        checkpoint_duration_s=draw(st.none() | finite),
        last_checkpoint_at=draw(st.none() | aware),
        deadline=draw(st.none() | aware),
        started_at=draw(st.none() | aware),
        node_ids=tuple(draw(st.lists(ident, max_size=4))),
        duration_s=draw(st.none() | finite),
        work_done_s=draw(finite),
    )


@settings(max_examples=200, deadline=None)
@given(jobs_strategy())
def test_job_round_trips_through_json_text(j: Job) -> None:
    data = codec.job_to_json(j)
    assert codec.job_from_json(json.loads(json.dumps(data))) == j
    assert codec.loads(Job, codec.dumps(j)) == j
    assert data["state"] == j.state.value
    assert datetime.fromisoformat(data["submitted_at"]).utcoffset() == timedelta(0)


def test_node_round_trip_keeps_history_and_warm_state() -> None:
    n = warm_node()
    data = codec.node_to_json(n)
    assert data["history"] == [
        {"state": "requested", "at": "2026-03-02T12:00:00+00:00", "resync": ""},
        {"state": "booting", "at": "2026-03-02T12:00:05+00:00", "resync": ""},
        {"state": "warm", "at": "2026-03-02T12:06:00+00:00", "resync": ""},
    ]
    assert data["warm_state"] == "hibernated"
    back = codec.node_from_json(json.loads(json.dumps(data)))
    assert back == n
    older = {**data, "history": [{k: v for k, v in t.items() if k != "resync"} for t in data["history"]]}
    assert codec.node_from_json(older) == n, "a node stored before history entries said whether they were re-syncs"
    assert isinstance(back.history, tuple) and all(isinstance(t, Transition) for t in back.history)
    assert back.entered_state_at == T0 + timedelta(minutes=6)


def test_group_round_trip_with_shape_warm_pool_and_wake_latencies() -> None:
    g = rich_group()
    data = codec.group_to_json(g)
    assert data["shape"] == {"gpu_model": "A100", "gpus_per_node": 8, "gpu_memory_gib": 80.0}
    assert data["warm_wake_latency_s"] == {"stopped": 45.0, "hibernated": 20.0, "running": 1.0}
    assert data["warm_pool"]["state"] == "hibernated"
    back = codec.group_from_json(json.loads(json.dumps(data)))
    assert back == g
    assert set(back.warm_wake_latency_s) == {WarmState.STOPPED, WarmState.HIBERNATED, WarmState.RUNNING}


def test_snapshot_round_trip() -> None:
    g = rich_group()
    snap = Snapshot(
        groups=(g, group("onprem", tier=Tier.STEADY)),
        nodes=(warm_node(), ready_node("n1", g)),
        jobs=(full_job(), job("j2", gpus=0, gpu_share=0.25)),
        targets={"aws-spot-a100": 3, "onprem": 1},
        spend_month_usd={"research": 1234.5, "prod": 0.0},
    )
    text = json.dumps(codec.snapshot_to_json(snap))
    assert codec.snapshot_from_json(json.loads(text)) == snap


def test_generic_codec_handles_float_keyed_mappings() -> None:
    f = Forecast(
        "a", "A100", (T0, T0 + timedelta(hours=1)), {0.5: (1.0, 2.0), 0.9: (3.0, 4.5)}, model="prophet"
    )
    data = codec.to_json(f)
    assert data["quantiles"] == {"0.5": [1.0, 2.0], "0.9": [3.0, 4.5]}
    assert codec.from_json(Forecast, json.loads(json.dumps(data))) == f


# ------------------------------------------------------------------ codec: parsing rules


def test_datetimes_parse_z_and_offsets_to_utc() -> None:
    base = codec.job_to_json(job("j"))
    for text in ("2026-03-02T12:00:00Z", "2026-03-02T12:00:00+00:00", "2026-03-02T17:30:00+05:30"):
        parsed = codec.job_from_json({**base, "submitted_at": text}).submitted_at
        assert parsed == T0 and parsed.utcoffset() == timedelta(0)


def test_naive_datetimes_are_rejected_naming_the_field() -> None:
    base = codec.job_to_json(job("j"))
    with pytest.raises(ValueError, match=r"^Job\.submitted_at: naive datetime"):
        codec.job_from_json({**base, "submitted_at": "2026-03-02T12:00:00"})
    node = codec.node_to_json(warm_node())
    node["history"][1]["at"] = "2026-03-02T12:00:05"
    snap = {"groups": [], "nodes": [node], "jobs": []}
    with pytest.raises(ValueError, match=r"^Snapshot\.nodes\[0\]\.history\[1\]\.at: naive"):
        codec.snapshot_from_json(snap)
    with pytest.raises(ValueError, match=r"^Job\.deadline: naive"):
        codec.job_to_json(dataclasses.replace(job("j"), deadline=datetime(2026, 1, 1)))  # noqa: DTZ001


def test_missing_optional_fields_take_the_dataclass_defaults() -> None:
    j = codec.job_from_json({"id": "j", "tenant": "a", "gpus": 2, "submitted_at": "2026-03-02T12:00:00Z"})
    assert j == Job("j", "a", 2, T0)
    g = codec.group_from_json(
        {
            "id": "g",
            "provider": "sim",
            "region": "r",
            "tier": "steady",
            "capacity_type": "onprem",
            "shape": {"gpu_model": "H100", "gpus_per_node": 4},
            "instance_type": "rack",
        }
    )
    assert g.warm_pool == WarmPoolSettings() and g.warm_wake_latency_s == {} and g.shape.gpu_memory_gib == 0.0
    snap = codec.snapshot_from_json({"groups": [], "nodes": [], "jobs": []})
    assert snap.targets == {} and snap.spend_month_usd == {}


def test_unknown_missing_and_mistyped_fields_are_errors_naming_the_field() -> None:
    base = codec.job_to_json(job("j"))
    with pytest.raises(ValueError, match=r"^Job\.colour: unknown field"):
        codec.job_from_json({**base, "colour": "red"})
    g = codec.group_to_json(rich_group())
    g["warm_pool"]["size"] = 3
    with pytest.raises(ValueError, match=r"^NodeGroup\.warm_pool\.size: unknown field"):
        codec.group_from_json(g)
    with pytest.raises(ValueError, match=r"^Job\.tenant: missing required field"):
        codec.job_from_json({k: v for k, v in base.items() if k != "tenant"})
    with pytest.raises(ValueError, match=r"^Job\.gpus: expected an integer"):
        codec.job_from_json({**base, "gpus": "8"})
    with pytest.raises(ValueError, match=r"^Job\.fault_tolerant: expected a boolean"):
        codec.job_from_json({**base, "fault_tolerant": None})
    with pytest.raises(ValueError, match=r"^Job\.state: 'queued' is not a valid JobState"):
        codec.job_from_json({**base, "state": "queued"})
    g = codec.group_to_json(rich_group())
    g["warm_wake_latency_s"] = {"frozen": 1.0}
    with pytest.raises(
        ValueError, match=r"^NodeGroup\.warm_wake_latency_s\['frozen'\]: 'frozen' is not a valid"
    ):
        codec.group_from_json(g)
    with pytest.raises(ValueError, match=r"^Job: job j: gpus must be >= 1"):  # the model's own validation
        codec.job_from_json({**base, "gpus": 0})
    with pytest.raises(ValueError, match=r"^Job: invalid JSON"):
        codec.loads(Job, "{not json")


# ------------------------------------------------------------------ store: files, reopen, WAL


def test_store_file_is_wal_and_survives_close_and_reopen(db_path: Path) -> None:
    g = rich_group()
    with Store.open(db_path) as s:
        assert s.schema_version == LATEST_VERSION
        assert s.journal_mode == "wal"
        s.add_job(full_job())
        s.put_node(warm_node())
        iid = s.record_intent("scale_up:aws-spot-a100:size=3", "p1", {"kind": "scale_up", "size": 3}, T0)
        s.set_target(g.id, 3, "scale_up:aws-spot-a100:size=3", T0)
        s.record_demand([DemandPoint(T0, "research", "A100", 8.0, 4.0)])
        s.record_cost(T0, "elastic_spot", 12.5, 8.0, tenant="research", group_id=g.id)
        s.set_meta(MetaKey.FEED_CURSOR, "prod")
        s.record_decisions("p1", T0, [("aws-spot-a100", "scale_up", "queue too long", {"size": 3})])
        assert Path(f"{db_path}-wal").exists()  # WAL mode, for real, on disk
    assert s.closed

    raw = sqlite3.connect(db_path)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persistent in the file
    finally:
        raw.close()

    with Store.open(db_path) as s:
        assert s.get_job("train-42") == full_job()
        assert s.get_node("i-0abc") == warm_node()
        (intent,) = s.unconfirmed_intents()
        assert (intent.id, intent.status, intent.action) == (
            iid,
            IntentStatus.PLANNED,
            {"kind": "scale_up", "size": 3},
        )
        assert s.targets() == {g.id: 3}
        assert s.demand_history() == [DemandPoint(T0, "research", "A100", 8.0, 4.0)]
        assert s.spend_by_tenant(T0) == {"research": 12.5}
        assert s.get_meta(MetaKey.FEED_CURSOR) == "prod"
        assert s.decisions("aws-spot-a100")[0].data == {"size": 3}


def test_memory_store_works_and_closed_store_refuses() -> None:
    s = Store(":memory:")
    assert s.schema_version == LATEST_VERSION
    s.add_job(job("j1"))
    assert [j.id for j in s.jobs()] == ["j1"]
    s.close()
    s.close()  # idempotent
    with pytest.raises(sqlite3.ProgrammingError):
        s.jobs()


# ------------------------------------------------------------------ store: migrations


def test_migrations_are_numbered_and_a_v1_file_is_migrated_with_its_data(db_path: Path) -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, LATEST_VERSION + 1))
    assert LATEST_VERSION >= 2

    with Store.open(db_path, target_version=1) as v1:
        assert v1.schema_version == 1
        cols = {r[1] for r in v1._query("PRAGMA table_info(cost_ledger)")}
        assert "gpu_hours" not in cols
        v1.add_job(full_job())
        v1.put_node(warm_node())
        iid = v1.record_intent("k1", "p1", {"kind": "scale_up"}, T0)
        v1.mark_intent(iid, IntentStatus.SENT, T0 + timedelta(seconds=1))
        v1.record_demand([DemandPoint(T0, "a", "A100", 1.0, 2.0)])
        # A v1 ledger row, written as v1 wrote it (no gpu_hours column yet).
        with v1._tx() as conn:
            conn.execute(
                "INSERT INTO cost_ledger (at, tenant, line, group_id, usd) VALUES (?, ?, ?, ?, ?)",
                ("2026-03-02T12:00:00.000000+00:00", "a", "steady", "onprem", 4.0),
            )

    with Store.open(db_path) as s:
        assert s.schema_version == LATEST_VERSION
        cols = {r[1] for r in s._query("PRAGMA table_info(cost_ledger)")}
        assert "gpu_hours" in cols
        indexes = {r[1] for r in s._query("PRAGMA index_list(intents)")}
        assert "intents_status" in indexes
        assert s.get_job("train-42") == full_job()
        assert s.get_node("i-0abc") == warm_node()
        assert [(i.id, i.status) for i in s.unconfirmed_intents()] == [(iid, IntentStatus.SENT)]
        assert s.demand_history() == [DemandPoint(T0, "a", "A100", 1.0, 2.0)]
        assert s.costs() == [CostEntry(T0, "steady", 4.0, 0.0, "a", "onprem")]
        s.record_cost(T0, "steady", 1.0, 2.5, tenant="a")
        assert s.gpu_hours_by_tenant(T0) == {"a": 2.5}

    with Store.open(db_path) as again:  # opening a current file is a no-op
        assert again.schema_version == LATEST_VERSION
        assert len(again.costs()) == 2


def test_newer_schema_is_refused_and_bad_target_version_rejected(db_path: Path) -> None:
    Store.open(db_path).close()
    raw = sqlite3.connect(db_path)
    raw.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    raw.commit()
    raw.close()
    with pytest.raises(SchemaTooNew, match="newer than this burst"):
        Store.open(db_path)
    with pytest.raises(ValueError, match="target_version"):
        Store.open(db_path.with_name("other.db"), target_version=LATEST_VERSION + 1)


# ------------------------------------------------------------------ store: jobs


def test_job_state_machine_is_enforced(store: Store) -> None:
    store.add_job(job("j1"))
    with pytest.raises(InvalidJobTransition, match="pending -> succeeded"):
        store.put_job(job("j1", state=JobState.SUCCEEDED))
    assert store.get_job("j1") == job("j1")  # unchanged

    store.put_job(job("j1", state=JobState.RUNNING, nodes=("n1",), started=T0))
    store.put_job(job("j1", state=JobState.PENDING))  # requeue after eviction
    store.put_job(job("j1", state=JobState.PENDING, priority=3))  # same state: a field update
    assert store.get_job("j1") == job("j1", priority=3)
    store.put_job(job("j1", state=JobState.RUNNING))
    store.put_job(job("j1", state=JobState.SUCCEEDED))
    with pytest.raises(InvalidJobTransition, match="succeeded -> running"):
        store.put_job(job("j1", state=JobState.RUNNING))

    with pytest.raises(JobExists):
        store.add_job(job("j1"))
    store.put_job(job("new", state=JobState.RUNNING))  # unknown id: inserted as observed
    assert store.get_job("new") is not None
    assert store.get_job("nope") is None


def test_ended_at_says_when_each_job_of_a_prefix_reached_its_final_state(store: Store) -> None:
    for job_id in ("svc:prod/chat:1", "svc:prod/chat:2", "batch-1"):
        store.add_job(Job(id=job_id, tenant="prod", gpus=1, submitted_at=T0), at=T0)
    ended = T0 + timedelta(hours=1)
    for job_id in ("svc:prod/chat:1", "batch-1"):
        store.put_job(Job(id=job_id, tenant="prod", gpus=1, submitted_at=T0, state=JobState.CANCELLED), at=ended)
    assert store.ended_at("svc:") == {"svc:prod/chat:1": ended}  # chat:2 still pending, batch-1 not of the prefix


def test_put_jobs_is_one_transaction(store: Store) -> None:
    store.put_jobs([job("a"), job("b")])
    with pytest.raises(InvalidJobTransition):
        store.put_jobs([job("a", state=JobState.RUNNING), job("c"), job("b", state=JobState.SUCCEEDED)])
    assert [(j.id, j.state) for j in store.jobs()] == [("a", JobState.PENDING), ("b", JobState.PENDING)]
    # checked in order within the batch: pending -> running -> succeeded in one call is fine
    store.put_jobs([job("a", state=JobState.RUNNING), job("a", state=JobState.SUCCEEDED)])
    assert store.get_job("a") == job("a", state=JobState.SUCCEEDED)


def test_a_job_is_in_exactly_one_state(store: Store) -> None:
    store.put_jobs(
        [
            job("p1", "a", submitted=T0 + timedelta(seconds=2)),
            job("p0", "b", submitted=T0 + timedelta(seconds=2)),
            job("r1", "a", state=JobState.RUNNING, submitted=T0),
            job("c1", "b", state=JobState.CHECKPOINTING, submitted=T0 + timedelta(seconds=1)),
        ]
    )
    store.put_job(job("r1", "a", state=JobState.PENDING, submitted=T0))  # requeued: moves, not copied
    store.put_job(job("c1", "b", state=JobState.RECLAIMED, submitted=T0 + timedelta(seconds=1)))
    every = {j.id for j in store.jobs()}
    for jid in every:
        assert sum(jid in {j.id for j in store.jobs([s])} for s in JobState) == 1
    assert [j.id for j in store.jobs([JobState.PENDING])] == ["r1", "p0", "p1"]  # submitted_at, then id
    assert [j.id for j in store.jobs([JobState.PENDING], tenant="a")] == ["r1", "p1"]
    assert [j.id for j in store.jobs([JobState.RECLAIMED, JobState.RUNNING])] == ["c1"]
    assert store.jobs([]) == []
    assert store.job_counts()[JobState.PENDING] == 3 and sum(store.job_counts().values()) == 4
    # the state column is the json's state, row by row
    rows = store._query("SELECT state, json FROM jobs")
    assert len(rows) == 4 and all(json.loads(js)["state"] == st_ for st_, js in rows)


def test_jobs_with_naive_times_are_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="submitted_at"):
        store.add_job(dataclasses.replace(job("j"), submitted_at=datetime(2026, 1, 1)))  # noqa: DTZ001
    assert store.jobs() == []


# ------------------------------------------------------------------ store: nodes


def test_nodes_round_trip_and_terminated_are_hidden(store: Store) -> None:
    g = rich_group()
    live = warm_node()
    gone = (
        ready_node("n-dead", g)
        .transition(NodeState.DRAINING, T0)
        .transition(NodeState.TERMINATING, T0)
        .transition(NodeState.TERMINATED, T0 + timedelta(minutes=2))
    )
    store.put_node(live)
    store.put_node(gone)
    assert store.nodes() == [live]
    assert store.nodes(include_terminated=True) == [live, gone]
    assert store.nodes(group_id="nope") == []
    woken = live.transition(NodeState.WAKING, T0 + timedelta(hours=1))
    store.put_node(woken)
    assert store.get_node(live.id) == woken
    assert store.forget_node("n-dead") is True
    assert store.forget_node("n-dead") is False
    assert store.get_node("n-dead") is None


# ------------------------------------------------------------------ store: intents


def test_intents_move_forward_only(store: Store) -> None:
    a = store.record_intent("k-a", "p1", {"kind": "scale_up", "target": "g", "size": 3}, T0)
    b = store.record_intent("k-b", "p1", {"kind": "terminate_nodes"}, T0 + timedelta(seconds=1))
    c = store.record_intent(
        "k-a", "p2", {"kind": "scale_up", "target": "g", "size": 3}, T0 + timedelta(seconds=2)
    )
    assert [i.id for i in store.unconfirmed_intents()] == [a, b, c]  # oldest first

    store.mark_intent(a, IntentStatus.SENT, T0 + timedelta(seconds=3), detail="req-1")
    sent = store.intent(a)
    assert sent is not None and sent.status is IntentStatus.SENT and sent.detail == "req-1"
    store.mark_intent(a, "confirmed", T0 + timedelta(seconds=4))
    done = store.intent(a)
    assert done is not None and done.status is IntentStatus.CONFIRMED
    assert done.detail == "req-1" and done.updated_at == T0 + timedelta(seconds=4)
    assert done.created_at == T0 and done.created_at.tzinfo is not None
    store.mark_intent(b, IntentStatus.FAILED, T0 + timedelta(seconds=5), detail="InsufficientCapacity")

    for intent_id, status in [
        (a, IntentStatus.SENT),  # backwards
        (a, IntentStatus.CONFIRMED),  # sideways (re-mark)
        (b, IntentStatus.SENT),  # out of a terminal status
        (c, IntentStatus.CONFIRMED),  # planned -> confirmed skips sent
        (c, IntentStatus.PLANNED),
    ]:
        with pytest.raises(InvalidIntentTransition):
            store.mark_intent(intent_id, status, T0 + timedelta(seconds=9))
    refused = store.intent(a)  # a refused move changes nothing
    assert refused is not None and (refused.status, refused.detail, refused.updated_at) == (
        IntentStatus.CONFIRMED, "req-1", T0 + timedelta(seconds=4))
    with pytest.raises(KeyError):
        store.mark_intent(999, IntentStatus.SENT, T0)
    with pytest.raises(ValueError):
        store.mark_intent(c, "lost", T0)

    assert [i.id for i in store.unconfirmed_intents()] == [c]
    assert [i.id for i in store.intents(key="k-a")] == [c, a]  # newest first
    assert [i.id for i in store.intents(limit=2)] == [c, b]
    assert store.intent(b) is not None and store.intent(b).detail == "InsufficientCapacity"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="action"):
        store.record_intent("k", "p", {"x": float("nan")}, T0)


def test_intents_journaled_and_moved_together_land_all_or_none(store: Store) -> None:
    many = store.record_intents([(f"k-{i}", "p1", {"kind": "place_job", "target": f"j{i}"}) for i in range(1203)], T0,
                                status=IntentStatus.SENT)
    assert len(many) == 1203 and many == sorted(many)
    assert [i.action["target"] for i in store.unconfirmed_intents()][:3] == ["j0", "j1", "j2"]
    done = T0 + timedelta(seconds=1)
    store.mark_intents(many, IntentStatus.CONFIRMED, done)  # more ids than one statement takes
    assert store.unconfirmed_intents() == []
    assert {(i.status, i.updated_at) for i in store.intents(limit=2000)} == {(IntentStatus.CONFIRMED, done)}

    a, b = store.record_intents([("k-a", "p2", {"kind": "evict_job"}), ("k-b", "p2", {"kind": "evict_job"})], T0,
                                status=IntentStatus.SENT)
    for ids, error in [([a, many[0], b], InvalidIntentTransition), ([a, 10**9], KeyError), ([a, a], InvalidIntentTransition)]:
        with pytest.raises(error):
            store.mark_intents(ids, IntentStatus.FAILED, done, "refused")
        assert [i.status for i in store.unconfirmed_intents()] == [IntentStatus.SENT] * 2, "a refused call moves none"
    with pytest.raises(InvalidIntentTransition, match="planned or sent"):
        store.record_intents([("k-c", "p3", {})], T0, status=IntentStatus.CONFIRMED)
    with pytest.raises(ValueError, match="action"):
        store.record_intents([("k-d", "p3", {}), ("k-e", "p3", {"x": float("nan")})], T0)
    assert store.intents(key="k-d") == [], "a row that cannot be written keeps the others out too"


# ------------------------------------------------------------------ store: targets, meta, decisions


def test_targets_meta_and_decisions(store: Store) -> None:
    store.set_target("g1", 3, "scale_up:g1:size=3", T0)
    store.set_target("g2", 0, "scale_down:g2:size=0", T0)
    store.set_target("g1", 5, "scale_up:g1:size=5", T0 + timedelta(minutes=1))
    assert store.targets() == {"g1": 5, "g2": 0}
    rec = store.target_records()["g1"]
    assert (rec.key, rec.updated_at) == ("scale_up:g1:size=5", T0 + timedelta(minutes=1))
    with pytest.raises(ValueError):
        store.set_target("g1", -1, "k", T0)
    assert store.forget_target("g2") and store.targets() == {"g1": 5}

    assert store.get_meta(MetaKey.FEED_CURSOR) is None and store.get_meta(MetaKey.FEED_CURSOR, "d") == "d"
    store.set_meta(MetaKey.FEED_CURSOR, "a")
    store.set_meta(MetaKey.FEED_CURSOR, "b")
    assert store.get_meta(MetaKey.FEED_CURSOR) == "b"
    with pytest.raises(ValueError, match="cluster"):
        store.set_meta("cluster", "a")  # type: ignore[arg-type]  # only the declared entries exist

    store.record_decisions("p1", T0, [("job:j1", "place_job", "fits on onprem-0", {"nodes": ["onprem-0"]})])
    store.record_decisions(
        "p2",
        T0 + timedelta(seconds=30),
        [("job:j1", "hold", "over budget", {}), ("group:g1", "scale_up", "queue wait SLO", {"size": 5})],
    )
    latest = store.decisions("job:j1")
    assert [(d.plan_id, d.kind) for d in latest] == [("p2", "hold"), ("p1", "place_job")]
    assert latest[1].data == {"nodes": ["onprem-0"]} and latest[1].at == T0
    assert [d.subject for d in store.decisions(limit=1)] == ["group:g1"]
    assert len(store.decisions(plan_id="p2")) == 2


# ------------------------------------------------------------------ store: demand and cost windows


def test_demand_history_windows_and_filters(store: Store) -> None:
    points = [
        DemandPoint(T0 + timedelta(minutes=m), tenant, model, float(m), 1.0)
        for m in range(0, 60, 10)
        for tenant, model in (("a", "A100"), ("b", "H100"))
    ]
    assert store.record_demand(points) == 12
    assert len(store.demand_history()) == 12
    window = store.demand_history(since=T0 + timedelta(minutes=10), until=T0 + timedelta(minutes=30))
    assert [(p.at, p.tenant) for p in window] == [
        (T0 + timedelta(minutes=10), "a"),
        (T0 + timedelta(minutes=10), "b"),
        (T0 + timedelta(minutes=20), "a"),
        (T0 + timedelta(minutes=20), "b"),
    ]  # since inclusive, until exclusive
    assert [
        p.running_gpus
        for p in store.demand_history(tenant="b", gpu_model="H100", since=T0 + timedelta(minutes=40))
    ] == [
        40.0,
        50.0,
    ]
    assert store.demand_history(tenant="a", gpu_model="H100") == []
    # the same sample again replaces, never duplicates; an offset time is the same instant
    store.record_demand([DemandPoint((T0 + timedelta(minutes=10)).astimezone(IST), "a", "A100", 99.0, 0.0)])
    again = store.demand_history(
        tenant="a", since=T0 + timedelta(minutes=10), until=T0 + timedelta(minutes=11)
    )
    assert again == [DemandPoint(T0 + timedelta(minutes=10), "a", "A100", 99.0, 0.0)]
    assert again[0].at.utcoffset() == timedelta(0)
    assert store.prune_demand(T0 + timedelta(minutes=30)) == 6
    assert min(p.at for p in store.demand_history()) == T0 + timedelta(minutes=30)


@pytest.fixture(params=["file", "memory", "postgresql"])
def ledger_store(request: pytest.FixtureRequest, db_path: Path) -> Iterator[Store]:
    """A file store, a private in-memory one (which holds its ledger rows back until the ledger is read), or a
    PostgreSQL one."""
    where = {"file": db_path, "memory": ":memory:"}.get(request.param) or request.getfixturevalue("pg_url")
    with Store.open(where) as s:
        yield s


def test_a_rolled_back_transaction_takes_back_its_own_ledger_rows_and_no_others(ledger_store: Store) -> None:
    store = ledger_store
    at = datetime(2026, 3, 1, tzinfo=UTC)
    store.record_costs([CostEntry(at, "steady", 1.0, 8.0, "a", "onprem")])
    with pytest.raises(RuntimeError), store.transaction():
        store.record_costs([CostEntry(at + timedelta(minutes=1), "steady", 2.0, 8.0, "a", "onprem")])
        assert store.spend_by_tenant(at) == {"a": 3.0}  # a read inside the transaction sees both
        store.record_costs([CostEntry(at + timedelta(minutes=2), "steady", 4.0, 8.0, "a", "onprem")])
        raise RuntimeError("the tick fails")
    assert [c.usd for c in store.costs()] == [1.0]
    with pytest.raises(RuntimeError), store.transaction():
        store.record_costs([CostEntry(at + timedelta(minutes=3), "steady", 8.0, 8.0, "a", "onprem")])
        raise RuntimeError("the tick fails")
    store.record_costs([CostEntry(at + timedelta(minutes=4), "steady", 16.0, 8.0, "a", "onprem")])
    assert [c.usd for c in store.costs()] == [1.0, 16.0]
    assert store.cost_by_line(at)["steady"] == 17.0


def test_an_in_memory_store_writes_held_back_ledger_rows_at_its_bound_and_a_rollback_still_keeps_earlier_ticks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ledger_module, "PENDING_COSTS_MAX", 2)
    at = datetime(2026, 3, 1, tzinfo=UTC)
    with Store.open(":memory:") as store:
        store.record_costs([CostEntry(at, "steady", 1.0, 8.0, "a", "onprem")])
        with pytest.raises(RuntimeError), store.transaction():
            store.record_costs([CostEntry(at + timedelta(minutes=1), "steady", 2.0, 8.0, "a", "onprem")])  # the bound
            store.record_costs([CostEntry(at + timedelta(minutes=2), "steady", 4.0, 8.0, "a", "onprem")])
            raise RuntimeError("the tick fails")
        for k in range(3):
            store.record_costs([CostEntry(at + timedelta(minutes=3 + k), "steady", 8.0, 8.0, "a", "onprem")])
        assert [c.usd for c in store.costs()] == [1.0, 8.0, 8.0, 8.0]


def test_cost_ledger_windows(ledger_store: Store) -> None:
    store = ledger_store
    month = datetime(2026, 3, 1, tzinfo=UTC)
    store.record_costs(
        [
            CostEntry(month - timedelta(hours=1), "elastic_on_demand", 100.0, 4.0, "a", "od"),  # last month
            CostEntry(month, "elastic_on_demand", 32.0, 8.0, "a", "od"),
            CostEntry(month + timedelta(days=1), "elastic_spot", 8.0, 8.0, "a", "spot"),
            CostEntry(month + timedelta(days=2), "elastic_spot", 10.0, 8.0, "b", "spot"),
            CostEntry(month + timedelta(days=2), "hot_pool", 3.0, 0.0, None, "od"),  # overhead
            CostEntry(month + timedelta(days=3), "steady", 5.0, 8.0, None, "onprem"),
        ]
    )
    store.record_cost(month + timedelta(days=3), "steady", 2.0, 8.0, tenant="b", group_id="onprem")
    assert store.spend_by_tenant(month) == {"a": 40.0, "b": 12.0}
    assert store.spend_by_tenant(month, until=month + timedelta(days=2)) == {"a": 40.0}
    assert store.spend_by_tenant(month - timedelta(days=30)) == {"a": 140.0, "b": 12.0}
    assert store.cost_by_line(month) == {
        "steady": 7.0,
        "elastic_on_demand": 32.0,
        "elastic_spot": 18.0,
        "hot_pool": 3.0,
    }
    assert store.cost_by_line(month + timedelta(days=10)) == dict.fromkeys(COST_LINES, 0.0)
    assert store.gpu_hours_by_tenant(month) == {"a": 16.0, "b": 16.0}
    assert [c.usd for c in store.costs(since=month, until=month + timedelta(days=1), tenant="a")] == [32.0]

    with pytest.raises(ValueError, match="cost line"):
        store.record_costs([CostEntry(month, "steady", 1.0), CostEntry(month, "gpu", 1.0)])
    assert len(store.costs()) == 7  # the batch above left nothing behind
    with pytest.raises(ValueError, match="since: naive"):
        store.spend_by_tenant(datetime(2026, 3, 1))  # noqa: DTZ001
    with pytest.raises(ValueError, match="usd"):
        store.record_cost(month, "steady", float("inf"), 1.0)


def test_a_v2_file_without_the_job_loss_table_opens_and_gains_it(db_path: Path) -> None:
    with Store.open(db_path, target_version=2) as v2:
        assert v2.schema_version == 2
        assert not v2._query("SELECT name FROM sqlite_master WHERE name = 'job_losses'")
        v2.record_cost(T0, "elastic_spot", 8.0, 2.0, tenant="a", group_id="spot")
    with Store.open(db_path) as s:
        assert s.schema_version == LATEST_VERSION
        assert s.costs() == [CostEntry(T0, "elastic_spot", 8.0, 2.0, "a", "spot")]  # the ledger is kept
        assert s.job_losses() == [] and s.loss_totals() == {}
        s.record_losses([JobLoss(T0, "j", "a", "interruption", 8.0, lost_gpu_s=7200.0, group_id="spot",
                                 node_ids=("spot-1",))])
    with Store.open(db_path) as again:
        assert again.job_losses() == [JobLoss(T0, "j", "a", "interruption", 8.0, lost_gpu_s=7200.0,
                                              group_id="spot", node_ids=("spot-1",))]
        assert again.loss_totals() == {"a": LossTotals(interruptions=1, lost_gpu_hours=2.0)}


def test_job_loss_ledger_windows_filters_and_refusals(store: Store) -> None:
    store.record_losses([
        JobLoss(T0, "j1", "a", "interruption", 8.0, lost_gpu_s=3600.0),
        JobLoss(T0 + timedelta(hours=1), "j1", "a", "checkpoint", 8.0, checkpoint_gpu_s=480.0),
        JobLoss(T0 + timedelta(hours=1, minutes=1), "j1", "a", "eviction", 8.0, lost_gpu_s=480.0),
        JobLoss(T0 + timedelta(hours=2), "j2", "b", "interruption", 0.5, lost_gpu_s=900.0),
    ])
    assert store.loss_totals() == {
        "a": LossTotals(interruptions=1, evictions=1, checkpoints=1, lost_gpu_hours=4080.0 / 3600,
                        checkpoint_gpu_hours=480.0 / 3600),
        "b": LossTotals(interruptions=1, lost_gpu_hours=0.25),
    }
    assert store.loss_totals(since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=2), tenant="a") == {
        "a": LossTotals(evictions=1, checkpoints=1, lost_gpu_hours=480.0 / 3600, checkpoint_gpu_hours=480.0 / 3600),
    }
    assert [r.cause for r in store.job_losses(job_id="j1")] == ["interruption", "checkpoint", "eviction"]
    assert [r.job_id for r in store.job_losses(tenant="b")] == ["j2"]
    with pytest.raises(ValueError, match="cause"):
        store.record_losses([JobLoss(T0, "j3", "a", "interruption", 1.0), JobLoss(T0, "j3", "a", "drain", 1.0)])
    with pytest.raises(ValueError, match=">= 0"):
        store.record_losses([JobLoss(T0, "j3", "a", "eviction", 1.0, lost_gpu_s=-1.0)])
    with pytest.raises(ValueError, match="naive"):
        store.record_losses([JobLoss(datetime(2026, 3, 2), "j3", "a", "eviction", 1.0)])  # noqa: DTZ001
    assert len(store.job_losses()) == 4  # the refused batches left nothing behind


# ------------------------------------------------------------------ store: concurrency


def test_readers_see_committed_data_only_and_are_not_blocked_by_a_writer(state_location: str | Path) -> None:
    db_path = state_location
    writer = Store.open(db_path)
    reader = Store.open(db_path)
    try:
        writer.put_jobs([job("seed")])
        seen_mid_batch: list[list[str]] = []

        def batch() -> Iterator[Job]:
            for i in range(3):
                yield job(f"b{i}")
                # The writer holds its write transaction open here; the other store reads at once.
                seen_mid_batch.append([j.id for j in reader.jobs()])

        writer.put_jobs(batch())
        assert seen_mid_batch == [["seed"]] * 3
        assert [j.id for j in reader.jobs()] == ["b0", "b1", "b2", "seed"]
    finally:
        writer.close()
        reader.close()


def test_concurrent_writer_and_reader_threads_on_one_file(state_location: str | Path) -> None:
    db_path = state_location
    batches, size = 40, 5
    errors: list[BaseException] = []
    done = threading.Event()
    ready = threading.Barrier(3, timeout=60)  # every store open before the first write: the reads race the writes

    def write() -> None:
        try:
            with Store.open(db_path) as w:
                ready.wait()
                for b in range(batches):
                    w.put_jobs(job(f"j{b:03d}-{i}", submitted=T0 + timedelta(seconds=b)) for i in range(size))
                    w.record_costs(CostEntry(T0, "steady", 1.0, 1.0, "a") for _ in range(size))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    per_reader: list[list[int]] = [[], []]

    def read(counts: list[int]) -> None:
        try:
            with Store.open(db_path) as r:
                ready.wait()
                while True:  # at least one read, however the threads are scheduled
                    finished = done.is_set()
                    n = len(r.jobs([JobState.PENDING]))
                    assert n % size == 0, n  # whole batches only
                    counts.append(n)
                    spend = r.spend_by_tenant(T0).get("a", 0.0)
                    assert spend % size == 0
                    if finished:
                        break
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    with Store.open(db_path):  # create + migrate once before the race
        pass
    threads = [threading.Thread(target=write)] + [
        threading.Thread(target=read, args=(c,)) for c in per_reader
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    for counts in per_reader:
        assert counts and counts == sorted(counts)  # a reader never sees time go backwards
    with Store.open(db_path) as s:
        assert len(s.jobs()) == batches * size
        assert s.spend_by_tenant(T0) == {"a": float(batches * size)}


def test_one_store_shared_by_threads(store: Store) -> None:
    def work(t: int) -> None:
        for i in range(50):
            store.record_intent(f"k{t}-{i}", "p", {"t": t, "i": i}, T0 + timedelta(microseconds=i))
            store.put_job(job(f"t{t}-{i}"))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    ids = [i.id for i in store.intents()]
    assert len(ids) == len(set(ids)) == 200
    assert len(store.jobs()) == 200


def test_two_stores_opening_an_old_file_migrate_it_once(state_location: str | Path) -> None:
    db_path = state_location
    Store.open(db_path, target_version=1).close()
    results: list[int] = []
    errors: list[BaseException] = []

    def opener() -> None:
        try:
            with Store.open(db_path) as s:
                results.append(s.schema_version)
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert results == [LATEST_VERSION] * 4


def test_a_hold_repeated_unchanged_is_one_row_until_it_stops(store: Store) -> None:
    cooling = ("group:g1", "hold", "1 idle node(s) kept: inside the cooldown", {"step": "scale_down"})
    for minute in range(3):
        store.record_decisions(f"p{minute}", T0 + timedelta(minutes=minute), [cooling])
    (row,) = store.decisions("group:g1")
    assert (row.at, row.last_at, row.seen, row.plan_id) == (T0, T0 + timedelta(minutes=2), 3, "p0")
    store.record_decisions("p3", T0 + timedelta(minutes=3), [("group:g1", "hold", "kept: a new reason", {})])
    store.record_decisions("p4", T0 + timedelta(minutes=4), [])  # a plan without it ends it
    store.record_decisions("p5", T0 + timedelta(minutes=5), [cooling])
    rows = store.decisions("group:g1")
    assert [(r.plan_id, r.seen) for r in rows] == [("p5", 1), ("p3", 1), ("p0", 3)]
    place = ("job:j1", "place_job", "fits", {"node_ids": ["n1"]})
    store.record_decisions("p6", T0 + timedelta(minutes=6), [place])
    store.record_decisions("p7", T0 + timedelta(minutes=7), [place])
    assert len(store.decisions("job:j1")) == 2, "actions are never merged: each plan's is its own"


def test_a_v4_file_moves_its_learnt_interruption_rates_into_the_controller_memory(db_path: Path) -> None:
    observations = '{"interruptions":{"spot":1.0},"node_hours":{"spot":2.5}}'
    with Store.open(db_path, target_version=4) as v4, v4._tx() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('spot.interruptions', ?)", (observations,))
    with Store.open(db_path) as s:
        assert s.schema_version == LATEST_VERSION
        assert s.memory() == {"interruptions": observations}
        assert not s._query("SELECT 1 FROM meta WHERE key = 'spot.interruptions'"), "one place for one fact"
        assert s.runtimes() == {}
        s.record_runtimes([("a", seq, float(seq)) for seq in range(1, 6)], keep=3)
        assert s.runtimes() == {"a": [(3, 3.0), (4, 4.0), (5, 5.0)]}, "a tenant keeps its newest run times"


def test_an_old_schema_is_migrated_with_its_data_on_either_backend(state_location: str | Path) -> None:
    with Store.open(state_location, target_version=1) as v1:
        assert v1.schema_version == 1
        v1.add_job(full_job())
        v1.record_demand([DemandPoint(T0, "a", "A100", 1.0, 2.0)])
        with v1._tx() as conn:  # a v1 ledger row, as v1 wrote it (no gpu_hours column yet)
            conn.execute("INSERT INTO cost_ledger (at, tenant, line, group_id, usd) VALUES (?, ?, ?, ?, ?)",
                         ("2026-03-02T12:00:00.000000+00:00", "a", "steady", "onprem", 4.0))
    with Store.open(state_location) as s:
        assert s.schema_version == LATEST_VERSION
        assert s.get_job("train-42") == full_job()
        assert s.demand_history() == [DemandPoint(T0, "a", "A100", 1.0, 2.0)]
        assert s.costs() == [CostEntry(T0, "steady", 4.0, 0.0, "a", "onprem")]
        s.record_losses([JobLoss(T0, "j", "a", "eviction", 8.0, lost_gpu_s=3600.0)])
        assert s.loss_totals() == {"a": LossTotals(evictions=1, lost_gpu_hours=8.0 / 8.0)}


def test_explain_finds_a_name_inside_decision_lists_on_either_backend(store: Store) -> None:
    store.record_decisions("p1", T0, [
        ("group:g1", "terminate", "idle", {"node_ids": ["n-7", "n-8"]}),
        ("tenant:a", "hold", "unplanned", {"job_ids": ["j-1"]}),
        ("group:g2", "terminate", "idle", {"node_ids": ["n-70"]}),  # LIKE alone would match n-7
    ])
    assert [d.subject for d in store.decisions_about("n-7")] == ["group:g1"]
    assert [d.subject for d in store.decisions_about("j-1")] == ["tenant:a"]
    assert store.decisions_about("nobody") == []


def test_floats_keep_double_precision_and_names_sort_bytewise_on_either_backend(store: Store) -> None:
    usd = 0.1 + 0.2  # not representable in 4 bytes
    store.record_cost(T0, "steady", usd, 1.0 / 3.0, tenant="Zed")
    store.record_cost(T0, "steady", 1.0, 1.0, tenant="alpha")
    store.record_cost(T0, "steady", 1.0, 1.0, tenant="_under")
    assert store.costs()[0].usd == usd and store.costs()[0].gpu_hours == 1.0 / 3.0
    assert list(store.spend_by_tenant(T0)) == ["Zed", "_under", "alpha"]  # byte order, as SQLite sorts


def test_a_postgresql_url_that_cannot_be_reached_is_one_clear_error() -> None:
    from burst.store_pg import StoreUnavailable

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreUnavailable, match=rf"postgresql://burst:\*\*\*@127.0.0.1:{port}/x: cannot connect"):
        Store.open(f"postgresql://burst:secret@127.0.0.1:{port}/x")


def test_a_postgresql_store_reconnects_after_the_server_drops_its_connection(pg_url: str) -> None:
    import psycopg

    with Store.open(pg_url) as store:
        store.add_job(job("j1"))
        (pid,) = store._query("SELECT pg_backend_pid()")[0]
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert [j.id for j in store.jobs()] == ["j1"], "a read outside a transaction runs again on a new connection"
        store.add_job(job("j2"))
        assert store._query("SELECT pg_backend_pid()")[0][0] != pid
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (store._query("SELECT pg_backend_pid()")[0][0],))
        store.put_job(job("j3"))  # the write's BEGIN meets the dropped connection first: it reconnects
        assert [j.id for j in store.jobs()] == ["j1", "j2", "j3"]
