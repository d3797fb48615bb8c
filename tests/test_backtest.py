"""forecasting.backtest: scores checked against figures computed by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from burst.cli import main
from burst.settings import data_dir
from forecasting.backtest import Scores, backtest, pinball
from forecasting.models import DemandSeries, SeriesError

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def sawtooth(days: int) -> DemandSeries:
    """Hourly: value = hour of day (0..23), the same every day."""
    n = days * 24
    return DemandSeries("t", "any", tuple(T0 + timedelta(hours=i) for i in range(n)), tuple(float(i % 24) for i in range(n)), 3600.0)


def test_pinball_loss_weights_under_and_over_forecasts_by_the_quantile() -> None:
    assert pinball(10.0, 8.0, 0.9) == pytest.approx(1.8)  # under by 2: 0.9 * 2
    assert pinball(10.0, 12.0, 0.9) == pytest.approx(0.2)  # over by 2: 0.1 * 2
    assert pinball(10.0, 12.0, 0.5) == pytest.approx(1.0)


def test_hand_computed_scores_for_a_perfect_and_an_offset_model() -> None:
    series = sawtooth(4)

    def perfect(train: DemandSeries, steps: int) -> dict[float, list[float]]:
        nxt = [float((len(train.values) + k) % 24) for k in range(steps)]
        return {0.5: nxt, 0.9: nxt, 0.99: nxt}

    def two_low(train: DemandSeries, steps: int) -> dict[float, list[float]]:
        return {q: [v - 2.0 for v in row] for q, row in perfect(train, steps).items()}

    scores = backtest(series, horizon_steps=12, folds=2, models={"perfect": perfect, "two_low": two_low})
    exact = scores["perfect"]
    assert isinstance(exact, Scores)
    assert (exact.mase, exact.pinball_p50, exact.pinball_p90, exact.coverage_p90) == (0.0, 0.0, 0.0, 1.0)
    low = scores["two_low"]
    assert isinstance(low, Scores)
    # MASE scale: |y[t] - y[t-24]| is 0 for a daily sawtooth, so the scale falls back to 1 and MASE = MAE = 2
    assert low.mase == pytest.approx(2.0)
    assert low.pinball_p50 == pytest.approx(1.0) and low.pinball_p90 == pytest.approx(1.8)
    assert low.coverage_p90 == 0.0


def test_a_missing_peer_is_reported_not_raised_and_short_series_are_refused() -> None:
    def unavailable(train: DemandSeries, steps: int) -> dict[float, list[float]]:
        raise ImportError("No module named 'statsforecast'")

    scores = backtest(sawtooth(4), horizon_steps=6, folds=1, models={"auto_ets": unavailable})
    assert scores == {"auto_ets": "not run: No module named 'statsforecast'"}
    with pytest.raises(SeriesError, match="cannot hold 3 fold"):
        backtest(sawtooth(3), horizon_steps=24, folds=3)


@pytest.mark.slow
def test_backtest_command_json_has_the_documented_keys_for_every_model() -> None:
    path = data_dir() / "demand" / "helios-earth" / "vcLJZ.csv"
    result = CliRunner().invoke(main, ["forecast", "--series", str(path), "--value-expr", "running_gpu_num+pending_gpu_num",
                                       "--backtest", "--folds", "1", "--horizon", "24h", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert set(doc["models"]) == {"burst", "prophet", "seasonal_naive", "auto_ets"}
    for name, scores in doc["models"].items():
        keys = {"mase", "pinball_p50", "pinball_p90", "coverage_p90", "coverage", "fit_s"}
        assert set(scores) == (keys | {"served_by"} if name == "burst" else keys)
        assert 0.0 <= scores["coverage_p90"] <= 1.0 and scores["mase"] >= 0
        assert set(scores["coverage"]) == {"p10", "p50", "p90", "p99"}
    assert sum(doc["models"]["burst"]["served_by"].values()) == 1  # one fold, served by the model its backtest chose
