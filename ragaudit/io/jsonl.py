"""JSON reading that locates every defect: JSON lines (never stopping at the first bad one) and
whole JSON files.

Every reader decodes through `decode`, which turns what Python's json and orjson would let
through or crash on into a located defect:

* nesting deeper than MAX_DEPTH: Python's json raises RecursionError near 1,000 levels and
  orjson refuses 1,024, and nothing deeper than a few levels is a trace, gold item or report;
* a key given twice in one object: parsers keep the last value silently, so the file means
  something else to every reader;
* NaN, Infinity and numbers beyond a double: not JSON, and `JSON.parse` in a browser refuses a
  report holding one;
* a lone surrogate escape (`"\\ud800"`): valid JSON grammar, but no Unicode text, and a str
  holding one cannot be written as UTF-8. It becomes U+FFFD (one code point for one, so
  offsets stay) and a note says where.

The common case costs one orjson parse, one orjson serialisation and at most three byte scans;
the standard parser only runs for the rare text orjson refuses.

A file of JSON lines can also be read a byte range at a time (`JsonLines(path, start=, end=)`),
so that several processes share one large file; line numbers then count from the range's first
line and the caller adds the lines of the ranges before it.

A line longer than `max_line_bytes()` (256 MiB; `RAGAUDIT_MAX_LINE_BYTES` sets another) is a
located defect, skipped in blocks and never held in memory, and reading goes on (`ragaudit.io.lines`).
"""

from __future__ import annotations

import builtins
import json
import math
import re
import sys
from dataclasses import dataclass
from itertools import accumulate, compress, count
from typing import Any

import orjson

from ragaudit.core.errors import Problem, clip
from ragaudit.core.types import FieldError

