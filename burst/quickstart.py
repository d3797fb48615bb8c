"""Where the embedded quickstart keeps its state between commands, and the instant a state file stands at.

`burst run` with neither --config nor --state runs the quickstart on a state
file in the per-user state directory (platformdirs' `user_state_dir`:
`$XDG_STATE_HOME/burst/quickstart/` on Linux, `~/.local/state/burst/quickstart/`
when XDG_STATE_HOME is unset), so that `burst jobs`, `submit`, `explain`,
`plan`, `usage` and `cost` without --config or --state read that same state.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from burst.runtime import load_run_config
from burst.state import MetaKey, Store
from policies import BurstConfig


def quickstart_state_path() -> Path:
    """The quickstart's state file in the per-user state directory."""
    from platformdirs import user_state_path

    return user_state_path("burst") / "quickstart" / "burst.db"


def state_path_for(config_path: Path | None, state: Path | str | None) -> Path | str:
    """The state file a command reads: --state, else the config's state_path, else the quickstart's."""
    if state is not None:
        return state
    if config_path is not None:
        return load_run_config(config_path).state_file()
    return quickstart_state_path()


def recorded_now(config: BurstConfig | None, store: Store) -> datetime:
    """The controller's "now" as the state file records it.

    A simulated clock's last tick where the config runs one (or, with no
    config, wherever the store has one); wall time otherwise, or before the
    first tick.
    """
    if config is None or config.clock == "sim":
        last = store.get_meta(MetaKey.LAST_TICK)
        if last is not None:
            return datetime.fromisoformat(last)
    return datetime.now(UTC)


__all__ = ["quickstart_state_path", "recorded_now", "state_path_for"]
