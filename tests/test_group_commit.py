"""Concurrent submits share store transactions, and each is answered only after its own commit (a real SQLite
store, real threads)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from builders import T0, job

from burst.api.group_commit import GroupCommit
from burst.model import Job
from burst.state import Store


def test_concurrent_submits_share_transactions_and_each_is_stored_when_answered(tmp_path: Path) -> None:
    path = tmp_path / "burst.db"
    store = Store.open(path)
    reader = Store.open(path, read_only=True)
    commits = GroupCommit(lambda jobs: store.add_jobs(jobs, at=T0))
    seen_at_answer: list[bool] = []
    lock = threading.Lock()

    def submit(i: int) -> bool:
        stored = commits.add(job(f"j{i}"))
        visible = reader.get_job(f"j{i}") is not None  # another connection: only a commit makes it visible
        with lock:
            seen_at_answer.append(visible)
        return stored

    with ThreadPoolExecutor(max_workers=64) as pool:
        answers = list(pool.map(submit, range(600)))
    assert all(answers) and all(seen_at_answer) and len(seen_at_answer) == 600
    assert len(store.jobs()) == 600
    assert commits.batches < 600, "some submits shared a transaction"
    store.close()
    reader.close()


def test_a_taken_id_fails_alone_and_the_same_id_twice_in_one_batch_is_stored_once(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "burst.db")
    store.add_job(job("old"), at=T0)
    assert store.add_jobs([job("a"), job("old"), job("b"), job("a")], at=T0) == [True, False, True, False]
    assert sorted(j.id for j in store.jobs()) == ["a", "b", "old"]
    commits = GroupCommit(lambda jobs: store.add_jobs(jobs, at=T0))
    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(lambda _: commits.add(job("same")), range(32)))
    assert answers.count(True) == 1
    store.close()


def test_a_failed_transaction_fails_every_submit_of_its_batch_and_stores_none(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "burst.db")
    release = threading.Event()
    calls: list[int] = []

    def write(jobs: Sequence[Job]) -> list[bool]:
        calls.append(len(jobs))
        if len(calls) == 1:
            release.wait(5)  # the first batch holds the write while the others queue behind it
            return store.add_jobs(jobs, at=T0)
        with store.transaction():
            store.add_jobs(jobs, at=T0)
            raise OSError("disk full")

    commits = GroupCommit(write)
    with ThreadPoolExecutor(max_workers=9) as pool:
        first = pool.submit(commits.add, job("first"))
        while not calls:
            threading.Event().wait(0.01)
        later = [pool.submit(commits.add, job(f"later{i}")) for i in range(8)]
        while len(commits._queue) < 8:
            threading.Event().wait(0.01)
        release.set()
        assert first.result() is True
        for f in later:
            with pytest.raises(OSError, match="disk full"):
                f.result()
    assert calls == [1, 8], "the eight queued submits were one transaction"
    assert [j.id for j in store.jobs()] == ["first"]
    store.close()
