"""Inline SVG charts for `report.html`: no script, no external resources.

Colours come from CSS classes in the page's stylesheet (`templates/report.css`), so the
palette lives in one place and the charts follow it. Every text that goes into a chart (labels,
names, classes) is escaped here, so the report templates insert the SVG as it is.
"""

from __future__ import annotations

import math
from html import escape
from typing import Callable


def _f(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _nice_step(top: int, ticks: int = 4) -> int:
    """A 1-2-5 step that cuts [0, top] into at most `ticks` parts."""
    raw = max(top, 1) / ticks
    base = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    for mult in (1, 2, 5, 10):
        if base * mult >= raw:
            return max(1, int(base * mult))
    return max(1, int(base * 10))


def bin_counts(values: list[float], bins: int, lo: float = 0.0, hi: float = 1.0) -> list[int]:
    """Counts per equal-width bin; the last bin is closed so `hi` itself lands in it. NaN is left out."""
    counts = [0] * bins
    width = (hi - lo) / bins
    for v in values:
        if not math.isfinite(v):
            continue
        i = min(bins - 1, max(0, int((v - lo) / width + 1e-9)))
        counts[i] += 1
    return counts


def histogram(
    values: list[float] | None = None,
    *,
    bands: list[tuple[float, float, str, str]],
    bins: int | None = None,
    counts: list[int] | None = None,
    threshold: float | None = None,
    threshold_label: str = "gate",
    label: str = "",
    unit: str = "runs",
    width: int = 380,
    height: int = 170,
) -> str:
    """A histogram on [0, 1] over coloured background bands `(lo, hi, css_class, name)`, of
    `values` cut into `bins`, or of `counts` already binned (equal-width bins on [0, 1])."""
    left, right, top, bottom = 34, 10, 18, 24
    pw, ph = width - left - right, height - top - bottom
    counts = list(counts) if counts is not None else bin_counts(values or [], bins or 20)
    bins = len(counts)
    step = _nice_step(max(counts) if counts else 1)
    ymax = max(step, math.ceil(max(counts, default=0) / step) * step)
    x: Callable[[float], float] = lambda v: left + v * pw  # noqa: E731
    y: Callable[[float], float] = lambda c: top + ph - c / ymax * ph  # noqa: E731
    out = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(label)}">',
        f"<title>{escape(label)}</title>",
    ]
    for lo, hi, css, name in bands:
        out.append(
            f'<rect class="band {escape(css)}" x="{_f(x(lo))}" y="{top}" width="{_f(x(hi) - x(lo))}" height="{ph}">'
            f"<title>{escape(name)}: {lo:.2f}–{hi:.2f}</title></rect>"
        )
        if x(hi) - x(lo) > 30:
            out.append(f'<text class="band-label" x="{_f(x(lo) + 3)}" y="{top + 10}">{escape(name)}</text>')
    for tick in range(0, ymax + 1, step):
        out.append(
            f'<line class="grid" x1="{left}" x2="{left + pw}" y1="{_f(y(tick))}" y2="{_f(y(tick))}"/>'
            f'<text class="tick" x="{left - 4}" y="{_f(y(tick) + 3)}" text-anchor="end">{tick}</text>'
        )
    bw = pw / bins
    for i, c in enumerate(counts):
        if c:
            lo, hi = i / bins, (i + 1) / bins
            out.append(
                f'<rect class="bar" x="{_f(x(lo) + 0.5)}" y="{_f(y(c))}" width="{_f(max(bw - 1, 1))}" '
                f'height="{_f(top + ph - y(c))}"><title>{lo:.3f}–{hi:.3f}: {c} {escape(unit)}</title></rect>'
            )
    out.append(f'<line class="axis" x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}"/>')
    for share in (0, 0.2, 0.4, 0.6, 0.8, 1.0):
        out.append(f'<text class="tick" x="{_f(x(share))}" y="{height - 8}" text-anchor="middle">{share:.1f}</text>')
    if threshold is not None and 0 <= threshold <= 1:
        tx = _f(x(threshold))
        out.append(
            f'<line class="threshold" x1="{tx}" x2="{tx}" y1="{top - 4}" y2="{top + ph}"/>'
            f'<text class="threshold-label" x="{tx}" y="{top - 6}" text-anchor="middle">'
            f"{escape(threshold_label)} {threshold:g}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def stacked_bars(
    rows: list[tuple[str, list[tuple[str, int]]]],
    *,
    marker: float | None = None,
    marker_label: str = "",
    label: str = "",
    width: int = 760,
    bar: int = 22,
    unit: str = "q",
) -> str:
    """One horizontal bar per row, split into `(state, count)` parts styled by class `s-<state>`,
    its total shown after it with `unit`.

    `marker` draws a dashed line at that share of the bar (a gate threshold on the first part)."""
    left, right, top, gap = 150, 60, 22, 12
    pw = width - left - right
    height = top + len(rows) * (bar + gap) + 4
    out = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(label)}">',
        f"<title>{escape(label)}</title>",
    ]
    for r, (name, parts) in enumerate(rows):
        total = sum(c for _, c in parts)
        y0 = top + r * (bar + gap)
        short = name if len(name) <= 22 else name[:21] + "…"
        out.append(
            f'<text class="row-label" x="{left - 8}" y="{y0 + bar / 2 + 4}" text-anchor="end">'
            f"<title>{escape(name)}</title>{escape(short)}</text>"
        )
        x0 = float(left)
        for state, count in parts:
            if not count:
                continue
            w = pw * count / total
            share = count / total
            out.append(
                f'<rect class="s-{escape(state)}" x="{_f(x0)}" y="{y0}" width="{_f(w)}" height="{bar}">'
                f"<title>{escape(name)} · {escape(state)}: {count} ({share:.0%})</title></rect>"
            )
            if w > 26:
                out.append(
                    f'<text class="seg-label" x="{_f(x0 + w / 2)}" y="{y0 + bar / 2 + 4}" '
                    f'text-anchor="middle">{count}</text>'
                )
            x0 += w
        out.append(f'<text class="tick" x="{left + pw + 6}" y="{y0 + bar / 2 + 4}">{total} {escape(unit)}</text>')
    if marker is not None and 0 <= marker <= 1:
        mx = _f(left + pw * marker)
        out.append(
            f'<line class="threshold" x1="{mx}" x2="{mx}" y1="{top - 6}" y2="{height - 2}"/>'
            f'<text class="threshold-label" x="{mx}" y="{top - 9}" text-anchor="middle">'
            f"{escape(marker_label)}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def trend_chart(series: dict[str, list[float]], *, width: int = 640, row: int = 60) -> str:
    """A self-contained SVG: one line per named series (oldest value first), each on its own row
    scaled to its own range, labelled with its name and its first and last values."""
    left, right = 8, 8
    height = max(1, len(series)) * row + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'font-family="sans-serif" font-size="11">'
    ]
    for k, (name, values) in enumerate(series.items()):
        top = k * row + 16
        out.append(f'<text x="{left}" y="{top - 4}">{escape(name)}</text>')
        if not values:
            continue
        lo, hi = min(values), max(values)
        span = (hi - lo) or 1.0
        step = (width - left - right - 90) / max(len(values) - 1, 1)
        xy = [(_f(left + i * step), _f(top + (row - 26) * (1 - (v - lo) / span))) for i, v in enumerate(values)]
        points = " ".join(f"{x},{y}" for x, y in xy)
        out.append(f'<polyline fill="none" stroke="#2563eb" stroke-width="1.5" points="{points}"/>')
        out.append(f'<circle cx="{xy[-1][0]}" cy="{xy[-1][1]}" r="2.5" fill="#2563eb"/>')  # the newest run
        out.append(f'<text x="{width - right - 84}" y="{top + 14}">{values[0]:.3f} → {values[-1]:.3f}</text>')
    out.append("</svg>")
    return "".join(out)
