"""Demand series files and `burst forecast`: loading, resampling, clear errors, and a real Helios series."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from burst.cli import main
from burst.settings import data_dir
from forecasting.models import SeriesError
from forecasting.series import load_series


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "demand.csv"
    path.write_text(text)
    return path


def test_points_are_averaged_per_step_and_gaps_filled_forward(tmp_path: Path) -> None:
    path = write(tmp_path, "time,running,pending\n"
                 "2020-05-01 00:00:00,2,0\n2020-05-01 00:30:00,4,2\n"  # hour 0: (2 + 6) / 2
                 "2020-05-01 03:10:00,10,1\n")  # hours 1 and 2 are empty
    loaded = load_series(path, value_expr="running+pending", step_s=3600)
    assert loaded.series.values == (4.0, 4.0, 4.0, 11.0)
    assert loaded.filled_buckets == 2 and loaded.rows == 3
    assert loaded.series.timestamps[0] == datetime(2020, 5, 1, tzinfo=UTC)
    assert loaded.series.tenant == "demand"


@pytest.mark.parametrize(
    ("text", "kw", "message"),
    [
        ("time,active\n2020-05-01 00:00:00,1\n", {"value_column": "pending"},
         "no column 'pending'; columns: time, active"),
        ("time,active\nyesterday,1\n", {}, "demand.csv:2: column 'time': 'yesterday' is not a time"),
        ("time,active\n2020-05-01 00:00:00,1\n2020-05-01 00:01:00,lots\n", {}, "demand.csv:3: column 'active': 'lots' is not a number"),
        ("time,a,b\n2020-05-01 00:00:00,1,2\n", {}, "say which column holds the value"),
        ("time,active\n", {}, "no rows"),
        ("time,a,b\n2020-05-01 00:00:00,1,2\n", {"value_expr": "a+"}, "expected column names joined by '+'"),
    ],
)
def test_bad_series_files_name_the_column_or_line(tmp_path: Path, text: str, kw: dict[str, str], message: str) -> None:
    with pytest.raises(SeriesError, match=message.replace("(", r"\(").replace("+", r"\+")):
        load_series(write(tmp_path, text), **kw)


def test_forecast_command_on_a_helios_virtual_cluster_prints_monotone_quantiles() -> None:
    path = data_dir() / "demand" / "helios-earth" / "vc6YE.csv"
    result = CliRunner().invoke(main, ["forecast", "--series", str(path), "--value-expr", "running_gpu_num+pending_gpu_num",
                                       "--horizon", "12h", "--quota", "400", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    # the model its own rolling-origin backtest chose, named with its score (vc6YE stepped up on its last day)
    assert doc["model"] == doc["selection"]["model"] == "recent_level"
    assert doc["selection"]["level_shift_at"] == "2020-05-31T10:00:00+00:00"
    assert doc["backtest_p90_pinball"] == doc["selection"]["backtest_p90_pinball"] > 0
    assert "until a fold starts a day after it" in doc["selection"]["reason"]
    assert doc["series"]["points"] == 31 * 24 and doc["series"]["last"] == "2020-05-31T23:00:00+00:00"
    steps = doc["forecast"]
    assert [s["at"] for s in steps][:2] == ["2020-06-01T00:00:00+00:00", "2020-06-01T01:00:00+00:00"]
    assert len(steps) == 12
    assert all(0 <= s["p10"] <= s["p50"] <= s["p90"] <= s["p99"] <= 400 for s in steps)


def test_forecast_command_rejects_bad_options_and_files_without_a_traceback(tmp_path: Path) -> None:
    runner = CliRunner()
    path = write(tmp_path, "time,active\n2020-05-01 00:00:00,1\n")
    bad_step = runner.invoke(main, ["forecast", "--series", str(path), "--step", "10s"])
    assert bad_step.exit_code == 2 and "10s is outside 5m..1d" in bad_step.output
    bad_horizon = runner.invoke(main, ["forecast", "--series", str(path), "--horizon", "60d"])
    assert bad_horizon.exit_code == 2 and "60d is outside one step..30d" in bad_horizon.output
    missing = runner.invoke(main, ["forecast", "--series", str(path), "--value-column", "pending"])
    assert missing.exit_code == 1 and "no column 'pending'" in missing.output
    assert "Traceback" not in missing.output
    short = runner.invoke(main, ["forecast", "--series", str(path), "--horizon", "2h", "--json"])
    assert short.exit_code == 0
    assert json.loads(short.output)["model"] == "seasonal_naive (history 1 h < 24 h)"


def test_forecast_command_gives_steady_tier_advice_from_the_forecast_p50() -> None:
    path = data_dir() / "demand" / "helios-earth" / "vc6YE.csv"
    base = ["forecast", "--series", str(path), "--value-expr", "running_gpu_num+pending_gpu_num", "--horizon", "24h"]
    alone = json.loads(CliRunner().invoke(main, [*base, "--json"]).output)
    p50 = sorted(s["p50"] for s in alone["forecast"])
    advice = alone["steady_tier"]
    median = (p50[11] + p50[12]) / 2
    assert advice["recommended_gpus"] == int(-(-median // 1))
    assert (advice["steady_gpus"], advice["utilisation"], advice["status"]) == (None, None, None)
    owned = json.loads(CliRunner().invoke(main, [*base, "--steady-gpus", "1000", "--json"]).output)["steady_tier"]
    assert owned["steady_gpus"] == 1000 and owned["status"] == "green"
    assert owned["utilisation"] == pytest.approx(sum(s["p50"] for s in alone["forecast"]) / (24 * 1000), abs=1e-4)
    text = CliRunner().invoke(main, [*base, "--steady-gpus", "100"]).output
    assert f"own {advice['recommended_gpus']} GPU(s)" in text and "today's 100 GPU(s) would be 100% utilised: red" in text
