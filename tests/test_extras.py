"""A lean install: the quickstart runs without any integration's SDK, and an integration a config uses without its
package installed is one line naming the extra that installs it (the real CLI in a process that cannot import
those packages)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from burst import plots
from burst.extras import EXTRAS, MissingExtra

ROOT = Path(__file__).resolve().parent.parent
GROUP = ("node_groups:\n  - id: g\n    provider: aws\n    tier: elastic\n    capacity_type: on_demand\n"
         "    instance_type: p4d.24xlarge\n    region: us-east-1\n    gpu_model: A100\n    gpus_per_node: 8\n"
         "    max_size: 2\naws:\n  region: us-east-1\n")


def lean(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "tests" / "without_extras.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_the_quickstart_runs_without_any_integrations_package(tmp_path: Path) -> None:
    out = lean("run", "--quiet", "--duration", "1h", "--state", str(tmp_path / "burst.db"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "stopped at" in out.stdout


def test_an_integration_without_its_package_is_one_line_naming_its_extra(tmp_path: Path) -> None:
    config = tmp_path / "burst.yaml"
    config.write_text("cluster: x\n" + GROUP)
    shutil.copytree(ROOT / "burst" / "data" / "quickstart" / "policies", tmp_path / "policies")
    out = lean("run", "--duration", "1h", "--config", str(config), cwd=tmp_path)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    [line] = out.stderr.strip().splitlines()
    assert "provider aws needs the Python package boto3" in line and "'burst-controller[aws]'" in line, line
    out = lean("jobs", "--state", "postgresql://burst@127.0.0.1:1/burst", cwd=tmp_path)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "psycopg, which is not installed: pip install 'burst-controller[postgres]'" in out.stderr, out.stderr


def test_a_report_without_matplotlib_names_the_reports_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an import of it now fails as if not installed
    with pytest.raises(MissingExtra, match=r"burst-controller\[reports\]"):
        plots.png(lambda theme: None, plots.LIGHT)  # type: ignore[arg-type,return-value]


def test_every_extra_is_declared_and_all_and_dev_include_them() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert set(EXTRAS.values()) <= set(extras)
    assert extras["all"] == [f"burst-controller[{','.join(sorted(set(EXTRAS.values()), key=list(extras).index))}]"]
    assert "burst-controller[all]" in extras["dev"]
    core = " ".join(project["dependencies"]).lower()
    assert not any(pkg in core for pkg in ("boto3", "google-cloud", "libcloud", "kubernetes", "psycopg", "matplotlib"))


def test_the_image_installs_every_integration_from_the_lock_on_a_pinned_base() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    bases = re.findall(r"^FROM (\S+)", dockerfile, re.M)
    assert bases and all(re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", b) for b in bases), bases
    assert "COPY pyproject.toml README.md constraints.txt" in dockerfile
    assert "pip install --no-cache-dir -c constraints.txt '.[all]'" in dockerfile
