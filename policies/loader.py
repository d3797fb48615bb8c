"""Loading and validating tenant policy files, with one `FILE:LINE: field: message` line per error.

The YAML machinery here (safe parsing with limits, key path -> line maps,
pydantic errors -> located lines) is shared with `policies.config`.
"""

from __future__ import annotations

import difflib
import threading
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from burst.model import Policy
from policies.fields import LocatedValueError, check_name
from policies.schema import TenantPolicyDoc
from policies.services import services_raw_checks

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_VALUES",
    "POLICY_SUFFIXES",
    "LocatedValueError",
    "PolicyError",
    "PolicyReloader",
    "PolicyValidationError",
    "RawCheck",
    "YamlDocument",
    "load_policy_file",
    "load_policy_dir",
    "policy_files",
    "policy_json_schema",
    "read_yaml",
    "validate_document",
    "validate_policy_dir",
    "validate_policy_file",
]

MAX_FILE_BYTES = 4 * 1024 * 1024
"""Larger files are rejected unread (a policy or config file is a few KiB)."""
MAX_DEPTH = 32
"""Deepest nesting of mappings/sequences accepted, counted after expanding aliases."""
MAX_VALUES = 100_000
"""Most YAML values (scalars, mappings, sequences) accepted, counted after expanding aliases."""
POLICY_SUFFIXES = (".yaml", ".yml")

Loc = tuple[str, ...]
M = TypeVar("M", bound=BaseModel)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _cut(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, marked with '...' (a key or value in a file may be megabytes)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class PolicyError:
    """One user-facing problem: `FILE:LINE: field: message` (field `-` for file-level problems)."""

    file: str
    line: int
    field: str
    message: str

    def __post_init__(self) -> None:
        # one error is one line, whatever a key or a value in the file contained
        object.__setattr__(self, "field", _cut(_one_line(self.field), 120) or "-")
        object.__setattr__(self, "message", _cut(_one_line(self.message), 500) or "invalid value")

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


class PolicyValidationError(Exception):
    """Raised when a file or directory does not validate; `errors` holds every problem found."""

    def __init__(self, errors: Iterable[PolicyError]) -> None:
        self.errors: list[PolicyError] = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors) or "invalid policy")


@dataclass(frozen=True)
class YamlDocument:
    """A parsed YAML file: its Python data and, for every key path, the 1-based line it sits on."""

    file: str
    data: Any
    lines: Mapping[Loc, int]

    def line_of(self, loc: Sequence[object]) -> int:
        """Decide the line for `loc`: that of the longest prefix of it that the file has (the key, else its mapping)."""
        path = tuple(str(p) for p in loc)
        for n in range(len(path), -1, -1):
            line = self.lines.get(path[:n])
            if line is not None:
                return line
        return 1


class _TooBig(Exception):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


