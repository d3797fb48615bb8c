"""The state file on disk: its integrity on open, its permissions, its backups, and starting over on purpose.

A state file holds jobs (with their commands), the intent journal and the
ledgers, so it is never silently replaced:

- `check_file` runs before SQLite opens an existing file: a 0-byte file, a
  file shorter than SQLite's header, or one whose first bytes are not
  SQLite's is refused with `DamagedStore`, one line naming the file, what is
  wrong and how to recover. A 0-byte file with its write-ahead log beside it
  (a crash before the first checkpoint) is refused too: SQLite would discard
  the log on opening, and the log may be all the store there is.
  `check_missing` refuses to create a new file where a `-wal` or backups of
  an old one are left (a deleted state file is not a fresh start; `--fresh`
  is). `check_open` runs SQLite's `PRAGMA quick_check` once the file is open
  (a truncated file, or garbage in later pages, is refused the same way) and
  `check_writable` refuses a store SQLite opens read-only (a damaged header,
  a read-only file or filesystem).
- `read_only_uri` opens a file for reading without creating, checkpointing or
  deleting it or its log (the read-only commands beside a running daemon).
- `make_private` leaves the file readable by its owner only (0600); SQLite
  gives its `-wal` and `-shm` files the same mode.
- `backup` copies the open store with SQLite's online backup API into
  `<state>.backups/` (0700), checks the copy, and keeps the newest `keep`
  (newest by when the copy was written, not by the clock in its name: a
  simulated clock restarted by `--fresh` runs behind the old run's).
- `recovery` names the newest backup that passes its own check, never a
  damaged one.
- `move_aside` is `--fresh`: the damaged file (and its `-wal`/`-shm`) is
  renamed `<state>.damaged-<time>`, never deleted, and a new store starts.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

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
    """The backups of state file `path`, oldest first: by when each was written, then by name (the clock in a
    name may be a simulated one, and a run started over with --fresh may name its copies before the old run's)."""
    folder = backup_dir(path)
    try:
        found = [p for p in folder.iterdir() if p.name.startswith(path.name + ".") and p.suffix == BACKUP_SUFFIX]
        return sorted(found, key=lambda p: (p.stat().st_mtime_ns, p.name))
    except OSError:
        return []


def backup_taken_at(copy: Path) -> datetime | None:
    """The controller's clock when backup `copy` (`<state>.<UTC time>[-n].db`) was taken, from its name."""
    try:
        stamp = copy.name.rsplit(".", 2)[-2].split("-")[0]
        return datetime.strptime(stamp, "%Y%m%dT%H%M%S%fZ").replace(tzinfo=UTC)
    except (ValueError, IndexError):
        return None


def backup_problem(copy: Path) -> str | None:
    """Decide whether backup `copy` could be restored: None when it is a sound SQLite file, else what is wrong.

    Read without writing anything beside it (no -wal, no -shm), so checking a backup never changes it.
    """
    try:
        check_file(copy)
        if not copy.exists():
            return "is gone"
        conn = sqlite3.connect(read_only_uri(copy, immutable=True), uri=True)
    except (DamagedStore, sqlite3.Error) as exc:
        return str(exc)
    try:
        verdict = [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall()]
        return None if verdict == ["ok"] else f"quick_check: {' '.join(verdict[:2])[:120]}"
    except sqlite3.Error as exc:
        return str(exc)
    finally:
        conn.close()


def recovery(path: Path) -> str:
    """How to recover a damaged state file: restore its newest backup that passes its check (a damaged backup is
    never named), or start over with --fresh."""
    saved = backups(path)
    skipped = 0
    for copy in reversed(saved):
        if backup_problem(copy) is None:
            also = f"; {skipped} newer backup(s) are damaged too" if skipped else ""
            return f"restore the last good backup (cp {copy} {path}){also}, or start over with `burst run --fresh` " \
                "(moves the damaged file aside)"
        skipped += 1
    restore = f"no good backup exists ({skipped} damaged); " if skipped else "no backup exists; "
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
    if size == 0:
        wal = _log_size(path)
        if wal:  # SQLite takes a 0-byte file for a new database and throws this log away on opening it
            raise damaged(path, f"is empty (0 bytes) but its write-ahead log {path.name}-wal ({wal} bytes) is beside "
                                "it; both are left as they are (copy them aside before anything else)")
        raise damaged(path, "is empty (0 bytes), not the store it was")
    if head != SQLITE_HEADER:
        what = "is truncated (shorter than an SQLite header)" if len(head) < len(SQLITE_HEADER) else \
            "is not an SQLite database (its header is wrong)"
        raise damaged(path, what)


def _log_size(path: Path) -> int:
    """The size of state file `path`'s write-ahead log (0 when there is none)."""
    try:
        return path.with_name(path.name + "-wal").stat().st_size
    except OSError:
        return 0


def check_missing(path: Path) -> None:
    """Decide whether a new state file may be created at `path`, which does not exist: raise DamagedStore when a
    write-ahead log or backups of an earlier file are beside it (it was deleted or moved, not never made)."""
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        raise damaged(path, f"is missing but its write-ahead log {wal.name} ({_log_size(path)} bytes) is beside it; "
                            "it is left as it is")
    if backups(path):
        raise damaged(path, f"is missing but backups of it are in {backup_dir(path)}")


def read_only_uri(path: Path, *, immutable: bool = False) -> str:
    """The SQLite URI that opens `path` for reading only: SQLite then never checkpoints or deletes its log.

    `immutable` also skips the log and its index (nothing is created beside the file): for a file no process
    writes, such as a backup, or a state file with no log beside it (no daemon has it open).
    """
    return f"file:{quote(os.fspath(path))}?mode=ro{'&immutable=1' if immutable else ''}"


def check_writable(conn: sqlite3.Connection, path: Path) -> None:
    """Decide whether an opened state file can be written: a write rolled back at once; raise DamagedStore if
    SQLite refuses it (a header that makes the file read-only, a read-only file or filesystem)."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            conn.execute(f"PRAGMA user_version = {version}")
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise  # another process is writing: not damage
        raise damaged(path, f"cannot be written ({exc})") from None


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
    stamp = f"{path.name}.{now:%Y%m%dT%H%M%S%fZ}"
    target = folder / f"{stamp}{BACKUP_SUFFIX}"
    n = 0
    while target.exists():  # a clock started again (--fresh on a simulated clock): never over an older copy
        n += 1
        target = folder / f"{stamp}-{n}{BACKUP_SUFFIX}"
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
    """`--fresh`: rename state file `path` (and its -wal, -shm, also when the file itself is gone) to
    `<state>.damaged-<UTC time>`; the new name, or None when there was nothing to move."""
    extras = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    if not path.exists() and not any(extra.exists() for extra in extras):
        return None
    aside = path.with_name(f"{path.name}.damaged-{now:%Y%m%dT%H%M%SZ}")
    for extra in extras:
        if extra.exists():
            extra.rename(aside.with_name(aside.name + extra.name[len(path.name):]))
    if path.exists():
        path.rename(aside)
    return aside
