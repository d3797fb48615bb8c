"""burst.model is a package of modules, one per thing modelled, read through `from burst.model import X`."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import typing
from datetime import UTC, datetime

import burst.model
from burst.codec import dumps, loads
from burst.model import (
    CapacityType,
    GpuShape,
    Job,
    JobState,
    Node,
    NodeGroup,
    NodeState,
    Policy,
    Snapshot,
    SpotPolicy,
    Tier,
    WarmState,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _defined(module_name: str) -> set[str]:
    """The public names a model module defines at its top level (classes, functions, constants)."""
    tree = ast.parse(inspect.getsource(importlib.import_module(module_name)))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def test_every_public_name_of_a_model_module_is_exported_by_the_package() -> None:
    modules = [m.name for m in pkgutil.iter_modules(burst.model.__path__, "burst.model.")]
    assert len(modules) >= 8
    exported: set[str] = set()
    for name in modules:
        module = importlib.import_module(name)
        for attr in _defined(name):
            assert getattr(burst.model, attr) is getattr(module, attr), f"burst.model.{attr} is not {name}'s"
            exported.add(attr)
    assert exported == set(burst.model.__all__)


def test_every_model_dataclass_resolves_its_field_types() -> None:
    # the codec decodes by `typing.get_type_hints`, which reads each class's own module: a type a field names
    # must be imported there at run time, not only for the type checker
    found = [c for c in (getattr(burst.model, n) for n in burst.model.__all__) if dataclasses.is_dataclass(c)]
    assert len(found) >= 30
    for cls in found:
        assert set(typing.get_type_hints(cls)) >= {f.name for f in dataclasses.fields(cls)}


def test_a_snapshot_and_a_policy_round_trip_through_the_codec() -> None:
    group = NodeGroup(id="g", provider="sim", region="r", tier=Tier.ELASTIC, capacity_type=CapacityType.SPOT,
                      shape=GpuShape("H100", 8), instance_type="p5", max_size=4)
    node = Node.requested("n1", "g", 8, T0).walk_to(NodeState.WARM, T0, warm_state=WarmState.RUNNING)
    job = Job(id="j", tenant="a", gpus=2, submitted_at=T0, state=JobState.RUNNING, node_ids=("n1",))
    snapshot = Snapshot(groups=(group,), nodes=(node,), jobs=(job,), targets={"g": 1},
                        warm_pools={"g": (1, WarmState.RUNNING)})
    back = loads(Snapshot, dumps(snapshot))
    assert back == snapshot
    assert [t.state for t in back.nodes[0].history] == [NodeState.REQUESTED, NodeState.BOOTING, NodeState.WARM]
    policy = Policy(tenant="a", priority=2, spot=SpotPolicy(allowed=True, max_share=0.5))
    assert loads(Policy, dumps(policy)) == policy
