"""The trend panel of report.html: per pipeline, the last runs' citation match, coverage, mean ΔS
and share of convergent questions on the same gold set and corpus, as small inline SVG lines.
Every value shown is escaped; nothing is fetched. The runs are those the history recorded before
this one, so `ragaudit report RUN_DIR` draws the same panel again later."""

from __future__ import annotations

from collections import defaultdict
from html import escape

from ragaudit.auditing.history import TREND_METRICS, Point

LABELS = {
    "citation_match": "citation match",
    "coverage": "coverage",
    "delta_s_qr": "mean ΔS",
    "convergent_share": "convergent share",
}
WIDTH, HEIGHT = 140, 28


def _line(values: list[float], label: str) -> str:
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    step = (WIDTH - 6) / max(len(values) - 1, 1)
    xy = [(3 + i * step, HEIGHT - 3 - (v - lo) / span * (HEIGHT - 6)) for i, v in enumerate(values)]
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
    last_x, last_y = xy[-1]
    return (
        f'<svg class="trend" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        'style="vertical-align:middle;color:#2563eb" '
        f'aria-label="{escape(label)}"><title>{escape(label)}</title>'
        f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{points}"/>'
        f'<circle cx="{last_x:.1f}" cy="{last_y:.1f}" r="2.5" fill="currentColor"/></svg>'
    )


def trend_panel(points: list[Point], *, metrics: tuple[str, ...] = TREND_METRICS) -> str:
    """The panel (an HTML fragment), or "" when the points hold fewer than two runs."""
    runs = list(dict.fromkeys(p.run_dir for p in points))
    if len(runs) < 2:
        return ""
    series: dict[tuple[str, str], list[float]] = defaultdict(list)
    for p in points:
        if p.metric in metrics:
            series[(p.pipeline, p.metric)].append(p.value)
    head = "".join(f"<th>{escape(LABELS.get(m, m))}</th>" for m in metrics)
    rows = []
    for pipeline in sorted({pipeline for pipeline, _ in series}):
        cells = []
        for metric in metrics:
            values = series.get((pipeline, metric), [])
            if not values:
                cells.append("<td>–</td>")
                continue
            label = (
                f"{pipeline}: {LABELS.get(metric, metric)} over {len(values)} runs, "
                f"{values[0]:.3f} to {values[-1]:.3f} (lowest {min(values):.3f}, highest {max(values):.3f})"
            )
            cells.append(f"<td>{_line(values, label)} <span class=num>{values[-1]:.3f}</span></td>")
        rows.append(f"<tr><td>{escape(pipeline)}</td>{''.join(cells)}</tr>")
    return (
        f'<section id="trends"><h2>Trends</h2><p class="muted small">The last {len(runs)} runs on this gold set '
        "and corpus, oldest to newest, this run last (<code>ragaudit history</code> has every run).</p>"
        f'<div class="table-scroll"><table class="trends"><thead><tr><th>pipeline</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div></section>"
    )
