"""`burst` as installed without its optional integrations: `python tests/without_extras.py ARGS...` runs the CLI
with every extra's package unimportable (`burst.extras.EXTRAS`), as in a venv of `pip install burst-controller`."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from burst.extras import EXTRAS  # noqa: E402


class WithoutExtras(importlib.abc.MetaPathFinder):
    """Refuses every module of an optional integration's package, as if it were not installed."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if name.split(".")[0] in EXTRAS and not name.startswith("google.protobuf"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


if __name__ == "__main__":
    sys.meta_path.insert(0, WithoutExtras())
    from burst.cli import main

    sys.argv[0] = "burst"
    main()
