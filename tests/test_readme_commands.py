"""The README's two commands are what CI runs, and they install from the lock."""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    """The lines of the README's first code block: the install-and-run and the test command."""
    text = (ROOT / "README.md").read_text()
    block = re.match(r"# burst\n\n```\n(.*?)\n```\n", text, re.S)
    assert block, "README.md must open with its commands in a code block"
    return block.group(1).splitlines()


def ci_lines() -> list[str]:
    return (ROOT / ".ci" / "run").read_text().splitlines()


def test_readme_opens_with_exactly_two_commands() -> None:
    first, second = readme_commands()
    assert first.endswith("burst run --duration 12h")
    assert "python -m pytest" in second


def test_ci_runs_both_readme_commands_verbatim_in_order() -> None:
    lines = ci_lines()
    positions = []
    for command in readme_commands():
        # `|| exit 1`, since `set -e` does not stop inside an `&&` list.
        assert f"{command} || exit 1" in lines, f".ci/run does not run the README's command verbatim: {command}"
        positions.append(lines.index(f"{command} || exit 1"))
    assert positions == sorted(positions), "the install-and-run command comes before the test command"


def test_both_commands_install_from_the_lock_and_the_first_keeps_the_venv_pip() -> None:
    first, second = readme_commands()
    assert "pip install -c constraints.txt -e . " in first
    assert "pip install -c constraints.txt -e '.[dev]' " in second
    assert "--upgrade pip" not in first


def test_ci_keeps_quickstart_state_in_a_temporary_directory() -> None:
    lines = ci_lines()
    first = lines.index(f"{readme_commands()[0]} || exit 1")
    exported = [i for i, line in enumerate(lines) if line.startswith("export XDG_STATE_HOME")]
    assert exported and exported[0] < first
    assert any(line.startswith('XDG_STATE_HOME="$(mktemp -d)"') for line in lines[: exported[0]])


def locked_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split(";")[0].strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt pins exact versions, not {line!r}"
            pins[canonicalize_name(name)] = version
    return pins


def test_the_lock_pins_every_declared_dependency_within_its_bounds() -> None:
    """A bound raised in pyproject.toml without re-running scripts/lock.sh fails here."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = locked_pins()
    extras = [spec for specs in project["optional-dependencies"].values() for spec in specs]
    for spec in project["dependencies"] + extras:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        if name == canonicalize_name(project["name"]):
            continue  # an extra naming others (all, dev): their packages are checked where they are declared
        assert name in pins, f"{name} is declared in pyproject.toml but not locked: run scripts/lock.sh"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside {requirement.specifier}: run scripts/lock.sh"
        )


def test_the_lock_resolves_kubernetes_against_botocore() -> None:
    """kubernetes 37.0.2+ needs python-dateutil>=3, which botocore refuses; the lock holds one that fits."""
    pins = locked_pins()
    assert int(pins["python-dateutil"].split(".")[0]) < 3
    assert tuple(int(part) for part in pins["kubernetes"].split(".")[:3]) <= (37, 0, 1)


def test_the_forecasters_burst_serves_install_with_the_first_command() -> None:
    """`burst forecast --backtest` scores AutoETS after `pip install -e .` alone: statsforecast is a main dependency."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    main = {canonicalize_name(Requirement(spec).name) for spec in project["dependencies"]}
    assert {"statsforecast", "prophet", "platformdirs"} <= main
