"""Every option of every command is in the README's entry for that command, so docs and help cannot drift."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click

from burst.cli import main

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def commands(group: click.Group, prefix: str = "burst") -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        if isinstance(command, click.Group):
            yield from commands(command, path)
        else:
            yield path, command


def readme_entries(path: str) -> str:
    """The README's command entries (`- \\`burst NAME ...`) for `path`, up to the next entry or heading."""
    found = re.findall(rf"^- `{re.escape(path)}\b.*?(?=^- `|^#)", README, re.S | re.M)
    return "\n".join(found)


def test_every_command_has_a_readme_entry_naming_each_of_its_options() -> None:
    missing = []
    for path, command in commands(main):
        entry = readme_entries(path)
        if not entry:
            missing.append(f"{path}: no README entry")
            continue
        for param in command.params:
            if isinstance(param, click.Option):
                flag = max(param.opts, key=len)
                if flag != "--help" and not re.search(rf"{re.escape(flag)}\b", entry):
                    missing.append(f"{path}: {flag}")
    assert not missing, "README entries lack: " + "; ".join(missing)
