"""The production audit (`ragaudit audit-log`) as text for a terminal: one line per window, then
each index change (drift) with the values before it and their first-seen times, the verdict and why."""

from __future__ import annotations

from ragaudit.metrics.delta_s import ZONES


def _cell(value, digits: int = 3) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def render_windows(model: dict) -> str:
    zones = [name for name, _ in ZONES]
    lines = [
        f"{'window':<22} {'traces':>7} {'errors':>7} {'grounded':>9} {'mean ΔS':>8} {'halluc.':>8}  "
        + " ".join(f"{z:>7}" for z in zones)
    ]
    for w in model["windows"]:
        grounded = "–" if w["grounded_rate"] is None else f"{w['grounded_rate']:.1%}"
        lines.append(
            f"{w['window']:<22} {w['traces']:>7} {w['errors']:>7} {grounded:>9} {_cell(w['delta_s_mean']):>8} "
            f"{w['hallucinations']:>8}  " + " ".join(f"{w['zones'][z]:>7}" for z in zones)
        )
    for d in model["drift"]:
        before = ", ".join(f"{v!r} first seen {at or '–'}" for v, at in d["previous_first_seen"].items())
        where = "within window" if d["within_window"] else "in window"
        lines.append(
            f"drift: {d['field']} {d['value']!r} first seen {d['first_seen'] or d['window']} "
            f"{where} {d['window']} (before: {before})"
        )
    summary = model["summary"]
    if summary["issues"]:
        lines.append("issues: " + ", ".join(f"{code} {n}" for code, n in summary["issues"].items()))
    lines.append(f"{summary['verdict'].upper()}: " + ("; ".join(summary["why"]) or "no error issue and no drift"))
    return "\n".join(lines) + "\n"
