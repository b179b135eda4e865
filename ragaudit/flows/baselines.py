"""The baseline a run or a gate compares with: a report.json, or `last-pass`, the latest passing run
in the history on the same gold set and corpus; a report.json read back typed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragaudit.core.errors import InputError
from ragaudit.core.model import Report
from ragaudit.io import rundir

if TYPE_CHECKING:
    from ragaudit.io.config import Config

LAST_PASS = "last-pass"


def read_report(path: str | Path) -> Report:
    """A report.json, typed; a file that is not a ragaudit report is an InputError naming it."""
    from ragaudit.checks.questionstore import complete
    from ragaudit.io.jsonfiles import read_json_file

    found = Report.from_json(read_json_file(Path(path), what="report"), str(path))
    if found.summary.question_rows is not None:  # a bounded report: every row is in questions.parquet beside it
        found.questions = complete(found, Path(path))
    return found


@dataclass
class BaselineChoice:
    """The baseline a run or a gate compares with: its report.json's path and report (both None
    when `last-pass` found no passing run yet), and what to tell the user about the choice."""

    path: Path | None
    report: Report | None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def choose_baseline(
    baseline: str | Path,
    config: Config,
    inputs: dict[str, Any] | None,
    *,
    allow_foreign: bool = False,
    history_dir: Path | None = None,
    until: Path | None = None,
) -> BaselineChoice:
    """`baseline` is a report.json or `last-pass`: the history's latest passing run on the same
    gold set and corpus (recorded before the run `until`; `history_dir` is where run directories
    go, for the default history). A baseline built on another gold set or corpus is refused (exit
    3) unless `allow_foreign`, then kept with a warning."""
    from ragaudit.auditing import history

    older = rundir.older_hashes(config.audit.corpus, (inputs or {}).get("corpus"))
    if str(baseline) == LAST_PASS:
        store = history.store_of(config, history_dir)
        try:
            path, found = history.last_pass(
                store, gold=(inputs or {}).get("gold"), corpus=[(inputs or {}).get("corpus"), *older], until=until
            )
        except history.NoPassingRun as exc:  # a first run, or none has passed yet: gate without a baseline
            return BaselineChoice(None, None, warnings=[f"no baseline, so no regression checks this time: {exc}"])
        return BaselineChoice(path, found, notes=[f"baseline: {path} (the latest passing run in {store})"])
    report = read_report(baseline)
    why = rundir.foreign_baseline(inputs, report.inputs)
    if why and any(
        rundir.foreign_baseline({**(inputs or {}), "corpus": alias}, report.inputs) is None for alias in older
    ):
        why = None
    if why and not allow_foreign:
        raise InputError(f"{baseline}: {why}; pass --allow-foreign-baseline to compare anyway")
    return BaselineChoice(Path(baseline), report, warnings=[f"{baseline}: {why}"] if why else [])
