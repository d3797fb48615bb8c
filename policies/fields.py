"""Field types shared by the tenant policy file and `burst.yaml`: names, bounded numbers, durations.

Each type refuses what the planner cannot use (booleans as numbers, NaN, values
outside `burst.bounds`) with a message the loaders turn into `FILE:LINE` lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, StrictInt, WithJsonSchema

from burst.bounds import MAX_PRIORITY, MAX_QUOTA_GPUS, MAX_TEXT_LENGTH, MAX_USD, shown
from policies.durations import Duration

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"
"""Tenant names (and so policy file stems): letters, digits, '.', '_', '-', at most 63 characters."""


def _path(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if "\x00" in value:
        raise ValueError("a path cannot contain a NUL character")
    if value.startswith("~"):
        try:
            Path(value).expanduser()
        except RuntimeError:
            raise ValueError(
                f"cannot expand {value.split('/', 1)[0]!r}: no such user's home directory"
            ) from None
    return value


PathStr = Annotated[str, Strict(), AfterValidator(_path), WithJsonSchema({"type": "string", "minLength": 1})]
"""A file-system path as written in the config (relative ones resolve against the config file's directory)."""


class StrictModel(BaseModel):
    """Base of every file-facing model: unknown keys are errors, no NaN/inf, immutable once built."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


def check_name(value: str) -> str:
    """Decide whether `value` is a usable tenant, node-group or service name; raise ValueError saying the rule if not."""
    if re.fullmatch(NAME_PATTERN, value) is None:
        raise ValueError(
            f"invalid name {shown(value)}: use letters, digits, '.', '_' or '-', starting with a letter or digit, "
            "at most 63 characters"
        )
    return value


def _positive(value: float) -> float:
    if value <= 0:
        raise ValueError(f"must be greater than 0, got {value:g}")
    return value


def _non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


Name = Annotated[
    str, Strict(), AfterValidator(check_name), WithJsonSchema({"type": "string", "pattern": NAME_PATTERN})
]
"""A tenant, node-group or service name."""
NonEmptyStr = Annotated[
    str, Strict(), Field(max_length=MAX_TEXT_LENGTH), AfterValidator(_non_empty),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": MAX_TEXT_LENGTH}),
]
NonNegativeInt = Annotated[StrictInt, Field(ge=0)]
GpuCount = Annotated[StrictInt, Field(ge=0, le=MAX_QUOTA_GPUS)]
"""A GPU quota or count in a policy (burst.bounds)."""
Priority = Annotated[StrictInt, Field(ge=-MAX_PRIORITY, le=MAX_PRIORITY)]
Number = Annotated[float, Strict()]
"""A float that also accepts ints, but not booleans or numeric strings."""
PositiveNumber = Annotated[float, Strict(), Field(gt=0)]
NonNegativeNumber = Annotated[float, Strict(), Field(ge=0)]
Money = Annotated[float, Strict(), Field(gt=0, le=MAX_USD)]
"""USD amounts (budgets, prices): > 0 and at most burst.bounds.MAX_USD."""
Fraction = Annotated[float, Strict(), Field(ge=0, le=1)]
PositiveDuration = Annotated[Duration, AfterValidator(_positive)]
"""A duration that must be longer than zero."""


def none_as_empty(value: Any, empty: Any) -> Any:
    """Decide what an explicitly empty YAML value (`key:` with nothing, i.e. null) means: the section's defaults."""
    return empty if value is None else value


class LocatedValueError(ValueError):
    """Raised inside a pydantic validator to point the error at `loc` below the validated value.

    E.g. a list validator that finds a duplicate id in item 2 raises
    `LocatedValueError("duplicate id", ("2", "id"))` and the error line names
    `node_groups.2.id` and that key's line.
    """

    def __init__(self, message: str, loc: Sequence[str | int]) -> None:
        super().__init__(message)
        self.message = message
        self.loc: tuple[str, ...] = tuple(str(p) for p in loc)
