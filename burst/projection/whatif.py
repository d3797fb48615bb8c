"""What-if files: YAML that overrides parts of the set-up a projection runs on.

A what-if file is one mapping; every key is optional, an unknown key is an error:

```yaml
name: no-spot            # shown in tables and JSON (default: the file's stem)
spot: false              # false: no spot groups at all (their work goes on demand);
                         # true: every tenant allows spot (needs a spot group; refused if all already do)
hot_pool_nodes: 4        # a fixed pool of N stopped nodes in the cheapest on-demand group (0: no pool)
steady_gpus_delta: +16   # GPUs added to (or, negative, removed from) the first steady group, in whole nodes
region: us-west-2        # every elastic group moved to this region (priced there)
prices:                  # USD per node-hour, by node group id or by instance type
  cloud-a100-spot: 1.80  # a cloud group: the price of its own capacity type (spot here)
  p4d.24xlarge: {on_demand: 20.0, spot: 2.0}   # an instance type, in every region: either price or both
```

`prices` re-prices the catalog the simulated runs bill from, so each run
charges the new price for every node-hour of the groups it names: the cost
line those groups bill (`elastic_on_demand` or `elastic_spot`) moves, and
what the planner buys may move with it (it plans on the same prices). A
group is priced from its offering's catalog row (provider, instance type,
region) for its capacity type, so a group key is refused when another group
of the set-up is priced from the same row and capacity type (price the
instance type instead); an
on-prem group is refused too (owned GPUs are priced by the on-prem cost
model, `catalog.onprem` in burst.yaml). An instance type key sets its price
in every region and for every provider the catalog lists it under.

`load_what_if` validates the whole file before anything is applied and raises
`WhatIfError` with ``FILE:LINE: message`` naming the key; `apply_what_if`
returns a new set-up (set-ups are frozen: nothing is ever half-applied), and
raises `WhatIfError` when the set-up cannot take the change (no steady group,
no price in the region, a `prices` key it has no group or instance type of).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from burst.catalog import Catalog, PriceRow, UnknownInstanceType, is_onprem
from burst.model import CapacityType, NodeGroup, Policy, Tier
from burst.sim.registry import strategy_run
from burst.sim.setup import SimSetup
from burst.sim.strategies import StrategyRun
from burst.sim.traces import TraceStats

KEYS = ("name", "spot", "hot_pool_nodes", "steady_gpus_delta", "region", "prices")
PRICE_KINDS = {"on_demand": CapacityType.ON_DEMAND, "spot": CapacityType.SPOT}
"""The capacity types an instance type's `prices` entry may set, by their key."""


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
    group_prices: Mapping[str, float] = field(default_factory=dict)  # USD per node-hour, by group id
    type_prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # by instance type, by PRICE_KINDS


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
    group_prices, type_prices = _prices(data.get("prices"), where("prices"))
    return WhatIf(name=name.strip(), spot=spot, hot_pool_nodes=pool, steady_gpus_delta=delta,
                  region=region.strip() if region else None, file=file, group_prices=group_prices,
                  type_prices=type_prices)


