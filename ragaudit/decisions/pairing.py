"""Which systems `compare` puts side by side.

A run's pipelines become systems in the config's order (recorded in the report's meta; a report
without it keeps the order of its summary). The pairs, first match wins:
* `--pair A:B` (repeatable): with one run, two of its pipelines; with two runs, A from the first
  and B from the second. A name may also be a system's full name (`RUN/PIPE` across runs).
* with one run, `[compare] pairs` of the run's config;
* by default: with one run, each pipeline with the first; across runs, each pipeline of a later
  run with its namesake in the first (a pipeline without one is named, not compared).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragaudit.core.errors import InputError, UsageError
from ragaudit.core.model import Report
from ragaudit.decisions.comparison import COMPARED, MARGIN, System
from ragaudit.decisions.noise import noise_floors


@dataclass
class Run:
    """The systems of one report, by pipeline name, in the config's order."""

    label: str | None
    systems: dict[str, System] = field(default_factory=dict)

    def describe(self) -> str:
        return f"run {self.label}" if self.label else "the run"


def pipeline_order(report: Report) -> list[str]:
    names = list(report.summary.pipelines)
    recorded = report.meta.get("pipeline_order")
    if not isinstance(recorded, list):
        return names
    return [n for n in recorded if n in names] + [n for n in names if n not in recorded]


def run_of(report: Report, label: str | None = None, runs_path: Path | None = None) -> Run:
    run = Run(label)
    order = pipeline_order(report)
    noise = noise_floors(runs_path, order, COMPARED)
    for pipeline in order:
        questions = {q.qid: q for q in report.questions if q.pipeline == pipeline}
        run.systems[pipeline] = System(f"{label}/{pipeline}" if label else pipeline, questions, noise[pipeline])
    return run


def default_pairs(runs: list[Run]) -> tuple[list[tuple[System, System]], list[str]]:
    """The default pairs, and a note for each pipeline left without a partner."""
    first = runs[0]
    if len(runs) == 1:
        systems = list(first.systems.values())
        return [(systems[0], other) for other in systems[1:]], []
    pairs, notes = [], []
    for run in runs[1:]:
        for name, system in run.systems.items():
            if name in first.systems:
                pairs.append((first.systems[name], system))
            else:
                notes.append(f"pipeline {name} of {run.describe()} is not in {first.describe()}: not compared")
    if not pairs:
        raise UsageError(
            f"no pipeline name is in both runs ({first.describe()}: {', '.join(first.systems)}; "
            f"{runs[1].describe()}: {', '.join(runs[1].systems)}): name the pairs with --pair A:B"
        )
    return pairs, notes


def _find(name: str, home: Run, runs: list[Run]) -> System | None:
    if name in home.systems:
        return home.systems[name]
    return next((s for run in runs for s in run.systems.values() if s.name == name), None)


def resolve(specs: list[str], runs: list[Run]) -> list[tuple[System, System]]:
    """`A:B` pairs as systems; an unknown name is a usage error naming it and the choices."""
    if len(runs) > 2:
        raise UsageError(f"--pair compares within one run or across two, found {len(runs)} run directories")
    home_a, home_b = runs[0], runs[-1]
    pairs = []
    for spec in specs:
        # a pipeline name may hold ':' itself: take the split whose both sides are known
        splits = [(spec[:i], spec[i + 1 :]) for i, c in enumerate(spec) if c == ":"]
        if not any(a and b for a, b in splits):
            raise UsageError(f"--pair: expected PIPE_A:PIPE_B, found {spec!r}")
        found = [(x, y) for a, b in splits if (x := _find(a, home_a, runs)) and (y := _find(b, home_b, runs))]
        if found:
            pairs.append(found[0])
            continue
        a, b = splits[0]
        unknown, home = (a, home_a) if _find(a, home_a, runs) is None else (b, home_b)
        raise UsageError(
            f"--pair {spec}: unknown pipeline {unknown!r} in {home.describe()}; choices: {', '.join(home.systems)}"
        )
    return pairs


