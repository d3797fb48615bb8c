"""Daemon logging: one JSON object per line, with the plan and action ids a record carries.

`burst run --log-format json` installs `JsonFormatter` on the root logger;
records logged with `extra={"plan_id": ..., "action_id": ...}` keep those keys,
so a log pipeline can join them to the decision log and to `burst explain`.
At INFO the actuator writes one `plan` record per tick (`plan_id`, `actions`,
`holds`) and one `action applied` record per action (`plan_id`, `action_id`,
`kind`, `target`, `reason`, `by`); failures are `action failed` or
`action not sent` at WARNING, with the same ids.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

HANDLER_NAME = "burst"
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line: time, level, logger, message, extras, and the traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, sort_keys=True)


def configure_logging(fmt: str, level: str = "info") -> None:
    """Send burst's logs to stderr as `text` or `json` lines at `level`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.set_name(HANDLER_NAME)
    handler.setLevel(level.upper())
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if h.get_name() != HANDLER_NAME] + [handler]
    if root.level > handler.level or root.level == logging.NOTSET:
        root.setLevel(handler.level)
