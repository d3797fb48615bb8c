"""Durations as written in policy and config files: `30s`, `10m`, `2h`, `7d`, `1h30m`, or plain seconds."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import PlainValidator, WithJsonSchema

from burst.bounds import MAX_DURATION_S, duration_problem, shown

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
    (`"1h30m"`, `"1.5h"`, `"45s"`), or a plain number string (`"90"`), up to
    `burst.bounds.MAX_DURATION_S` (366 days). Anything else (booleans, negative,
    non-finite or longer values, unknown units, `"1m1h"`) raises ValueError
    with a message saying what was wrong and what is accepted; the value is
    quoted cut to a few dozen characters.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got a boolean ({value!r}); {_HINT}")
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an int too large for a float
            seconds = math.inf
        return _bounded(seconds, value)
    if not isinstance(value, str):
        raise ValueError(f"expected a duration, got {type(value).__name__}; {_HINT}")
    text = value.strip().lower()
    if not text:
        raise ValueError(f"empty duration; {_HINT}")
    if len(text) > 64:
        raise ValueError(f"invalid duration {shown(value)}: longer than 64 characters; {_HINT}")
    try:
        plain = float(text)
    except ValueError:
        plain = None
    if plain is not None:
        if re.fullmatch(r"\d+(?:\.\d+)?", text) is None:
            raise ValueError(f"invalid duration {shown(value)}; {_HINT}")
        return _bounded(plain, value)
    if _WHOLE.fullmatch(text) is None:
        raise ValueError(f"invalid duration {shown(value)}; {_HINT}")
    total = 0.0
    seen: list[str] = []
    for number, unit in _PART.findall(text):
        if seen and "dhms".index(unit) <= "dhms".index(seen[-1]):
            raise ValueError(
                f"invalid duration {shown(value)}: units must appear once each, in the order d, h, m, s"
            )
        seen.append(unit)
        total += float(number) * _UNIT_SECONDS[unit]
    return _bounded(total, value)


def _bounded(seconds: float, value: object) -> float:
    """`seconds`, if it is a usable duration (finite, 0 .. MAX_DURATION_S); else a ValueError quoting `value`."""
    if seconds > MAX_DURATION_S:
        raise ValueError(f"duration {shown(value)} is longer than the limit of 366 days")
    problem = duration_problem(seconds)
    if problem is not None:
        raise ValueError(f"duration {problem}; {_HINT}")
    return seconds


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
        {"type": "number", "minimum": 0, "maximum": MAX_DURATION_S},
        {"type": "string", "pattern": DURATION_PATTERN, "maxLength": 64},
    ],
}

Duration = Annotated[float, PlainValidator(_validate), WithJsonSchema(_DURATION_JSON_SCHEMA)]
"""A pydantic field type: any spelling `parse_duration` accepts, stored as float seconds."""
