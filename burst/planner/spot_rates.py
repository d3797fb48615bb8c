"""Spot interruption rates per offering (node group): a prior from the cloud's published band, learnt from what burst sees.

AWS's Spot Instance Advisor publishes, per instance type and region, the share
of instances interrupted in a month in bands (`BANDS`: <5%, 5-10%, 10-15%,
15-20%, >20%). A group's `interruption_band` gives its prior: the band's
midpoint (25% for >20%) as a per-node hazard h = −ln(1 − p) / 720 per hour. A
group with no band gets `DEFAULT_BAND`'s, so an unknown offering is never
preferred to one known to be quiet.

The learnt rate is the Gamma-Poisson posterior mean: the prior counts as
`PRIOR_NODE_HOURS` node-hours of evidence at the prior rate, so

    rate = (prior × PRIOR_NODE_HOURS + interruptions) / (PRIOR_NODE_HOURS + node_hours)

where `interruptions` and `node_hours` are what burst observed on the group
(interruption notices; ready spot nodes × time), both decayed with a half-life
of `HALF_LIFE_H` so the rate follows a market that changes. The reconcile loop
keeps the observations (`InterruptionObservations`, stored with its other
state) and passes the rates into `plan()` as `Snapshot.interruption_rates`;
everything here is pure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from burst.model import CapacityType, GroupId, NodeGroup

BANDS: Mapping[str, float] = {"<5%": 0.025, "5-10%": 0.075, "10-15%": 0.125, "15-20%": 0.175, ">20%": 0.25}
"""AWS interruption-frequency bands and the monthly share each stands for (its midpoint; 25% for >20%)."""
DEFAULT_BAND = "10-15%"
PRIOR_NODE_HOURS = 720.0
"""How much evidence the published band counts for: one node-month."""
HALF_LIFE_H = 168.0
"""Observations lose half their weight in a week."""


def band_rate(band: str) -> float:
    """Interruptions per node-hour of a monthly interruption share band (`BANDS`)."""
    if band not in BANDS:
        raise ValueError(f"unknown interruption band {band!r}: expected one of {', '.join(BANDS)}")
    return -math.log(1.0 - BANDS[band]) / 720.0


def prior_rate(group: NodeGroup) -> float:
    """A group's interruption rate per node-hour before burst has seen any (0 for a group that is not spot)."""
    if group.capacity_type is not CapacityType.SPOT:
        return 0.0
    return band_rate(group.interruption_band or DEFAULT_BAND)


@dataclass(frozen=True)
class InterruptionObservations:
    """Interruptions and spot node-hours burst observed per group, decayed (see the module doc)."""

    interruptions: Mapping[GroupId, float] = field(default_factory=dict)
    node_hours: Mapping[GroupId, float] = field(default_factory=dict)

    def observe(
        self, hours: float, ready_nodes: Mapping[GroupId, int], interrupted: Iterable[GroupId]
    ) -> InterruptionObservations:
        """These observations after `hours` more with `ready_nodes` spot nodes per group and the `interrupted` notices."""
        keep = 0.5 ** (max(0.0, hours) / HALF_LIFE_H)
        counts = {g: n * keep for g, n in self.interruptions.items()}
        exposure = {g: h * keep for g, h in self.node_hours.items()}
        for gid, nodes in ready_nodes.items():
            exposure[gid] = exposure.get(gid, 0.0) + nodes * max(0.0, hours)
        for gid in interrupted:
            counts[gid] = counts.get(gid, 0.0) + 1.0
        return InterruptionObservations(interruptions=counts, node_hours=exposure)

    def rates(self, groups: Iterable[NodeGroup]) -> dict[GroupId, float]:
        """The learnt interruption rate per node-hour of every spot group in `groups`."""
        out = {}
        for group in groups:
            if group.capacity_type is not CapacityType.SPOT:
                continue
            prior = prior_rate(group)
            seen = self.interruptions.get(group.id, 0.0)
            hours = self.node_hours.get(group.id, 0.0)
            out[group.id] = (prior * PRIOR_NODE_HOURS + seen) / (PRIOR_NODE_HOURS + hours)
        return out

    def to_json(self) -> str:
        return json.dumps({"interruptions": dict(sorted(self.interruptions.items())),
                           "node_hours": dict(sorted(self.node_hours.items()))})

    @staticmethod
    def from_json(text: str | None) -> InterruptionObservations:
        """Observations stored by `to_json` (none for no text or unreadable text: the priors stand)."""
        try:
            raw = json.loads(text) if text else {}
            return InterruptionObservations(
                interruptions={str(k): float(v) for k, v in raw.get("interruptions", {}).items()},
                node_hours={str(k): float(v) for k, v in raw.get("node_hours", {}).items()},
            )
        except (ValueError, TypeError, AttributeError):
            return InterruptionObservations()


def interruption_rate(group: NodeGroup, learnt: Mapping[GroupId, float]) -> float:
    """The group's learnt rate when the snapshot carries one, else its prior."""
    found = learnt.get(group.id)
    return prior_rate(group) if found is None else found


__all__ = ["BANDS", "DEFAULT_BAND", "HALF_LIFE_H", "PRIOR_NODE_HOURS", "InterruptionObservations", "band_rate",
           "interruption_rate", "prior_rate"]
