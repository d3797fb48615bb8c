"""Process-wide settings read from the environment, with documented defaults."""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "BURST_DATA_DIR"
DEFAULT_DATA_DIR = "../shared/data"


def data_dir() -> Path:
    """Where the real traces and demand series live (`$BURST_DATA_DIR`, default `../shared/data`)."""
    return Path(os.environ.get(DATA_DIR_ENV, DEFAULT_DATA_DIR))
