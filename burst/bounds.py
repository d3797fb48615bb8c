"""The bounds of every value a user can set: one table, read by every edge that takes input.

The API models (`burst.api.app`), the policy and config loaders (`policies/`),
`burst submit`, the synthetic generator's settings and the trace loaders
(`burst.sim.traces`) all refuse values outside these bounds, each in its own
words (422 naming the field, `FILE:LINE: field: message`, a skipped row with
its line). The reconcile loop checks every job it reads against the same
bounds (`job_problem`), so a job that reached the store some other way (an
older burst, a hand edit) is failed with its reason instead of failing the
tick for every tenant.

The bounds are generous for real fleets (the largest real trace here has a
53-day job and a 128-GPU job) and small enough that no arithmetic the planner
does on them overflows, and no string or list makes the store or the decision
log grow without end. README.md's "Limits" table lists them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from burst.model import Job

MAX_DURATION_S = 366 * 86400.0
"""Longest duration anywhere (job run times, checkpoint intervals, policy and config durations): a year."""
MAX_JOB_GPUS = 1024
"""Most whole GPUs one job may ask for."""
MAX_GPUS_PER_NODE = 128
"""Most GPUs a node group's node may carry (rack-scale nodes included)."""
MAX_GROUP_NODES = 10_000
"""Most nodes in one node group (max_size, min_size, initial_size, warm pools)."""
MAX_PRIORITY = 1_000_000_000
"""Priorities (a tenant's, a job's within its tenant) lie in [-MAX_PRIORITY, MAX_PRIORITY] (Kubernetes' user range)."""
MAX_QUOTA_GPUS = 1_000_000
"""Largest GPU quota or GPU count in a policy (steady/burst quotas, hot-pool minimum)."""
MAX_USD = 1e9
"""Largest money amount (budget caps, prices, costs), USD."""
MAX_WEIGHT = 1e6
"""Largest fair-share weight (weights are > 0)."""
MAX_RATE_PER_HOUR = 10_000.0
"""Most synthetic arrivals per hour (the base rate, and the base rate times the burst factor)."""
MAX_REPLICAS = 10_000
"""Most replicas of one service (min_replicas, max_replicas)."""
MAX_REPLICA_GPUS = MAX_JOB_GPUS
"""Most GPUs one service replica may take (a replica is no larger than a job may be)."""
MAX_REQUESTS_PER_S = 1e6
"""Most requests per second one service replica may be declared to serve."""
MAX_GPU_S_PER_TOKEN = 60.0
"""Largest GPU-seconds per context or generated token of a service's token cost (real models: ~1e-5 .. 1e-1)."""
MAX_EVENT_MULTIPLIER = 1000.0
"""Largest demand multiplier a service's declared event may give (multipliers are > 0)."""
MAX_TENANT_SERVICE_EVENTS = 100
"""Most service events a tenant may keep in use through the API (those ended within SERVICE_EVENT_MEMORY_S)."""
SERVICE_EVENT_MEMORY_S = 14 * 86400.0
"""How long after its end an event declared through the API is still read: the request-rate forecaster's training
window (`burst.service_forecasts.TRAINING_DAYS`), inside which a past event still shapes the history it is fitted on.
An event that ended before it is no longer read, and the API refuses to store one."""
MAX_QUERY_LENGTH = 4096
"""Longest PromQL expression of a service's rate_query (characters)."""
MAX_LOOP_INTERVAL_S = 3600.0
"""Longest loop_interval: the daemon ticks at least hourly."""
MIN_CLOCK_SPEED = 0.01
MAX_CLOCK_SPEED = 1e6
"""A sim clock's speed (simulated seconds per wall second) lies in [MIN_CLOCK_SPEED, MAX_CLOCK_SPEED]."""
MAX_NAME_LENGTH = 63
"""Longest tenant, node-group or API job id."""
MAX_JOB_ID_LENGTH = 320
"""Longest job id from any source (a Kubernetes pod's namespace/name is at most 63 + 1 + 253)."""
MAX_TEXT_LENGTH = 256
"""Longest short free-text value (a GPU model, a region, an instance type)."""
MAX_ARG_LENGTH = 4096
"""Longest single argument of a job's command."""
MAX_LIST_LENGTH = 256
"""Most items in a list a user writes (a job's command, a policy's allowed lists)."""
MAX_BODY_BYTES = 64 * 1024
"""Largest API request body."""
MAX_TENANT_PENDING_JOBS = 1_000_000
"""Most pending (not yet terminal) jobs a tenant policy's `limits.max_pending_jobs` may allow."""
MAX_SUBMITS_PER_S = 10_000.0
"""Fastest sustained submit rate a tenant policy's `limits.submits_per_second` may allow."""
MAX_SUBMIT_BURST = 100_000
"""Largest burst of submits a tenant policy's `limits.submit_burst` may allow."""
MAX_PENDING_JOB_BYTES = 1024**3
"""Most stored job text (bytes of job records) of a tenant's pending jobs its `limits.max_pending_job_bytes` may allow."""
DEFAULT_PAGE_JOBS = 100
MAX_PAGE_JOBS = 1000
"""A listing (`GET /v1/jobs`) answers DEFAULT_PAGE_JOBS jobs a page unless asked, at most MAX_PAGE_JOBS."""
MAX_PAGE_BYTES = 4 * 1024 * 1024
"""A listing page stops early (its cursor goes on) once its jobs' stored records pass this many bytes."""
MAX_SHOWN_VALUE = 40
"""Longest value quoted in an error message (longer ones are cut, with '...')."""