def choose_pairs(runs: list[Run], specs: list[str] | None) -> tuple[list[tuple[System, System]], list[str]]:
    """The pairs to compare (module docstring) and notes on pipelines left out."""
    if specs:
        return resolve(specs, runs), []
    return default_pairs(runs)


def _settings(report: Report) -> dict[str, Any]:
    """`[compare]` of the run's config as its report records it (older reports have none)."""
    settings = report.meta.get("compare") or {}
    if not isinstance(settings, dict):
        raise InputError(f"report.json: $.meta.compare: expected an object, found {type(settings).__name__}")
    pairs = settings.get("pairs") or []
    if not isinstance(pairs, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(n, str) for n in p) for p in pairs
    ):
        raise InputError("report.json: $.meta.compare.pairs: expected [A, B] pairs of pipeline names")
    for key in ("margin", "discordance", "icc"):
        if key in settings and (isinstance(settings[key], bool) or not isinstance(settings[key], int | float)):
            raise InputError(
                f"report.json: $.meta.compare.{key}: expected a number, found {type(settings[key]).__name__}"
            )
    return settings


def _foreign_inputs(reports: list[Report], runs: list[Run]) -> list[str]:
    """A note for a run whose gold set or corpus is not the first run's (their sha256 in its meta):
    its questions are paired with the first run's by qid all the same."""
    first = reports[0].inputs or {}
    notes = []
    for report, run in zip(reports[1:], runs[1:]):
        inputs = report.inputs or {}
        for name, what in (("gold", "gold set"), ("corpus", "corpus")):
            mine, theirs = first.get(name), inputs.get(name)
            if mine and theirs and mine != theirs:
                notes.append(
                    f"{run.describe()} ran on another {what} than {runs[0].describe()} (sha256 {str(theirs)[:12]}…, "
                    f"not {str(mine)[:12]}…): questions are paired by qid, and only those both hold are compared"
                )
    return notes


def _unpaired(pairs: list[tuple[System, System]]) -> list[str]:
    """A note for each pair whose systems did not score the same questions: those of one only are not compared."""
    notes = []
    for a, b in pairs:
        both = len(a.questions.keys() & b.questions.keys())
        only_a, only_b = len(a.questions) - both, len(b.questions) - both
        if only_a or only_b:
            notes.append(
                f"{b.name} vs {a.name}: the {both} questions both scored are compared; {only_a} only {a.name} "
                f"scored and {only_b} only {b.name} scored are not"
            )
    return notes


def configured_pairs(report: Report) -> list[str]:
    """`[compare] pairs` of the run's config, as recorded in its report, in `A:B` form."""
    return [f"{a}:{b}" for a, b in _settings(report).get("pairs") or []]


def comparison_of(
    reports: list[Report],
    *,
    labels: list[str] | None = None,
    run_dirs: list[Path] | None = None,
    specs: list[str] | None = None,
    margin: float | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The comparison of the reports' systems (see `ragaudit.decisions.comparison`), with the settings of the first
    report's `[compare]` where the caller gives none, and notes on pipelines left out. `run_dirs`
    locate runs.parquet, whose seeds give each system's noise floor."""
    from ragaudit.checks.runstore import RUNS
    from ragaudit.decisions.comparison import compare
    from ragaudit.decisions.power import Assumptions

    runs = [
        run_of(r, labels[i] if labels else None, Path(run_dirs[i]) / RUNS if run_dirs else None)
        for i, r in enumerate(reports)
    ]
    settings = _settings(reports[0])
    if margin is None:
        margin = settings.get("margin", MARGIN)
    if not 0 < margin < 1:
        raise UsageError(f"The 'margin' parameter must be a number in (0, 1). Got {margin!r} instead.")
    if not specs and len(runs) == 1:
        specs = configured_pairs(reports[0])
    pairs, notes = choose_pairs(runs, specs)
    notes = _foreign_inputs(reports, runs) + notes + _unpaired(pairs)
    assumptions = Assumptions(
        discordance=settings.get("discordance", Assumptions.discordance), icc=settings.get("icc", Assumptions.icc)
    )
    return compare(pairs, margin=float(margin), assumptions=assumptions), notes
