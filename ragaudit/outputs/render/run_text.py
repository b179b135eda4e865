"""What `ragaudit run`, `report` and `gate` say besides the summary: the warnings of a run, its
throughput, and the pipelines a baseline lacks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragaudit.core.progress_rate import rate_text

if TYPE_CHECKING:
    from ragaudit.core.model import Gate
    from ragaudit.core.types import Issue
    from ragaudit.pipelines.runner import RunResult


def notices(result: RunResult, findings: list[Issue]) -> list[str]:
    """The run's warnings, its aborted pipelines and the gold check's counts, one line each (stderr)."""
    lines = [f"warning: {line}" for line in result.warnings]
    lines += [f"pipeline {name} aborted (analyzer parity): {why}" for name, why in sorted(result.aborted.items())]
    if findings:
        errors = sum(1 for f in findings if f.severity == "error")
        lines.append(f"gold check: {errors} errors, {len(findings) - errors} warnings (listed in the report)")
    return lines


def throughput(result: RunResult, took: float, breakdown: str) -> str:
    """How many runs, run now or resumed, in how long, and where the time went."""
    return (
        f"{result.total:,} runs ({result.executed:,} run now, {result.resumed:,} resumed) in {took:.1f} s, "
        f"{rate_text(result.executed / took if took > 0 else 0.0, 'runs')} ({breakdown})"
    )


def baseline_gaps(gate: Gate) -> list[str]:
    """A warning for each gated pipeline the baseline does not hold (stderr)."""
    return [
        f"warning: pipeline {name} is not in the baseline: no drift checks for it"
        for name in gate.missing_from_baseline()
    ]
