"""The detection matrix of `ragaudit faults` as a text table: the clean run first, then each fault
gated alone and against the clean run as its baseline, per gated pipeline."""

from __future__ import annotations

from typing import Any


def _rate(value: float | None) -> str:
    return "   –" if value is None else f"{value:4.0%}"


def _cells(pipelines: dict[str, Any], gated: list[str]) -> str:
    return "  ".join(
        f"{p['verdict']:<5}{_rate(p['detection_rate']):>5}{_rate(p['false_flag_rate']):>5}"
        for p in (pipelines[n] for n in gated)
    )


def render_fault_matrix(result: dict[str, Any]) -> str:
    gated = result["gated"]
    width = 15 * len(gated) + 2 * (len(gated) - 1)
    lines = [
        f"{'':<24} {'':>8}  {'without a baseline':<{width}}   {'with the clean run as baseline':<{width}}",
        f"{'fault':<24} {'affected':>8}  "
        + "  ".join(f"{n[:15]:<15}" for n in gated)
        + "   "
        + "  ".join(f"{n[:15]:<15}" for n in gated),
        f"{'':<24} {'':>8}  " + "   ".join("  ".join(f"{'gate':<5}{'det':>5}{'ff':>5}" for _ in gated) for _ in "ab"),
        f"{'clean run':<24} {'':>8}  {_cells(result['clean']['pipelines'], gated)}",
    ]
    for r in result["faults"]:
        name = f"{r['fault']} (control)" if r.get("control") else r["fault"]
        mark = "" if r["ok"] else ("  FAILS A CORRECT RUN" if r.get("control") else "  MISSED")
        mark = mark or ("  (not applicable here)" if not r["applicable"] else "")
        lines.append(
            f"{name:<24} {len(r['affected']):>8}  {_cells(r['pipelines'], gated)}   "
            f"{_cells(r['with_baseline']['pipelines'], gated)}{mark}"
        )
    verdict = (
        "passes the clean run and the controls, and fails every fault against the baseline"
        if result["passed"]
        else "does NOT tell clean from faulty"
    )
    return "\n".join(lines) + f"\ngate {verdict}\n"
