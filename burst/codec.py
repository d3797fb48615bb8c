"""JSON (de)serialisation of the domain model.

One generic, dataclass-driven codec is used everywhere a model object crosses
a boundary: CLI ``--json`` snapshots, store rows, the API. It walks each
dataclass's resolved type hints once, compiles an encoder and a decoder per
type, and caches them.

Wire format
-----------
- dataclasses are JSON objects with every field present (a stable schema);
- datetimes are ISO 8601 strings in UTC with an explicit offset
  (``2026-03-02T12:00:00+00:00``); decoding accepts any offset, including
  ``Z``, returns UTC datetimes and rejects naive ones;
- enums are their values; tuples, lists and frozensets are arrays;
- mappings are objects; non-string keys (enums, floats, ints) are written as
  their string form (``{"stopped": 30.0}``, ``{"0.5": [...]}``).

Decoding is tolerant of missing optional fields (the dataclass default is
used) and strict everywhere else: an unknown field, a missing required field,
a value of the wrong type or a naive datetime raises `CodecError` (a
`ValueError`) whose message starts with the path of the offending field, e.g.
``Snapshot.nodes[0].history[1].at: naive datetime ...``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from burst.model import Job, Node, NodeGroup, Snapshot

__all__ = [
    "CodecError",
    "dumps",
    "from_json",
    "group_from_json",
    "group_to_json",
    "job_from_json",
    "job_to_json",
    "loads",
    "node_from_json",
    "node_to_json",
    "snapshot_from_json",
    "snapshot_to_json",
    "to_json",
]

T = TypeVar("T")

Codec = Callable[[Any, str], Any]
"""A compiled encoder or decoder: (value, path-for-errors) -> value."""


class CodecError(ValueError):
    """A value could not be encoded or decoded; `path` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


# ------------------------------------------------------------------ public API


def to_json(obj: Any) -> Any:
    """Encode a model object (any dataclass, or a tuple/list of them) as JSON-compatible data."""
    return _encoder(type(obj))(obj, type(obj).__name__)


def from_json(cls: type[T], data: Any) -> T:
    """Decode `data` (already parsed JSON) into an instance of the dataclass `cls`."""
    result: T = _decoder(cls)(data, cls.__name__)
    return result


