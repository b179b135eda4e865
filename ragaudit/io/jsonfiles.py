"""JSON files read with every defect located: JSON lines (never stopping at the first bad one, each
bad line a `BadLine`) and whole JSON documents (`read_json_file`), decoded by `ragaudit.io.jsonl`."""

from __future__ import annotations

import os
from io import BufferedReader
from typing import Any, Iterator, cast

from ragaudit.core.errors import InputError, Problem
from ragaudit.core.types import FieldError

# orjson serialises at most 254 nested levels, so everything `decode` accepts can be written back
# by orjson and by the standard library at any sane stack depth.
from ragaudit.io.jsonl import BOM, BadLine, JsonDefect, decode
from ragaudit.io.lines import long_line, max_line_bytes, read_lines, skip_line

READ_BUFFER = 1 << 20  # reading lines through a 1 MB buffer takes a quarter of the time of 8 KB


def open_input(path: str | os.PathLike[str], *, what: str = "file", buffering: int = -1) -> BufferedReader:
    """Open an input for binary reading, turning every OS failure into an InputError."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise InputError(Problem(path, f"expected {_a(what)}, found a directory"))
    try:
        return cast(BufferedReader, open(path, "rb", buffering=buffering))  # never unbuffered here (typeshed: BinaryIO)
    except FileNotFoundError:
        raise InputError(Problem(path, f"no such {what}")) from None
    except OSError as exc:
        raise InputError(Problem(path, f"cannot read {what}: {exc.strerror}")) from None


class JsonLines:
    """The JSON lines of a file, or of the lines that start in the byte range [start, end) of it
    (`end=None`: to the end of the file), as `(line_number, value, notes)`; `finite` as in
    `decode`. A blank line is skipped; a bad line yields a BadLine as value, and reading goes on.

    Line numbers count from 1 at the first line of the range, and `lines` (every line read,
    blank ones included) is what the next range's numbers follow. A byte order mark is dropped
    from the first line of the file. Iterating raises InputError when the file cannot be opened
    or read; an empty file is the caller's to refuse (`require_records`), since one range of a
    file may well hold no record.
    """

    def __init__(self, path: str | os.PathLike[str], *, finite: bool = True, start: int = 0, end: int | None = None):
        self.name = os.fspath(path)
        self.finite, self.start, self.end = finite, start, end
        self.lines = self.records = 0

    def __iter__(self) -> Iterator[tuple[int, Any, tuple[FieldError, ...]]]:
        name, finite, end = self.name, self.finite, self.end
        number = records = 0
        cap = max_line_bytes()
        with open_input(name, buffering=READ_BUFFER) as handle:
            try:
                position = self.start
                if position:
                    # The line that runs across `start` belongs to the range before.
                    handle.seek(position - 1)
                    position += skip_line(handle) - 1
                for raw, size in read_lines(handle, cap):
                    if end is not None:
                        if position >= end:
                            break
                        position += size
                    number += 1
                    self.lines = number
                    if not raw:  # longer than the cap
                        records += 1
                        self.records = records
                        yield number, BadLine(name, number, long_line(cap, size)), ()
                        continue
                    if raw.isspace():  # never empty: a line read from a file holds at least its newline
                        continue
                    records += 1
                    self.records = records
                    # Kept whole: the trailing newline is JSON whitespace, and copying long lines costs.
                    line = raw[len(BOM) :] if number == 1 and not self.start and raw.startswith(BOM) else raw
                    try:
                        value, notes = decode(line, finite=finite)
                    except JsonDefect as defect:
                        yield number, BadLine(name, number, _line_message(defect, raw), defect.path), ()
                        continue
                    yield number, value, notes
            except OSError as exc:
                raise InputError(Problem(name, f"cannot read file: {exc.strerror}", number + 1)) from None

    def require_records(self) -> None:
        """Raise InputError when the file held no record at all (after iterating the whole file)."""
        if self.records == 0:
            raise InputError(no_records(self.name, self.lines))


def no_records(name: str, lines: int) -> Problem:
    """Why a file of JSON lines with no record is refused, given how many (blank) lines it has."""
    return Problem(
        name,
        "expected JSON lines, found an empty file" if lines == 0 else "expected JSON lines, found only blank lines",
    )


def iter_json_values(
    path: str | os.PathLike[str], *, finite: bool = True
) -> Iterator[tuple[int, Any, tuple[FieldError, ...]]]:
    """Yield `(line_number, value, notes)` for each non-blank line; a bad line yields a BadLine
    as value. `finite` as in `decode`. Raises InputError when the file cannot be opened or read,
    or holds no record at all."""
    lines = JsonLines(path, finite=finite)
    yield from lines
    lines.require_records()


def iter_json_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """Yield `(line_number, value)` for each non-blank line; a bad line (NaN and the like
    included) yields a BadLine as value. Raises InputError when the file cannot be opened or
    holds no record at all."""
    for number, value, _ in iter_json_values(path):
        yield number, value


def _line_message(defect: JsonDefect, raw: bytes) -> str:
    if defect.syntax and not raw.endswith(b"\n") and defect.syntax.startswith(("Expecting", "Unterminated")):
        return "truncated last line: expected a complete JSON value" + defect.message[len("expected a JSON value") :]
    return defect.message


_KINDS = {dict: "object", list: "array", str: "string", int: "integer", float: "number", bool: "boolean"}


def read_json_file(
    path: str | os.PathLike[str], *, what: str, expect: type | tuple[type, ...] = dict, finite: bool = True
) -> Any:
    """The JSON value of a whole file, whose top level must be an instance of `expect`
    (`object` for any value). Raises InputError naming the file, and the line when there is one,
    for: a missing or unreadable file, bytes that are not UTF-8, invalid JSON, nesting deeper
    than MAX_DEPTH, a duplicate key, NaN/Infinity (unless `finite=False`: they become null), and
    a top-level value of another type ("expected a report object, found an array")."""
    name = os.fspath(path)
    with open_input(name, what=what) as handle:
        try:
            data = handle.read()
        except OSError as exc:
            raise InputError(Problem(name, f"cannot read {what}: {exc.strerror}")) from None
    if data.startswith(BOM):
        data = data[len(BOM) :]
    if not data.strip():
        raise InputError(Problem(name, f"expected {_a(what)} in JSON, found an empty file"))
    try:
        value, _ = decode(data, finite=finite)
    except JsonDefect as defect:
        raise InputError(Problem(name, defect.message, defect.line, defect.path)) from None
    kinds = expect if isinstance(expect, tuple) else (expect,)
    if object not in kinds and (isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds)):
        wanted = " or ".join(_KINDS.get(k, k.__name__) for k in kinds)
        raise InputError(Problem(name, f"expected {_a(what)} {wanted}, found {_a(_kind(value))}"))
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return _KINDS[bool] if isinstance(value, bool) else _KINDS.get(type(value), type(value).__name__)


def _a(word: str) -> str:
    return word if word == "null" else ("an " if word[:1] in "aeiou" else "a ") + word
