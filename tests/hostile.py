"""Hostile inputs and the verdict on each: shared by the fuzz tests and `bench/fuzz_inputs.py`.

Each `*_verdict` function feeds one input to a real edge of burst (the API over
a real app and store, the policy loader, the config loader with the daemon's
own checks, a trace loader) and says how it was answered: "accepted" (the
value is within bounds, and what it produced is too) or "refused" (cleanly:
a 4xx naming the field, or `FILE:LINE: field: message` lines, or skipped rows
with their line). Anything else (a 5xx, a traceback, an error without its
field or line, a value out of bounds let through) raises `Unclean`.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from burst.bounds import job_problem
from burst.catalog import UnknownInstanceType
from burst.sim.traces import TraceError, load_trace
from policies import PolicyValidationError, load_config, load_policy_file

LINE = re.compile(r"^[^\n]+:[1-9]\d*: [^\n]+: [^\n]+$")
MAX_MESSAGE = 400
"""An error line may quote the file and field, but no value longer than a few dozen characters."""


class Unclean(AssertionError):
    """An input was not refused cleanly: what was wrong with the answer."""


# ------------------------------------------------------------------ the catalogue

HOSTILE_NUMBERS: list[Any] = [
    0, -1, 1, 7, 2**31, 2**63, 2**64, -(2**63), 10**400, 1e308, 1e30, 1e15, 1e8, 1e5, -1e30, 1e-300, 0.5, 1.5,
    math.nan, math.inf, -math.inf,
]
HOSTILE_STRINGS: list[Any] = [
    "", " ", "x" * 10_000, "99999999999d", "9" * 400, "1e30", "NaN", "Infinity", "-5", "1h30m", "1m1h", "\x00",
    "😀" * 50, "2026-03-02T00:00:00Z", "0001-01-01T00:00:00Z", "../../etc/passwd", "a:b", "1e999",
]
HOSTILE_OTHERS: list[Any] = [None, True, False, [], {}, ["x"] * 1000, {"a": 1}, [[[[[]]]]]]
HOSTILE_VALUES: list[Any] = HOSTILE_NUMBERS + HOSTILE_STRINGS + HOSTILE_OTHERS


def _short_enough(message: str, *, slack: int = 0) -> None:
    if len(message) > MAX_MESSAGE + slack:
        raise Unclean(f"message of {len(message)} characters (values must be cut): {message[:120]}...")
    if "Traceback" in message:
        raise Unclean(f"traceback in the answer: {message[:200]}")


def _located(errors: list[Any], file: Path) -> None:
    if not errors:
        raise Unclean("refused with no error")
    for error in errors:
        text = str(error)
        if not LINE.match(text) or not text.startswith(f"{file}:"):
            raise Unclean(f"not one FILE:LINE: field: message line: {text[:200]!r}")
        _short_enough(text, slack=len(str(file)))


# ------------------------------------------------------------------ the API


def api_verdict(response: Any) -> str:
    """The verdict on one API answer (an httpx/TestClient response to POST /v1/jobs)."""
    text = response.text
    if response.status_code >= 500:
        raise Unclean(f"{response.status_code}: {text[:200]}")
    _short_enough(text, slack=2000)
    if response.status_code == 201:
        problem = job_problem_of(response.json())
        if problem is not None:
            raise Unclean(f"accepted a job out of bounds: {problem}")
        return "accepted"
    if response.status_code == 422:
        detail = response.json()["detail"]
        if not detail or not all(d.get("loc") and d.get("msg") for d in detail):
            raise Unclean(f"422 without a field: {text[:200]}")
        return "refused"
    if response.status_code in (400, 403, 409, 413, 429):
        if "detail" not in response.json():
            raise Unclean(f"{response.status_code} without a detail")
        return "refused"
    raise Unclean(f"unexpected status {response.status_code}: {text[:200]}")


def job_problem_of(data: dict[str, Any]) -> str | None:
    from burst.codec import job_from_json

    return job_problem(job_from_json(data))


def api_body(values: Callable[[str], Any], keys: list[str]) -> str:
    """A JSON body with `keys` set by `values(key)` (NaN and Infinity written as JSON's non-standard tokens)."""
    body = {"tenant": "prod", "gpus": 1}
    for key in keys:
        body[key] = values(key)
    return json.dumps(body, allow_nan=True)


API_KEYS = ["tenant", "gpus", "gpu_share", "gpu_model", "priority", "fault_tolerant", "checkpoint_interval",
            "duration", "id", "command", "colour"]


# ------------------------------------------------------------------ policy files

POLICY_KEYS: list[tuple[str, ...]] = [
    ("priority",), ("quota", "steady_gpus"), ("quota", "burst_gpus"), ("budget", "usd_per_hour"),
    ("budget", "usd_per_month"), ("spot", "allowed"), ("spot", "max_share"), ("spot", "required_checkpoint_interval"),
    ("spot", "deadline_margin"), ("spot", "price_tolerance"), ("prescale", "quantile"), ("prescale", "buffer"),
    ("hot_pool", "min_gpus"), ("allowed_providers",), ("allowed_regions",), ("queue_wait_slo",), ("preemptible_by",),
    ("fair_share_weight",), ("max_job_runtime",), ("gpu_sharing",), ("tenant",), ("unknown_key",),
]


def as_yaml_scalar(value: Any) -> str:
    """`value` as YAML text; a huge int is written unquoted (as a hostile file would)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9).strip()
    return text[:-4].strip() if text.endswith("\n...") else text.removesuffix("...").strip()


def policy_text(settings: list[tuple[tuple[str, ...], Any]]) -> str:
    """A policy file setting each key path to its value (later settings of a path win)."""
    doc: dict[str, Any] = {}
    for path, value in settings:
        node = doc
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
        node[path[-1]] = value
    return "\n".join(_emit(doc, 0)) + "\n"


def _emit(doc: dict[str, Any], indent: int) -> list[str]:
    out = []
    for key, value in doc.items():
        if isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
            out.append(" " * indent + f"{key}:")
            out.extend(_emit(value, indent + 2))
        else:
            out.append(" " * indent + f"{key}: {as_yaml_scalar(value)}")
    return out


def policy_verdict(path: Path, *, tick: Callable[[Any], None] | None = None) -> str:
    """The verdict on one policy file; an accepted policy is given to `tick` (to plan a daemon's tick with it)."""
    try:
        policy = load_policy_file(path)
    except PolicyValidationError as exc:
        _located(exc.errors, path)
        return "refused"
    except Exception as exc:  # anything else is a crash a user would see as a traceback
        raise Unclean(f"{type(exc).__name__}: {str(exc)[:200]}") from exc
    from burst.bounds import MAX_DURATION_S, MAX_PRIORITY, MAX_QUOTA_GPUS

    if abs(policy.priority) > MAX_PRIORITY or (policy.max_job_runtime_s or 0) > MAX_DURATION_S or \
            (policy.steady_quota_gpus or 0) > MAX_QUOTA_GPUS or not math.isfinite(policy.fair_share_weight):
        raise Unclean(f"accepted a policy out of bounds: {policy}")
    if tick is not None:
        try:
            tick(policy)
        except Exception as exc:
            raise Unclean(f"a tick under the accepted policy failed: {type(exc).__name__}: {exc}") from exc
    return "accepted"


def tick_under_policy(policy: Any) -> None:
    """Two reconcile ticks (sim provider, in-memory store) with `policy` for tenant batch and a mix of its jobs."""
    from builders import T0, job
    from test_reconcile import build

    from burst.state import Store
    from burst.workloads.queue import MemoryQueue
    from providers.sim import ManualClock

    clock = ManualClock(T0)
    queue = MemoryQueue()
    controller, _, _ = build(Store(":memory:"), clock, queue=queue)
    controller.policies = lambda: {"batch": policy}
    for i, gpus in enumerate((1, 4, 8, 8, 16)):
        queue.submit(job(f"b{i}", tenant="batch", gpus=gpus, duration_s=3600.0, fault_tolerant=i % 2 == 0,
                         checkpoint_interval_s=600.0 if i % 2 == 0 else None, priority=i - 2))
    controller.tick()
    clock.advance(600)
    controller.tick()


# ------------------------------------------------------------------ burst.yaml

CONFIG_KEYS: list[tuple[str, str]] = [
    # (the quickstart line's text before the value, a label)
    ("clock_speed: ", "clock_speed"), ("sim_start: ", "sim_start"), ("loop_interval: ", "loop_interval"),
    ("    gpus_per_node: ", "gpus_per_node"), ("    max_size: ", "max_size"), ("    min_size: ", "min_size"),
    ("    boot_latency: ", "boot_latency"), ("    scale_down_cooldown: ", "scale_down_cooldown"),
    ("    spot_hazard_per_hour: ", "spot_hazard_per_hour"), ("    seed: ", "synthetic seed"),
    ("    base_jobs_per_hour: ", "base_jobs_per_hour"), ("    daily_amplitude: ", "daily_amplitude"),
    ("    peak_hour: ", "peak_hour"), ("    burst_probability: ", "burst_probability"),
    ("    burst_factor: ", "burst_factor"), ("    burst_hours: ", "burst_hours"), ("    burst_window: ", "burst_window"),
]


def config_text(quickstart: str, changes: list[tuple[int, Any]]) -> str:
    """The quickstart config with the value of `CONFIG_KEYS[i]`'s first line replaced, for each (i, value)."""
    lines = quickstart.splitlines()
    for index, value in changes:
        prefix = CONFIG_KEYS[index % len(CONFIG_KEYS)][0]
        for n, line in enumerate(lines):
            if line.startswith(prefix):
                lines[n] = prefix + as_yaml_scalar(value)
                break
    return "\n".join(lines) + "\n"


def config_verdict(path: Path, *, tick: Callable[[Any], None] | None = None) -> str:
    """The verdict on one burst.yaml: loaded and checked as `burst run` does, then (when accepted) `tick` is
    given the config to build a daemon and tick it."""
    from burst.runtime import ConfigError, validate_config

    try:
        config = load_config(path)
        validate_config(config, path)
    except PolicyValidationError as exc:
        _located(exc.errors, path)
        return "refused"
    except (ConfigError, UnknownInstanceType) as exc:
        text = str(exc)
        if "\n" in text or not re.match(r"^[a-z_.0-9]+: |^no price for ", text):
            raise Unclean(f"config error without its field: {text[:200]!r}") from exc
        _short_enough(text)
        return "refused"
    except Exception as exc:
        raise Unclean(f"{type(exc).__name__}: {str(exc)[:200]}") from exc
    if tick is not None:
        tick(config)
    return "accepted"


# ------------------------------------------------------------------ traces

TRACE_HEADER = ["job_id", "submission_time", "duration", "num_gpu"]


def trace_text(rows: list[list[Any]]) -> str:
    """An ITP-format trace with these rows (cells written as str())."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(TRACE_HEADER)
    for row in rows:
        writer.writerow([str(c) for c in row])
    return out.getvalue()


def trace_verdict(path: Path) -> tuple[str, list[Any]]:
    """The verdict on one trace file, and the jobs it loaded (every one within bounds)."""
    try:
        trace = load_trace(path)
    except TraceError as exc:
        text = str(exc)
        if "\n" in text or not text.startswith(f"{path}:"):
            raise Unclean(f"trace error not one line naming the file: {text[:200]!r}") from exc
        _short_enough(text, slack=len(str(path)))
        return "refused", []
    except Exception as exc:
        raise Unclean(f"{type(exc).__name__}: {str(exc)[:200]}") from exc
    for job in trace.jobs:
        problem = job_problem(job)
        if problem is not None:
            raise Unclean(f"loaded a job out of bounds: {problem}")
    for bad in trace.bad_rows:
        if bad.line < 2:
            raise Unclean(f"bad row without its line: {bad}")
        _short_enough(bad.message)
    return ("refused" if trace.bad_rows else "accepted"), list(trace.jobs)