def dumps(obj: Any) -> str:
    """Compact, key-sorted JSON text for a model object (NaN and infinities are rejected)."""
    try:
        return json.dumps(to_json(obj), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        if isinstance(exc, CodecError):
            raise
        raise CodecError(type(obj).__name__, str(exc)) from exc


def loads(cls: type[T], text: str | bytes) -> T:
    """Parse JSON text and decode it into `cls`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CodecError(cls.__name__, f"invalid JSON: {exc}") from exc
    return from_json(cls, data)


def job_to_json(job: Job) -> dict[str, Any]:
    return _encode_object(job, Job)


def job_from_json(data: Mapping[str, Any]) -> Job:
    return from_json(Job, data)


def node_to_json(node: Node) -> dict[str, Any]:
    return _encode_object(node, Node)


def node_from_json(data: Mapping[str, Any]) -> Node:
    return from_json(Node, data)


def group_to_json(group: NodeGroup) -> dict[str, Any]:
    return _encode_object(group, NodeGroup)


def group_from_json(data: Mapping[str, Any]) -> NodeGroup:
    return from_json(NodeGroup, data)


def snapshot_to_json(snapshot: Snapshot) -> dict[str, Any]:
    return _encode_object(snapshot, Snapshot)


def snapshot_from_json(data: Mapping[str, Any]) -> Snapshot:
    return from_json(Snapshot, data)


def _encode_object(obj: Any, cls: type[Any]) -> dict[str, Any]:
    out: dict[str, Any] = _encoder(cls)(obj, cls.__name__)
    return out


# ------------------------------------------------------------------ compilation

_ENCODERS: dict[Any, Codec] = {}
_DECODERS: dict[Any, Codec] = {}


def _kind(value: Any) -> str:
    """How a JSON value is described in error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _encoder(tp: Any) -> Codec:
    try:
        return _ENCODERS[tp]
    except KeyError:
        pass
    except TypeError:  # unhashable annotation: compile without caching
        return _compile_encoder(tp)
    codec = _compile_encoder(tp)
    _ENCODERS[tp] = codec
    return codec


def _decoder(tp: Any) -> Codec:
    try:
        return _DECODERS[tp]
    except KeyError:
        pass
    except TypeError:
        return _compile_decoder(tp)
    codec = _compile_decoder(tp)
    _DECODERS[tp] = codec
    return codec


@dataclasses.dataclass(frozen=True)
class _FieldPlan:
    name: str
    required: bool
    encode: Codec
    decode: Codec


_PLANS: dict[type[Any], tuple[_FieldPlan, ...]] = {}


def _plan(cls: type[Any]) -> tuple[_FieldPlan, ...]:
    """The fields of a dataclass with their compiled codecs (resolved lazily, so recursion works)."""
    plan = _PLANS.get(cls)
    if plan is None:
        hints = typing.get_type_hints(cls)
        plan = tuple(
            _FieldPlan(
                name=f.name,
                required=f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                encode=_encoder(hints[f.name]),
                decode=_decoder(hints[f.name]),
            )
            for f in dataclasses.fields(cls)
            if f.init
        )
        _PLANS[cls] = plan
    return plan


# ---- encoders


def _identity(value: Any, path: str) -> Any:
    return value


def _encode_datetime(value: Any, path: str) -> str:
    if not isinstance(value, datetime):
        raise CodecError(path, f"expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise CodecError(path, f"naive datetime {value.isoformat()} (times must be timezone-aware UTC)")
    try:
        return value.astimezone(UTC).isoformat()
    except OverflowError as exc:
        raise CodecError(path, f"datetime {value!r} is out of range in UTC") from exc


def _encode_key(tp: Any) -> Callable[[Any, str], str]:
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return lambda k, path: str(k.value)
    if tp is float:
        return lambda k, path: repr(float(k))
    if tp in (str, int, Any):
        return lambda k, path: str(k)
    raise TypeError(f"unsupported mapping key type {tp!r}")


def _compile_encoder(tp: Any) -> Codec:
    if tp is Any or tp in (str, int, float, bool, type(None)):
        return _identity
    if tp is datetime:
        return _encode_datetime
    if isinstance(tp, type) and issubclass(tp, enum.Enum):

        def enc_enum(value: Any, path: str) -> Any:
            return value.value if isinstance(value, enum.Enum) else value

        return enc_enum
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        cls = tp

        def enc_dataclass(value: Any, path: str) -> dict[str, Any]:
            if not isinstance(value, cls):
                raise CodecError(path, f"expected {cls.__name__}, got {type(value).__name__}")
            return {f.name: f.encode(getattr(value, f.name), f"{path}.{f.name}") for f in _plan(cls)}

        return enc_dataclass
    if _is_union(tp):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = [(_runtime_type(a), _encoder(a)) for a in options]

        def enc_union(value: Any, path: str) -> Any:
            if value is None:
                return None
            for rt, enc in inner:
                if rt is None or isinstance(value, rt):
                    return enc(value, path)
            return inner[0][1](value, path)

        return enc_union
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (tuple, list, frozenset, set, Sequence):
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            items = [_encoder(a) for a in args]

            def enc_fixed(value: Any, path: str) -> list[Any]:
                return [e(v, f"{path}[{i}]") for i, (e, v) in enumerate(zip(items, value, strict=True))]

            return enc_fixed
        item = _encoder(args[0]) if args else _identity
        is_set = origin in (frozenset, set)

        def enc_seq(value: Any, path: str) -> list[Any]:
            out = [item(v, f"{path}[{i}]") for i, v in enumerate(value)]
            if is_set:
                try:
                    out.sort()
                except TypeError:
                    pass
            return out

        return enc_seq
    if origin in (dict, Mapping):
        ktp, vtp = args if args else (Any, Any)
        kenc = _encode_key(ktp)
        venc = _encoder(vtp)

        def enc_map(value: Any, path: str) -> dict[str, Any]:
            return {kenc(k, path): venc(v, f"{path}[{k!r}]") for k, v in value.items()}

        return enc_map
    raise TypeError(f"codec: unsupported type {tp!r}")


def _runtime_type(tp: Any) -> type[Any] | tuple[type[Any], ...] | None:
    """A class to dispatch union members on while encoding (None: accept anything)."""
    if isinstance(tp, type):
        return tp
    origin = typing.get_origin(tp)
    if isinstance(origin, type):
        return origin
    return None


# ---- decoders


def _dec_str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise CodecError(path, f"expected a string, got {_kind(value)}")
    return value


def _dec_bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise CodecError(path, f"expected a boolean, got {_kind(value)}")
    return value


def _dec_int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodecError(path, f"expected an integer, got {_kind(value)}")
    return value


def _dec_float(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CodecError(path, f"expected a number, got {_kind(value)}")
    return float(value)


def _dec_none(value: Any, path: str) -> None:
    if value is not None:
        raise CodecError(path, f"expected null, got {_kind(value)}")
    return None


def _dec_datetime(value: Any, path: str) -> datetime:
    if not isinstance(value, str):
        raise CodecError(path, f"expected an ISO 8601 datetime string, got {_kind(value)}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise CodecError(path, f"invalid ISO 8601 datetime {value!r}") from exc
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise CodecError(path, f"naive datetime {value!r} (add an offset such as 'Z' or '+00:00')")
    try:
        return parsed.astimezone(UTC)
    except OverflowError as exc:
        raise CodecError(path, f"datetime {value!r} is out of range in UTC") from exc


def _decode_key(tp: Any) -> Callable[[Any, str], Any]:
    def need_str(k: Any, path: str) -> str:
        if not isinstance(k, str):
            raise CodecError(path, f"mapping keys must be strings, got {_kind(k)}")
        return k

    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        enum_dec = _decoder(tp)
        return lambda k, path: enum_dec(need_str(k, path), f"{path}[{k!r}]")
    if tp in (float, int):
        conv = tp

        def dec_num_key(k: Any, path: str) -> Any:
            try:
                v = conv(need_str(k, path))
            except ValueError as exc:
                raise CodecError(f"{path}[{k!r}]", f"key is not a {conv.__name__}") from exc
            if conv is float and not math.isfinite(v):
                raise CodecError(f"{path}[{k!r}]", "key must be finite")
            return v

        return dec_num_key
    if tp in (str, Any):
        return need_str
    raise TypeError(f"unsupported mapping key type {tp!r}")


def _compile_decoder(tp: Any) -> Codec:
    if tp is Any:
        return _identity
    simple: dict[Any, Codec] = {
        str: _dec_str,
        bool: _dec_bool,
        int: _dec_int,
        float: _dec_float,
        type(None): _dec_none,
        datetime: _dec_datetime,
    }
    if tp in simple:
        return simple[tp]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        enum_cls = tp

        def dec_enum(value: Any, path: str) -> Any:
            if isinstance(value, enum_cls):
                return value
            try:
                return enum_cls(value)
            except ValueError as exc:
                allowed = ", ".join(repr(m.value) for m in enum_cls)
                raise CodecError(
                    path, f"{value!r} is not a valid {enum_cls.__name__} (one of {allowed})"
                ) from exc

        return dec_enum
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        cls = tp

        def dec_dataclass(value: Any, path: str) -> Any:
            if not isinstance(value, Mapping):
                raise CodecError(path, f"expected an object, got {_kind(value)}")
            plan = _plan(cls)
            names = {f.name for f in plan}
            for key in value:
                if key not in names:
                    raise CodecError(f"{path}.{key}", f"unknown field for {cls.__name__}")
            kwargs: dict[str, Any] = {}
            for f in plan:
                if f.name in value:
                    kwargs[f.name] = f.decode(value[f.name], f"{path}.{f.name}")
                elif f.required:
                    raise CodecError(f"{path}.{f.name}", "missing required field")
            try:
                return cls(**kwargs)
            except (TypeError, ValueError) as exc:
                if isinstance(exc, CodecError):
                    raise
                raise CodecError(path, str(exc)) from exc

        return dec_dataclass
    if _is_union(tp):
        args = typing.get_args(tp)
        nullable = type(None) in args
        options = [_decoder(a) for a in args if a is not type(None)]

        def dec_union(value: Any, path: str) -> Any:
            if value is None:
                if nullable:
                    return None
                raise CodecError(path, "must not be null")
            if len(options) == 1:
                return options[0](value, path)
            errors: list[str] = []
            for dec in options:
                try:
                    return dec(value, path)
                except CodecError as exc:
                    errors.append(exc.message)
            raise CodecError(path, "; ".join(errors))

        return dec_union
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (tuple, list, frozenset, set, Sequence):
        make: Callable[[Any], Any] = {list: list, frozenset: frozenset, set: set}.get(origin, tuple)
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            items = [_decoder(a) for a in args]

            def dec_fixed(value: Any, path: str) -> tuple[Any, ...]:
                if not isinstance(value, list | tuple):
                    raise CodecError(path, f"expected an array, got {_kind(value)}")
                if len(value) != len(items):
                    raise CodecError(path, f"expected {len(items)} items, got {len(value)}")
                return tuple(d(v, f"{path}[{i}]") for i, (d, v) in enumerate(zip(items, value, strict=True)))

            return dec_fixed
        item = _decoder(args[0]) if args else _identity

        def dec_seq(value: Any, path: str) -> Any:
            if not isinstance(value, list | tuple):
                raise CodecError(path, f"expected an array, got {_kind(value)}")
            return make(item(v, f"{path}[{i}]") for i, v in enumerate(value))

        return dec_seq
    if origin in (dict, Mapping):
        ktp, vtp = args if args else (Any, Any)
        kdec = _decode_key(ktp)
        vdec = _decoder(vtp)

        def dec_map(value: Any, path: str) -> dict[Any, Any]:
            if not isinstance(value, Mapping):
                raise CodecError(path, f"expected an object, got {_kind(value)}")
            return {kdec(k, path): vdec(v, f"{path}[{k!r}]") for k, v in value.items()}

        return dec_map
    raise TypeError(f"codec: unsupported type {tp!r}")
