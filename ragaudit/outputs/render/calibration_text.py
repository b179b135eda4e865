"""`ragaudit calibrate`'s table: per gate check, its value on the controls, how well it separates
them from the faults, the proposed threshold, and what that threshold catches."""

from __future__ import annotations

from typing import Any


def _num(value: object) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


def render_calibration(result: dict[str, Any]) -> str:
    lines = [
        f"calibration of {result['questions']} questions: the oracle and its LLM-style rewrite as controls, "
        "every fault class injected",
        f"{'check':<24} {'controls':<16} {'separation':>10}  {'proposed':>8}  caught (question detection)",
    ]
    for key, c in result["checks"].items():
        controls = " ".join(_num(v) for v in c["controls"].values())
        caught = [
            f"{name} {f['detection']:.0%}" if f["detection"] is not None else name
            for name, f in c["faults"].items()
            if f["fails"]
        ]
        separation = "–" if c["separation"] is None else f"{c['separation']:.2f}"
        proposed = "not gated" if c["proposed"] is None else _num(c["proposed"])
        lines.append(f"{key:<24} {controls:<16} {separation:>10}  {proposed:>8}  {', '.join(caught) or '–'}")
        if c["not_gated"]:
            lines.append(f"{'':<24} {c['not_gated']}")
        if c["false_fail"]:
            lines.append(f"{'':<24} fails the controls: {', '.join(c['false_fail'])}")
    missed = sorted(
        {name for c in result["checks"].values() for name in next(iter(result["checks"].values()))["faults"]}
        - {name for c in result["checks"].values() for name, f in c["faults"].items() if f["fails"]}
    )
    if missed:
        lines.append(f"no check above catches: {', '.join(missed)} (validation errors and max_errors may)")
    return "\n".join(lines) + "\n"
