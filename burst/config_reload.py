"""What a changed `burst.yaml` means for a running daemon: which keys apply at once, which need a restart.

The daemon re-reads its config on SIGHUP or when the file changes. Keys that
only pace or price the loop (`loop_interval`, `loop_jitter`, `catalog`) are
applied between ticks; keys that shape what the daemon was built from
(providers, node groups, state file, clock, API, leader lease, job sources)
are reported as needing a restart and keep their running value, so a reload
never leaves the daemon half rebuilt.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies import BurstConfig

LIVE_KEYS: frozenset[str] = frozenset({"loop_interval", "loop_jitter", "catalog"})
"""Top-level burst.yaml keys a running daemon applies on reload."""


@dataclass(frozen=True)
class ConfigChange:
    """The top-level keys that differ between the running and the reloaded config."""

    live: tuple[str, ...]
    restart: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.live and not self.restart


def diff_config(running: BurstConfig, reloaded: BurstConfig) -> ConfigChange:
    """Decide which top-level keys changed, split into those applied live and those that need a restart."""
    changed = sorted(
        name for name in type(running).model_fields
        if getattr(running, name) != getattr(reloaded, name)
    )
    return ConfigChange(
        live=tuple(k for k in changed if k in LIVE_KEYS),
        restart=tuple(k for k in changed if k not in LIVE_KEYS),
    )


def apply_live(running: BurstConfig, reloaded: BurstConfig, change: ConfigChange) -> BurstConfig:
    """Decide the config the daemon runs on after a reload: the running one with only the live keys replaced."""
    return running.model_copy(update={k: getattr(reloaded, k) for k in change.live})


__all__ = ["LIVE_KEYS", "ConfigChange", "apply_live", "diff_config"]
