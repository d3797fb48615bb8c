"""The jobs table: the embedded queue's truth, each job's `burst.codec` record next to the columns queries filter on.

A stored job moves only along `JOB_TRANSITIONS`; `swap_job` is the
compare-and-set write of callers that read, decide and write back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from burst import codec
from burst.model import JOB_TRANSITIONS, TERMINAL_JOB_STATES, Job, JobState
from burst.store.base import StoreBase
from burst.store.sql import _dt, _placeholders, _ts, _where

__all__ = ["InvalidJobTransition", "JobExists", "JobRecords"]


class InvalidJobTransition(ValueError):
    """A stored job was asked to move along an edge `JOB_TRANSITIONS` does not have."""


class JobExists(ValueError):
    """`add_job` was given an id the store already has."""


class JobRecords(StoreBase):
    """The jobs table: add, update (along `JOB_TRANSITIONS`), read, page through and count jobs."""

    def add_job(self, job: Job, *, at: datetime | None = None) -> None:
        """Insert a new job; raises `JobExists` if its id is taken."""
        stamp = self._stamp(at)
        with self._tx() as conn:
            if conn.execute("SELECT 1 FROM jobs WHERE id = ?", (job.id,)).fetchone() is not None:
                raise JobExists(f"job {job.id} already exists")
            self._write_job(conn, job, stamp)

    def add_jobs(self, jobs: Sequence[Job], *, at: datetime | None = None) -> list[bool]:
        """Insert new jobs in one transaction: for each, True when stored, False when its id was taken (by an
        earlier job or an earlier one of `jobs`); a taken id never stops the others."""
        stamp = self._stamp(at)
        added: list[bool] = []
        with self._tx() as conn:
            ids = list(dict.fromkeys(j.id for j in jobs))
            taken: set[str] = set()
            for chunk in range(0, len(ids), 500):
                part = ids[chunk:chunk + 500]
                taken.update(r[0] for r in conn.execute(
                    f"SELECT id FROM jobs WHERE id IN ({_placeholders(len(part))})", part).fetchall())
            for job in jobs:
                fresh = job.id not in taken
                if fresh:
                    self._write_job(conn, job, stamp)
                    taken.add(job.id)
                added.append(fresh)
        return added

    def put_job(self, job: Job, *, at: datetime | None = None) -> None:
        """Insert or update a job; a state change must be an edge of `JOB_TRANSITIONS`."""
        self.put_jobs((job,), at=at)

    def put_jobs(self, jobs: Iterable[Job], *, at: datetime | None = None) -> None:
        """`put_job` for many jobs in one transaction (all or none; checked in order)."""
        stamp = self._stamp(at)
        with self._tx() as conn:
            for job in jobs:
                self._put_job(conn, job, stamp)

    def _put_job(self, conn: Any, job: Job, stamp: str) -> None:
        row = conn.execute("SELECT state FROM jobs WHERE id = ?", (job.id,)).fetchone()
        if row is not None:
            old = JobState(row[0])
            if job.state is not old and job.state not in JOB_TRANSITIONS[old]:
                raise InvalidJobTransition(f"job {job.id}: {old.value} -> {job.state.value} is not allowed")
        self._write_job(conn, job, stamp)

    @staticmethod
    def _write_job(conn: Any, job: Job, stamp: str) -> None:
        if not isinstance(job, Job):
            raise TypeError(f"expected a Job, got {type(job).__name__}")
        conn.execute(
            "INSERT INTO jobs (id, tenant, state, submitted_at, json, updated_at) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET tenant = excluded.tenant, state = excluded.state, "
            "submitted_at = excluded.submitted_at, json = excluded.json, updated_at = excluded.updated_at",
            (
                job.id,
                job.tenant,
                job.state.value,
                _ts(job.submitted_at, f"job {job.id} submitted_at"),
                codec.dumps(job),
                stamp,
            ),
        )

    def get_job(self, job_id: str) -> Job | None:
        """The stored job `job_id`, or None if there is none."""
        rows = self._query("SELECT json FROM jobs WHERE id = ?", (job_id,))
        return codec.loads(Job, rows[0][0]) if rows else None

    def jobs(
        self,
        states: Iterable[JobState] | None = None,
        tenant: str | None = None,
        *,
        unreadable: list[tuple[str, str, str]] | None = None,
    ) -> list[Job]:
        """Jobs in any of `states` (all when None) for `tenant` (all when None), by submitted_at, id.

        A row whose record does not decode raises, unless `unreadable` is given: then it is left out and
        (job id, tenant, why) appended there.
        """
        where: list[str] = []
        params: list[Any] = []
        if states is not None:
            wanted = sorted({JobState(s).value for s in states})
            if not wanted:
                return []
            where.append(f"state IN ({_placeholders(len(wanted))})")
            params.extend(wanted)
        if tenant is not None:
            where.append("tenant = ?")
            params.append(tenant)
        if unreadable is None:
            rows = self._query(f"SELECT json FROM jobs{_where(where)} ORDER BY submitted_at, id", params)
            return [codec.loads(Job, r[0]) for r in rows]
        out: list[Job] = []
        for job_id, tenant_name, text in self._query(
            f"SELECT id, tenant, json FROM jobs{_where(where)} ORDER BY submitted_at, id", params
        ):
            try:
                out.append(codec.loads(Job, text))
            except (ValueError, TypeError, OverflowError) as exc:
                unreadable.append((job_id, tenant_name, f"its stored record does not decode: {str(exc)[:200]}"))
        return out

    def fail_unreadable_job(self, job_id: str, *, at: datetime) -> None:
        """Mark a job whose record does not decode as failed (its state column; the record is kept as it is)."""
        stamp = self._stamp(at)
        with self._tx() as conn:
            conn.execute("UPDATE jobs SET state = ?, updated_at = ? WHERE id = ?", (JobState.FAILED.value, stamp, job_id))

    def active_job_states(self) -> dict[str, JobState]:
        """Each pending or running job's state, by id (a cheap read: the daemon polls it between ticks)."""
        wanted = (JobState.PENDING.value, JobState.RUNNING.value, JobState.CHECKPOINTING.value)
        rows = self._query(f"SELECT id, state FROM jobs WHERE state IN ({_placeholders(len(wanted))})", wanted)
        return {str(jid): JobState(state) for jid, state in rows}

    def finish_times(self) -> list[datetime]:
        """When each running job with a known duration is due to finish (the daemon wakes then)."""
        running = self.jobs(states=[JobState.RUNNING, JobState.CHECKPOINTING])
        return [at for at in (job.finishes_at for job in running) if at is not None]

    def ended_at(self, id_prefix: str) -> dict[str, datetime]:
        """When each job whose id starts with `id_prefix` and that has ended was last written (the instant it was
        put in its final state, which no later write changes), by job id."""
        final = sorted(s.value for s in TERMINAL_JOB_STATES)
        rows = self._query(f"SELECT id, updated_at FROM jobs WHERE state IN ({_placeholders(len(final))}) "
                           "AND substr(id, 1, ?) = ?", [*final, len(id_prefix), id_prefix])
        return {job_id: _dt(stamp) for job_id, stamp in rows}

    def job_counts(self) -> dict[JobState, int]:
        """How many jobs are in each state (every state present, zero included)."""
        counts = dict.fromkeys(JobState, 0)
        for state, n in self._query("SELECT state, count(*) FROM jobs GROUP BY state"):
            counts[JobState(state)] = int(n)
        return counts

    def job_record(self, job_id: str) -> tuple[Job, str] | None:
        """The job and its version (the stored record's text, which `swap_job` compares), or None if there is none.

        Raises ValueError when the record does not decode.
        """
        rows = self._query("SELECT json FROM jobs WHERE id = ?", (job_id,))
        return (codec.loads(Job, rows[0][0]), str(rows[0][0])) if rows else None

    def swap_job(self, job: Job, *, version: str, at: datetime | None = None) -> bool:
        """Decide whether `job` replaces its stored row: only if the row still holds `version` (its record as
        `job_record` read it) and the state that record was read in (compare-and-set); whether it did.

        A write from a stale read (the row changed since) moves nothing and answers False, so the caller reads
        again. A state change must be an edge of `JOB_TRANSITIONS` (else `InvalidJobTransition`).
        """
        stamp = self._stamp(at)
        with self._tx() as conn:
            row = conn.execute("SELECT state FROM jobs WHERE id = ? AND json = ?", (job.id, version)).fetchone()
            if row is None:
                return False
            old = JobState(row[0])
            if job.state is not old and job.state not in JOB_TRANSITIONS[old]:
                raise InvalidJobTransition(f"job {job.id}: {old.value} -> {job.state.value} is not allowed")
            moved = conn.execute(
                "UPDATE jobs SET tenant = ?, state = ?, submitted_at = ?, json = ?, updated_at = ? "
                "WHERE id = ? AND state = ? AND json = ?",
                (job.tenant, job.state.value, _ts(job.submitted_at, f"job {job.id} submitted_at"), codec.dumps(job),
                 stamp, job.id, old.value, version),
            ).rowcount
            return bool(moved == 1)

    def tenant_backlog(self, tenant: str) -> tuple[int, int]:
        """How many of `tenant`'s jobs are not yet terminal, and how many bytes their stored records hold (the
        records are ASCII JSON, so their length is their size)."""
        wanted = sorted(s.value for s in JobState if s not in TERMINAL_JOB_STATES)
        rows = self._query(
            f"SELECT count(*), coalesce(sum(length(json)), 0) FROM jobs WHERE tenant = ? "
            f"AND state IN ({_placeholders(len(wanted))})", (tenant, *wanted),
        )
        return int(rows[0][0]), int(rows[0][1])

    def job_page(
        self,
        *,
        states: Iterable[JobState] | None = None,
        tenant: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int,
        max_bytes: int,
    ) -> tuple[list[tuple[str, str, str]], bool]:
        """Decide one page of a job listing: the rows (submitted_at, id, record) after the key `after` in
        (submitted_at, id) order, filtered as `jobs` filters; at most `limit` rows, fewer once their records pass
        `max_bytes` (one at least); and whether more rows follow. The rows stay undecoded: a record that does not
        decode is the caller's to skip, and its key still moves the page on."""
        where: list[str] = []
        params: list[Any] = []
        if states is not None:
            wanted = sorted({JobState(s).value for s in states})
            if not wanted:
                return [], False
            where.append(f"state IN ({_placeholders(len(wanted))})")
            params.extend(wanted)
        if tenant is not None:
            where.append("tenant = ?")
            params.append(tenant)
        if after is not None:
            where.append("(submitted_at > ? OR (submitted_at = ? AND id > ?))")
            params.extend((after[0], after[0], after[1]))
        sql = f"SELECT submitted_at, id, json FROM jobs{_where(where)} ORDER BY submitted_at, id LIMIT ?"
        rows: list[tuple[str, str, str]] = []
        size = 0
        with self._lock:
            cursor = self._c().execute(sql, (*params, limit + 1))
            try:
                while batch := cursor.fetchmany(64):  # a page of large records is never all in memory at once
                    for submitted_at, job_id, text in batch:
                        if len(rows) >= limit or (rows and size + len(text) > max_bytes):
                            return rows, True
                        rows.append((str(submitted_at), str(job_id), str(text)))
                        size += len(text)
            finally:
                cursor.close()
        return rows, False
