"""Line-by-line JSON reading that locates every defect and never stops at the first one."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Iterator

import orjson

from ragaudit.errors import InputError, Problem


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that is not a JSON value of the expected kind."""
    file: str
    line: int
    message: str
    path: str = "$"

    @property
    def problem(self) -> Problem:
        return Problem(self.file, self.message, self.line, self.path)


def open_input(path: str | os.PathLike, *, what: str = "file"):
    """Open an input for binary reading, turning every OS failure into an InputError."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise InputError(Problem(path, f"expected a {what}, found a directory"))
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise InputError(Problem(path, f"no such {what}")) from None
    except OSError as exc:
        raise InputError(Problem(path, f"cannot read {what}: {exc.strerror}")) from None


def iter_json_lines(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """Yield `(line_number, value)` for each non-blank line; a bad line yields a BadLine as value.

    Raises InputError when the file cannot be opened or holds no record at all.
    """
    name = os.fspath(path)
    records = 0
    with open_input(name) as handle:
        number = 0
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            records += 1
            line = raw.rstrip(b"\r\n")
            try:
                yield number, orjson.loads(line)
                continue
            except orjson.JSONDecodeError:
                pass
            try:  # the standard parser names the defect clearly, and accepts NaN/Infinity as Python does
                yield number, json.loads(line)
            except UnicodeDecodeError as exc:
                yield number, BadLine(name, number, f"expected UTF-8 text, found byte {line[exc.start]:#04x} at column {exc.start + 1}")
            except json.JSONDecodeError as exc:
                truncated = not raw.endswith(b"\n") and exc.msg.startswith(("Expecting", "Unterminated"))
                what = "truncated last line: expected a complete JSON value" if truncated else "expected a JSON value"
                yield number, BadLine(name, number, f"{what}, found invalid JSON ({exc.msg} at column {exc.colno})")
    if records == 0:
        raise InputError(Problem(name, "expected JSON lines, found an empty file" if number == 0
                                 else "expected JSON lines, found only blank lines"))


def dump_line(value: Any) -> str:
    """One JSON line, keys sorted, no trailing newline."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
