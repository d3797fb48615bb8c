"""The checkpoint channel: the messages between the controller and whatever runs a job.

burst never checkpoints a job itself; it asks, and the job (or its sidecar)
answers. The same four messages travel over every channel: the on-prem node
agent's HTTP link (this package), and Kubernetes pod annotations.

Controller -> runner (`Work`, fetched by the agent on each poll):

* `Assignment`: start this job on these GPU UUIDs (with the sharing mode and
  share of a fractional job).
* `CheckpointRequest`: checkpoint now; `deadline` is when the job will be
  stopped whether or not it has answered (a spot notice's deadline, or the
  eviction's grace).
* `Eviction`: stop the job now (its process group is killed).

Runner -> controller (`Report`, posted by the agent):

* `JobStatus`: started, running, exited (with the exit code) or killed.
* `CheckpointAck`: the job wrote a checkpoint for `request_id`, at `at`.

The job's side of the contract (what a training script implements):

* it finds its GPUs in `CUDA_VISIBLE_DEVICES` (UUIDs) and its id in `BURST_JOB_ID`;
* on the checkpoint signal (`BURST_CHECKPOINT_SIGNAL`, default SIGUSR1) it
  saves a checkpoint, then writes the request id it read from
  `BURST_CHECKPOINT_REQUEST_FILE` into `BURST_CHECKPOINT_ACK_FILE` (write a
  temporary file and rename it, so the ack is never half-written);
* at the deadline it gets SIGTERM, and SIGKILL `KILL_GRACE_S` later.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from burst.model import GpuSharing

DEFAULT_CHECKPOINT_SIGNAL = "SIGUSR1"
KILL_GRACE_S = 10.0
"""Seconds between SIGTERM and SIGKILL of a job's process group."""

ENV_JOB_ID = "BURST_JOB_ID"
ENV_CHECKPOINT_SIGNAL = "BURST_CHECKPOINT_SIGNAL"
ENV_CHECKPOINT_REQUEST_FILE = "BURST_CHECKPOINT_REQUEST_FILE"
ENV_CHECKPOINT_ACK_FILE = "BURST_CHECKPOINT_ACK_FILE"


class Message(BaseModel):
    """Base of every channel message: strict, immutable, unknown keys refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Assignment(Message):
    job_id: str
    command: list[str] = Field(min_length=1, description="argv of the job's process")
    gpu_uuids: list[str] = Field(default_factory=list)
    sharing: GpuSharing = GpuSharing.NONE
    share: float | None = Field(default=None, gt=0, le=1)
    env: dict[str, str] = Field(default_factory=dict)
    checkpoint_signal: str = DEFAULT_CHECKPOINT_SIGNAL


class CheckpointRequest(Message):
    job_id: str
    request_id: str
    deadline: datetime


class Eviction(Message):
    job_id: str
    reason: str


class Work(Message):
    """What the controller has for one agent on this poll (drained: each item is delivered once)."""

    assignments: list[Assignment] = Field(default_factory=list)
    checkpoints: list[CheckpointRequest] = Field(default_factory=list)
    evictions: list[Eviction] = Field(default_factory=list)


class JobPhase(StrEnum):
    STARTED = "started"
    RUNNING = "running"
    EXITED = "exited"  # the process group ended by itself; see exit_code
    KILLED = "killed"  # burst ended it (eviction, or the checkpoint deadline passed)
    FAILED_TO_START = "failed_to_start"


class JobStatus(Message):
    job_id: str
    phase: JobPhase
    at: datetime
    exit_code: int | None = None
    detail: str = ""


class CheckpointAck(Message):
    job_id: str
    request_id: str
    at: datetime


class GpuSummary(Message):
    """One GPU as the agent reports it (from discovery, or the static inventory)."""

    uuid: str
    index: int
    model: str
    memory_mib: int
    health: str = "healthy"
    health_reason: str = ""


class Report(Message):
    """One agent's heartbeat: its GPUs and health, and what happened to its jobs since the last one."""

    node_id: str
    at: datetime
    discovery: str = Field(default="", description="the one-line discovery status (NVML, or static inventory)")
    gpus: list[GpuSummary] = Field(default_factory=list)
    jobs: list[JobStatus] = Field(default_factory=list)
    acks: list[CheckpointAck] = Field(default_factory=list)
