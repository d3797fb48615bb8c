"""`bench/strategies.py` with the loop's per-tick store writes switched off: a measurement, never a way to run burst.

    python bench/without_store_writes.py --speed --workers 1     # any bench/strategies.py arguments

Every reconcile tick writes two things to the store besides the plan and its
provider actions: the intent journal of the plan's job actions (each action
journaled as sent before it is applied, and confirmed after: `burst.actuator`)
and the controller's memory (`burst.memory`: the sections that changed, and
completed jobs' run times). This script runs `bench/strategies.py` with
those writes turned into no-ops in its own process (job actions are applied
unjournaled; `ControllerMemory.save` neither compares its sections with what
it last wrote nor writes them or the run times, and `Store.put_memory` writes
nothing), so `bench/speed_side_by_side.py --store-writes` can time the same
replay with and without them, side by side. The replays decide the same:
nothing in a simulation reads the journal of job actions or the memory back.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from burst.actuator import Actuator, JobApplier, Outcome  # noqa: E402
from burst.memory import ControllerMemory  # noqa: E402
from burst.model import Action  # noqa: E402
from burst.state import Store  # noqa: E402


def _apply_unjournaled(self: Actuator, plan_id: str, actions: Sequence[Action],
                       apply_job: JobApplier | None) -> list[Outcome]:
    """`Actuator._apply_jobs` without its journal: apply each job action in order, and say each applied."""
    assert apply_job is not None
    for action in actions:
        apply_job(action)
    return [Outcome(a, self.idempotency_key(plan_id, a), True) for a in actions]


def _save_nothing(self: ControllerMemory, store: Store) -> None:
    """`ControllerMemory.save` without writing (nor comparing the sections with what was last written): only
    forget what a save forgets."""
    for name in self._applied:
        self.events.pop(name, None)
    self._applied = set()
    self._new_runtimes = []
    self._interruptions_due = False


def switch_off_store_writes() -> None:
    """Turn the journal of job actions and the memory's writes into no-ops in this process."""
    Actuator._apply_jobs = _apply_unjournaled  # type: ignore[method-assign]
    ControllerMemory.save = _save_nothing  # type: ignore[method-assign]
    Store.put_memory = lambda self, sections: None  # type: ignore[method-assign]  # the events kept as read


if __name__ == "__main__":
    switch_off_store_writes()
    import strategies

    raise SystemExit(strategies.main())
