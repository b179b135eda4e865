"""An SQLite file kept as a cache: a shortcut that never stops a run and never loses one.

A cache that is damaged (not a database, truncated, torn pages, a table of another shape, a
directory in its place) is set aside beside it, `answers.damaged-20261124T164001.sqlite` with its
journal files, and a new one is built in its place; a warning names both. A cache that cannot be
used as it is (locked by another process, read-only, a full disk) is left untouched: a read-only
one is still read, a locked one is not used for the rest of the run; a warning says so. Every
failure turns a lookup into a miss and a write into a no-op: the run goes on as without a cache.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Sequence

# Primary SQLite result codes of a cache that is fine but cannot be used now, or not written:
# the file stays where it is. Every other failure means the file is not the cache it should be.
BUSY, LOCKED, READONLY, IOERR, FULL, CANTOPEN, PERM = 5, 6, 8, 10, 13, 14, 3
IN_USE = (BUSY, LOCKED)
UNWRITABLE = (READONLY, FULL, CANTOPEN, PERM)
TIMEOUT_S = 2.0  # how long a call waits for a cache another process is writing
JOURNALS = ("-wal", "-shm", "-journal")


def _code(exc: sqlite3.Error) -> int:
    return (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF


def _shape(tables: dict[str, str]) -> dict[str, list[tuple[str, str, int]]]:
    """Each table's columns (name, declared type, primary key position) as SQLite reports them."""
    db = sqlite3.connect(":memory:")
    try:
        for name, columns in tables.items():
            db.execute(f"CREATE TABLE {name} ({columns})")
        return {name: _columns(db, name) for name in tables}
    finally:
        db.close()


def _columns(db: sqlite3.Connection, table: str) -> list[tuple[str, str, int]]:
    return [(row[1], str(row[2]).upper(), row[5]) for row in db.execute(f"PRAGMA table_info({table})")]


class Damaged(Exception):
    """The file is not the cache it should be."""


