"""Running jobs on one node: process groups on bound GPUs, the checkpoint signal, deadlines, eviction.

Each job runs as its own process group (a new session), so a signal or a
kill reaches every process the job started. `poll()` is called on every agent
tick: it reaps jobs that exited, reads checkpoint acks, and enforces
checkpoint deadlines (SIGTERM at the deadline, SIGKILL `kill_grace_s` later).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from burst.agent.channel import (
    ENV_CHECKPOINT_ACK_FILE,
    ENV_CHECKPOINT_REQUEST_FILE,
    ENV_CHECKPOINT_SIGNAL,
    ENV_JOB_ID,
    KILL_GRACE_S,
    Assignment,
    CheckpointAck,
    CheckpointRequest,
    Eviction,
    JobPhase,
    JobStatus,
)
from burst.model import GpuSharing

MPS_CONTROL = "nvidia-cuda-mps-control"


def job_environment(assignment: Assignment, job_dir: Path, *, mps_dir: Path) -> dict[str, str]:
    """The variables a job gets beyond the agent's own: its GPUs, its id, the checkpoint files, the sharing mode's."""
    env = dict(assignment.env)
    env.update(
        {
            "CUDA_VISIBLE_DEVICES": ",".join(assignment.gpu_uuids),
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            ENV_JOB_ID: assignment.job_id,
            ENV_CHECKPOINT_SIGNAL: assignment.checkpoint_signal,
            ENV_CHECKPOINT_REQUEST_FILE: str(job_dir / "checkpoint-request"),
            ENV_CHECKPOINT_ACK_FILE: str(job_dir / "checkpoint-ack"),
        }
    )
    if assignment.share is not None:
        env["BURST_GPU_SHARE"] = f"{assignment.share:g}"
    if assignment.sharing is GpuSharing.MPS:
        # Clients find the MPS control daemon through its pipe directory; the thread
        # percentage caps the job's share of the GPU's SMs.
        env["CUDA_MPS_PIPE_DIRECTORY"] = str(mps_dir / "pipe")
        env["CUDA_MPS_LOG_DIRECTORY"] = str(mps_dir / "log")
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(max(1, round((assignment.share or 1.0) * 100)))
    return env


@dataclass
class _Running:
    assignment: Assignment
    process: subprocess.Popen[bytes]
    job_dir: Path
    pending: dict[str, datetime] = field(default_factory=dict)  # checkpoint request id -> deadline
    acked: set[str] = field(default_factory=set)
    terminated_at: datetime | None = None
    killed: bool = False


class JobRunner:
    """The jobs of one node, each a process group (see the module docstring)."""

    def __init__(
        self,
        workdir: Path,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        kill_grace_s: float = KILL_GRACE_S,
        base_env: Mapping[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.clock = clock
        self.kill_grace_s = kill_grace_s
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.jobs: dict[str, _Running] = {}
        self._mps_started = False

    @property
    def mps_dir(self) -> Path:
        return self.workdir / "mps"

    def start(self, assignment: Assignment) -> JobStatus:
        """Start the job's process group; a second start of a running job is a no-op reporting RUNNING.

        A job that cannot start (a command that is not there, a NUL in its
        argv or environment, an id that is no directory name) is reported
        FAILED_TO_START and fails alone: this never raises for what one job
        carries, so the rest of its batch still starts.
        """
        now = self.clock()
        if assignment.job_id in self.jobs:
            return JobStatus(job_id=assignment.job_id, phase=JobPhase.RUNNING, at=now, detail="already running")
        try:
            return self._launch(assignment, now)
        except (OSError, ValueError, TypeError) as exc:  # ValueError: a NUL reaching execve, a bad path
            return JobStatus(job_id=assignment.job_id, phase=JobPhase.FAILED_TO_START, at=now,
                             detail=f"{type(exc).__name__}: {str(exc)[:300]}")

    def _launch(self, assignment: Assignment, now: datetime) -> JobStatus:
        jobs = self.workdir / "jobs"
        job_dir = jobs / assignment.job_id
        if jobs.resolve() not in job_dir.resolve().parents:  # "", "..", "/etc": the job's directory is under jobs/
            raise ValueError(f"job id {assignment.job_id[:80]!r} is not a usable directory name")
        job_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("checkpoint-request", "checkpoint-ack"):
            (job_dir / stale).unlink(missing_ok=True)
        detail = self._prepare_sharing(assignment)
        env = {**self.base_env, **job_environment(assignment, job_dir, mps_dir=self.mps_dir)}
        with open(job_dir / "output.log", "ab") as log:
            process = subprocess.Popen(
                assignment.command, env=env, cwd=job_dir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.jobs[assignment.job_id] = _Running(assignment, process, job_dir)
        return JobStatus(job_id=assignment.job_id, phase=JobPhase.STARTED, at=now, detail=detail)

    def _prepare_sharing(self, assignment: Assignment) -> str:
        if assignment.sharing is not GpuSharing.MPS or self._mps_started:
            return ""
        control = shutil.which(MPS_CONTROL)
        if control is None:
            return f"{MPS_CONTROL} not found: the GPU is time-sliced instead of shared through MPS"
        for sub in ("pipe", "log"):
            (self.mps_dir / sub).mkdir(parents=True, exist_ok=True)
        env = {**self.base_env, "CUDA_MPS_PIPE_DIRECTORY": str(self.mps_dir / "pipe"),
               "CUDA_MPS_LOG_DIRECTORY": str(self.mps_dir / "log")}
        subprocess.run([control, "-d"], env=env, check=False)
        self._mps_started = True
        return "MPS control daemon started"

    def request_checkpoint(self, request: CheckpointRequest) -> str:
        """Write the request id where the job reads it, then signal its process group. Returns what happened."""
        running = self.jobs.get(request.job_id)
        if running is None:
            return f"job {request.job_id} is not running here"
        path = running.job_dir / "checkpoint-request"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(request.request_id)
        tmp.replace(path)
        running.pending[request.request_id] = request.deadline
        sig = _signal(running.assignment.checkpoint_signal)
        self._signal_group(running, sig)
        return f"sent {sig.name} to job {request.job_id}"

    def evict(self, eviction: Eviction) -> JobStatus | None:
        """Kill the job's whole process group now; None if it is not running here."""
        running = self.jobs.get(eviction.job_id)
        if running is None:
            return None
        self._signal_group(running, signal.SIGKILL)
        running.killed = True
        running.process.wait()
        del self.jobs[eviction.job_id]
        return JobStatus(
            job_id=eviction.job_id,
            phase=JobPhase.KILLED,
            at=self.clock(),
            exit_code=running.process.returncode,
            detail=f"evicted: {eviction.reason}",
        )

    def poll(self) -> tuple[list[JobStatus], list[CheckpointAck]]:
        """Reap exited jobs, collect new checkpoint acks and enforce checkpoint deadlines."""
        now = self.clock()
        statuses: list[JobStatus] = []
        acks: list[CheckpointAck] = []
        for job_id, running in list(self.jobs.items()):
            acks.extend(self._read_ack(running, now))
            code = running.process.poll()
            if code is not None:
                self._signal_group(running, signal.SIGKILL)  # what the job left behind goes with it
                del self.jobs[job_id]
                phase = JobPhase.KILLED if running.terminated_at is not None else JobPhase.EXITED
                statuses.append(JobStatus(job_id=job_id, phase=phase, at=now, exit_code=code))
                continue
            overdue = [rid for rid, deadline in running.pending.items() if rid not in running.acked and deadline <= now]
            if overdue and running.terminated_at is None:
                self._signal_group(running, signal.SIGTERM)
                running.terminated_at = now
                statuses.append(
                    JobStatus(job_id=job_id, phase=JobPhase.RUNNING, at=now,
                              detail=f"checkpoint {overdue[0]} not acknowledged by its deadline: SIGTERM")
                )
            elif running.terminated_at is not None and now >= running.terminated_at + timedelta(seconds=self.kill_grace_s):
                self._signal_group(running, signal.SIGKILL)
                running.process.wait()
                del self.jobs[job_id]
                statuses.append(
                    JobStatus(job_id=job_id, phase=JobPhase.KILLED, at=now, exit_code=running.process.returncode,
                              detail=f"still running {self.kill_grace_s:g} s after SIGTERM: SIGKILL")
                )
        return statuses, acks

    def _read_ack(self, running: _Running, now: datetime) -> list[CheckpointAck]:
        path = running.job_dir / "checkpoint-ack"
        try:
            request_id = path.read_text().strip()
        except FileNotFoundError:
            return []
        if request_id not in running.pending or request_id in running.acked:
            return []
        running.acked.add(request_id)
        return [CheckpointAck(job_id=running.assignment.job_id, request_id=request_id, at=now)]

    def pids(self, job_id: str) -> int | None:
        """The process-group id of a running job (its leader's pid)."""
        running = self.jobs.get(job_id)
        return running.process.pid if running else None

    def stop_all(self) -> None:
        """Kill every job's process group (the agent is shutting down)."""
        for job_id in list(self.jobs):
            self.evict(Eviction(job_id=job_id, reason="agent stopping"))

    @staticmethod
    def _signal_group(running: _Running, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(running.process.pid, sig)


def _signal(name: str) -> signal.Signals:
    try:
        return signal.Signals[name if name.startswith("SIG") else f"SIG{name}"]
    except KeyError:
        raise ValueError(f"unknown signal {name!r}; use a name such as SIGUSR1") from None
