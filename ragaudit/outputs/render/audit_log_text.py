"""The production audit (`ragaudit audit-log`) as text for a terminal: one line per window, then
each index change (drift) with the values before it and their first-seen times, the verdict and why."""

from __future__ import annotations

from typing import Any

from ragaudit.checks.metrics.delta_s import ZONES


def _cell(value: object, digits: int = 3) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _level(kind: str, value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.1%}" if kind == "rate" else f"{value:.3f}"


def _size(kind: str, relative: bool, value: float) -> str:
    if kind == "rate":
        return f"{value * 100:+.1f} points"
    return f"{value:+.3f}"


def describe(r: dict[str, Any], metrics: dict[str, Any]) -> list[str]:
    """A regression: metric, levels, size with its CI, p, noise floor and windows; then the queries
    that moved most, each with its worst runs."""
    kind, relative = metrics[r["metric"]]["kind"], metrics[r["metric"]]["relative"]
    floor = "unknown (no earlier window pair)" if r["floor"] is None else f"{r['floor']:.3g} ({r['floor_pairs']} pairs)"
    share = f", {r['effect']:+.1%} of before" if relative and r["effect"] is not None else ""
    against = "the window before" if r["against"] == "previous" else "the baseline"
    lines = [
        f"regression: {r['metric']} of {r['pipeline']} {_level(kind, r['before'])} → {_level(kind, r['after'])} "
        f"({_size(kind, relative, r['size'])}{share}, 95% CI {_size(kind, relative, r['low'])} to "
        f"{_size(kind, relative, r['high'])}, Holm p {r['p_holm']:.2g}, noise floor {floor}) in window "
        f"{r['window']} against {against} {r['reference']}"
    ]
    for q in r["queries"]:
        runs = "; ".join(
            f"{w['file']}:{w['line']} trace {w['trace']}" + ("" if kind == "rate" else f" {w['value']:.3g}")
            for w in q["worst"]
        )
        lines.append(
            f"  query {q['query'][:80]!r}: {q['runs']} runs, {_level(kind, q['before'])} → {_level(kind, q['after'])}"
            + (f"; worst: {runs}" if runs else "")
        )
    return lines


def render_windows(model: dict[str, Any]) -> str:
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
    health = model.get("health") or {}
    for r in health.get("regressions", []):
        lines += describe(r, health["metrics"])
    noise = sum(
        m["verdict"] == "noise" and m.get("size") not in (None, 0)
        for c in health.get("comparisons", [])
        for m in c["metrics"].values()
    )
    if health.get("comparisons"):
        lines.append(
            f"health: {len(health['comparisons'])} window comparisons, {len(health['regressions'])} regressions, "
            f"{noise} movements named noise (not significant, below min_effect or within the noise floor)"
        )
    summary = model["summary"]
    if summary["issues"]:
        lines.append("issues: " + ", ".join(f"{code} {n}" for code, n in summary["issues"].items()))
    lines.append(
        f"{summary['verdict'].upper()}: " + ("; ".join(summary["why"]) or "no error issue, no drift and no regression")
    )
    return "\n".join(lines) + "\n"
