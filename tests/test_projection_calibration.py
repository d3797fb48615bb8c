"""The cost backtest's naive projection (last week's jobs, moved a week) and the conformal band correction."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from burst.catalog import OnPremCost
from burst.model import Job
from burst.projection.calibration import (
    Band,
    band_score,
    calibrated_bands,
    conformal_widening,
    naive_projection,
    shifted_week,
)
from burst.sim.engine import simulate
from burst.sim.registry import strategy_run
from burst.sim.setup import default_setup
from burst.sim.traces import TraceStats

T0 = datetime(2021, 3, 4, tzinfo=UTC)
CUT = T0 + timedelta(days=7)


def _job(jid: str, at: datetime, gpus: int = 8, hours: float = 2.0, deadline: datetime | None = None) -> Job:
    return Job(id=jid, tenant="t", gpus=gpus, submitted_at=at, duration_s=hours * 3600.0, deadline=deadline)


def _stats(p50_gpus: float) -> TraceStats:
    return TraceStats(jobs=2, gpu_hours=32.0, peak_gpus=16.0, p50_gpus=p50_gpus, start=T0, end=CUT)


# ------------------------------------------------------------------ the naive projection


def test_naive_week_is_the_week_before_the_cut_moved_exactly_seven_days() -> None:
    due = CUT + timedelta(days=1)
    history = [
        _job("too-early", CUT - timedelta(days=7, seconds=1)),
        _job("first", CUT - timedelta(days=7), deadline=due),
        _job("last", CUT - timedelta(seconds=1)),
        _job("at-cut", CUT),
    ]
    moved = shifted_week(history, CUT)
    assert [j.id for j in moved] == ["first", "last"]
    assert moved[0].submitted_at == CUT and moved[1].submitted_at == CUT + timedelta(days=7, seconds=-1)
    assert moved[0].deadline == due + timedelta(days=7) and moved[1].deadline is None
    assert [(j.tenant, j.gpus, j.duration_s) for j in moved] == [("t", 8, 7200.0)] * 2


def test_naive_projection_replays_last_week_on_the_set_up_it_is_given() -> None:
    # Two 8-GPU, 2-hour jobs a week before the cut (and one before that week, left out). The coming week's set-up
    # owns one 8-GPU on-prem node: both jobs fit on it one after the other, so the week costs that node's week at
    # the on-prem rate and nothing in the cloud. On the week before's set-up (no on-prem node) they ran in the cloud.
    history = [_job("old", T0 - timedelta(hours=1)), _job("a", T0 + timedelta(days=1)),
               _job("b", T0 + timedelta(days=3))]
    coming = strategy_run("burst-no-forecast", default_setup(_stats(8.0)), _stats(8.0))
    naive = naive_projection(coming, history, CUT)
    assert naive.cost_by_tier.get("elastic_on_demand", 0.0) == 0.0
    assert naive.cost_usd == pytest.approx(8 * 168 * OnPremCost().usd_per_gpu_hour)
    by_hand = [_job("a", CUT + timedelta(days=1)), _job("b", CUT + timedelta(days=3))]
    assert naive.cost_usd == simulate(coming, by_hand, start=CUT, end=CUT + timedelta(days=7), prior=history).cost_usd
    before = strategy_run("burst-no-forecast", default_setup(_stats(0.0)), _stats(0.0))
    cloud = naive_projection(before, history, CUT)
    assert cloud.cost_by_tier.get("steady", 0.0) == 0.0
    assert cloud.cost_by_tier["elastic_on_demand"] + cloud.cost_by_tier["elastic_spot"] > 0.0


# ------------------------------------------------------------------ conformal band correction


def test_band_score_is_the_log_factor_the_band_needed_at_both_ends() -> None:
    band = Band(100.0, 150.0, 200.0)
    assert band_score(band, 250.0) == pytest.approx(math.log(1.25))
    assert band_score(band, 90.0) == pytest.approx(math.log(100 / 90))
    assert band_score(band, 150.0) == pytest.approx(math.log(0.75))  # inside: the nearer end, 150/200
    assert band_score(Band(0.0, 10.0, 20.0), 1.0) == pytest.approx(math.log(1 / 20))
    assert band_score(Band(0.0, 10.0, 20.0), 0.0) == -math.inf and band_score(band, 0.0) == math.inf


def test_conformal_widening_takes_the_ranked_score_or_with_few_scores_the_largest_miss() -> None:
    assert conformal_widening([]) is None
    assert conformal_widening([0.4, 0.1, 0.3, 0.2]) == 0.4  # ceil(5 x 0.8) = 4th of 4
    assert conformal_widening([0.5, 0.1, 0.3, 0.2, 0.4, 0.0, 0.6, 0.7, 0.8]) == 0.7  # ceil(10 x 0.8) = 8th of 9
    assert conformal_widening([-0.4, -0.1, -0.3, -0.2]) == -0.1  # four bands that held: narrow
    # Fewer than four: rank ceil((n + 1) 0.8) > n. Widen to the largest miss; weeks that held never narrow.
    assert conformal_widening([0.1, -0.2, 0.3]) == 0.3
    assert conformal_widening([-0.5]) == 0.0


def test_each_weeks_band_is_corrected_from_the_weeks_before_it_only() -> None:
    bands = [Band(100.0, 150.0, 200.0)] * 6
    actuals = [250.0, 90.0, 150.0, 120.0, 1000.0, 130.0]
    out = calibrated_bands(bands, actuals)
    assert out[0] == bands[0]  # no earlier week: the band as projected
    # Weeks 1-3: fewer than four scores, the largest so far is week 0's, log(250/200) = log 1.25.
    # Week 4: scores log 1.25, log(100/90), log 0.75, log(100/120); the 4th smallest is log 1.25.
    for week in (1, 2, 3, 4):
        assert (out[week].p10, out[week].p50, out[week].p90) == pytest.approx((80.0, 150.0, 250.0))
    # Week 5 adds week 4's score, log(1000/200) = log 5, the 5th smallest of five.
    assert (out[5].p10, out[5].p50, out[5].p90) == pytest.approx((20.0, 150.0, 1000.0))
    # Neither its own actual nor a later one moves a week's band.
    assert calibrated_bands(bands, [*actuals[:4], 1.0, 1e9])[4] == out[4]
    assert calibrated_bands(bands[:5], actuals[:5]) == out[:5]


def test_a_band_that_always_held_narrows_but_not_past_its_p50() -> None:
    out = calibrated_bands([Band(100.0, 150.0, 200.0)] * 5, [150.0] * 5)
    assert out[1:4] == [Band(100.0, 150.0, 200.0)] * 3  # one to three weeks that held: no narrowing
    # Four scores of log 0.75: the P10 over 0.75 (133.3), the P90 times 0.75 (150, the P50).
    assert (out[4].p10, out[4].p90) == pytest.approx((400 / 3, 150.0))
    with pytest.raises(ValueError, match="2 bands for 1 actuals"):
        calibrated_bands(bands=[Band(1, 2, 3)] * 2, actuals=[1.0])
