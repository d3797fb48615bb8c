"""How far a service's rate surges within a cold boot, on its own past, and the warm nodes that is worth.

A forecast's top quantile says how high the rate may go when the series
behaves as it has on average; the surges a hot pool exists for (a news
spike, a promotion nobody declared) are the ones no forecast sees. So the
warm pool is also sized from the service's own record of surges:
`SurgeProfile` keeps, for every step of the history, the ratio of the peak
rate over the next window (a cold replica's lead) to the day's typical rate
before it (the median of the `LEVEL_S` before the step) or the rate at the
step, whichever is higher, and the typical rate of the last day,
`level_rps`. A surge counts once, where it starts: the steps inside it, whose
rate is already high, rise little further, as the replicas serving them need
no warm node.

`warm_nodes_for_surges` decides how many stopped warm nodes that record is
worth beyond the replicas already planned, by the pool's own newsvendor
balance. A warm node costs `warm_node_hour_usd` an hour (its disk); when a
surge needs it, it serves `cold_lead - wake_lead` seconds sooner than a cold
boot, that many seconds of one replica's full capacity in requests that are
not left unserved. The k-th warm node is kept while the share of past
windows whose surge needed it is at least the holding cost over one window
divided by that saving. Stopped nodes cost about 1% of a running replica, so
the pool covers surges far rarer than a forecast's P99, which is what makes
it pay. The pool is sized from the day's level, not the rate of the minute,
so it stays put through the day (a warm node made costs a boot) and a surge
in progress is not multiplied again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LEVEL_S = 86400.0
"""The span whose median is the typical rate a surge is measured against."""
FLOOR_SHARE = 0.05
"""A level below this share of the history's mean counts as this share (a surge from silence is finite)."""


@dataclass(frozen=True)
class SurgeProfile:
    """Past surges (module doc): `ratios` (ascending) of the peak over the next `window_s` to the higher of the
    median of the day before and the rate at the step, and `level_rps`, the median of the history's last day
    (levels at least a floor)."""

    window_s: float
    level_rps: float
    ratios: tuple[float, ...]

    @classmethod
    def of(cls, rates: Sequence[float] | np.ndarray, step_s: float, window_s: float,
           level_s: float = LEVEL_S) -> SurgeProfile:
        """Decide the profile of `rates` (requests/s, one per `step_s`, oldest first), levels taken over
        `level_s`: a step's ratio needs a whole level span before it and a whole window after it, so the record
        is empty under the two."""
        if not (step_s > 0 and window_s > 0 and level_s > 0):
            raise ValueError(f"step, window and level span must be > 0, got {step_s}, {window_s} and {level_s}")
        values = np.asarray(rates, dtype=float)
        values = values[np.isfinite(values)]
        ahead = max(1, math.ceil(window_s / step_s - 1e-9))
        day = max(1, math.ceil(level_s / step_s - 1e-9))
        floor = max(FLOOR_SHARE * float(values.mean()), 1e-9) if values.size else 1e-9
        level = max(float(np.median(values[-day:])), floor) if values.size else floor
        if values.size < day + ahead:
            return cls(window_s, level, ())
        levels = np.maximum(np.median(np.lib.stride_tricks.sliding_window_view(values[:-ahead], day), axis=1), floor)
        peaks = np.lib.stride_tricks.sliding_window_view(values[day:], ahead).max(axis=1)
        rates = values[day - 1: day - 1 + peaks.size]  # the rate at each step: a surge counts from where it starts
        return cls(window_s, level, tuple(float(r) for r in np.sort(peaks / np.maximum(levels, rates))))

    def ratio_exceeded(self, share: float) -> float | None:
        """Decide the surge ratio that past windows exceeded in `share` of cases (the 1 - share quantile,
        the highest ratio seen when `share` is below one case in the record); None without a record."""
        if not self.ratios:
            return None
        share = min(1.0, max(0.0, share))
        index = min(len(self.ratios) - 1, math.floor((1.0 - share) * len(self.ratios)))
        return self.ratios[index]


@dataclass(frozen=True)
class SurgePool:
    """Warm nodes a service's past surges are worth beyond its planned replicas, and why."""

    warm_nodes: int
    reason: str


def warm_nodes_for_surges(profile: SurgeProfile, *, replicas: int, capacity_rps: float, warm_node_hour_usd: float,
                          saved_s: float, unserved_request_cost_usd: float) -> SurgePool:
    """Decide the warm nodes past surges are worth beyond `replicas` (module doc): the day's level times the
    surge ratio exceeded in `holding / saving` of past windows, in replicas at full capacity, less `replicas`,
    at least 0. No record, or no saving (`saved_s` or the unserved cost 0), give none."""
    saving = saved_s * capacity_rps * unserved_request_cost_usd
    if not profile.ratios or saving <= 0:
        return SurgePool(0, "surges: no record or no saving: 0 warm nodes for surges")
    holding = warm_node_hour_usd * profile.window_s / 3600.0
    share = holding / saving
    ratio = profile.ratio_exceeded(share)
    assert ratio is not None  # a record exists
    rate = profile.level_rps * ratio
    needed = math.ceil(rate / capacity_rps - 1e-9)
    beyond = max(0, needed - replicas)
    return SurgePool(beyond, f"surges: {share:.2%} of past {profile.window_s:g} s windows rose over x{ratio:.3g} the "
                             f"day's level (a warm node's ${holding:.4g} per window against ${saving:.4g} saved when "
                             f"used) -> {rate:.4g} req/s on today's {profile.level_rps:.4g}, {needed} replicas at "
                             f"full capacity, {beyond} beyond {replicas}")


__all__ = ["FLOOR_SHARE", "LEVEL_S", "SurgePool", "SurgeProfile", "warm_nodes_for_surges"]
