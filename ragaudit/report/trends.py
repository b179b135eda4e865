"""The trend panel of report.html: the last runs' values of a few metrics, per pipeline, as small
inline SVG lines. Every value shown is escaped; nothing is fetched."""

from __future__ import annotations

from collections import defaultdict
from html import escape

from ragaudit.history import TREND_METRICS, Point

LABELS = {"citation_match": "citation match", "coverage": "coverage", "delta_s_qr": "mean ΔS", "correct": "correct"}
WIDTH, HEIGHT = 140, 28


def _line(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    step = WIDTH / max(len(values) - 1, 1)
    points = " ".join(f"{i * step:.1f},{HEIGHT - 3 - (v - lo) / span * (HEIGHT - 6):.1f}" for i, v in enumerate(values))
    return (
        f'<svg class="trend" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{len(values)} runs"><polyline fill="none" stroke="currentColor" stroke-width="1.5" '
        f'points="{points}"/></svg>'
    )


def trend_panel(points: list[Point]) -> str:
    """The panel, or "" when the history holds fewer than two runs."""
    runs = list(dict.fromkeys(p.run_dir for p in points))
    if len(runs) < 2:
        return ""
    series: dict[tuple[str, str], list[float]] = defaultdict(list)
    for p in points:
        if p.metric in TREND_METRICS:
            series[(p.pipeline, p.metric)].append(p.value)
    pipelines = sorted({pipeline for pipeline, _ in series})
    head = "".join(f"<th>{escape(LABELS[m])}</th>" for m in TREND_METRICS)
    rows = []
    for pipeline in pipelines:
        cells = []
        for metric in TREND_METRICS:
            values = series.get((pipeline, metric), [])
            cells.append(
                f"<td>{_line(values)} <span class=num>{values[-1]:.3f}</span></td>" if values else "<td>–</td>"
            )
        rows.append(f"<tr><td>{escape(pipeline)}</td>{''.join(cells)}</tr>")
    return (
        f'<section id="trends"><h2>Trends</h2><p class="muted small">The last {len(runs)} runs on this gold set '
        "and corpus, oldest to newest (ragaudit history has them all).</p>"
        f'<div class="table-scroll"><table class="trends"><thead><tr><th>pipeline</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div></section>"
    )
