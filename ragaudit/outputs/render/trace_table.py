"""`rag_traces.sqlite` of a production audit, written as the traces stream by.

The table has the columns of a run directory's `rag_traces` (docs/reference.md §6, `ragaudit.outputs.render.logs`),
one row per trace and answer segment (a trace without segments gives one row with `seg` null),
and after them what a gold-free audit measures: the window, where the trace was read (file, line),
the ΔS zone, the segment's support, whether it is grounded, what it states that its sources lack,
the codes of the trace's issues, and the segment text. Lists are JSON text. The file is written
under a temporary name and renamed into place when the audit ends.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import orjson

from ragaudit.io.files import atomic_path, sqlite_errors
from ragaudit.outputs.render.logs import COLUMNS

EXTRA = (
    ("window", "TEXT"),
    ("file", "TEXT"),
    ("line", "INTEGER"),
    ("zone", "TEXT"),
    ("support", "REAL"),
    ("grounded", "INTEGER"),
    ("hallucinated", "TEXT"),
    ("issues", "TEXT"),
    ("segment", "TEXT"),
)
TYPES = {"variant": "INTEGER", "seed": "INTEGER", "seg": "INTEGER", "deltaS": "REAL"}  # the rest is TEXT
ALL_COLUMNS = (*COLUMNS, *(name for name, _ in EXTRA))
CREATE = (
    "CREATE TABLE rag_traces ("
    + ", ".join([f"{c} {TYPES.get(c, 'TEXT')}" for c in COLUMNS] + [f"{n} {t}" for n, t in EXTRA])
    + ")"
)
INSERT = f"INSERT INTO rag_traces VALUES ({', '.join('?' * len(ALL_COLUMNS))})"


def _cell(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return orjson.dumps(list(value)).decode()
    if isinstance(value, bool):
        return int(value)
    return value


class TraceTable:
    """`add` rows (dicts with every column of ALL_COLUMNS), then `close`; `abandon` on failure."""

    def __init__(self, path: Path):
        self._stack = contextlib.ExitStack()
        self._tmp = self._stack.enter_context(atomic_path(path))
        self._tmp.unlink()
        self._path = Path(path)
        try:
            with self._failing():
                self._db = sqlite3.connect(self._tmp)
                self._db.execute(CREATE)
        except BaseException:
            self.abandon()
            raise

    def _failing(self) -> contextlib.AbstractContextManager[None]:
        """An SQLite error (a full disk, say) as the input-output error it is: exit 3."""
        return sqlite_errors(f"write {self._path.name}", self._path)

    def add(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            with self._failing(), self._db:
                self._db.executemany(INSERT, [tuple(_cell(r[c]) for c in ALL_COLUMNS) for r in rows])

    def close(self) -> None:
        self._db.close()
        self._stack.close()

    def abandon(self) -> None:
        db = getattr(self, "_db", None)  # none when the table could not be made
        if db is not None:
            db.close()
        self._stack.__exit__(RuntimeError, RuntimeError("abandoned"), None)