EARLIEST_YEAR = 1970
LATEST_YEAR = 9000
"""Times outside these years are refused (1970: numeric trace times count from the Unix epoch): far from datetime's limits, so adding any duration stays in range."""


@dataclass(frozen=True)
class Limit:
    """One row of the limits table: what is bounded, its bounds, and in which unit (README's table)."""

    what: str
    bounds: str


LIMITS: tuple[Limit, ...] = (
    Limit("durations (job duration, checkpoint interval, policy and config durations)", "0 .. 366 days"),
    Limit("GPUs of one job", f"0 (with gpu_share) .. {MAX_JOB_GPUS}"),
    Limit("gpu_share", "(0, 1], finite"),
    Limit("GPUs per node (gpus_per_node)", f"1 .. {MAX_GPUS_PER_NODE}"),
    Limit("nodes per group (min_size, max_size, initial_size, warm pools)", f"0 .. {MAX_GROUP_NODES}"),
    Limit("priority (tenant policy; job, within its tenant)", f"-{MAX_PRIORITY} .. {MAX_PRIORITY}"),
    Limit("GPU quotas and hot_pool.min_gpus", f"0 .. {MAX_QUOTA_GPUS}"),
    Limit("money (budgets, prices)", f"> 0 .. {MAX_USD:g} USD"),
    Limit("fair_share_weight", f"> 0 .. {MAX_WEIGHT:g}"),
    Limit("service replicas (min_replicas, max_replicas)", f"0 .. {MAX_REPLICAS}"),
    Limit("GPUs per service replica (gpus_per_replica)", f"1 .. {MAX_REPLICA_GPUS}"),
    Limit("requests_per_s of a service replica", f"> 0 .. {MAX_REQUESTS_PER_S:g}"),
    Limit("gpu_s_per_request a and b (GPU-seconds per token)", f"0 .. {MAX_GPU_S_PER_TOKEN:g}, not both 0"),
    Limit("target_utilisation of a service", "> 0 .. 1"),
    Limit("unserved_request_cost of a service", f"0 .. {MAX_USD:g} USD per request"),
    Limit("multiplier of a service event", f"> 0 .. {MAX_EVENT_MULTIPLIER:g}"),
    Limit("service events a tenant keeps through the API (POST /v1/services/NAME/events; those ended within 14 days)",
          f"0 .. {MAX_TENANT_SERVICE_EVENTS} per tenant"),
    Limit("rate_query of a service (PromQL)", f"1 .. {MAX_QUERY_LENGTH} characters"),
    Limit("loop_interval", "> 0 .. 1 hour"),
    Limit("clock_speed (sim clock)", f"{MIN_CLOCK_SPEED:g} .. {MAX_CLOCK_SPEED:g}"),
    Limit("synthetic arrival rate (base_jobs_per_hour x burst_factor)", f"0 .. {MAX_RATE_PER_HOUR:g} per hour"),
    Limit("tenant, node group and API job ids", f"{MAX_NAME_LENGTH} characters"),
    Limit("job ids from any source", f"{MAX_JOB_ID_LENGTH} characters"),
    Limit("short text (gpu_model, region, instance type)", f"{MAX_TEXT_LENGTH} characters"),
    Limit("a job's command", f"{MAX_LIST_LENGTH} arguments of at most {MAX_ARG_LENGTH} characters"),
    Limit("lists in policies and burst.yaml", f"{MAX_LIST_LENGTH} items"),
    Limit("API request body", f"{MAX_BODY_BYTES // 1024} KiB"),
    Limit("text in a job (command, gpu_model, ids)", "no control characters (U+0000 .. U+001F, U+007F)"),
    Limit("a tenant's pending jobs (policy limits.max_pending_jobs; default 10000)",
          f"0 .. {MAX_TENANT_PENDING_JOBS}"),
    Limit("a tenant's submits (policy limits.submits_per_second, default 20; limits.submit_burst, default 100)",
          f"> 0 .. {MAX_SUBMITS_PER_S:g} per second; bursts 1 .. {MAX_SUBMIT_BURST}"),
    Limit("a tenant's pending job text (policy limits.max_pending_job_bytes; default 16 MiB)",
          f"0 .. {MAX_PENDING_JOB_BYTES // 1024**3} GiB"),
    Limit("jobs per listing page (GET /v1/jobs limit)",
          f"1 .. {MAX_PAGE_JOBS} (default {DEFAULT_PAGE_JOBS}; a page stops early past {MAX_PAGE_BYTES // 1024**2} MiB)"),
    Limit("times (submission, sim_start, trace times)", f"years {EARLIEST_YEAR} .. {LATEST_YEAR}"),
)