def _price(value: Any, what: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise WhatIfError(f"{where}: prices: {what} must be a price in USD per node-hour > 0, got {value!r}")
    return float(value)


def _prices(doc: Any, where: str) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """A `prices` mapping split into group prices (a number) and instance type prices (a mapping of
    `PRICE_KINDS`); which keys are groups and which instance types is checked against the set-up when applied."""
    if doc is None:
        return {}, {}
    if not isinstance(doc, dict) or not doc:
        raise WhatIfError(f"{where}: prices must map node group ids or instance types to prices, got {doc!r}")
    groups: dict[str, float] = {}
    types: dict[str, dict[str, float]] = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            unknown = sorted(str(k) for k in value if k not in PRICE_KINDS)
            if unknown or not value:
                raise WhatIfError(f"{where}: prices: instance type {key!r} takes {' and/or '.join(PRICE_KINDS)}, "
                                  f"got {', '.join(unknown) or 'nothing'}")
            types[str(key)] = {k: _price(v, f"{key}.{k}", where) for k, v in value.items()}
        else:
            groups[str(key)] = _price(value, str(key), where)
    return groups, types


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
    for gid, usd in sorted(what_if.group_prices.items()):
        parts.append(f"{gid} at ${usd:g}/node-hour")
    for itype, kinds in sorted(what_if.type_prices.items()):
        parts.append(f"{itype} at " + ", ".join(f"${usd:g}/h {kind.replace('_', '-')}" for kind, usd in sorted(kinds.items())))
    return "; ".join(parts) or "nothing"


def apply_what_if(setup: SimSetup, what_if: WhatIf) -> SimSetup:
    """The set-up with the what-if's group and price changes (spot, steady size, region, prices); the pool goes in
    `run_for`."""
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
    catalog = setup.catalog
    if what_if.group_prices or what_if.type_prices:
        catalog, priced = repriced(catalog, groups, what_if, where)
        notes.append(priced)
    return dataclasses.replace(setup, groups=tuple(groups), initial=initial, default_policy=default_policy,
                               policies=policies, catalog=catalog, assumptions=(*setup.assumptions, "; ".join(notes)))


def repriced(catalog: Catalog, groups: list[NodeGroup], what_if: WhatIf, where: str) -> tuple[Catalog, str]:
    """`catalog` with the what-if's `prices` (module doc) applied to the offerings of `groups`, and a note saying
    what each key priced; `WhatIfError` for a key that is neither a cloud group of `groups` nor a listed instance
    type, or a group whose offering another group shares."""
    rows = {row.key: row for row in catalog.rows()}
    notes = []
    for itype, kinds in sorted(what_if.type_prices.items()):
        keys = [k for k, row in rows.items() if row.instance_type == itype]
        if not keys:
            raise WhatIfError(f"{where}: prices: {itype!r} is neither a node group of the set-up nor an instance type "
                              "in the price catalog")
        for k in keys:
            for kind, usd in kinds.items():
                rows[k] = _priced(rows[k], PRICE_KINDS[kind], usd, what_if.name)
        notes.append(f"{itype} priced " + ", ".join(f"{kind} {usd:g} $/h" for kind, usd in sorted(kinds.items())))
    by_id = {g.id: g for g in groups}
    for gid, usd in sorted(what_if.group_prices.items()):
        group = by_id.get(gid)
        if group is None:
            raise WhatIfError(f"{where}: prices: {gid!r} is not a node group of the set-up ({', '.join(by_id)}); "
                              "an instance type takes on_demand and/or spot prices")
        if is_onprem(group):
            raise WhatIfError(f"{where}: prices: {gid} is on-prem: owned GPUs are priced by the on-prem cost model "
                              "(catalog.onprem in burst.yaml), not by a node price")
        key = _row_of(catalog, group, where).key
        sharing = [g.id for g in groups if g.id != gid and not is_onprem(g) and g.capacity_type is group.capacity_type
                   and (found := catalog.find(g.provider, g.instance_type, g.region)) is not None and found.key == key]
        if sharing:
            raise WhatIfError(f"{where}: prices: {gid} is priced from the same offering ({group.instance_type} in "
                              f"{group.region}, {group.capacity_type.value}) as {', '.join(sharing)}: price "
                              f"{group.instance_type!r} instead")
        rows[key] = _priced(rows[key], group.capacity_type, usd, what_if.name)
        notes.append(f"{gid} priced {usd:g} $/h")
    priced = Catalog(rows.values(), onprem=catalog.onprem, spot_history=catalog.spot_history,
                     storage=catalog.storage_rows(), root_volume_gb=catalog.root_volume_gb)
    return priced, "; ".join(notes)


def _priced(row: PriceRow, capacity_type: CapacityType, usd: float, name: str) -> PriceRow:
    if capacity_type is CapacityType.SPOT:
        return dataclasses.replace(row, spot_usd_per_hour=usd, source=f"what-if {name}")
    return dataclasses.replace(row, on_demand_usd_per_hour=usd, source=f"what-if {name}")


def _row_of(catalog: Catalog, group: NodeGroup, where: str) -> PriceRow:
    try:
        return catalog.row(group.provider, group.instance_type, group.region)
    except UnknownInstanceType as exc:
        raise WhatIfError(f"{where}: prices: {group.id}: {exc}") from None


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


__all__ = ["KEYS", "PRICE_KINDS", "WhatIf", "WhatIfError", "apply_what_if", "describe", "load_what_if", "repriced",
           "run_for"]