# orjson serialises at most 254 nested levels, so everything `decode` accepts can be written back
# by orjson and by the standard library at any sane stack depth.
MAX_DEPTH = 254
BOM = b"\xef\xbb\xbf"
_DEEP = f"expected JSON nested at most {MAX_DEPTH} deep, found deeper"
_STRING_BYTES = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.S)  # `"?`: an unterminated string runs to the end
_KEEP = b"[]{}\n"
_OTHER_BYTES = bytes(b for b in range(256) if b not in _KEEP)
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],]|NaN|-?Infinity|-?[0-9][0-9.eE+-]*', re.S)
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_COLON_ESCAPE = re.compile(rb"\\u003[aA]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DOUBLE_MAX = sys.float_info.max
FINITE = "a finite number"


class JsonDefect(ValueError):
    """Why a JSON text was refused: a message in the house style, its 1-based line in the text
    and, when known, the JSON path of the defect. For invalid JSON, `syntax` and `column` hold
    the parser's own words and position, for callers that phrase their own message."""

    def __init__(
        self, message: str, line: int = 1, path: str = "$", *, syntax: str | None = None, column: int | None = None
    ):
        super().__init__(message)
        self.message, self.line, self.path, self.syntax, self.column = message, line, path, syntax, column


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


# ---- decoding ---------------------------------------------------------------------------------


def decode(data: bytes, *, finite: bool = True) -> tuple[Any, tuple[FieldError, ...]]:
    """The JSON value of `data` (UTF-8 bytes, no byte order mark) and a note for each value
    replaced on the way in (lone surrogates; with `finite=False`, non-finite numbers).

    Raises JsonDefect for invalid UTF-8 or JSON, nesting deeper than MAX_DEPTH, a duplicate key,
    and (when `finite`) NaN, Infinity or a number beyond a double. With `finite=False` those
    numbers become None and a note each, for a reader that reports them field by field.
    """
    try:
        value = orjson.loads(data)
        written = orjson.dumps(value)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        # orjson refuses NaN, lone surrogates, numbers beyond a double and invalid JSON, and
        # cannot write more than 254 levels: the standard parser says which it was.
        return _decode_slowly(data, finite)
    # Duplicate keys, cheaply. orjson's rewrite has none, so text that is the rewrite plus
    # trailing whitespace has none (files written compactly). Otherwise: colons outside strings
    # are exactly the keys, and orjson writes each colon inside a string as one colon, so without
    # a duplicate the raw text holds as many colons as the rewrite, while each dropped duplicate
    # takes one or more away. Only a colon escaped as \u003a can hide that; then the exact check
    # runs, as it does whenever the counts differ.
    if not data.startswith(written) and (data.count(b":") != written.count(b":") or _COLON_ESCAPE.search(data)):
        _check_duplicates(data.decode("utf-8"))
    return value, ()


def _decode_slowly(data: bytes, finite: bool) -> tuple[Any, tuple[FieldError, ...]]:
    # Trailing JSON whitespace off, so that a value cut short is reported where it stops rather
    # than at the start of the next line.
    data = data.rstrip(b" \t\r\n")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _line_column(data, exc.start)
        raise JsonDefect(f"expected UTF-8 text, found byte {data[exc.start]:#04x} at column {column}", line) from None
    deep_line = _too_deep(data)
    if deep_line is not None:
        raise JsonDefect(_DEEP, deep_line)
    hooks = _Hooks()
    try:
        value = json.loads(
            text,
            object_pairs_hook=hooks.pairs,
            parse_constant=hooks.constant,
            parse_float=hooks.float,
            parse_int=hooks.int,
        )
    except json.JSONDecodeError as exc:
        raise JsonDefect(
            f"expected a JSON value, found invalid JSON ({exc.msg} at column {exc.colno})",
            exc.lineno,
            syntax=exc.msg,
            column=exc.colno,
        ) from None
    except RecursionError:  # only when the caller's own stack is already deep
        raise JsonDefect(_DEEP) from None
    if hooks.duplicate:
        _check_duplicates(text)
        raise JsonDefect("expected each key once in an object, found a key twice")  # the parser saw one
    if hooks.nonfinite and finite:
        found = _locate(text, nonfinite=True)
        if found is not None:
            raise JsonDefect(found[2], _line_of(text, found[0]), found[1])
        raise JsonDefect(f"expected {FINITE}, found NaN or Infinity")
    if hooks.nonfinite or _SURROGATE_ESCAPE.search(data):
        return scrub(value)
    return value, ()


class _Hooks:
    """Parser hooks that note what orjson would have refused, for the exact checks afterwards."""

    def __init__(self) -> None:
        self.duplicate = self.nonfinite = False

    def pairs(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            self.duplicate = True
        return obj

    def constant(self, name: str) -> float:
        self.nonfinite = True
        return float(name)

    def float(self, text: str) -> float:
        value = float(text)
        if value in (math.inf, -math.inf):
            self.nonfinite = True
        return value

    def int(self, text: str) -> builtins.int | builtins.float:
        # Past 309 digits no double holds the number; stop before int() meets Python's digit limit.
        if len(text.lstrip("-")) > 309 or abs(value := int(text)) > _DOUBLE_MAX:
            self.nonfinite = True
            return -math.inf if text.startswith("-") else math.inf
        # Beyond 64 bits orjson reads a float: the same line must read the same either way.
        return value if -(2**63) <= value < 2**64 else float(value)


def _check_duplicates(text: str) -> None:
    found = _locate(text, nonfinite=False)
    if found is not None:
        raise JsonDefect(found[2], _line_of(text, found[0]), found[1])


def _locate(text: str, *, nonfinite: bool) -> tuple[int, str, str] | None:
    """(offset, JSON path, message) of the first duplicate key, or non-finite number when asked,
    in `text`, which the standard parser has read. Iterative, so any depth is fine."""
    stack: list[list[Any]] = []  # objects: [keys seen, current key, expecting a key]; arrays: [None, index]
    for match in _TOKEN.finditer(text):
        token = match.group()
        first = token[0]
        if first == '"':
            top = stack[-1] if stack else None
            if top is not None and top[0] is not None and top[2]:
                key = json.loads(token) if "\\" in token else token[1:-1]
                if key in top[0]:
                    top[1] = key
                    return (
                        match.start(),
                        _path(stack),
                        f"expected each key once in an object, found {_shown(key)} twice",
                    )
                top[0].add(key)
                top[1], top[2] = key, False
        elif first == "{":
            stack.append([set(), None, True])
        elif first == "[":
            stack.append([None, 0])
        elif first in "}]":
            stack.pop()
        elif first == ",":
            top = stack[-1]
            if top[0] is None:
                top[1] += 1
            else:
                top[2] = True
        elif nonfinite and not _finite_literal(token):
            return match.start(), _path(stack), f"expected {FINITE}, found {clip(token, 24)}"
    return None


def _finite_literal(token: str) -> bool:
    if token[-1] == "N" or token[-1] == "y":  # NaN, Infinity, -Infinity
        return False
    if any(c in token for c in ".eE"):
        return math.isfinite(float(token))
    return len(token.lstrip("-")) <= 309 and abs(int(token)) <= _DOUBLE_MAX


def _too_deep(data: bytes) -> int | None:
    """The 1-based line where `data` first nests deeper than MAX_DEPTH, or None. C-speed passes:
    strings out, brackets and newlines kept, a running sum of +1/-1."""
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return None
    kept = _STRING_BYTES.sub(b"", data).translate(None, _OTHER_BYTES)
    depths = accumulate(map(_STEP.__getitem__, kept))
    first = next(compress(count(), map(MAX_DEPTH.__lt__, depths)), None)
    return None if first is None else kept.count(b"\n", 0, first) + 1


def _line_column(data: bytes, offset: int) -> tuple[int, int]:
    start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - start + 1


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _path(stack: list[list[Any]]) -> str:
    parts = ["$"]
    for top in stack:
        if top[0] is None:
            parts.append(f"[{top[1]}]")
        elif top[1] is not None:
            parts.append(_member(top[1]))
    return "".join(parts)


def member_path(key: str, parent: str = "$") -> str:
    """The JSON path of member `key` of the value at `parent`, as notes and BadLines name it."""
    return parent + _member(key)


def _member(key: str) -> str:
    key = _SURROGATE.sub("\ufffd", key)
    return f".{key}" if _IDENTIFIER.match(key) else f"[{json.dumps(key, ensure_ascii=False)}]"


def _shown(key: str) -> str:
    return repr(clip(_SURROGATE.sub("\ufffd", key), 40))


# ---- replacing what cannot be kept -------------------------------------------------------------


def scrub(value: Any) -> tuple[Any, tuple[FieldError, ...]]:
    """`value` with lone surrogates replaced by U+FFFD (in keys and strings) and non-finite
    numbers replaced by None, and a FieldError naming each. Walks dicts, lists and tuples without
    recursion; copies only the containers on the way to a change and returns `value` itself
    when nothing changed, so a caller's objects are never modified."""
    changes: list[tuple[tuple[str | int, ...], str, Any]] = []  # (trail of keys and indexes, kind, detail)
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    active: set[int] = set()
    while stack:
        node, trail = stack.pop()
        key = trail[-1] if trail else None
        if isinstance(key, str) and not key.isascii() and _SURROGATE.search(key):
            changes.append((trail, "key", key))
        if isinstance(node, str):
            if not node.isascii() and _SURROGATE.search(node):
                changes.append((trail, "text", node))
        elif isinstance(node, float):
            if not math.isfinite(node):
                changes.append((trail, "number", node))
        elif isinstance(node, (dict, list, tuple)):
            if id(node) in active:  # a cycle in a caller's objects: leave it to whoever writes it
                continue
            active.add(id(node))
            items = list(node.items() if isinstance(node, dict) else enumerate(node))
            stack.extend((child, trail + (key,)) for key, child in reversed(items))  # popped in text order
    if not changes:
        return value, ()
    return _apply(value, changes)


def _apply(value: Any, changes: list[tuple[tuple[str | int, ...], str, Any]]) -> tuple[Any, tuple[FieldError, ...]]:
    copies: dict[int, Any] = {}

    def own(node: Any) -> Any:
        if id(node) in copies:
            return copies[id(node)]
        copy = dict(node) if isinstance(node, dict) else list(node)
        copies[id(node)] = copies[id(copy)] = copy
        return copy

    root: Any = [value]
    notes: list[tuple[int, FieldError]] = []
    # Values first, then keys from the deepest up, so that every trail still leads somewhere;
    # the notes keep the order in which the changes were found.
    order = sorted(range(len(changes)), key=lambda i: (changes[i][1] == "key", -len(changes[i][0])))
    for position in order:
        trail, kind, detail = changes[position]
        steps = (0, *trail)
        holder = root
        for step in steps[:-1]:
            holder[step] = own(holder[step])
            holder = holder[step]
        last = steps[-1]
        if kind == "key":
            renamed = _SURROGATE.sub("\ufffd", detail)
            pairs = [(renamed if k == detail else k, v) for k, v in holder.items()]
            holder.clear()
            holder.update(pairs)
            notes.append(
                (
                    position,
                    FieldError(
                        _trail_path(trail[:-1]) + _member(renamed),
                        "Unicode text",
                        f"a key with lone surrogate {_codepoint(detail)} (read as U+FFFD)",
                    ),
                )
            )
        elif kind == "text":
            holder[last] = _SURROGATE.sub("\ufffd", detail)
            notes.append(
                (
                    position,
                    FieldError(
                        _trail_path(trail), "Unicode text", f"lone surrogate {_codepoint(detail)} (read as U+FFFD)"
                    ),
                )
            )
        else:
            holder[last] = None
            notes.append((position, FieldError(_trail_path(trail), FINITE, _nonfinite_name(detail))))
    return root[0], tuple(note for _, note in sorted(notes, key=lambda n: n[0]))


def _trail_path(trail: tuple[str | int, ...]) -> str:
    return "$" + "".join(f"[{step}]" if isinstance(step, int) else _member(str(step)) for step in trail)


def _codepoint(text: str) -> str:
    found = _SURROGATE.search(text)
    return f"U+{ord(found.group()):04X}" if found else "no lone surrogate"


def _nonfinite_name(number: float) -> str:
    return "NaN" if number != number else ("Infinity" if number > 0 else "-Infinity")


# ---- writing ----------------------------------------------------------------------------------


def dump_line(value: Any) -> str:
    """One JSON line, keys sorted, no trailing newline. Raises ValueError rather than write NaN
    or Infinity, which no JSON reader accepts."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dump_plain_line(value: dict[str, Any]) -> str:
    """`dump_line(value)`, byte for byte, written by orjson (several times faster) when the value
    is one orjson writes alike (`_plain`): a trace line, say."""
    if _plain(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
        except orjson.JSONEncodeError:  # a lone surrogate, say: the one writer decides
            pass
    return dump_line(value)


def _plain(value: dict[str, Any] | list[Any]) -> bool:
    """Does `value` hold only str keys, strs, bools, None, ints of 64 bits and floats that orjson
    and json.dumps write alike (0, or finite of magnitude in [1e-4, 1e16), where neither uses an
    exponent)? Exact types only: anything else goes to the one writer."""
    v: Any
    for v in value.values() if type(value) is dict else value:
        kind = type(v)
        if kind is str or v is None or kind is bool:
            continue
        if kind is float:
            if not (v == 0.0 or 1e-4 <= abs(v) < 1e16):
                return False
        elif kind is int:
            if not -(2**63) <= v < 2**63:
                return False
        elif kind is dict or kind is list:
            if not _plain(v):
                return False
        else:
            return False
    return type(value) is not dict or all(type(k) is str for k in value)
