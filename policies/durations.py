"""Durations as written in policy and config files: `30s`, `10m`, `2h`, `7d`, `1h30m`, or plain seconds."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import PlainValidator, WithJsonSchema

_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_WHOLE = re.compile(r"(?:\d+(?:\.\d+)?[dhms])+")
DURATION_PATTERN = r"^\s*(\d+(\.\d+)?|(\d+(\.\d+)?[dhmsDHMS])+)\s*$"
"""The string form `parse_duration` accepts, as a JSON-schema pattern."""

_HINT = "use seconds (e.g. 90) or a duration like 30s, 10m, 2h, 7d, 1h30m"


def parse_duration(value: object) -> float:
    """Decide how many seconds `value` denotes.

    Accepts a non-negative finite int/float (seconds) or a string of one or more
    `<number><unit>` parts with units d, h, m, s in that order, each at most once
    (`"1h30m"`, `"1.5h"`, `"45s"`), or a plain number string (`"90"`). Anything
    else (booleans, negative or non-finite numbers, unknown units, `"1m1h"`)
    raises ValueError with a message saying what was wrong and what is accepted.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got a boolean ({value!r}); {_HINT}")
    if isinstance(value, int | float):
        seconds = float(value)
        if not math.isfinite(seconds):
            raise ValueError(f"duration must be finite, got {value!r}; {_HINT}")
        if seconds < 0:
            raise ValueError(f"duration must not be negative, got {value!r}")
        return seconds
    if not isinstance(value, str):
        raise ValueError(f"expected a duration, got {type(value).__name__}; {_HINT}")
    text = value.strip().lower()
    if not text:
        raise ValueError(f"empty duration; {_HINT}")
    try:
        plain = float(text)
    except ValueError:
        plain = None
    if plain is not None:
        if re.fullmatch(r"\d+(?:\.\d+)?", text) is None:
            raise ValueError(f"invalid duration {value!r}; {_HINT}")
        return plain
    if _WHOLE.fullmatch(text) is None:
        raise ValueError(f"invalid duration {value!r}; {_HINT}")
    total = 0.0
    seen: list[str] = []
    for number, unit in _PART.findall(text):
        if seen and "dhms".index(unit) <= "dhms".index(seen[-1]):
            raise ValueError(
                f"invalid duration {value!r}: units must appear once each, in the order d, h, m, s"
            )
        seen.append(unit)
        total += float(number) * _UNIT_SECONDS[unit]
    if not math.isfinite(total):
        raise ValueError(f"duration {value!r} is too large")
    return total


def format_duration(seconds: float) -> str:
    """Decide the shortest `1h30m`-style spelling of `seconds` (fractions of a second kept as `1.5s`)."""
    if seconds < 0 or not math.isfinite(seconds):
        raise ValueError(f"cannot format duration {seconds!r}")
    whole = int(seconds)
    frac = seconds - whole
    parts: list[str] = []
    for unit in "dhm":
        size = int(_UNIT_SECONDS[unit])
        if whole >= size:
            parts.append(f"{whole // size}{unit}")
            whole %= size
    if whole or frac or not parts:
        parts.append(f"{whole + frac:g}s" if frac else f"{whole}s")
    return "".join(parts)


def _validate(value: Any) -> float:
    return parse_duration(value)


_DURATION_JSON_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": DURATION_PATTERN},
    ],
}

Duration = Annotated[float, PlainValidator(_validate), WithJsonSchema(_DURATION_JSON_SCHEMA)]
"""A pydantic field type: any spelling `parse_duration` accepts, stored as float seconds."""
