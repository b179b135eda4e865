"""Reading a JSON document of a known shape field by field: each reader names the first place a
document differs (`$.questions[3].stats.runs: expected an integer, found text`)."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ragaudit.core.types import LAMBDA_STATES

T = TypeVar("T")
JSON = dict[str, Any]


class ShapeError(ValueError):
    """A report document that lacks what a reader needs: where, and what was expected."""


def kind_of(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def get(data: JSON, key: str, where: str, check: Callable[[Any], bool], expected: str, default: Any = ...) -> Any:
    if key not in data:
        if default is not ...:
            return default
        raise ShapeError(f"{where}.{key}: expected {expected}, found none")
    value = data[key]
    if not check(value):
        shown = f" {value!r}"[:42] if isinstance(value, (str, int, float)) and not isinstance(value, bool) else ""
        raise ShapeError(f"{where}.{key}: expected {expected}, found {kind_of(value)}{shown}")
    return value


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_count(value: Any) -> bool:
    return is_int(value) and value >= 0


def is_state(value: Any) -> bool:
    """A λ state: convergent, recursive, chaotic or divergent."""
    return isinstance(value, str) and value in LAMBDA_STATES


def is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def opt_num(value: Any) -> bool:
    return value is None or is_num(value)


def obj(data: Any, where: str) -> JSON:
    if not isinstance(data, dict):
        raise ShapeError(f"{where}: expected an object, found {kind_of(data)}")
    return data


def items(data: JSON, key: str, where: str, read: Callable[[Any, str], T], default: Any = ...) -> list[T]:
    items = get(data, key, where, lambda v: isinstance(v, list), "an array", default)
    return [read(item, f"{where}.{key}[{i}]") for i, item in enumerate(items)]


# Metric keys of older reports, read under their present name: ndcg, once fixed at 10, follows [metrics] k.
RENAMED_METRICS = {"ndcg@10": "ndcg@k"}


def numbers(data: JSON, key: str, where: str) -> dict[str, float | None]:
    """An object of metric values, older keys under their present names (RENAMED_METRICS)."""
    found = get(data, key, where, lambda v: isinstance(v, dict), "an object of numbers")
    for name, value in found.items():
        if not opt_num(value):
            raise ShapeError(f"{where}.{key}.{name}: expected a number or null, found {kind_of(value)}")
    return {RENAMED_METRICS.get(name, name): value for name, value in found.items()}
