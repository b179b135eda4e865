"""Recorded answers from a file: plain text/markdown, JSON, or a Jupyter notebook's outputs.

In a notebook, an answer is a printed (stdout) output that carries a `[Data: …]` block, a
string shown as a cell's result, or an `'answer'`/`'response'` string inside a shown dict (as
DRIFT search prints its nodes). Logs on stderr are not answers. Repeats are kept once.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragaudit.adapters.graphrag.cite import parse_blocks
from ragaudit.core.errors import InputError, Problem
from ragaudit.io.jsonl import BOM, JsonDefect, decode

_LITERAL = r"""(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")"""
# pprint may wrap a long string as ('part' 'part'); IPython prints it whole.
_VALUE = rf"(?P<value>{_LITERAL}|\((?:\s*{_LITERAL})+\s*\)|None)"
_ENTRY = re.compile(rf"'(?P<key>query|answer|response)':\s*{_VALUE}")


@dataclass(frozen=True, slots=True)
class RecordedAnswer:
    text: str
    origin: str
    query: str | None = None


def read_answers(path: str | Path) -> list[RecordedAnswer]:
    """The answers recorded in `path`; raises InputError when it is unreadable or holds none."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".ipynb", ".json"):
        data = _read_json(path)
        found = _notebook(data, path.name) if suffix == ".ipynb" else _json(data, path.name)
    else:
        try:
            raw = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(Problem(str(path), f"unreadable answer file: {exc}")) from exc
        found = [RecordedAnswer(raw, path.name)]
    unique, seen = [], set()
    for answer in found:
        if answer.text.strip() and answer.text not in seen:
            seen.add(answer.text)
            unique.append(answer)
    if not unique:
        raise InputError(Problem(str(path), "expected a recorded answer, found none"))
    return unique


def _read_json(path: Path) -> Any:
    """The JSON of an answer file. NaN and Infinity read as null: a notebook's plots may hold
    them, and only strings are read here. Deep nesting and duplicate keys are input errors."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(Problem(str(path), f"unreadable answer file: {exc}")) from exc
    try:
        value, _ = decode(data[len(BOM) :] if data.startswith(BOM) else data, finite=False)
    except JsonDefect as defect:
        message = f"expected JSON, found a syntax error: {defect.syntax}" if defect.syntax else defect.message
        raise InputError(Problem(str(path), message, defect.line, defect.path)) from None
    return value


def _json(data: Any, name: str) -> list[RecordedAnswer]:
    items = data if isinstance(data, list) else [data]
    out = []
    for i, item in enumerate(items):
        where = name if len(items) == 1 else f"{name} [{i}]"
        if isinstance(item, str):
            out.append(RecordedAnswer(item, where))
        elif isinstance(item, dict) and isinstance(text := item.get("response", item.get("answer")), str):
            out.append(
                RecordedAnswer(
                    text,
                    where,
                    item.get("query") if isinstance(item.get("query"), str) else None,
                )
            )
        else:
            raise InputError(
                Problem(
                    name,
                    "expected a string or an object with a string 'response' or 'answer'",
                    path=f"$[{i}]" if isinstance(data, list) else "$",
                )
            )
    return out


def _notebook(data: Any, name: str) -> list[RecordedAnswer]:
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise InputError(Problem(name, "expected a Jupyter notebook (an object with 'cells')"))
    out = []
    for number, cell in enumerate(data["cells"]):
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        for output in outputs if isinstance(outputs, list) else ():
            if not isinstance(output, dict):
                continue
            where = f"{name} cell {number}"
            if output.get("output_type") == "stream":
                text = _join(output.get("text"))
                if output.get("name") == "stdout" and parse_blocks(text):
                    out.append(RecordedAnswer(text.strip(), where))
            elif isinstance(output.get("data"), dict):
                out.extend(_shown(_join(output["data"].get("text/plain")), where))
    return out


def _join(text: Any) -> str:
    if isinstance(text, list):
        return "".join(t for t in text if isinstance(t, str))
    return text if isinstance(text, str) else ""


def _shown(text: str, where: str) -> list[RecordedAnswer]:
    stripped = text.strip()
    if stripped[:1] in ("'", '"'):
        value = _eval(stripped)
        return [RecordedAnswer(value, where)] if isinstance(value, str) else []
    out, query, count = [], None, 0
    for match in _ENTRY.finditer(text):
        value = _eval(match.group("value"))
        if match.group("key") == "query":
            query = value if isinstance(value, str) else None
            continue
        if isinstance(value, str):
            out.append(RecordedAnswer(value, f"{where} {match.group('key')} {count}", query))
        count += 1
    return out


def _eval(literal: str) -> Any:
    try:
        return ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return None
