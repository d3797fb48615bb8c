"""What-if files: YAML that overrides parts of the set-up a projection runs on.

A what-if file is one mapping; every key is optional, an unknown key is an error:

```yaml
name: no-spot            # shown in tables and JSON (default: the file's stem)
spot: false              # false: no spot groups at all (their work goes on demand);
                         # true: every tenant allows spot (needs a spot group; refused if all already do)
hot_pool_nodes: 4        # a fixed pool of N stopped nodes in the cheapest on-demand group (0: no pool)
steady_gpus_delta: +16   # GPUs added to (or, negative, removed from) the first steady group, in whole nodes
region: us-west-2        # every elastic group moved to this region (priced there)
```

`load_what_if` validates the whole file before anything is applied and raises
`WhatIfError` with ``FILE:LINE: message`` naming the key; `apply_what_if`
returns a new set-up (set-ups are frozen: nothing is ever half-applied), and
raises `WhatIfError` when the set-up cannot take the change (no steady group,
no price in the region).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from burst.catalog import UnknownInstanceType
from burst.model import CapacityType, Policy, Tier
from burst.sim.registry import strategy_run
from burst.sim.setup import SimSetup
from burst.sim.strategies import StrategyRun
from burst.sim.traces import TraceStats

KEYS = ("name", "spot", "hot_pool_nodes", "steady_gpus_delta", "region")


class WhatIfError(ValueError):
    """A what-if file that cannot be used; one line naming the file, line and key."""


@dataclass(frozen=True)
class WhatIf:
    """The overrides of one what-if file (None: keep the baseline's)."""

    name: str
    spot: bool | None = None
    hot_pool_nodes: int | None = None
    steady_gpus_delta: int | None = None
    region: str | None = None
    file: str = ""


def load_what_if(path: Path) -> WhatIf:
    """The what-if in `path`, fully validated (module doc), or `WhatIfError`."""
    from policies.loader import PolicyValidationError, read_yaml

    try:
        doc = read_yaml(path)
    except PolicyValidationError as exc:
        raise WhatIfError("; ".join(str(e) for e in exc.errors)) from None
    file = str(path)
    data: Any = doc.data
    if data is None:
        raise WhatIfError(f"{file}:1: empty what-if: give at least one of {', '.join(KEYS[1:])}")
    if not isinstance(data, dict):
        raise WhatIfError(f"{file}:1: a what-if is a mapping of {', '.join(KEYS)}")

    def where(key: str) -> str:
        return f"{file}:{doc.line_of((key,))}"

    for key in data:
        if key not in KEYS:
            raise WhatIfError(f"{where(str(key))}: unknown key {key!r} (expected one of {', '.join(KEYS)})")
    if not any(k in data for k in KEYS[1:]):
        raise WhatIfError(f"{file}:1: give at least one of {', '.join(KEYS[1:])}")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name.strip():
        raise WhatIfError(f"{where('name')}: name must be a non-empty string, got {name!r}")
    spot = data.get("spot")
    if spot is not None and not isinstance(spot, bool):
        raise WhatIfError(f"{where('spot')}: spot must be true or false, got {spot!r}")
    pool = data.get("hot_pool_nodes")
    if pool is not None and (isinstance(pool, bool) or not isinstance(pool, int) or pool < 0):
        raise WhatIfError(f"{where('hot_pool_nodes')}: hot_pool_nodes must be a whole number >= 0, got {pool!r}")
    delta = data.get("steady_gpus_delta")
    if delta is not None and (isinstance(delta, bool) or not isinstance(delta, int)):
        raise WhatIfError(f"{where('steady_gpus_delta')}: steady_gpus_delta must be a whole number of GPUs "
                          f"(e.g. +16 or -8), got {delta!r}")
    region = data.get("region")
    if region is not None and (not isinstance(region, str) or not region.strip()):
        raise WhatIfError(f"{where('region')}: region must be a non-empty string, got {region!r}")
    return WhatIf(name=name.strip(), spot=spot, hot_pool_nodes=pool, steady_gpus_delta=delta,
                  region=region.strip() if region else None, file=file)


def describe(what_if: WhatIf) -> str:
    """One line saying what the what-if changes against the baseline, key by key, as its file asks."""
    parts = []
    if what_if.spot is False:
        parts.append("no spot: spot groups removed, their work goes on demand")
    elif what_if.spot is True:
        parts.append("spot allowed for every tenant")
    if what_if.hot_pool_nodes is not None:
        parts.append("no hot pool" if what_if.hot_pool_nodes == 0
                     else f"a fixed hot pool of {what_if.hot_pool_nodes} stopped node(s) in the cheapest on-demand group")
    if what_if.steady_gpus_delta:
        parts.append(f"{what_if.steady_gpus_delta:+d} on-prem GPUs in the steady tier (whole nodes)")
    if what_if.region:
        parts.append(f"elastic groups moved to {what_if.region}")
    return "; ".join(parts) or "nothing"


def apply_what_if(setup: SimSetup, what_if: WhatIf) -> SimSetup:
    """The set-up with the what-if's group changes (spot, steady size, region); the pool goes in `run_for`."""
    where = what_if.file or what_if.name
    groups = list(setup.groups)
    initial = dict(setup.initial)
    notes = [f"what-if {what_if.name}"]
    default_policy = setup.default_policy
    policies = dict(setup.policies)
    if what_if.spot is False:
        groups = [g for g in groups if g.capacity_type is not CapacityType.SPOT]
        initial = {gid: n for gid, n in initial.items() if any(g.id == gid for g in groups)}
        if default_policy is not None:
            default_policy = dataclasses.replace(default_policy, spot=dataclasses.replace(default_policy.spot, allowed=False))
        policies = {t: dataclasses.replace(p, spot=dataclasses.replace(p.spot, allowed=False)) for t, p in policies.items()}
        notes.append("no spot groups")
    if what_if.spot is True:
        if not any(g.capacity_type is CapacityType.SPOT for g in groups):
            raise WhatIfError(f"{where}: spot: true needs a spot group in the set-up; there is none")
        closed = sorted(t for t, p in policies.items() if not p.spot.allowed)
        fallback = default_policy or Policy(tenant="_default")
        if not fallback.spot.allowed:
            closed.append("tenants without a policy")
        if not closed:
            raise WhatIfError(f"{where}: spot: true changes nothing: every tenant's policy already allows spot "
                              "(spot: false is the what-if that takes it away)")
        default_policy = dataclasses.replace(fallback, spot=dataclasses.replace(fallback.spot, allowed=True))
        policies = {t: dataclasses.replace(p, spot=dataclasses.replace(p.spot, allowed=True)) for t, p in policies.items()}
        notes.append(f"spot allowed for {', '.join(closed)}")
    if what_if.steady_gpus_delta:
        steady = [i for i, g in enumerate(groups) if g.tier is Tier.STEADY]
        if not steady:
            raise WhatIfError(f"{where}: steady_gpus_delta needs a steady (on-prem) group in the set-up")
        i = steady[0]
        g = groups[i]
        per = g.gpus_per_node
        nodes = math.ceil(abs(what_if.steady_gpus_delta) / per) * (1 if what_if.steady_gpus_delta > 0 else -1)
        size = max(0, initial.get(g.id, 0) + nodes)
        groups[i] = dataclasses.replace(g, min_size=max(0, g.min_size + nodes), max_size=max(size, g.max_size + nodes))
        initial[g.id] = size
        notes.append(f"steady {g.id}: {size} nodes ({nodes:+d} x {per} GPUs)")
    if what_if.region:
        moved = []
        for i, g in enumerate(groups):
            if g.tier is Tier.ELASTIC:
                moved_group = dataclasses.replace(g, region=what_if.region)
                try:
                    setup.catalog.group_price(moved_group)
                    setup.catalog.standby_price(moved_group)
                except UnknownInstanceType as exc:
                    raise WhatIfError(f"{where}: region {what_if.region}: {exc}") from None
                groups[i] = moved_group
                moved.append(g.id)
        notes.append(f"elastic groups {', '.join(moved) or '(none)'} in {what_if.region}")
    return dataclasses.replace(setup, groups=tuple(groups), initial=initial, default_policy=default_policy,
                               policies=policies, assumptions=(*setup.assumptions, "; ".join(notes)))


def run_for(strategy: str, setup: SimSetup, stats: TraceStats, what_if: WhatIf | None = None) -> StrategyRun:
    """The strategy run of a projection: `strategy` on `setup`, or the what-if's set-up and hot pool."""
    if what_if is None:
        return strategy_run(strategy, setup, stats)
    changed = apply_what_if(setup, what_if)
    if what_if.hot_pool_nodes is None:
        return strategy_run(strategy, changed, stats)
    if what_if.hot_pool_nodes == 0:
        return strategy_run("burst-no-pool", changed, stats)
    return strategy_run("burst-fixed-pool", changed, stats, fixed_pool_nodes=what_if.hot_pool_nodes)


__all__ = ["KEYS", "WhatIf", "WhatIfError", "apply_what_if", "describe", "load_what_if", "run_for"]