class CacheDB:
    """One cache file, shared by the threads of a process (`what` names it in warnings)."""

    def __init__(self, path: Path, tables: dict[str, str], *, what: str):
        self.path, self.tables, self.what = Path(path), tables, what
        self.expected = _shape(tables)
        self.warnings: list[str] = []
        self.readable = self.writable = False
        self._db: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file opened
        self._lock = threading.Lock()
        with self._lock:
            self._start()

    # ---- use ----------------------------------------------------------------------------------

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a query; none when the cache cannot be read."""
        with self._lock:
            if not self.readable or self._db is None:
                return []
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                self._failed(exc, "read")
                return []

    def write(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Write `rows` in one transaction; nothing when the cache cannot be written."""
        with self._lock:
            for attempt in range(2):  # a second time into the new file when the first was damaged
                if not self.writable or self._db is None:
                    return
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                    self._db.executemany(sql, rows)
                    self._db.execute("COMMIT")
                    return
                except sqlite3.Error as exc:
                    self._rollback()
                    if not self._failed(exc, "written") or attempt:
                        return

    def close(self) -> None:
        with self._lock:
            self._close()

    # ---- opening, setting aside ----------------------------------------------------------------

    def _start(self) -> None:
        try:
            self._open()
        except Damaged as exc:
            self._set_aside(str(exc))
        except sqlite3.Error as exc:
            if _code(exc) in UNWRITABLE:
                self._open_read_only(exc)
            elif _code(exc) in IN_USE:
                self._give_up(f"another process holds it ({exc})")
            else:
                self._set_aside(str(exc))
        except OSError as exc:
            self._give_up(f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc))

    def _open(self) -> None:
        self._close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and not self.path.is_file():
            raise Damaged(f"expected a file, found a {'folder' if self.path.is_dir() else 'special file'}")
        db = self._db = sqlite3.connect(self.path, timeout=TIMEOUT_S, check_same_thread=False, isolation_level=None)
        self._identity = None
        if self.path.exists():
            stat = self.path.stat()
            self._identity = (stat.st_dev, stat.st_ino)
        db.execute("PRAGMA journal_mode=WAL")
        # a cache: a power cut may cost the last rows written (never the file), not a sync a write
        db.execute("PRAGMA synchronous=NORMAL")
        for name, columns in self.tables.items():
            db.execute(f"CREATE TABLE IF NOT EXISTS {name} ({columns})")
        self._check_shape(db)
        self.readable = self.writable = True

    def _check_shape(self, db: sqlite3.Connection) -> None:
        for name, expected in self.expected.items():
            found = _columns(db, name)
            if found != expected:
                shown = ", ".join(f"{c[0]} {c[1]}".strip() for c in found) or "no columns"
                raise Damaged(f"its table {name} has columns ({shown}), expected ({self.tables[name]})")
            db.execute(f"SELECT * FROM {name} LIMIT 1").fetchall()

    def _open_read_only(self, why: sqlite3.Error) -> None:
        """Read what the cache holds without writing anything, not even its journal files (in a
        folder that cannot be written, only as an immutable file)."""
        self._close()
        failed: Exception | None = None
        for options in ("mode=ro", "mode=ro&immutable=1"):
            try:
                db = self._db = sqlite3.connect(
                    f"{self.path.resolve().as_uri()}?{options}",
                    uri=True,
                    timeout=TIMEOUT_S,
                    check_same_thread=False,
                    isolation_level=None,
                )
                self._check_shape(db)
            except (sqlite3.Error, Damaged, OSError) as exc:
                self._close()
                failed = exc
                continue
            self.readable = True
            self.warnings.append(
                f"{self.what} {self.path} cannot be written ({why}): what it holds is used, nothing new is kept"
            )
            return
        self._give_up(f"it cannot be written ({why}) nor read ({failed})")

    def _give_up(self, why: str) -> None:
        self._close()
        self.readable = self.writable = False
        self.warnings.append(f"{self.what} {self.path} is not used in this run: {why}")

    def _failed(self, exc: sqlite3.Error, doing: str) -> bool:
        """Deal with a failure while in use; True when a new cache was built in place of a damaged one."""
        code = _code(exc)
        if code in IN_USE or code in UNWRITABLE or code == IOERR:
            if doing == "written":
                self.writable = False
                self.warnings.append(f"{self.what} {self.path} cannot be written ({exc}): nothing new is kept")
            else:
                self._give_up(f"it could not be {doing} ({exc})")
            return False
        if not self.writable:  # opened read-only: it cannot be set aside either
            self._give_up(f"it could not be {doing} ({exc})")
            return False
        return self._set_aside(str(exc))

    def _set_aside(self, why: str) -> bool:
        """Move a damaged cache (and its journals) aside and start a new one; True when it did."""
        self._close()
        self.readable = self.writable = False
        if not self._still_ours():  # another process already set it aside: use the new one
            aside = None
        else:
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
            aside = self.path.with_name(f"{self.path.stem}.damaged-{stamp}{self.path.suffix}")
            n = 1
            while aside.exists() or aside.is_symlink():
                n += 1
                aside = self.path.with_name(f"{self.path.stem}.damaged-{stamp}-{n}{self.path.suffix}")
            try:
                os.replace(self.path, aside)
            except OSError as exc:
                self._give_up(f"it is damaged ({why}) and cannot be set aside ({exc.strerror or exc})")
                return False
            for journal in JOURNALS:
                if Path(f"{self.path}{journal}").exists():
                    try:
                        os.replace(f"{self.path}{journal}", f"{aside}{journal}")
                    except OSError:
                        Path(f"{self.path}{journal}").unlink(missing_ok=True)
        try:
            self._open()
        except (sqlite3.Error, Damaged, OSError) as exc:
            self._give_up(f"it was damaged ({why}) and a new one cannot be built ({exc})")
            return False
        if aside is not None:
            self.warnings.append(
                f"{self.what} {self.path} was damaged ({why}): set aside as {aside}, a new one is built"
            )
        return True

    def _still_ours(self) -> bool:
        """Whether the file at the path is the one this process opened (or failed to open)."""
        try:
            stat = self.path.stat()
        except OSError:
            return False
        return self._identity is None or self._identity == (stat.st_dev, stat.st_ino)

    def _rollback(self) -> None:
        try:
            if self._db is not None and self._db.in_transaction:
                self._db.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def _close(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
        self._db = None
