"""Everything a run directory holds besides its traces is built here, from the traces alone, so
that `ragaudit report RUN_DIR` rebuilds it identically: the audit of the stored traces, the report
model, runs.parquet and issues.jsonl moved into place, the manifest stamped, and each renderer of
`ragaudit.outputs.render` called. Every file is written to a temporary name and renamed into place, so a
crash or a full disk never leaves half an output; the stored traces are only read."""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ragaudit.auditing.history import Point
from ragaudit.checks import runstore
from ragaudit.core.errors import InputError
from ragaudit.core.model import Baseline, Report
from ragaudit.core.progress import phase
from ragaudit.io import rundir, runfiles
from ragaudit.io.files import write_json

if TYPE_CHECKING:
    from ragaudit.auditing.audit import Audit
    from ragaudit.core.execution import Executor, Task
    from ragaudit.outputs.render.logs import Places
    from ragaudit.pipelines.inputs import Inputs

TREND_RUNS = 20  # runs the trend panel of report.html shows


def build(
    run_dir: Path, subject: Inputs, *, baseline: Baseline | None = None, warnings: list[str] | None = None
) -> Report:
    """Audit the stored traces of `run_dir`, read once as a stream, then write every output.
    Returns the report; what went wrong without stopping it goes to `warnings`."""
    from ragaudit.auditing.audit import StreamingAudit
    from ragaudit.io.stream import stream_trace_file

    run_dir = Path(run_dir)
    with tempfile.TemporaryDirectory(prefix=".audit-", dir=run_dir) as work:
        auditor = StreamingAudit(subject, Path(work), baseline=baseline)
        auditor.extend(stream_trace_file(run_dir / runfiles.TRACES, markers=subject.config.audit.marker_forms))
        return write_outputs(run_dir, auditor.finish(), subject, warnings=warnings)


def write_outputs(
    run_dir: Path, result: Audit, subject: Inputs, *, warnings: list[str] | None = None, beside: Executor | None = None
) -> Report:
    """Every output of a finished audit (whose files are in a work folder inside `run_dir`);
    report.html shows the trend of the runs before it in the history the manifest names (none,
    with a line in `warnings`, when the history cannot be read now). `beside`, worker processes of
    this machine (`--executor processes`), writes traces.log and rag_traces.sqlite, begun as soon
    as the question rows are known, while this process writes the rest."""
    from ragaudit.auditing.audit import report_of
    from ragaudit.auditing.reporting import held_rows, write_questions, write_report
    from ragaudit.checks.metrics import memo
    from ragaudit.checks.questionstore import QUESTIONS
    from ragaudit.outputs.render import html, junit, logs, markdown
    from ragaudit.outputs.render.trends import trend_panel

    if warnings is not None:
        warnings += [said for said in result.warnings if said not in warnings]
    memo.forget()  # the runs are scored: what scoring remembered per text leaves memory before the outputs
    with phase("writing outputs", counts_as="writing"):
        manifest = rundir.update_manifest(run_dir, embed_model_id=subject.encoder.model_id)
        # a streamed audit's runs are in a file (runs_path is None only for an audit answered from memory)
        os.replace(cast(Path, result.runs_path), run_dir / runstore.RUNS)
        result.runs_path = run_dir / runstore.RUNS
        if result.issues_path is not None:
            os.replace(result.issues_path, run_dir / "issues.jsonl")
        # the logs need only runs.parquet and each question's λ state: worker processes start on them first
        states = {q.key: q.lam.state for q in result.evaluation.questions}
        places = result.snippets.places()
        logging: Task | None = None
        if beside is not None:
            logging = beside.submit(logs.write_log_files, run_dir, result.runs_path, states, places)
        comparing = None
        try:  # an error stops the outputs only once the writers running beside are done too
            with phase("report.json and questions.parquet"):
                report = report_of(result, subject, manifest)
                write_report(run_dir / "report.json", report)
                write_questions(run_dir / QUESTIONS, report, subject.items, subject.corpus)
            if len(report.summary.pipelines) > 1 or subject.config.compare.pairs:
                # its statistics (resampling in numpy, mostly outside the GIL) run beside the other outputs
                pool = ThreadPoolExecutor(1, thread_name_prefix="compare")
                comparing = pool.submit(write_comparison, run_dir, [report], run_dirs=[run_dir])
                pool.shutdown(wait=False)
            with phase("history"):
                try:
                    trend = trend_panel(load_trend(manifest.get("history"), run_dir, report))
                except InputError as exc:  # a locked or damaged history costs the report its trend panel only
                    trend = ""
                    if warnings is not None:
                        warnings.append(f"report.html has no trend panel: {'; '.join(map(str, exc.problems))}")
            if logging is None:
                with phase("traces.log and rag_traces.sqlite"):
                    logs.write_log_files(run_dir, result.runs_path, states, places)
            with phase("junit.xml"):
                junit.write_junit(run_dir / "junit.xml", report)
            with phase("report.html"):
                html.write_html(run_dir / "report.html", report, trend, held_rows(report))
            if logging is not None:
                with phase("traces.log and rag_traces.sqlite"):  # the rest of it, when it is not done yet
                    _logged(logging, run_dir, result.runs_path, states, places)
        except BaseException:
            beside_us: list[Any] = [  # futures: the comparison's, and the logs' (a Future of this machine's processes)
                task for task in (comparing, logging) if task is not None
            ]
            wait(beside_us)
            raise
        comparison = None
        if comparing is not None:
            with phase("compare.json and compare.html"):  # the rest of it, when it is not done yet
                comparison = comparing.result()[0]
        with phase("summary.md"):
            markdown.write_summary(run_dir / "summary.md", report, comparison)
        with phase("manifest"):  # the sha256 of every output
            rundir.stamp_outputs(run_dir)
    return report


