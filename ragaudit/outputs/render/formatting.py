"""How the HTML reports show values: plain text, escaped by the templates (these are their filters)."""

from __future__ import annotations

from typing import Any


def num(value: object, digits: int = 3) -> str:
    """A number as shown in tables: floats to `digits` decimals, ints whole, booleans yes/no,
    a missing value as a dash; any other value as its text."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def pct(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}%}"


def signed(value: float, digits: int = 3) -> str:
    return f"{value:+.{digits}f}"


def blank(value: object) -> str:
    """A value as an attribute or cell text: missing is empty."""
    return "" if value is None else str(value)


def value(found: object) -> str:
    """A gate threshold or value, which may be a number, a string, a list or a dict."""
    if isinstance(found, dict):
        return ", ".join(f"{k} {value(v)}" for k, v in found.items())
    if isinstance(found, list):
        return "[" + ", ".join(value(v) for v in found) + "]"
    return num(found)


def limit(threshold: object) -> str:
    """A threshold as configured: 0.45, not 0.450."""
    if isinstance(threshold, float):
        return f"{threshold:g}"
    if isinstance(threshold, dict):
        return ", ".join(f"{k} {limit(v)}" for k, v in threshold.items())
    return value(threshold)


def against(found: object, threshold: object, digits: int = 3) -> str:
    """A gate check's value, with as many decimals beyond `digits` as it takes to tell it from its
    threshold: 0.40038 against 0.4 shows as 0.4004, never as 0.400 beside a bar of 0.4."""
    if not isinstance(found, float) or isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        return value(found)
    if found != threshold:
        for shown in range(digits, 16):
            if f"{found:.{shown}f}" != f"{float(threshold):.{shown}f}":
                return f"{found:.{shown}f}"
    return num(found, digits)


def check_value(check: dict[str, Any]) -> str:
    """`against` for a check as the HTML views hold it (a dict with value and threshold)."""
    return against(check["value"], check["threshold"])


FILTERS = {
    "num": num,
    "pct": pct,
    "signed": signed,
    "blank": blank,
    "value": value,
    "limit": limit,
    "check_value": check_value,
}
