"""Daemon logging: one JSON object per line, with the plan and action ids a record carries.

`burst run --log-format json` installs `JsonFormatter` on the root logger;
records logged with `extra={"plan_id": ..., "action_id": ...}` keep those keys,
so a log pipeline can join them to the decision log and to `burst explain`.
At INFO the actuator writes one `plan` record per tick (`plan_id`, `actions`,
`holds`) and one `action applied` record per action (`plan_id`, `action_id`,
`kind`, `target`, `reason`, `by`); failures are `action failed` or
`action not sent` at WARNING, with the same ids.

Records that can repeat without bound (a full file table refusing every
accept, a stranger's malformed requests) go through `RepeatFilter`, installed
on a logger by `limit_repeats`: the first record of each distinct message
passes, repeats of it within `REPEAT_WINDOW_S` are dropped and counted, and
the next one let through after the window says how many were dropped (also
as the `suppressed` key in JSON).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

HANDLER_NAME = "burst"
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
REPEAT_WINDOW_S = 60.0
REPEAT_KEYS = 256  # distinct messages tracked per filter; beyond, new ones share one allowance per window


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


class RepeatFilter(logging.Filter):
    """Lets one record per distinct message through per `window_s` seconds, and counts the rest.

    A message is distinct by logger, level, the first line of its text (200
    characters at most) and its exception's type, so a traceback repeated a
    thousand times is one line per window. At most `max_keys` messages are
    tracked: when that many were seen within the window, any further new one
    shares a single allowance, so output stays bounded even when every
    message differs. Thread-safe.
    """

    def __init__(self, window_s: float = REPEAT_WINDOW_S, *, max_keys: int = REPEAT_KEYS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window_s = window_s
        self.max_keys = max_keys
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, int, str, str], list[float]] = {}  # key -> [passed at, suppressed since]

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a malformed record is the handler's to report
            return True
        exc = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
        key = (record.name, record.levelno, text.split("\n", 1)[0][:200], exc)
        now = self._clock()
        with self._lock:
            if key not in self._seen and len(self._seen) >= self.max_keys:
                self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.window_s}
                if len(self._seen) >= self.max_keys:
                    key = (record.name, record.levelno, "", "")  # the shared allowance
            entry = self._seen.get(key)
            if entry is not None and now - entry[0] < self.window_s:
                entry[1] += 1
                return False
            suppressed = int(entry[1]) if entry is not None else 0
            since = now - entry[0] if entry is not None else 0.0
            self._seen[key] = [now, 0]
        if suppressed:
            first, newline, rest = text.partition("\n")
            record.msg = f"{first} ({suppressed} more like this suppressed in the last {since:.0f} s){newline}{rest}"
            record.args = ()
            record.suppressed = suppressed
        return True


def limit_repeats(*names: str, window_s: float = REPEAT_WINDOW_S) -> None:
    """Install a `RepeatFilter` on each named logger that has none (records logged on it directly; a child
    logger's records pass through its own filters only)."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RepeatFilter) for f in logger.filters):
            logger.addFilter(RepeatFilter(window_s))
