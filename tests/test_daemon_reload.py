"""The daemon reloads tenant policies on SIGHUP or file change, keeps the last good set on error, logs JSON."""

from __future__ import annotations

import io
import json
import logging
import shutil
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from burst.logs import JsonFormatter, configure_logging
from burst.model import ActionKind
from burst.reconcile import TickReport
from burst.runtime import ConfigError, build_runtime, load_run_config, quickstart_config_path


def copy_quickstart(tmp_path: Path) -> Path:
    src = quickstart_config_path().parent
    shutil.copytree(src, tmp_path / "qs")
    return tmp_path / "qs" / "burst.yaml"


def test_policy_change_is_picked_up_and_a_broken_one_keeps_the_last_good(tmp_path: Path) -> None:
    config = copy_quickstart(tmp_path)
    runtime = build_runtime(load_run_config(config), state_path=tmp_path / "s.db")
    try:
        policies = config.parent / "policies"
        assert runtime.reloader.current["batch"].priority != 42
        assert runtime.reload_if_changed() is None  # nothing changed, nothing asked
        text = (policies / "batch.yaml").read_text()
        (policies / "batch.yaml").write_text(text.replace("priority:", "priority: 42 #", 1)
                                              if "priority:" in text else text + "\npriority: 42\n")
        runtime.run(until=runtime.now() + timedelta(minutes=2), realtime=False)
        assert runtime.reloader.current["batch"].priority == 42

        (policies / "prod.yaml").write_text("priority: [not, a, number]\n")
        runtime.run(until=runtime.now() + timedelta(minutes=2), realtime=False)
        assert runtime.reloader.current["batch"].priority == 42  # last good set kept whole
        assert "prod" in runtime.reloader.current
        assert runtime.reloader.last_errors and "prod.yaml" in str(runtime.reloader.last_errors[0])

        runtime.request_reload()  # SIGHUP's handler: reload even without a change
        errors = runtime.reload_if_changed()
        assert errors and "prod.yaml" in errors[0]
    finally:
        runtime.close()


def test_json_log_lines_keep_plan_and_action_ids() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("burst.test.json")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.warning("action failed", extra={"plan_id": "c-0000007", "action_id": "c-0000007.2", "detail": "ICE"})
    line = json.loads(stream.getvalue())
    assert line["message"] == "action failed" and line["level"] == "warning"
    assert (line["plan_id"], line["action_id"], line["detail"]) == ("c-0000007", "c-0000007.2", "ICE")


def test_config_reload_applies_pacing_and_prices_keeps_the_rest_and_survives_a_broken_file(tmp_path: Path) -> None:
    config = copy_quickstart(tmp_path)
    original = config.read_text()
    runtime = build_runtime(load_run_config(config), state_path=tmp_path / "s.db", config_file=config)
    od = next(g for g in runtime.providers["sim"].node_groups() if g.id == "cloud-a100-od")
    price_before = runtime.catalog.group_price(od)
    try:
        start = runtime.now()
        runtime.run(until=start + timedelta(minutes=3), realtime=False)
        assert runtime.now() == start + timedelta(minutes=3)  # 1m ticks

        config.write_text(
            original.replace("loop_interval: 1m", "loop_interval: 5m").replace("cluster: quickstart", "cluster: other")
            + "catalog:\n  overrides:\n    - {provider: sim, instance_type: p4d.24xlarge, region: us-east-1,"
              " on_demand_usd_per_hour: 99.0, spot_usd_per_hour: 9.0, read_on: 2026-12-01}\n"
        )
        records: list[logging.LogRecord] = []
        handler = logging.Handler()
        handler.emit = records.append  # type: ignore[method-assign]
        logging.getLogger("burst").addHandler(handler)
        try:
            tick = runtime.now()
            runtime.run(until=tick + timedelta(minutes=10), realtime=False)
        finally:
            logging.getLogger("burst").removeHandler(handler)
        assert runtime.config.loop_interval == 300.0
        assert runtime.now() == tick + timedelta(minutes=10)  # reloaded after the first tick: two 5m waits, not ten 1m
        assert runtime.catalog.group_price(od) == 99.0 != price_before
        assert runtime.controller.prices is runtime.catalog
        assert runtime.config.cluster == "quickstart"  # needs a restart: the running value stays
        restart = [r for r in records if "only after a restart" in r.getMessage()]
        assert restart and restart[0].keys == ["cluster"]  # type: ignore[attr-defined]

        config.write_text("loop_interval: [1m\n")  # broken YAML
        errors = runtime.reload_if_changed()
        assert errors and "burst.yaml" in errors[0]
        assert runtime.config.loop_interval == 300.0 and runtime.catalog.group_price(od) == 99.0

        config.write_text(original.replace("loop_interval: 1m", "loop_interval: -3m"))  # valid YAML, bad value
        runtime.request_reload()
        errors = runtime.reload_if_changed()
        assert errors and "loop_interval" in errors[0]
        assert runtime.config.loop_interval == 300.0

        config.write_text(original + "catalog:\n  overrides:\n    - {provider: sim, instance_type: new-type,"
                          " region: us-east-1, on_demand_usd_per_hour: 5.0, read_on: 2026-12-01}\n")
        errors = runtime.reload_if_changed()  # a new type needs its GPU shape: refused whole
        assert errors and "gpu_model and gpus" in errors[0]
        assert runtime.catalog.group_price(od) == 99.0
    finally:
        runtime.close()