def shown(value: object) -> str:
    """Decide how a value is quoted in an error message: its repr, cut to `MAX_SHOWN_VALUE` characters."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN_VALUE else text[: MAX_SHOWN_VALUE - 3] + "..."


def duration_problem(seconds: float) -> str | None:
    """Decide why `seconds` is not a usable duration (None when it is: finite, 0 .. MAX_DURATION_S)."""
    if not math.isfinite(seconds):
        return f"must be finite, got {shown(seconds)}"
    if seconds < 0:
        return f"must not be negative, got {seconds:g}"
    if seconds > MAX_DURATION_S:
        return f"{seconds:g} s is longer than the limit of 366 days"
    return None


def time_problem(at: datetime) -> str | None:
    """Decide why `at` is not a usable instant (None when it is: aware, within years 1971 .. 9000)."""
    if at.tzinfo is None:
        return "needs a timezone"
    if not EARLIEST_YEAR <= at.year <= LATEST_YEAR:
        return f"year {at.year} is outside {EARLIEST_YEAR} .. {LATEST_YEAR}"
    return None


def text_problem(value: str, limit: int = MAX_TEXT_LENGTH) -> str | None:
    """Decide why `value` is not a usable short text (None when it is at most `limit` characters)."""
    if len(value) > limit:
        return f"{len(value)} characters is longer than the limit of {limit}"
    return None


_CONTROL = re.compile("[\x00-\x1f\x7f]")


def control_problem(value: str) -> str | None:
    """Decide why `value` cannot travel as a job's text (None when it has no control character).

    A control character (U+0000 .. U+001F, U+007F) has no place in an argv, a
    GPU model or an id: a NUL cannot reach `execve` at all, and a line break
    forges lines in logs.
    """
    found = _CONTROL.search(value)
    if found is None:
        return None
    return f"control character U+{ord(found.group()):04X} at position {found.start()} is not allowed"


def command_problem(command: tuple[str, ...] | list[str]) -> str | None:
    """Decide why an argv is not usable (None when it has at most MAX_LIST_LENGTH arguments of bounded length,
    none with a control character)."""
    if len(command) > MAX_LIST_LENGTH:
        return f"{len(command)} arguments is more than the limit of {MAX_LIST_LENGTH}"
    for i, arg in enumerate(command):
        if len(arg) > MAX_ARG_LENGTH:
            return f"argument {i} has {len(arg)} characters, more than the limit of {MAX_ARG_LENGTH}"
        control = control_problem(arg)
        if control is not None:
            return f"argument {i}: {control}"
    return None


def priority_problem(priority: int) -> str | None:
    """Decide why `priority` is not usable (None when it lies in [-MAX_PRIORITY, MAX_PRIORITY])."""
    if not -MAX_PRIORITY <= priority <= MAX_PRIORITY:
        return f"must be within -{MAX_PRIORITY} .. {MAX_PRIORITY}, got {shown(priority)}"
    return None


def job_problem(job: Job) -> str | None:
    """Decide why the planner cannot reason about `job` (None when every field is within bounds).

    The reconcile loop fails a job with this reason rather than plan with it:
    the first field out of bounds is named. (The common case, a job within
    bounds, is one chain of comparisons: trace loaders check every row.)
    """
    share, duration, interval, took = job.gpu_share, job.duration_s, job.checkpoint_interval_s, job.checkpoint_duration_s
    if (
        len(job.id) <= MAX_JOB_ID_LENGTH and len(job.tenant) <= MAX_NAME_LENGTH and 0 <= job.gpus <= MAX_JOB_GPUS
        and (share is None or 0 < share <= 1)  # NaN fails every comparison, so it takes the long way
        and (job.gpu_model is None or len(job.gpu_model) <= MAX_TEXT_LENGTH)
        and (job.priority is None or -MAX_PRIORITY <= job.priority <= MAX_PRIORITY)
        and (duration is None or 0 <= duration <= MAX_DURATION_S)
        and (interval is None or 0 <= interval <= MAX_DURATION_S)
        and (took is None or 0 <= took <= MAX_DURATION_S)
        and (job.declared_duration_s is None or 0 <= job.declared_duration_s <= MAX_DURATION_S)
        and 0 <= job.work_done_s <= 2 * MAX_DURATION_S
        and job.submitted_at.tzinfo is not None and EARLIEST_YEAR <= job.submitted_at.year <= LATEST_YEAR
        and job.started_at is None and job.last_checkpoint_at is None and job.deadline is None
        and not job.command and not job.node_ids
    ):
        return None  # a pending job as sources submit it, within bounds
    return _first_problem(job)


def _first_problem(job: Job) -> str | None:
    checks: list[tuple[str, str | None]] = [
        ("id", text_problem(job.id, MAX_JOB_ID_LENGTH)),
        ("tenant", text_problem(job.tenant, MAX_NAME_LENGTH)),
        ("gpus", None if 0 <= job.gpus <= MAX_JOB_GPUS else f"must be within 0 .. {MAX_JOB_GPUS}, got {job.gpus}"),
    ]
    if job.gpu_share is not None:
        share_ok = math.isfinite(job.gpu_share) and 0 < job.gpu_share <= 1
        checks.append(("gpu_share", None if share_ok else f"must be in (0, 1], got {shown(job.gpu_share)}"))
    if job.gpu_model is not None:
        checks.append(("gpu_model", text_problem(job.gpu_model)))
    if job.priority is not None:
        checks.append(("priority", priority_problem(job.priority)))
    for name in ("duration_s", "declared_duration_s", "checkpoint_interval_s", "checkpoint_duration_s"):
        value = getattr(job, name)
        if value is not None:
            checks.append((name, duration_problem(value)))
    work = job.work_done_s
    checks.append(("work_done_s", None if math.isfinite(work) and 0 <= work <= 2 * MAX_DURATION_S
                   else f"must be within 0 .. 732 days, got {shown(work)}"))
    for name in ("submitted_at", "started_at", "last_checkpoint_at", "deadline"):
        at = getattr(job, name)
        if at is not None:
            checks.append((name, time_problem(at)))
    checks.append(("command", command_problem(job.command)))
    if len(job.node_ids) > MAX_JOB_GPUS:
        checks.append(("node_ids", f"{len(job.node_ids)} nodes is more than the limit of {MAX_JOB_GPUS}"))
    for name, problem in checks:
        if problem is not None:
            return f"{name}: {problem}"
    return None
