"""`compare.html`: the comparison as one self-contained page (tables only, no script), laid out by
`templates/compare.html`: metrics down the page, so that no table is wider than a 1280 px window
(a long name breaks within its cell rather than push a table past the edge)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragaudit.io.files import write_atomic
from ragaudit.outputs.render import compare_text
from ragaudit.outputs.render.templating import render, trusted

STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#1d2433}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}table{border-collapse:collapse;width:100%;margin:.5rem 0}
th,td{padding:.35rem .45rem;border-bottom:1px solid #e3e6ec;text-align:right;overflow-wrap:anywhere}
th:first-child,td:first-child{text-align:left}
th{background:#f4f6f9}.better{background:#e3f6e8}.worse{background:#fde7e7}.tie,.noise{color:#5b6475}
.note{color:#5b6475}"""


def _pair(result: dict[str, Any], pair: dict[str, Any]) -> dict[str, Any]:
    return {
        "a": pair["a"],
        "b": pair["b"],
        "questions": pair["questions"],
        "tolerance": pair["tolerance"],
        "margin": compare_text.points(pair["margin"]),
        "metrics": list(pair["metrics"].items()),
        "sentences": compare_text.sentences(pair),
        "noise": compare_text.noise_line(result, pair),
        "mde": compare_text.mde_line(pair),
        "states": list(pair["lambda_transitions"]),
        "transitions": pair["lambda_transitions"],
    }


def render_compare(result: dict[str, Any]) -> str:
    return render(
        "compare.html",
        style=trusted(STYLE),
        systems=result["systems"],
        metrics=list(next(iter(result["means"].values()))),
        means=result["means"],
        pairs=[_pair(result, p) for p in result["pairs"]],
    )


def write_compare_html(path: Path, result: dict[str, Any]) -> None:
    write_atomic(path, render_compare(result))
