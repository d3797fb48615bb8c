"""From the quickstart to a config of one's own: `burst init`, `burst config`, a config copied without its
policies, output that can be pasted into the next command, and usage that adds up to the run's spend (the real
CLI on real state files)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from burst.cli import main
from burst.model import month_start
from burst.state import Store

ROOT = Path(__file__).resolve().parent.parent


def plain(text: str) -> str:
    """`text` without the terminal's colour codes."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner(env=env).invoke(main, list(args))


def test_a_config_copied_without_its_policies_fails_in_one_line_naming_the_directory(tmp_path: Path) -> None:
    shutil.copy(ROOT / "burst" / "data" / "quickstart" / "burst.yaml", tmp_path / "burst.yaml")
    result = cli("run", "--quiet", "--duration", "1h", "--config", str(tmp_path / "burst.yaml"))
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert f"{tmp_path / 'policies'}:1:" in line and "does not exist" in line and "burst init" in line, line
    assert not list(tmp_path.glob("burst.db*")), "nothing started: no packaged policies stood in"


def test_burst_init_writes_a_config_that_validates_and_runs_and_never_overwrites(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    result = cli("init", str(mine))
    assert result.exit_code == 0, result.output
    config = mine / "burst.yaml"
    assert config.read_text().startswith("# Your burst config, written by `burst init`")
    assert sorted(p.name for p in (mine / "policies").glob("*.yaml")) == ["batch.yaml", "prod.yaml", "research.yaml"]
    checked = cli("config", "validate", "--json", str(config))
    assert checked.exit_code == 0 and json.loads(checked.output) == {
        "file": str(config), "valid": True, "errors": [], "node_groups": 3, "tenants": 3}
    assert cli("run", "--quiet", "--duration", "1h", "--config", str(config)).exit_code == 0
    before = config.read_text()
    again = cli("init", str(mine))
    assert again.exit_code == 1 and "already exists" in again.output and config.read_text() == before


def test_config_validate_names_every_bad_line_and_schema_is_the_config_schema(tmp_path: Path) -> None:
    assert cli("init", str(tmp_path)).exit_code == 0
    config = tmp_path / "burst.yaml"
    config.write_text(config.read_text().replace("loop_interval: 1m", "loop_interval: soon"))
    (tmp_path / "policies" / "prod.yaml").write_text("tenant: prod\npriority: high\n")
    result = cli("config", "validate", str(config))
    assert result.exit_code == 1
    assert re.search(rf"{re.escape(str(config))}:\d+: loop_interval", result.output), result.output
    schema = json.loads(cli("config", "schema").output)
    assert "loop_interval" in schema["properties"] and "loop_max_failing" in schema["properties"]


@pytest.fixture
def ran(tmp_path: Path) -> Path:
    path = tmp_path / "burst.db"
    assert cli("run", "--quiet", "--duration", "12h", "--state", str(path)).exit_code == 0
    return path


@pytest.mark.parametrize("where", ["a pipe", "an 80-column terminal"])
def test_ids_and_names_are_whole_at_80_columns_and_through_a_pipe(ran: Path, where: str) -> None:
    # `syn-202603021…` could not be pasted into `burst explain`, nor `resear…` into --tenant.
    env = {"TTY_COMPATIBLE": "1", "COLUMNS": "80"} if where == "an 80-column terminal" else {"COLUMNS": "80"}
    ids = [j["id"] for j in json.loads(cli("jobs", "--json", "--state", str(ran)).output)]
    listed = cli("jobs", "--state", str(ran), env=env)
    shown = plain(listed.output)
    assert listed.exit_code == 0 and ids
    assert all(i in shown for i in ids), [i for i in ids if i not in shown][:3]
    assert "…" not in shown
    usage = cli("usage", "--state", str(ran), env=env)
    assert usage.exit_code == 0 and all(t in plain(usage.output) for t in ("research", "batch", "prod"))
    assert "…" not in plain(usage.output)
    if where == "an 80-column terminal":
        assert max(len(line) for line in shown.splitlines()) <= 80
        assert "left out at 80" in shown


def test_usage_adds_up_to_what_the_run_spent(ran: Path) -> None:
    # Before: $444.65 of usage against the run's $693.14 (idle capacity was on no row).
    with Store.open(ran, read_only=True) as store:
        now = max(c.at for c in store.costs())
        spent = sum(store.cost_by_line(since=month_start(now)).values())
    usage = json.loads(cli("usage", "--json", "--state", str(ran)).output)
    tenants = sum(t["usd"] for t in usage["tenants"].values())
    assert usage["idle"]["usd"] > 0
    assert usage["total_usd"] == pytest.approx(spent, abs=0.01)
    assert usage["total_usd"] == pytest.approx(tenants + usage["idle"]["usd"] + usage["warm_pool"]["usd"], abs=1e-6)
    table = cli("usage", "--state", str(ran)).output
    assert re.search(rf"total\s*│\s*│\s*{spent:,.2f}", table), table[-600:]


def test_explain_json_keys_are_the_readmes(ran: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    said = re.search(r"`--json` prints a list of\s+`\{(.*?)\}`", readme, re.S)
    timeline = re.search(r"with `--timeline`, a list of\s+`\{(.*?)\}`", readme, re.S)
    assert said and timeline
    keys = {k.strip().strip('"') for k in said.group(1).split(",")}
    timeline_keys = {k.strip().strip('"') for k in timeline.group(1).split(",")}
    decisions = json.loads(cli("explain", "cloud-a100-spot", "--json", "--state", str(ran)).output)
    assert decisions and all(set(d) == keys for d in decisions)
    entries = json.loads(cli("explain", "cloud-a100-spot", "--timeline", "--json", "--state", str(ran)).output)
    assert entries and all(set(e) == timeline_keys for e in entries)
