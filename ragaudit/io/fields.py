"""Typed field access on raw JSON objects for the readers, collecting every located problem."""

from __future__ import annotations

from typing import Any

from ragaudit.core.errors import Problem, describe

_MISSING = object()
_KINDS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: type(v) is int,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


class Fields:
    """Reads the fields of one JSON object; each bad field adds a Problem and yields None."""

    def __init__(self, obj: dict[str, Any], problems: list[Problem], *, file: str, line: int | None, path: str = "$"):
        self.obj, self.problems, self.file, self.line, self.path = obj, problems, file, line, path

    def at(self, name: str | int) -> str:
        return f"{self.path}[{name}]" if isinstance(name, int) else f"{self.path}.{name}"

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(self.file, message, self.line, path))

    def get(self, name: str, kind: str, *, required: bool = False, default: Any = None) -> Any:
        value = self.obj.get(name, _MISSING)
        if value is _MISSING or value is None:
            if required:
                self.problem(
                    self.at(name),
                    f"expected {_a(kind)}, found {'null' if value is None else 'nothing (required field)'}",
                )
            return default
        if not _KINDS[kind](value):
            self.problem(self.at(name), f"expected {_a(kind)}, found {describe(value)}")
            return default
        return value

    def strings(self, name: str, *, required: bool = False) -> tuple[str, ...]:
        values = self.get(name, "array", required=required) or []
        out = []
        for i, value in enumerate(values):
            if isinstance(value, str):
                out.append(value)
            else:
                self.problem(f"{self.at(name)}[{i}]", f"expected a string, found {describe(value)}")
        return tuple(out)

    def child(self, name: str, *, required: bool = False) -> "Fields | None":
        value = self.get(name, "object", required=required)
        if value is None:
            return None
        return Fields(value, self.problems, file=self.file, line=self.line, path=self.at(name))