def _yaml_error(file: str, exc: yaml.YAMLError, text: str | None = None) -> PolicyError:
    """Turn a PyYAML exception into one located line."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = int(mark.line) + 1 if mark is not None else 1
        parts = [p for p in (exc.context, exc.problem) if p]
        message = "; ".join(_one_line(p) for p in parts) or _one_line(str(exc))
        return PolicyError(file, line, "-", f"invalid YAML: {message}")
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1 if text is not None else 1
        return PolicyError(file, line, "-", f"invalid YAML: unacceptable character #x{exc.character:04x}")
    return PolicyError(file, 1, "-", f"invalid YAML: {_one_line(str(exc))}")


class _Walker:
    """Walks a composed node tree: key path -> line, duplicate keys, size limits, scalar construction."""

    def __init__(self, loader: yaml.SafeLoader, file: str) -> None:
        self.loader = loader
        self.file = file
        self.lines: dict[Loc, int] = {}
        self.errors: list[PolicyError] = []
        self.count = 0

    def field(self, path: Loc) -> str:
        return ".".join(path) or "-"

    def walk(self, node: Node, path: Loc, depth: int) -> None:
        self.count += 1
        if self.count > MAX_VALUES:
            raise _TooBig(
                _line(node), f"document too large: more than {MAX_VALUES} values (after expanding aliases)"
            )
        if depth > MAX_DEPTH:
            raise _TooBig(
                _line(node), f"document nested deeper than {MAX_DEPTH} levels (after expanding aliases)"
            )
        self.lines.setdefault(path, _line(node))
        if isinstance(node, ScalarNode):
            try:
                self.loader.construct_object(node)
            except yaml.YAMLError as exc:
                err = _yaml_error(self.file, exc)
                self.errors.append(PolicyError(self.file, _line(node), self.field(path), err.message))
            except Exception as exc:  # e.g. a timestamp like 2026-02-30 that is not a date
                self.errors.append(
                    PolicyError(
                        self.file, _line(node), self.field(path), f"invalid value {_short(node.value)}: {exc}"
                    )
                )
        elif isinstance(node, SequenceNode):
            for i, item in enumerate(node.value):
                self.walk(item, (*path, str(i)), depth + 1)
        elif isinstance(node, MappingNode):
            seen: dict[str, int] = {}
            merges: list[tuple[Node, Node]] = []
            for key, value in node.value:
                if key.tag == "tag:yaml.org,2002:merge":
                    merges.append((key, value))
                    continue
                name = key.value if isinstance(key, ScalarNode) else f"<{key.id}>"
                if isinstance(key, ScalarNode) and name in seen:
                    self.errors.append(
                        PolicyError(
                            self.file,
                            _line(key),
                            self.field((*path, name)),
                            f"duplicate key {_short(name)} (first given on line {seen[name]})",
                        )
                    )
                seen.setdefault(name, _line(key))
                self.lines.setdefault((*path, name), _line(key))
                self.walk(key, (*path, name), depth + 1)
                self.walk(value, (*path, name), depth + 1)
            if len(merges) > 1:
                key = merges[1][0]
                self.errors.append(
                    PolicyError(self.file, _line(key), self.field((*path, "<<")), "duplicate merge key '<<'")
                )
            for _key, value in merges:
                # merged keys belong to this mapping's path; keys given here take precedence
                targets = value.value if isinstance(value, SequenceNode) else [value]
                for target in targets:
                    self.walk(target, path, depth + 1)


def _check_events(text: str, file: str) -> None:
    """One pass over parser events: syntax errors and nesting depth, before anything recursive runs."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = int(event.start_mark.line) + 1 if event.start_mark is not None else 0
                raise PolicyValidationError(
                    [PolicyError(file, line, "-", f"document nested deeper than {MAX_DEPTH} levels")]
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def read_yaml(path: Path) -> YamlDocument:
    """Decide what a YAML file holds, or why it cannot be used.

    Reads one document safely (SafeLoader: no Python tags), maps every key path
    to its line, and rejects unreadable files, non-UTF-8 bytes, syntax errors,
    duplicate keys, unknown tags, and documents too large or too deep (alias
    bombs included). An empty file is `None` data. Raises
    `PolicyValidationError`; never any other exception.
    """
    file = str(path)
    try:
        raw = path.read_bytes() if path.stat().st_size <= MAX_FILE_BYTES else None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PolicyValidationError([PolicyError(file, 1, "-", f"cannot read file: {why}")]) from None
    if raw is None:
        raise PolicyValidationError([PolicyError(file, 1, "-", f"file larger than {MAX_FILE_BYTES} bytes")])
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise PolicyValidationError(
            [PolicyError(file, line, "-", f"not UTF-8 text (invalid byte 0x{raw[exc.start]:02x})")]
        ) from None
    try:
        _check_events(text, file)
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return YamlDocument(file, None, {(): 1})
            walker = _Walker(loader, file)
            walker.walk(node, (), 1)
            if walker.errors:
                raise PolicyValidationError(walker.errors)
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except PolicyValidationError:
        raise
    except _TooBig as exc:
        raise PolicyValidationError([PolicyError(file, exc.line, "-", exc.message)]) from None
    except yaml.YAMLError as exc:
        raise PolicyValidationError([_yaml_error(file, exc, text)]) from None
    except RecursionError:
        raise PolicyValidationError([PolicyError(file, 1, "-", "document nested too deeply")]) from None
    except Exception as exc:  # defensive: whatever PyYAML raises must still be one located line
        raise PolicyValidationError(
            [PolicyError(file, 1, "-", f"cannot read YAML: {_one_line(str(exc))}")]
        ) from None
    return YamlDocument(file, data, walker.lines)


# ------------------------------------------------------------ pydantic -> lines


def _strip(annotation: Any) -> list[Any]:
    """The alternatives an annotation stands for (Optional/Union split, Annotated unwrapped, None dropped)."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _strip(typing.get_args(annotation)[0])
    if isinstance(annotation, UnionType) or typing.get_origin(annotation) is typing.Union:
        return [alt for arg in typing.get_args(annotation) for alt in _strip(arg)]
    return [] if annotation is type(None) else [annotation]


def _step(annotation: Any, part: str) -> Any:
    """The annotation of the value at `part` below a value of type `annotation` (None if unknown)."""
    for alt in _strip(annotation):
        if isinstance(alt, type) and issubclass(alt, BaseModel):
            info = alt.model_fields.get(part)
            if info is not None:
                return info.annotation
            continue
        origin = typing.get_origin(alt)
        args = typing.get_args(alt)
        if origin in (list, tuple, set, frozenset) and args:
            return args[0]
        if origin is dict and len(args) == 2:
            return args[1]
    return None


def _model_at(root: type[BaseModel], loc: Sequence[str]) -> type[BaseModel] | None:
    """The model class validating the mapping at `loc` (list indices and dict keys stepped over)."""
    current: Any = root
    for part in loc:
        current = _step(current, part)
        if current is None:
            return None
    for alt in _strip(current):
        if isinstance(alt, type) and issubclass(alt, BaseModel):
            return alt
    return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _message(root: type[BaseModel], err: Mapping[str, Any], loc: Loc) -> str:
    kind = err.get("type", "")
    msg = str(err.get("msg", "invalid value"))
    value = err.get("input")
    if kind == "extra_forbidden":
        key = loc[-1] if loc else "?"
        model = _model_at(root, loc[:-1])
        allowed = sorted(model.model_fields) if model is not None else []
        close = difflib.get_close_matches(key, allowed, n=1)
        if close:
            return f"unknown key {_short(key)} (did you mean {close[0]!r}?)"
        return (
            f"unknown key {_short(key)}; allowed keys: {', '.join(allowed)}" if allowed else f"unknown key {_short(key)}"
        )
    if kind == "missing":
        return "required key is missing"
    if kind == "invalid_key":
        return f"keys must be strings, got {_short(value)}"
    if kind == "model_type" or kind == "model_attributes_type" or kind == "dict_type":
        return f"expected a mapping, got {type(value).__name__} {_short(value)}"
    if kind == "value_error" and msg.startswith("Value error, "):
        return msg[len("Value error, ") :]
    if kind == "assertion_error" and msg.startswith("Assertion failed, "):
        return msg[len("Assertion failed, ") :]
    msg = msg[0].lower() + msg[1:] if msg else msg
    if not isinstance(value, dict | list | tuple | set) and kind.endswith(
        ("_type", "_parsing", "literal_error", "enum")
    ):
        msg += f" (got {_short(value)})"
    return _one_line(msg)


def pydantic_errors(root: type[BaseModel], doc: YamlDocument, exc: ValidationError) -> list[PolicyError]:
    """Decide the located lines for a pydantic ValidationError raised while validating `doc` with `root`."""
    out: list[PolicyError] = []
    for err in exc.errors(include_url=False):
        loc: Loc = tuple(str(p) for p in err["loc"] if p != "[key]")
        ctx_error = (err.get("ctx") or {}).get("error")
        message = _message(root, err, loc)
        if isinstance(ctx_error, LocatedValueError):
            loc = (*loc, *ctx_error.loc)
            message = ctx_error.message
        out.append(PolicyError(doc.file, doc.line_of(loc), ".".join(loc) or "-", message))
    return sorted(set(out), key=lambda e: (e.line, e.field, e.message))


RawCheck = Callable[[Mapping[str, Any]], list[tuple[tuple[int | str, ...], str]]]
"""A check on the raw mapping: (loc, message) per problem; run beside pydantic so both report."""


def validate_document(
    model: type[M],
    doc: YamlDocument,
    *,
    what: str,
    context: dict[str, Any] | None = None,
    checks: RawCheck | None = None,
) -> M:
    """Decide whether `doc` is a valid `model`; return it, or raise PolicyValidationError with located lines.

    An empty document means all defaults; a document that is not a mapping is
    one file-level error naming `what` the file should hold. `checks` run on the
    raw mapping and their problems are reported together with pydantic's.
    """
    data = {} if doc.data is None else doc.data
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"{type(data).__name__} {_short(data)}"
        raise PolicyValidationError(
            [PolicyError(doc.file, doc.line_of(()), "-", f"expected a mapping of {what} keys, got {kind}")]
        )
    errors: list[PolicyError] = []
    if checks is not None:
        for loc, message in checks(data):
            path = tuple(str(p) for p in loc)
            errors.append(PolicyError(doc.file, doc.line_of(path), ".".join(path) or "-", message))
    try:
        result = model.model_validate(data, context=context)
    except ValidationError as exc:
        errors.extend(pydantic_errors(model, doc, exc))
    except RecursionError:
        errors.append(PolicyError(doc.file, 1, "-", "document nested too deeply"))
    else:
        if not errors:
            return result
    raise PolicyValidationError(sorted(set(errors), key=lambda e: (e.line, e.field, e.message)))


# ------------------------------------------------------------ tenant files


def _tenant_of(path: Path) -> str:
    """Decide the tenant a file is for (its stem), or raise PolicyValidationError if the name is unusable."""
    try:
        return check_name(path.stem)
    except ValueError as exc:
        raise PolicyValidationError([PolicyError(str(path), 1, "-", f"file name: {exc}")]) from None


def validate_policy_file(path: Path) -> tuple[str, TenantPolicyDoc]:
    """Decide whether one tenant file is valid: return (tenant, document) or raise PolicyValidationError."""
    tenant = _tenant_of(path)
    doc = read_yaml(path)
    if doc.data is None:
        raise PolicyValidationError(
            [PolicyError(str(path), 1, "-", "empty policy file: write `{}` for a tenant with every default")]
        )
    return tenant, validate_document(
        TenantPolicyDoc, doc, what="tenant policy", context={"tenant": tenant}, checks=services_raw_checks
    )


def load_policy_file(path: Path) -> Policy:
    """Decide the `Policy` one tenant file (`<tenant>.yaml`) defines; raise PolicyValidationError if it is invalid."""
    tenant, doc = validate_policy_file(path)
    return doc.to_policy(tenant)


def policy_files(path: Path) -> list[Path]:
    """Decide which entries of a policy directory are tenant files: `*.yaml`/`*.yml`, not starting with `_` or `.`."""
    return sorted(
        p for p in path.iterdir() if p.suffix in POLICY_SUFFIXES and not p.name.startswith(("_", "."))
    )


def _load_dir(path: Path) -> tuple[dict[str, Policy], list[PolicyError]]:
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except (OSError, ValueError) as exc:
        return {}, [PolicyError(str(path), 1, "-", f"cannot use policy directory: {exc}")]
    if not is_dir:
        why = ("does not exist (burst.yaml's policies_dir names it: copy the policies with the config, or start "
               "from `burst init DIR`, which writes both)") if not exists else "is not a directory"
        return {}, [PolicyError(str(path), 1, "-", f"policy directory {why}")]
    try:
        files = policy_files(path)
    except OSError as exc:
        return {}, [PolicyError(str(path), 1, "-", f"cannot list policy directory: {exc.strerror or exc}")]
    policies: dict[str, Policy] = {}
    sources: dict[str, Path] = {}
    errors: list[PolicyError] = []
    for file in files:
        if not file.is_file():
            errors.append(PolicyError(str(file), 1, "-", "not a regular file"))
            continue
        try:
            tenant, doc = validate_policy_file(file)
        except PolicyValidationError as exc:
            errors.extend(exc.errors)
            continue
        if tenant in sources:
            errors.append(
                PolicyError(
                    str(file), 1, "-", f"tenant {tenant!r} is already defined by {sources[tenant].name}"
                )
            )
            continue
        sources[tenant] = file
        policies[tenant] = doc.to_policy(tenant)
    return policies, errors


def validate_policy_dir(path: Path) -> list[PolicyError]:
    """Decide every problem in a policy directory (all files, all errors); [] means it loads cleanly."""
    return _load_dir(path)[1]


def load_policy_dir(path: Path) -> dict[str, Policy]:
    """Decide the tenant -> Policy set a directory defines; raise PolicyValidationError with all errors, loading nothing."""
    policies, errors = _load_dir(path)
    if errors:
        raise PolicyValidationError(errors)
    return policies


def policy_json_schema() -> dict[str, Any]:
    """The JSON schema of a tenant policy file (for editors and `burst policy schema`)."""
    return TenantPolicyDoc.model_json_schema()


class PolicyReloader:
    """Holds the last good policy set of a directory and swaps it only for a fully valid one.

    The constructor loads once; if that fails, `current` is empty and
    `last_errors` says why. Safe to read `current` from other threads while
    `reload` runs.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._current: dict[str, Policy] = {}
        self._lock = threading.Lock()
        self.last_errors: list[PolicyError] = []
        self.generation = 0
        self.reload()

    @property
    def current(self) -> dict[str, Policy]:
        """The last good tenant -> Policy set (a copy)."""
        with self._lock:
            return dict(self._current)

    def reload(self) -> list[PolicyError]:
        """Decide whether the directory's new contents replace the current set: on any error keep it and return the errors."""
        policies, errors = _load_dir(self.path)
        with self._lock:
            self.last_errors = errors
            if not errors:
                self._current = policies
                self.generation += 1
        return errors
