"""A provider package's names, imported when first used: importing the package (for its spec) loads no SDK."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from types import ModuleType


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], object]:
    """A module `__getattr__` for `package` that imports each name in `where` from its module on first use.

    A name that is also a submodule's (`connect` of `connect.py`) is bound to the name again once the
    submodule is imported, since importing a submodule binds the package's attribute to the module."""

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        pkg = sys.modules[package]
        setattr(pkg, name, value)
        for other, home in where.items():  # names a submodule import has shadowed since
            if isinstance(getattr(pkg, other, None), ModuleType) and home in sys.modules:
                setattr(pkg, other, getattr(sys.modules[home], other))
        return value

    return __getattr__


__all__ = ["lazy_exports"]
