"""`burst explain NAME --timeline`: one time-ordered list of what happened to a job or group, and why.

It merges, oldest first, the decision log's actions and holds about NAME (a
hold repeated by consecutive plans is one entry with its first and last plan
and how many made it), and for a job its submission and its job-loss ledger
rows (runs lost to interruptions or evictions, checkpoints taken). Each entry
is one line of text, or one object of `--json`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from burst.model import Job
from burst.state import Decision, JobLoss

SIGNS = {"scale_up": "+", "place_job": "+", "scale_down": "-", "terminate_nodes": "-", "reclaim_job": "-",
         "evict_job": "-", "requeue_job": "-", "hold": "=", "submitted": "*", "lost": "!", "checkpoint": "~"}


@dataclass(frozen=True)
class Entry:
    """One line of a timeline: what happened at `at` (until `until` for a repeated hold), about `subject`."""

    at: datetime
    kind: str
    subject: str
    detail: str
    until: datetime | None = None
    seen: int = 1
    plan_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at.isoformat(), "until": (self.until or self.at).isoformat(), "seen": self.seen,
                "kind": self.kind, "subject": self.subject, "detail": self.detail, "plan_id": self.plan_id}


def timeline(decisions: Iterable[Decision], job: Job | None = None, losses: Iterable[JobLoss] = ()) -> list[Entry]:
    """The entries about one name, oldest first (ties keep submission, then decisions, then losses)."""
    entries: list[tuple[datetime, int, Entry]] = []
    if job is not None:
        entries.append((job.submitted_at, 0, Entry(job.submitted_at, "submitted", job.id,
                                                    f"{job.gpu_demand:g} GPU(s), tenant {job.tenant}")))
    for d in decisions:
        entries.append((d.at, 1, Entry(d.at, d.kind, d.subject, d.reason, until=d.last_at, seen=d.seen,
                                       plan_id=d.plan_id)))
    for loss in losses:
        where = f" on {', '.join(loss.node_ids)}" if loss.node_ids else ""
        if loss.cause == "checkpoint":
            entry = Entry(loss.at, "checkpoint", loss.job_id,
                          f"checkpoint taken{where}: {loss.checkpoint_gpu_s / 3600:.2f} GPU-h spent checkpointing")
        else:
            entry = Entry(loss.at, "lost", loss.job_id,
                          f"{loss.cause}{where}: {loss.lost_gpu_s / 3600:.2f} GPU-h of work lost since the last checkpoint")
        entries.append((loss.at, 2, entry))
    return fold([e for _, _, e in sorted(entries, key=lambda t: (t[0], t[1]))])


def _shape(text: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "#", text)


def fold(entries: Sequence[Entry]) -> list[Entry]:
    """Consecutive holds about one subject whose reasons differ only in their numbers become one entry.

    It keeps the first one's time and plan, the last one's time and reason, and
    counts the plans of all of them (a countdown such as "next due in 3.9 min"
    is one hold, not one line a minute).
    """
    out: list[Entry] = []
    for e in entries:
        last = out[-1] if out else None
        if (last is not None and e.kind == "hold" and last.kind == "hold" and e.subject == last.subject
                and _shape(e.detail) == _shape(last.detail)):
            out[-1] = dataclasses.replace(last, detail=e.detail, until=e.until or e.at, seen=last.seen + e.seen)
        else:
            out.append(e)
    return out


def render_text(entries: Sequence[Entry]) -> list[str]:
    """One line per entry: UTC time, sign, kind (a repeated hold with its count and last time), subject, detail."""
    lines = []
    for e in entries:
        kind = e.kind
        if e.seen > 1 and e.until is not None:
            kind += f" x{e.seen} to {e.until:%H:%M:%S}"
        lines.append(f"{e.at:%Y-%m-%d %H:%M:%S} {SIGNS.get(e.kind, '~')} {kind:<20} {e.subject:<18} {e.detail}")
    return lines


__all__ = ["Entry", "fold", "render_text", "timeline"]