def test_json_log_records_every_plan_and_each_applied_action_with_the_plans_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    configure_logging("json", "info")  # what `burst run --log-format json --log-level info` installs
    runtime = build_runtime(load_run_config(None), state_path=tmp_path / "s.db")
    reports: list[TickReport] = []
    try:
        runtime.run(until=runtime.now() + timedelta(hours=4), on_tick=reports.append, realtime=False)
    finally:
        runtime.close()
        root.handlers[:] = handlers
        root.setLevel(level)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    plans = {line["plan_id"]: line for line in lines if line["message"] == "plan"}
    applied: dict[str, dict[str, dict[str, object]]] = {}
    for line in lines:
        if line["message"] == "action applied":
            assert line["level"] == "info" and line["logger"] == "burst.actuator"
            applied.setdefault(line["plan_id"], {})[line["action_id"]] = line
    assert len(reports) > 240 and len(plans) == len(reports)  # a heartbeat a minute, and ticks events woke
    acted = [r for r in reports if r.plan.actions]
    kinds = {a.kind for r in acted for a in r.plan.actions}
    assert ActionKind.SCALE_UP in kinds and ActionKind.PLACE_JOB in kinds  # cloud capacity and job placements
    for report in reports:
        plan = report.plan
        assert plans[plan.id]["actions"] == len(plan.actions) and plans[plan.id]["holds"] == len(plan.holds)
        failed = {o.action.id for o in report.outcomes if not o.ok}
        logged = applied.get(plan.id, {})
        assert set(logged) == {a.id for a in plan.actions} - failed
        for action in plan.actions:
            if action.id in logged:
                line = logged[action.id]
                assert (line["kind"], line["target"], line["reason"]) == (action.kind.value, action.target, action.reason)
    assert set(applied) <= set(plans)


@pytest.mark.parametrize("broken", ["empty", "truncated"])
def test_an_empty_or_truncated_config_is_refused_on_reload_as_at_start_and_logged(
    tmp_path: Path, broken: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = copy_quickstart(tmp_path)
    original = config.read_text()
    runtime = build_runtime(load_run_config(config), state_path=tmp_path / "s.db", config_file=config)
    try:
        start = runtime.now()
        runtime.run(until=start + timedelta(minutes=2), realtime=False)
        good = runtime.config
        assert good.loop_interval == 60.0 and good.node_groups

        # an editor's half-saved file: nothing, or the head of the file, without loop_interval and node_groups
        config.write_text("" if broken == "empty" else original[: original.index("loop_interval:")])
        with pytest.raises(ConfigError, match="no node groups"):
            build_runtime(load_run_config(config), state_path=tmp_path / "other.db")  # refused at start

        with caplog.at_level(logging.INFO, logger="burst"):
            errors = runtime.reload_if_changed()
        assert errors and "burst.yaml" in errors[0] and "no node groups" in errors[0]
        assert runtime.config is good and runtime.config.loop_interval == 60.0  # not the default 10 s
        failed = [r for r in caplog.records if r.getMessage().startswith("config reload failed")]
        assert len(failed) == 1 and failed[0].levelno == logging.ERROR
        assert failed[0].errors == errors  # type: ignore[attr-defined]
        assert not any(r.getMessage() == "config reloaded" for r in caplog.records)

        tick = runtime.now()
        runtime.run(until=tick + timedelta(minutes=3), realtime=False)
        assert runtime.now() == tick + timedelta(minutes=3)  # still 1m ticks on the last good config
    finally:
        runtime.close()
