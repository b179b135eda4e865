"""Where things are in a TOML text: tomllib keeps no positions, so the text is scanned for the line
of every table, key and array item (for config errors that name their line)."""

from __future__ import annotations

import re
import tomllib
from bisect import bisect_right

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_BASIC, _LITERAL = r'"(?:[^"\\\n]|\\.)*"', r"'[^'\n]*'"
_KEY = re.compile(f"{_BARE.pattern}|{_BASIC}|{_LITERAL}")
# a multi-line string may end its content with one or two quotes right before the delimiter
_STRING = re.compile(
    "|".join([r'"""(?:[^"\\]|\\.|"(?!""))*""""{0,2}', r"'''(?:[^']|'(?!''))*''''{0,2}", _BASIC, _LITERAL]), re.DOTALL
)
_SCALAR = re.compile(r"[^,\]}#\r\n]*")
_GAP = re.compile(r"(?:[ \t\r\n]+|#[^\n]*)*")
_SPACE = re.compile(r"[ \t]*")

Loc = tuple[str | int, ...]  # a path in the TOML: its keys, and the index of each array item


class Positions:
    """The line of every table, key and array item of a valid TOML text, by path."""

    def __init__(self, text: str):
        self.text, self.i = text, 0
        self.lines: dict[Loc, int] = {}
        self.ends = [m.end() for m in re.finditer("\n", text)]
        try:
            self._document()
        except (IndexError, ValueError, AttributeError, tomllib.TOMLDecodeError):
            pass  # keep what was found: a line is a help, never a reason to fail

    def line_of(self, loc: Loc) -> int | None:
        """The line of `loc`, or of its nearest enclosing table or item (a missing key's header)."""
        while loc and loc not in self.lines:
            loc = loc[:-1]
        return self.lines.get(loc)

    def _at(self, path: Loc, header: bool = False) -> None:
        line = bisect_right(self.ends, self.i) + 1
        if header or path not in self.lines:
            self.lines[path] = line

    def _skip(self, newlines: bool = True) -> None:
        self.i = _matched((_GAP if newlines else _SPACE).match(self.text, self.i)).end()

    def _document(self) -> None:
        table: Loc = ()
        arrays: dict[Loc, int] = {}  # an array of tables -> index of its last [[item]]
        while True:
            self._skip()
            if self.i >= len(self.text):
                return
            if self.text[self.i] != "[":
                self._pair(table)
                continue
            double = self.text.startswith("[[", self.i)
            self.i += 1 + double
            keys, table = self._keys(), ()
            for j, key in enumerate(keys):
                table += (key,)
                if table in arrays and not (double and j == len(keys) - 1):
                    table += (arrays[table],)
                self._at(table)
            if double:
                arrays[table] = arrays.get(table, -1) + 1
                table += (arrays[table],)
            self._at(table, header=True)
            self.i += 1 + double

    def _keys(self) -> tuple[str, ...]:
        keys = []
        while True:
            self._skip(newlines=False)
            token = _matched(_KEY.match(self.text, self.i)).group()
            self.i += len(token)
            keys.append(tomllib.loads(f"k = {token}")["k"] if token[0] in "\"'" else token)
            self._skip(newlines=False)
            if self.text[self.i] != ".":
                return tuple(keys)
            self.i += 1

    def _pair(self, table: Loc) -> None:
        keys = self._keys()
        for j in range(1, len(keys) + 1):
            self._at(table + keys[:j])
        self._skip(newlines=False)
        if self.text[self.i] != "=":
            raise ValueError(f"expected '=' at offset {self.i}")
        self.i += 1
        self._skip(newlines=False)
        self._value(table + keys)

    def _value(self, path: Loc) -> None:
        opening = self.text[self.i]
        if opening not in "[{":
            self.i = _matched(_STRING.match(self.text, self.i) or _SCALAR.match(self.text, self.i)).end()
            return
        close, index = "]" if opening == "[" else "}", 0
        self.i += 1
        while True:
            self._skip()
            if self.text[self.i] == close:
                self.i += 1
                return
            if opening == "[":
                self._at(path + (index,))
                self._value(path + (index,))
            else:
                self._pair(path)
            self._skip()
            if self.text[self.i] == ",":
                self.i, index = self.i + 1, index + 1
            elif self.text[self.i] != close:
                raise ValueError(f"expected ',' or {close!r} at offset {self.i}")


def _matched(found: re.Match[str] | None) -> re.Match[str]:
    """A match the line index relies on: the text was already parsed by tomllib, so it is there."""
    if found is None:
        raise ValueError("the TOML line index lost its place in a text tomllib accepted")
    return found


BARE = _BARE
