"""What `ragaudit history` prints: per (pipeline, metric), a sparkline and a table over the runs
(oldest first: finish time, git commit, the run's verdict, the pipeline's gate, the value); the
same as JSON for tools; and an SVG of the lines."""

from __future__ import annotations

import json
from pathlib import Path

from ragaudit.auditing.history import Point
from ragaudit.auditing.history_series import sparkline

Series = dict[tuple[str, str], list[Point]]


def series_of(points: list[Point]) -> Series:
    """The points by (pipeline, metric), in that order, each oldest run first."""
    out: Series = {}
    for point in points:
        out.setdefault((point.pipeline, point.metric), []).append(point)
    return dict(sorted(out.items()))


def _verdict(passed: bool) -> str:
    return "pass" if passed else "fail"


def render_text(points: list[Point], store: str, left_out: list[str] | None = None) -> str:
    """The series, then which metrics were left out (not gated) and how to see them."""
    runs = len({p.run_dir for p in points})
    lines = [f"{runs} run{'s' * (runs != 1)} in {store}, oldest first"]
    for (pipeline, metric), found in series_of(points).items():
        values = [p.value for p in found]
        lines += [
            "",
            f"{pipeline} · {metric}  {sparkline(values)}  {values[0]:.4f} → {values[-1]:.4f}",
            f"  {'finished':<20}  {'commit':<10}  {'run':<4}  {'gate':<4}  value",
        ]
        lines += [
            f"  {p.finished or '?':<20}  {(p.git_commit or '-')[:10]:<10}  {p.verdict:<4}  "
            f"{_verdict(p.pipeline_passed):<4}  {p.value:.4f}"
            for p in found
        ]
    if left_out:
        lines += ["", f"not gated, left out: {', '.join(left_out)} (--all shows them, --metric one of them)"]
    return "\n".join(lines)


def render_json(points: list[Point]) -> str:
    return json.dumps(
        [
            {
                "pipeline": pipeline,
                "metric": metric,
                "runs": [
                    {
                        "run_dir": p.run_dir,
                        "finished": p.finished,
                        "git_commit": p.git_commit,
                        "verdict": p.verdict,
                        "pipeline_gate": _verdict(p.pipeline_passed),
                        "value": p.value,
                    }
                    for p in found
                ],
            }
            for (pipeline, metric), found in series_of(points).items()
        ],
        indent=2,
        sort_keys=True,
        allow_nan=False,
    )


def render_svg(points: list[Point]) -> str:
    from ragaudit.outputs.render.charts import trend_chart

    return trend_chart({f"{p} · {m}": [x.value for x in found] for (p, m), found in series_of(points).items()})


def write_svg(path: Path, points: list[Point]) -> None:
    """The trends drawn to an SVG file, written whole or not at all."""
    from ragaudit.io.files import write_atomic

    write_atomic(path, render_svg(points))
