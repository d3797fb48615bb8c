"""Printing a command's table so what a user pastes into the next command is never cut.

Rich fits a table to the terminal by cutting cells (`syn-202603021…`), and
to 80 columns when output goes to a pipe. `print_table` decides otherwise:
through a pipe or into a file, nothing is cut (the table is as wide as its
widest row); on a terminal, the `whole` columns (ids and names that
`burst explain`, `--tenant` and the like take) keep their longest value's
width and never wrap, the `droppable` columns are left out, least important
first, while the table is wider than the terminal (the caption says which;
`--json` has them all), and the other columns fold onto more lines instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

UNBOUNDED_WIDTH = 100_000
"""The console width for output that is not a terminal: wider than any row, so no cell is ever cut."""


def print_table(table: Table, *, whole: Sequence[str] = (), droppable: Sequence[str] = (),
                terminal: bool | None = None, width: int | None = None) -> None:
    """Print `table` to stdout with the cells of its `whole` columns never cut or wrapped, nothing cut at all off
    a terminal, and on a terminal the `droppable` columns (least important first) left out while it does not
    fit (`terminal` and `width` override what stdout is, for tests)."""
    on_terminal = Console().is_terminal if terminal is None else terminal  # rich's test (TTY_COMPATIBLE, a tty)
    for column in table.columns:
        if str(column.header) in whole:
            column.no_wrap = True
            column.overflow = "ignore"
            column.min_width = max([len(str(column.header)), *(len(str(c)) for c in column._cells)])
        elif column.overflow == "ellipsis":
            column.overflow = "fold"
    console = Console(width=(width or None) if on_terminal else UNBOUNDED_WIDTH, soft_wrap=not on_terminal)
    if on_terminal:
        _drop_to_fit(console, table, droppable)
    console.print(table)


def _drop_to_fit(console: Console, table: Table, droppable: Sequence[str]) -> None:
    """Leave out `droppable` columns, in order, while `table` is wider than `console`; the caption names them."""
    dropped: list[str] = []
    for header in droppable:
        if console.measure(table, options=console.options.update_width(UNBOUNDED_WIDTH)).maximum <= console.width:
            break
        for column in list(table.columns):
            if str(column.header) == header:
                table.columns.remove(column)
                dropped.append(header)
    if dropped:
        note = f"{', '.join(dropped)} left out at {console.width} columns (--json, or a wider terminal, shows them)"
        table.caption = f"{table.caption}; {note}" if table.caption else note


__all__ = ["UNBOUNDED_WIDTH", "print_table"]
