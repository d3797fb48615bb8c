"""The daemon reloads tenant policies on SIGHUP or file change, keeps the last good set on error, logs JSON."""

from __future__ import annotations

import io
import json
import logging
import shutil
from datetime import timedelta
from pathlib import Path

from burst.logs import JsonFormatter
from burst.runtime import build_runtime, load_run_config, quickstart_config_path


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
