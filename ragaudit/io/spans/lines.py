"""The JSON values of a span export: JSON lines, or one JSON document (pretty-printed as a whole,
as `MessageToJson` and `json.dump(..., indent=2)` write it); gzip-compressed or not.

Each value comes with the line it starts on; a line that is not JSON becomes a BadLine and
reading goes on. JSON lines stream; a single document is read whole. A line longer than the
readers' cap (`ragaudit.io.jsonl.max_line_bytes`) is a BadLine, skipped unread. Damage in a
compressed file (a bad CRC, a cut or trailing garbage) is a BadLine at the line where reading
stopped: the lines before it are read, as they would be by any other reader.
"""

from __future__ import annotations

import gzip
import os
import zlib
from contextlib import contextmanager
from typing import IO, Any, Iterator

from ragaudit.core.errors import InputError, Problem
from ragaudit.core.types import FieldError
from ragaudit.io.jsonfiles import READ_BUFFER, no_records, open_input
from ragaudit.io.jsonl import BOM, BadLine, JsonDefect, decode
from ragaudit.io.lines import long_line, max_line_bytes, read_lines

_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_ERRORS = (OSError, EOFError, zlib.error)


def json_values(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any, tuple[FieldError, ...]]]:
    """`(line, value, notes)` for each JSON value of the file (`value` a BadLine for a bad line);
    NaN and Infinity come through as None with a note each. Raises InputError when the file
    cannot be read or holds no value at all."""
    name = os.fspath(path)
    lines = records = 0
    with _open(name) as handle:
        first = True
        for raw in _lines(handle, name):
            lines += 1
            if isinstance(raw, BadLine):
                records += 1
                yield raw.line, raw, ()
                first = False
                continue
            if raw.isspace():
                continue
            records += 1
            if first and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            try:
                value, notes = decode(raw, finite=False)
            except JsonDefect as defect:
                # a pretty-printed document opens with a bracket alone on its first line; only
                # then is the file read whole (a JSON lines file with a bad first line is not)
                if first and raw.strip() in (b"{", b"["):
                    yield _whole_document(name, lines)
                    return
                yield lines, BadLine(name, lines, defect.message, defect.path), ()
                first = False
                continue
            first = False
            yield lines, value, notes
    if records == 0:
        raise InputError(no_records(name, lines))


def _whole_document(name: str, first_line: int) -> tuple[int, Any, tuple[FieldError, ...]]:
    """The file as one JSON document starting on `first_line`; when it is not one, a BadLine at
    the line of its first defect."""
    with _open(name) as handle:
        try:
            data = handle.read()
        except _GZIP_ERRORS as exc:
            raise InputError(Problem(name, f"cannot read file: {exc}")) from None
    if data.startswith(BOM):
        data = data[len(BOM) :]
    try:
        value, notes = decode(data, finite=False)
    except JsonDefect as defect:
        return first_line, BadLine(name, defect.line, defect.message, defect.path), ()
    return first_line, value, notes


@contextmanager
def _open(name: str) -> Iterator[IO[bytes]]:
    with open_input(name, buffering=READ_BUFFER) as handle:
        if handle.peek(2)[:2] != _GZIP_MAGIC:
            yield handle
            return
        with gzip.GzipFile(fileobj=handle, mode="rb") as unpacked:
            yield unpacked  # type: ignore[misc]


def _lines(handle: IO[bytes], name: str) -> Iterator[bytes | BadLine]:
    """The lines of the file; a BadLine for a line over the cap, and one where damage in a
    compressed file stops the reading."""
    number = 0
    cap = max_line_bytes()
    try:
        for raw, size in read_lines(handle, cap):
            number += 1
            yield raw or BadLine(name, number, long_line(cap, size))
    except _GZIP_ERRORS as exc:
        yield BadLine(
            name,
            number + 1,
            f"expected the rest of a compressed file, found damage ({exc}): the {number:,} lines before it "
            "were read, the rest cannot be",
        )