def _logged(task: Task, run_dir: Path, runs_path: Path, states: dict[tuple[str, str], str], places: Places) -> None:
    """Wait for the logs written beside; when every worker given them died, write them here (a
    worker that died mid-write leaves its temporary files: they go first)."""
    from ragaudit.core.execution import WorkerDied
    from ragaudit.outputs.render import logs

    try:
        task.result()
    except WorkerDied:
        for name in ("traces.log", "rag_traces.sqlite"):
            for left in run_dir.glob(f".{name}.*.tmp"):
                left.unlink(missing_ok=True)
        logs.write_log_files(run_dir, runs_path, states, places)


def write_comparison(
    out_dir: Path,
    reports: list[Report],
    labels: list[str] | None = None,
    *,
    run_dirs: list[Path] | None = None,
    pairs: list[str] | None = None,
    margin: float | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """compare.json and compare.html for pairs of the systems (pipelines) of one or more reports
    (`ragaudit.decisions.pairing`); returns the comparison and notes on pipelines left out."""
    from ragaudit.decisions.pairing import comparison_of
    from ragaudit.outputs.render.compare_html import write_compare_html

    result, notes = comparison_of(reports, labels=labels, run_dirs=run_dirs, specs=pairs, margin=margin)
    write_json(Path(out_dir) / "compare.json", result)
    write_compare_html(Path(out_dir) / "compare.html", result)
    return result, notes


def load_trend(store: Path | None, run_dir: Path, report: Report, *, last: int = TREND_RUNS) -> list[Point]:
    """The points of the panel: up to `last` - 1 runs the history recorded before this one on the
    same gold set and corpus, then this run. No store (or none yet): this run only."""
    from ragaudit.auditing import history

    current = history.points_of(run_dir, report)
    if store is None or not Path(store).is_file() or last < 2:
        return current
    inputs = report.inputs or {}
    earlier = history.trend(
        store,
        last=last - 1,
        gold=inputs.get("gold"),
        corpus=inputs.get("corpus"),
        until=run_dir,
    )
    return earlier + current
