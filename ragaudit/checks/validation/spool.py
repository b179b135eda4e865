"""An append-only sequence that keeps only its most recent items in memory and the rest in a
temporary file, so that memory stays flat however many bad lines or issues a run finds."""

from __future__ import annotations

import pickle
import tempfile
from typing import IO, Any, Iterator

CHUNK = 1024  # items per pickled chunk; the same many are the most ever held in memory


class Spool:
    """Append items, then iterate them in order (as often as wanted, once appending is done)."""

    def __init__(self, *, chunk: int = CHUNK):
        self._chunk = chunk
        self._tail: list[Any] = []
        self._file: IO[bytes] | None = None
        self._spilled = 0

    def append(self, item: Any) -> None:
        self._tail.append(item)
        if len(self._tail) >= self._chunk:
            if self._file is None:
                self._file = tempfile.TemporaryFile()
            pickle.dump(self._tail, self._file, protocol=pickle.HIGHEST_PROTOCOL)
            self._spilled += len(self._tail)
            self._tail = []

    def __len__(self) -> int:
        return self._spilled + len(self._tail)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Iterator[Any]:
        if self._file is not None:
            self._file.seek(0)
            read = 0
            while read < self._spilled:
                chunk = pickle.load(self._file)
                read += len(chunk)
                yield from chunk
            self._file.seek(0, 2)  # appending may go on after a look
        yield from self._tail

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
