"""The state file on disk: its integrity on open, its permissions, its backups, and starting over on purpose.

A state file holds jobs (with their commands), the intent journal and the
ledgers, so it is never silently replaced:

- `check_file` runs before SQLite opens an existing file: a 0-byte file (with
  no write-ahead log beside it), a file shorter than SQLite's header, or one
  whose first bytes are not SQLite's is refused with `DamagedStore`, one line
  naming the file, what is wrong and how to recover. `check_open` runs
  SQLite's `PRAGMA quick_check` once the file is open (a truncated file, or
  garbage in later pages, is refused the same way).
- `make_private` leaves the file readable by its owner only (0600); SQLite
  gives its `-wal` and `-shm` files the same mode.
- `backup` copies the open store with SQLite's online backup API into
  `<state>.backups/` (0700), checks the copy, and keeps the newest `keep`.
- `move_aside` is `--fresh`: the damaged file (and its `-wal`/`-shm`) is
  renamed `<state>.damaged-<time>`, never deleted, and a new store starts.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime
from pathlib import Path

SQLITE_HEADER = b"SQLite format 3\x00"
BACKUP_SUFFIX = ".db"
DEFAULT_BACKUP_KEEP = 3
DEFAULT_BACKUP_INTERVAL_S = 3600.0


class DamagedStore(RuntimeError):
    """The state file is empty, truncated or corrupt: the message is one line with the file, the problem and
    the way to recover."""


def backup_dir(path: Path) -> Path:
    """Where the backups of state file `path` go: `<state>.backups/` beside it."""
    return path.with_name(path.name + ".backups")


def backups(path: Path) -> list[Path]:
    """The backups of state file `path`, oldest first (their names sort by the time they were taken)."""
    folder = backup_dir(path)
    try:
        return sorted(p for p in folder.iterdir() if p.name.startswith(path.name + ".") and p.suffix == BACKUP_SUFFIX)
    except OSError:
        return []


def recovery(path: Path) -> str:
    """How to recover a damaged state file: restore its newest backup, or start over with --fresh."""
    saved = backups(path)
    restore = f"restore the last good backup (cp {saved[-1]} {path}), or " if saved else "no backup exists; "
    return f"{restore}start over with `burst run --fresh` (moves the damaged file aside)"


def damaged(path: Path, problem: str) -> DamagedStore:
    """The error for state file `path` with `problem`: one line naming it, the problem and the recovery."""
    return DamagedStore(f"{path}: state file {problem}; {recovery(path)}")


def check_file(path: Path) -> None:
    """Decide whether an existing state file may be opened: raise DamagedStore if it is empty or not SQLite."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise damaged(path, f"cannot be read ({exc.strerror or exc})") from None
    wal = path.with_name(path.name + "-wal")
    if size == 0:
        if wal.exists() and wal.stat().st_size > 0:
            return  # content only in the write-ahead log so far: SQLite reads it from there
        raise damaged(path, "is empty (0 bytes), not the store it was")
    if head != SQLITE_HEADER:
        what = "is truncated (shorter than an SQLite header)" if len(head) < len(SQLITE_HEADER) else \
            "is not an SQLite database (its header is wrong)"
        raise damaged(path, what)


def check_open(conn: sqlite3.Connection, path: Path) -> None:
    """Decide whether an opened state file is sound (`PRAGMA quick_check`); raise DamagedStore if not."""
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise  # another process holds it: not damage
        raise damaged(path, f"is corrupt ({exc})") from None
    except sqlite3.DatabaseError as exc:
        raise damaged(path, f"is corrupt ({exc})") from None
    verdict = [str(r[0]) for r in rows]
    if verdict != ["ok"]:
        said = " ".join(" ".join(verdict[:3]).split())[:160] if verdict else "no answer"
        raise damaged(path, f"is corrupt (quick_check: {said}{' ...' if len(verdict) > 3 else ''})")


def make_private(path: Path) -> None:
    """Make state file `path` readable and writable by its owner only (0600); a file we do not own stays."""
    try:
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
    except OSError:
        pass


def backup(conn: sqlite3.Connection, path: Path, now: datetime, *, keep: int = DEFAULT_BACKUP_KEEP) -> Path:
    """Copy the open store of `path` to `<state>.backups/<state>.<UTC time>.db` with SQLite's online backup
    API, check the copy, and delete all but the newest `keep` backups; return the new backup.

    A copy that fails its quick_check is deleted and DamagedStore raised: the store itself is damaged.
    """
    folder = backup_dir(path)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = folder / f"{path.name}.{now:%Y%m%dT%H%M%S%fZ}{BACKUP_SUFFIX}"
    partial = target.with_name(target.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.close(fd)
    try:
        copy = sqlite3.connect(partial)
        try:
            conn.backup(copy)
            check_open(copy, path)
        finally:
            copy.close()
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    for old in backups(path)[:-keep] if keep > 0 else []:
        old.unlink(missing_ok=True)
    return target


def move_aside(path: Path, now: datetime) -> Path | None:
    """`--fresh`: rename state file `path` (and its -wal, -shm) to `<state>.damaged-<UTC time>`; the new name,
    or None when there was no file."""
    if not path.exists():
        return None
    aside = path.with_name(f"{path.name}.damaged-{now:%Y%m%dT%H%M%SZ}")
    for suffix in ("-wal", "-shm"):
        extra = path.with_name(path.name + suffix)
        if extra.exists():
            extra.rename(aside.with_name(aside.name + suffix))
    path.rename(aside)
    return aside
