"""ragaudit as a library: every command's flow as a function that returns a typed result.

    from ragaudit.flows import api

    outcome = api.audit("configs/default.toml")          # run, audit, gate, write the run directory
    outcome.report.gate.verdict                            # a ragaudit.core.model.Report
    gated = api.gate("reports/RUN/report.json", "configs/strict.toml", baseline="last-pass")
    with api.validate(["traces.jsonl"], corpus="corpus/") as found:
        for issue in found: ...

`ragaudit.cli.commands` parses, calls one of these, prints what it returns and maps it to an exit code.
Messages a caller should show (warnings, notes) are returned, never printed; bad input raises
`ragaudit.core.errors.InputError` (exit 3), `UsageError` (2), `PipelineError` (4).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Union

from ragaudit.auditing.checking import check_gold as check_gold
from ragaudit.auditing.checking import ingest as ingest
from ragaudit.auditing.checking import validate as validate
from ragaudit.core.errors import InputError, RagauditError, UsageError
from ragaudit.core.model import Gate, Report
from ragaudit.flows.baselines import BaselineChoice, choose_baseline, read_report
from ragaudit.io import rundir

if TYPE_CHECKING:  # the types of results only: nothing of these is imported until a function needs it
    from ragaudit.auditing.history import Trends
    from ragaudit.checks.goldtools.anchor import Anchoring
    from ragaudit.flows.app import Outcome
    from ragaudit.io.config import Config
    from ragaudit.outputs.results import Run

ConfigLike = Union[str, Path, "Config"]  # a config file's path, or a Config loaded from one

__all__ = """Calibrated Compared ConfigLike anchor audit calibrate check_gold compare faults gate ingest load_config
load_run report run_baseline support_score support_scores trends validate verify""".split()


def run_baseline(
    config: ConfigLike,
    baseline: str | Path | None,
    allow_foreign: bool = False,
    out: Path | None = None,
    resume: Path | None = None,
) -> BaselineChoice | None:
    """The baseline a run of `config` compares with (None without `baseline`): chosen as
    `choose_baseline` does against the config's inputs as they are now, `last-pass` from the
    history beside the run directories (`out`, or those of the run `resume` finishes)."""
    if not baseline:
        return None

    config = _config(config)
    history_dir = Path(resume).parent if resume else out
    inputs = rundir.input_hashes(config)
    return choose_baseline(baseline, config, inputs, allow_foreign=allow_foreign, history_dir=history_dir)


# ---- audit, report, gate ---------------------------------------------------------------------


def audit(
    config: ConfigLike,
    *,
    out: Path | None = None,
    resume: Path | None = None,
    workers: int | None = None,
    baseline: BaselineChoice | None = None,
    gold_check: bool = True,
    executor: str | None = None,
    scheduler: str | None = None,
    command: list[str] | None = None,
) -> Outcome:
    """Run every pipeline of `config` (a path or a loaded Config) over its gold set, audit the
    traces as they come, gate and write every output of the run directory. Returns
    `ragaudit.flows.app.Outcome`: the run's figures, its Report, the gold set's findings."""
    from ragaudit.flows.app import audit_config

    config = _config(config)
    outcome = audit_config(
        config,
        out=out,
        resume=resume,
        workers=workers,
        baseline=baseline.report.as_baseline() if baseline and baseline.report else None,
        baseline_path=baseline.path if baseline else None,
        gold_check=gold_check,
        executor=executor,
        scheduler=scheduler,
        command=command,
    )
    if not (outcome.run_dir / "report.json").is_file():  # never a result without a report
        raise RagauditError(f"{outcome.run_dir}: the report was not written")
    return outcome


@dataclass
class Rebuilt:
    report: Report
    run_dir: Path
    warnings: list[str] = field(default_factory=list)


def report(run_dir: Path) -> Rebuilt:
    """Rebuild every output of `run_dir` from its stored traces (only read, never rewritten), with
    the config, gold set and baseline its manifest names."""
    from ragaudit.outputs.writing import build
    from ragaudit.pipelines.inputs import Inputs

    manifest = rundir.read_manifest(run_dir)
    inputs = Inputs.from_config(_config(manifest["config_path"]))
    base = None
    warnings = rundir.gating_changes(manifest, inputs.config)
    if manifest.get("baseline"):
        chosen = choose_baseline(manifest["baseline"], inputs.config, manifest["inputs"], allow_foreign=True)
        warnings += chosen.warnings
        base = chosen.report.as_baseline() if chosen.report else None
    with rundir.locked(run_dir):
        inputs.check_gold(strict=False)
        built = build(run_dir, inputs, baseline=base, warnings=warnings)
    if not (Path(run_dir) / "report.json").is_file():  # never a result without a report
        raise RagauditError(f"{run_dir}: the report was not written")
    return Rebuilt(built, Path(run_dir), warnings)


@dataclass
class Gated:
    """A report gated again: the new gate, and the report with it."""

    gate: Gate
    report: Report
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def gate(
    report_path: Path, config: ConfigLike, *, baseline: str | Path | None = None, allow_foreign_baseline: bool = False
) -> Gated:
    """Apply the [gate] of `config` to a report.json (with the drift checks against `baseline`, a
    report.json or `last-pass`). The report's runs' coverage is read from runs.parquet beside it;
    a report moved alone must carry all its runs."""
    from ragaudit.checks import runstore
    from ragaudit.checks.metrics.evaluate import Evaluation
    from ragaudit.decisions.gating import evaluate_gate, fitted_to
    from ragaudit.io.calibration import check_inputs, regated

    config = _config(config)
    found = read_report(report_path)
    if config.calibration is not None:
        check_inputs(config.calibration, found.inputs)
    said = regated(config.calibration, found.inputs)
    chosen = None
    if baseline is not None:
        run_dir = Path(report_path).resolve().parent
        chosen = choose_baseline(
            baseline,
            config,
            found.inputs,
            allow_foreign=allow_foreign_baseline,
            history_dir=run_dir.parent,
            until=run_dir,
        )
    errors: dict[str, int] = {}
    questions: dict[str, set[str]] = {}
    for i, issue in enumerate(found.issues):
        if issue.get("severity") == "error":
            pipeline = issue.get("pipeline")
            if not isinstance(pipeline, str):
                raise InputError(f"{report_path}: $.issues[{i}].pipeline: expected a pipeline name")
            errors[pipeline] = errors.get(pipeline, 0) + 1
            questions.setdefault(pipeline, set()).add(str(issue.get("qid") or f"line {issue.get('line')}"))
    runs_file = Path(report_path).parent / runstore.RUNS
    evaluation = Evaluation(
        questions=found.questions,
        sections=found.summary.sections,
        pipelines=found.summary.pipelines,
        coverage_share=runstore.coverage_share(runs_file) if runs_file.is_file() else None,
    )
    if not runs_file.is_file():  # a report moved alone: the runs it carries must be all of them
        if any(q.runs is None for q in found.questions):
            raise InputError(
                f"{report_path}: expected {runstore.RUNS} beside the report (the per-run coverage "
                "behind coverage_pass_rate), found none"
            )
        evaluation.runs = [r for q in found.questions for r in q.runs or []]
    result = evaluate_gate(
        evaluation,
        config.gate,
        error_counts=errors,
        aborted={name: p.aborted for name, p in found.pipelines.items() if p.aborted is not None},
        baseline=chosen.report.as_baseline() if chosen and chosen.report else None,
        error_questions={p: sorted(q) for p, q in questions.items()},
        fitted=fitted_to(config),
    )
    found.gate = result
    warnings = [said] if said else []
    return Gated(result, found, warnings + (chosen.warnings if chosen else []), chosen.notes if chosen else [])


# ---- faults, calibrate, compare --------------------------------------------------------------


@dataclass
class FaultsResult:
    result: dict[str, Any]  # faults.json's content
    json_path: Path
    html_path: Path
    warnings: list[str] = field(default_factory=list)  # what went wrong without changing a figure (a cache)

    @property
    def passed(self) -> bool:
        return bool(self.result["passed"])


def faults(
    run_dir: Path,
    *,
    config: str | Path | None = None,
    only: str | Sequence[str] | None = None,
    rate: float = 0.2,
    seed: int = 0,
    out: Path | None = None,
) -> FaultsResult:
    """Inject each fault class (those `only` names: a list, or comma-separated) into a share of the
    questions of a finished run and gate every faulty copy as `report` would (module
    `ragaudit.flows.injection`); writes faults.json and faults.html."""
    from ragaudit.core.progress import phase
    from ragaudit.flows.injection import run_faults
    from ragaudit.flows.injection.registry import fault_names
    from ragaudit.io.files import refuse_overwriting, write_json
    from ragaudit.io.runfiles import MANIFEST, TRACES
    from ragaudit.io.stream import read_trace_file
    from ragaudit.outputs.render.faults_html import write_faults_html
    from ragaudit.pipelines.inputs import Inputs

    only = fault_names(only) if isinstance(only, str) else only
    manifest = rundir.read_manifest(run_dir)
    config_file = config or manifest["config_path"]
    target = Path(out or run_dir)
    json_path, html_path = target / "faults.json", target / "faults.html"
    refuse_overwriting([json_path, html_path], [Path(run_dir) / TRACES, Path(run_dir) / MANIFEST, config_file])
    loaded = _config(config_file)
    inputs = Inputs.from_config(loaded)
    with phase("reading traces", unit="runs", counts_as="loading") as reading:
        traces = read_trace_file(
            Path(run_dir) / TRACES, offset_unit=loaded.audit.offset_unit, markers=loaded.audit.marker_forms
        )
        reading.advance(len(traces))
    inputs.check_gold(strict=False)
    result, _ = run_faults(traces, inputs, only=list(only) if only else None, rate=rate, seed=seed)
    target.mkdir(parents=True, exist_ok=True)
    same = target.resolve() == Path(run_dir).resolve()
    with (
        rundir.locked(run_dir) if same else contextlib.nullcontext(),
        phase("writing faults.json and faults.html", counts_as="writing"),
    ):
        write_json(json_path, result)
        write_faults_html(html_path, result)
    return FaultsResult(result, json_path, html_path, inputs.cache_warnings())


class Calibrated(NamedTuple):
    proposal: dict[str, Any]  # calibration.json's content
    path: Path  # where it was written


def calibrate(config: ConfigLike, *, out: Path | None = None, rate: float = 0.2, seed: int = 0) -> Calibrated:
    """Propose [gate] thresholds for the gold set and corpus of `config` (module
    `ragaudit.flows.calibrating`); writes calibration.json (default: beside the config) and returns its
    content and path."""
    from ragaudit.core.progress import phase
    from ragaudit.flows.calibrating import AUDITS
    from ragaudit.flows.calibrating import calibrate as propose
    from ragaudit.io.files import output_target, refuse_overwriting, write_json
    from ragaudit.pipelines.inputs import Inputs

    if not 0 < rate <= 1:
        raise UsageError(f"expected --rate in (0, 1], found {rate}")
    loaded = _config(config)
    target = Path(out) if out else (Path(loaded.path).parent if loaded.path else Path.cwd()) / "calibration.json"
    refuse_overwriting([target], [loaded.path, loaded.audit.gold, loaded.audit.corpus])
    output_target(target)  # a folder, a FIFO or a device is refused before the oracle runs
    # one phase from the first second to the last audit: a first calibration embeds every text it
    # audits, minutes on a busy machine, and counts its audits meanwhile
    with phase("calibrate", AUDITS, unit="audits", counts_as="calibrate") as audits:
        result = propose(Inputs.from_config(loaded), rate=rate, seed=seed, done=audits.advance)
    write_json(target, result)
    return Calibrated(result, target)


class Compared(NamedTuple):
    comparison: dict[str, Any]  # compare.json's content
    notes: list[str]  # what was left out, and why
    folder: Path | None  # where compare.json and compare.html were written (None: not written)


def compare(
    run_dirs: Sequence[Path],
    *,
    pairs: Sequence[str] = (),
    margin: float | None = None,
    out: Path | None = None,
) -> Compared:
    """Compare pipelines within a run or across two (module `ragaudit.decisions.comparison`); with `out`,
    writes compare.json and compare.html there. Returns the comparison, notes on what was left
    out, and the folder written (None without `out`). A run directory's own compare.json and
    compare.html are stamped in its manifest, so `out` is never a run directory (UsageError)."""
    from ragaudit.core.progress import phase
    from ragaudit.decisions.pairing import comparison_of
    from ragaudit.io.files import refuse_overwriting
    from ragaudit.outputs.writing import write_comparison

    if margin is not None and not 0 < margin < 1:
        raise UsageError(f"--margin: expected a number in (0, 1), found {margin}")
    target = Path(out) if out is not None else None
    outputs = [target / "compare.json", target / "compare.html"] if target is not None else []
    refuse_overwriting(outputs, [Path(d) / "report.json" for d in run_dirs])
    with phase("reading reports", counts_as="loading"):
        reports = [read_report(Path(d) / "report.json") for d in run_dirs]
    labels = [Path(d).name for d in run_dirs] if len(run_dirs) > 1 else None
    if target is None:
        with phase("comparing"):
            found = comparison_of(reports, labels=labels, run_dirs=list(run_dirs), specs=list(pairs), margin=margin)
        return Compared(*found, None)
    target.mkdir(parents=True, exist_ok=True)
    with phase("comparing and writing compare.json and compare.html", counts_as="writing"):
        found = write_comparison(target, reports, labels, run_dirs=list(run_dirs), pairs=list(pairs), margin=margin)
    return Compared(*found, target)


# ---- verify ------------------------------------------------------------------------------------


@dataclass
class Verified:
    """What verify found: the changes (none: unchanged), what was checked, and notes for the user."""

    changed: list[str]
    checked: list[str]
    notes: list[str] = field(default_factory=list)


def verify(run_dir: Path, *, attestation: Path | None = None, pubkey: Path | None = None) -> Verified:
    """Whether the inputs, traces and outputs of `run_dir` are unchanged since the run (and, with
    `attestation`, every file it lists; with `pubkey`, its signature), naming each change."""

    if attestation or pubkey:
        from ragaudit.decisions import attestcheck

        attestcheck.check_options(attestation, pubkey)
        assert attestation is not None  # check_options refuses --pubkey without --attestation
        found = attestcheck.verify(run_dir, attestation, pubkey)
        return Verified(list(found.mismatches), found.checked(run_dir, attestation), list(found.notes))
    notes: list[str] = []
    changed = rundir.changes(run_dir, notes)
    return Verified(changed, [f"unchanged: gold, corpus, config, traces and outputs of {run_dir}"], notes)


# ---- history, gold anchors ----------------------------------------------------------------------


def trends(
    store: Path | None = None,
    *,
    config: str | Path | None = None,
    metric: str | None = None,
    pipeline: str | None = None,
    last: int | None = None,
    plot: Path | None = None,
    every: bool = False,
    rename: str | None = None,
) -> Trends:
    """The trends of the recorded runs (`ragaudit.auditing.history.Trends`): of `store`, else of the history
    of `config`'s runs; of the gated metrics only unless `every` (or a `metric`) is asked for;
    `rename` ("OLD=NEW") first records pipeline OLD's values under NEW. With nothing to show, its
    `error` says why (nothing is drawn); else with `plot`, the trends are drawn to that SVG file."""
    from ragaudit.auditing.history import trends as read
    from ragaudit.outputs.render.history_text import write_svg

    found = read(
        store,
        config_path=Path(config) if config else None,
        metric=metric,
        pipeline=pipeline,
        last=last,
        plot=plot,
        every=every,
        rename=rename,
    )
    found.error = found.refusal(metric=metric, pipeline=pipeline)
    if plot and found.error is None:
        write_svg(plot, found.points)
    return found


def anchor(corpus: str | Path, question: str, answer: str, *, model: str | None = None) -> Anchoring:
    """Where the `answer` to `question` is in the corpus at `corpus`: candidate anchor spans, the
    best first (`ragaudit.checks.goldtools.anchor.Anchoring`); the embedding `model` is loaded only when
    neither exact nor folded matching finds the answer. A blank answer or question is a UsageError."""
    from ragaudit.checks.goldtools.anchor import find_anchor
    from ragaudit.io.corpus import load_corpus
    from ragaudit.pipelines.inputs import encoder_for

    if not answer.strip() or not question.strip():
        raise UsageError("--question and --answer must hold text")
    return find_anchor(load_corpus(corpus), answer, lambda: encoder_for(model))


def load_config(path: str | Path) -> Config:
    """A config file, read and validated (`ragaudit.io.config.Config`); an invalid one is an InputError."""
    return _config(path)


def _config(config: ConfigLike) -> Config:
    """A Config from a path (or a Config as it is)."""
    from ragaudit.io.config import Config, load_config

    return config if isinstance(config, Config) else load_config(config)


def load_run(path: str | Path) -> Run:
    """A finished run directory as pandas DataFrames (`ragaudit.outputs.results.Run`)."""
    from ragaudit.outputs.results import load_run as load

    return load(path)


def support_scores(pairs: Sequence[tuple[str, Sequence[str]]]) -> list[float]:
    """Support of each (segment, cited texts) pair in [0, 1], from the bundled scorer; offline, CPU
    (`ragaudit.checks.metrics.support.support_scores`)."""
    from ragaudit.checks.metrics.support import support_scores as scores

    return scores(pairs)


def support_score(segment: str, cited_texts: Sequence[str]) -> float:
    """How well `cited_texts` support `segment`, in [0, 1] (`ragaudit.checks.metrics.support.support_score`)."""
    from ragaudit.checks.metrics.support import support_score as score

    return score(segment, cited_texts)
