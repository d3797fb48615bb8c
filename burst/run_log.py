"""What `burst run` prints: each decision as it is made, an hourly status line and a closing summary.

Lines are plain text (or one JSON object each with `--json`), timestamped
with the controller's clock, so a simulated run reads like a day in the life
of the fleet.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

from burst.actuator import EXECUTORS, Executor
from burst.model import ActionKind, JobState, NodeState, month_start
from burst.reconcile import LoopStats, TickReport
from burst.runtime import Runtime

SIGNS = {ActionKind.SCALE_UP: "+", ActionKind.SCALE_DOWN: "-", ActionKind.TERMINATE_NODES: "-"}


class TickPrinter:
    """Prints a runtime's decisions through `echo`."""

    def __init__(self, runtime: Runtime, *, as_json: bool, quiet: bool, echo: Callable[[str], None]) -> None:
        self.runtime = runtime
        self.as_json = as_json
        self.quiet = quiet
        self.echo = echo
        self.started_at = runtime.now()
        self._last_status_hour: datetime | None = None
        self.placed = 0
        self.completed = 0
        self.requeued = 0

    def banner(self, until: datetime | None) -> None:
        """Say what is running, on which clock, for how long, with which state file."""
        cfg = self.runtime.config
        groups = ", ".join(
            f"{g.id} ({g.tier.value}/{g.capacity_type.value}, {g.max_size}x{g.gpus_per_node} {g.shape.gpu_model})"
            for g in cfg.node_groups_model()
        )
        clock = f"simulated clock at {cfg.clock_speed:g}x" if self.runtime.sim_clock else "real clock"
        end = f" until {until.isoformat()}" if until else " until SIGTERM"
        tenants = ", ".join(sorted(self.runtime.reloader.current)) or "none"
        self._emit(
            f"burst: cluster {cfg.cluster}; groups {groups}; tenants {tenants}; "
            f"{clock} from {self.started_at.isoformat()}{end}; state {self.runtime.state_path}",
            {"event": "start", "cluster": cfg.cluster, "at": self.started_at.isoformat(),
             "until": until.isoformat() if until else None, "state": str(self.runtime.state_path)},
        )

    def tick(self, report: TickReport) -> None:
        """Print the provider decisions of one tick, and a status line when the hour changes."""
        self.placed += sum(1 for a in report.plan.actions if a.kind is ActionKind.PLACE_JOB)
        self.completed += len(report.job_events.completed)
        self.requeued += len(report.job_events.requeued)
        if self.quiet:
            return
        stamp = f"{report.at:%Y-%m-%d %H:%M}"
        failed = {o.action.id: o.detail for o in report.outcomes if not o.ok}
        for action in report.plan.actions:
            if EXECUTORS[action.kind] is Executor.JOB_SOURCE:
                continue
            size = f" -> {action.size}" if action.size is not None else ""
            note = f" FAILED: {failed[action.id]}" if action.id in failed else ""
            self._emit(
                f"{stamp} {SIGNS.get(action.kind, '~')} {action.kind.value} {action.target}{size}: {action.reason}{note}",
                {"event": "action", "at": report.at.isoformat(), "plan_id": report.plan.id, **action.to_json(),
                 **({"failed": failed[action.id]} if action.id in failed else {})},
            )
        for why, ids in (("orphan", report.gc.orphans), ("stuck", report.gc.stuck)):
            for node_id in ids:
                self._emit(f"{stamp} - gc {node_id}: {why}", {"event": "gc", "at": report.at.isoformat(), "node": node_id, "why": why})
        hour = report.at.replace(minute=0, second=0, microsecond=0)
        if hour != self._last_status_hour:
            self._last_status_hour = hour
            self.status(report)

    def status(self, report: TickReport) -> None:
        """One line: queue, nodes per group, spend rate, which model serves the demand forecasts, and each
        service's ready and desired replicas, observed rate and forecast over its lead time."""
        snap = report.snapshot
        if snap is None:
            return
        states = Counter(j.state for j in snap.jobs)
        running_gpus = sum(j.gpu_demand for j in snap.jobs if j.state is not JobState.PENDING)
        per_group: dict[str, dict[str, int]] = {}
        for g in snap.groups:
            nodes = [n for n in snap.nodes if n.group_id == g.id]
            per_group[g.id] = {
                "ready": sum(1 for n in nodes if n.state is NodeState.READY),
                "booting": max(0, snap.target_of(g) - sum(1 for n in nodes if n.state is NodeState.READY)),
            }
        rate = sum(self.runtime.catalog.group_price(g) * per_group[g.id]["ready"] for g in snap.groups)
        groups = " | ".join(
            f"{gid} {c['ready']} ready" + (f" +{c['booting']} booting" if c["booting"] else "") for gid, c in per_group.items()
        )
        served = self.runtime.forecasts.served_by() if self.runtime.forecasts else {}
        serving = self.runtime.forecasts.serving() if self.runtime.forecasts else {}
        models = Counter(m.split(" (")[0] for m in served.values())
        scores: dict[str, list[float]] = {}
        for s in serving.values():
            score = s["backtest_p90_pinball"]
            if isinstance(score, float):
                scores.setdefault(str(s["model"]).split(" (")[0], []).append(score)
        forecasts = (" | forecasts: " + ", ".join(
            f"{m} x{n}" + (f" (backtest P90 pinball {sum(scores[m]) / len(scores[m]):.2f})" if m in scores else "")
            for m, n in sorted(models.items()))) if served else ""
        services = report.services.statuses if report.services is not None else []
        serving_line = (" | services: " + ", ".join(
            f"{st.tenant}/{st.name} {st.ready} ready of {st.desired}"
            + (f" at {st.observed_rps:.3g} req/s" if st.observed_rps is not None else f" ({st.error})")
            + (f", forecast {st.forecast_lead_rps:.3g} over the {st.lead_s:g} s lead"
               if st.forecast_lead_rps is not None else "")
            for st in services)) if services else ""
        self._emit(
            f"{report.at:%Y-%m-%d %H:%M} = status: {states[JobState.PENDING]} pending, "
            f"{states[JobState.RUNNING] + states[JobState.CHECKPOINTING]} running ({running_gpus:g} GPUs) | {groups} | "
            f"${rate:,.2f}/h{forecasts}{serving_line}",
            {"event": "status", "at": report.at.isoformat(), "pending": states[JobState.PENDING],
             "running": states[JobState.RUNNING] + states[JobState.CHECKPOINTING], "running_gpus": running_gpus,
             "groups": per_group, "usd_per_hour": rate, "forecasts": dict(sorted(served.items())),
             "forecast_scores": {k: v["backtest_p90_pinball"] for k, v in sorted(serving.items())},
             "services": [st.to_json() for st in services]},
        )

    def summary(self, stats: LoopStats) -> None:
        """Close with ticks, jobs and spend by cost line since the run began."""
        now = self.runtime.now()
        by_line = self.runtime.store.cost_by_line(since=min(self.started_at, month_start(now)))
        total = sum(by_line.values())
        lines = ", ".join(f"{k} ${v:,.2f}" for k, v in sorted(by_line.items())) or "none"
        self._emit(
            f"burst: stopped at {now.isoformat()} after {stats.ticks} tick(s), {stats.errors} failed; "
            f"jobs placed {self.placed}, completed {self.completed}, requeued {self.requeued}; "
            f"spend ${total:,.2f} ({lines})",
            {"event": "stop", "at": now.isoformat(), "ticks": stats.ticks, "errors": stats.errors, "placed": self.placed,
             "completed": self.completed, "requeued": self.requeued, "cost_by_line": by_line, "total_usd": total},
        )

    def _emit(self, text: str, data: dict[str, Any]) -> None:
        self.echo(json.dumps(data, sort_keys=True, default=str) if self.as_json else text)
