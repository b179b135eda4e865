"""What the aggregates keep on disk while an audit finishes: pickled entries read back in order,
and values kept by a sort key, in a file when given one (only their keys and offsets in memory),
to be read back in key order."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import IO, Any, Iterator


def entries(spilled: IO[bytes]) -> Iterator[Any]:
    """The pickled entries of a spill file, in order."""
    while True:
        try:
            yield pickle.load(spilled)
        except EOFError:
            return


class InOrder:
    """(key, group, value) kept as they come, read back in key order: in the file `path` when
    given (memory holds each key, group and offset), else in memory."""

    def __init__(self, path: Path | None):
        self.path = path
        self._file: IO[bytes] | None = open(path, "w+b") if path is not None else None
        self._kept: list[tuple[Any, str, Any]] = []  # (key, group, value or its offset)

    def add(self, key: Any, group: str, value: Any) -> None:
        if self._file is None:
            self._kept.append((key, group, value))
            return
        self._kept.append((key, group, self._file.tell()))
        pickle.dump(value, self._file, protocol=pickle.HIGHEST_PROTOCOL)

    def in_order(self) -> Iterator[tuple[str, Any]]:
        """(group, value) in key order (the order they came in among equal keys)."""
        self._kept.sort(key=lambda entry: entry[0])
        for _, group, found in self._kept:
            if self._file is not None:
                self._file.seek(found)
                found = pickle.load(self._file)
            yield group, found

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            assert self.path is not None
            self.path.unlink(missing_ok=True)
