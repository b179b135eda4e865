"""The tables of docs/reference.md that a registry owns, written from it: the issue codes
(`ragaudit.core.codes`), the metrics (`ragaudit.checks.metrics.registry`), the gate checks and the
`[gate]` keys (`ragaudit.core.gatechecks`, then the section's own keys of the config schema).

`make docs` writes them into the reference (`python -m ragaudit.outputs.render.doctables
docs/reference.md`); the tests hold the reference to what this writes, so a registry entry added or
changed is a table row without a hand edit."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

TableRows = Iterable[Iterable[str]]


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|")


def _named(name: str) -> str:
    return f"`{name}`"


def _table(header: list[str], rows: TableRows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def codes() -> str:
    from ragaudit.core.codes import CODES

    rows = ((_named(c.code), c.severity, c.family, c.meaning, c.fix) for c in CODES.values())
    return _table(["code", "severity", "from", "meaning", "fix"], rows)


def metrics() -> str:
    from ragaudit.checks.metrics.registry import METRICS

    rows = (
        (
            _named(m.name),
            m.level,
            "higher" if m.higher_is_better else "lower",
            ", ".join(map(_named, m.gated_by)) or "—",
            "yes" if m.compared else "no",
            m.description,
        )
        for m in METRICS.values()
    )
    return _table(["metric", "level", "better", "gated by", "compared", "definition"], rows)


def gate_checks() -> str:
    from ragaudit.core.gatechecks.registry import CHECKS

    return _table(["check", "fails when", "questions named"], ((_named(c.name), c.fails_when, c.names) for c in CHECKS))


def _default(value: Any) -> str:
    return "none" if value is None else _named(json.dumps(list(value) if isinstance(value, tuple) else value))


def gate_keys() -> str:
    """Every check's key, then the section's own (which pipelines, a calibration), from the schema."""
    from ragaudit.core.gatechecks.registry import KEYS
    from ragaudit.io.config_schema import GATE_OWN_KEYS

    rows = [(_named(k.name), _default(k.default), k.range, k.what) for k in KEYS.values()]
    rows += [(_named(k.name), _default(k.default), k.range, k.what) for k in GATE_OWN_KEYS]
    return _table(["key", "default", "range", "what"], rows)


TABLES: dict[str, Callable[[], str]] = {
    "table: codes": codes,
    "table: metrics": metrics,
    "table: gate-checks": gate_checks,
    "keys: gate": gate_keys,
}


def block(text: str, marker: str) -> tuple[int, int]:
    """Where the table after `<!-- marker -->` lies in `text`: its first and past-last character."""
    start = text.index(f"<!-- {marker} -->\n") + len(f"<!-- {marker} -->\n")
    end = start
    while text.startswith("|", end):
        end = text.index("\n", end) + 1
    return start, end


def written(text: str) -> str:
    """`text` with every table of TABLES written from its registry."""
    for marker, make in TABLES.items():
        start, end = block(text, marker)
        text = text[:start] + make() + text[end:]
    return text


def main(argv: list[str]) -> int:
    """Write the tables into each file named; say which changed."""
    for name in argv:
        path = Path(name)
        before = path.read_text(encoding="utf-8")
        after = written(before)
        if after != before:
            path.write_text(after, encoding="utf-8")
            print(f"{path}: tables written from the registries")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
