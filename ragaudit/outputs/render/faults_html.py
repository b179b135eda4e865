"""`faults.html`: the detection matrix of `ragaudit faults` as one self-contained page, laid out by
`templates/faults.html`. The clean run is the first row; each fault row says whether every gated
pipeline's gate failed it, which checks fired, and how many of the affected questions the checks
named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragaudit.io.files import write_atomic
from ragaudit.outputs.render.compare_html import STYLE
from ragaudit.outputs.render.templating import render, trusted

EXTRA = """body{max-width:1500px}.caught{background:#e3f6e8}.missed{background:#fde7e7}td.l{text-align:left}
td.l:first-child{min-width:16rem}code{font-size:12px}"""


def _cells(row: dict[str, Any], gated: list[str]) -> list[dict[str, Any]]:
    cells = []
    for name in gated:
        p = row["pipelines"].get(name) or {}
        cells.append(
            {
                "verdict": p.get("verdict", "–"),
                "detection_rate": p.get("detection_rate"),
                "false_flag_rate": p.get("false_flag_rate"),
                "failed_checks": ", ".join(p.get("failed_checks") or []) or "none",
            }
        )
    return cells


def render_faults(result: dict[str, Any]) -> str:
    gated = result["gated"]
    clean = result["clean"]
    faults = [
        {
            "fault": r["fault"],
            "description": r["description"],
            "control": r.get("control", False),
            "applicable": r["applicable"],
            "affected": len(r["affected"]),
            "ok": r["ok"],
            "cells": _cells(r, gated),
            "baseline_cells": _cells(r["with_baseline"], gated),
        }
        for r in result["faults"]
    ]
    return render(
        "faults.html",
        style=trusted(STYLE + EXTRA),
        passed=result["passed"],
        questions=result["questions"],
        rate=result["rate"],
        seed=result["seed"],
        gated=gated,
        clean={"passes": clean["verdict"] == "pass", "cells": _cells(clean, gated)},
        faults=faults,
    )


def write_faults_html(path: Path, result: dict[str, Any]) -> None:
    write_atomic(path, render_faults(result))
