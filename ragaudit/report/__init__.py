"""Everything a run directory holds besides its traces is built here, from the traces alone, so
that `ragaudit report RUN_DIR` rebuilds it identically. Every file is written to a temporary name
and renamed into place, so a crash or a full disk never leaves half an output; the stored traces
are only read."""
from __future__ import annotations

import json
from pathlib import Path

from ragaudit import rundir
from ragaudit.io.files import write_atomic
from ragaudit.io.jsonl import dump_line
from ragaudit.io.traces import read_trace_file


def dumps(value) -> str:
    """A report-like value as JSON text; NaN and infinities are refused (JSON has none)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def write_json(path: Path, value) -> None:
    write_atomic(path, dumps(value))


def build(run_dir: Path, subject, *, baseline: dict | None = None) -> dict:
    """Audit the stored traces of `run_dir`, then write every output. Returns the report."""
    from ragaudit.audit import audit, report_of
    from ragaudit.report import html, junit, logs, markdown

    run_dir = Path(run_dir)
    result = audit(read_trace_file(run_dir / rundir.TRACES), subject, baseline=baseline)
    manifest = rundir.update_manifest(run_dir, embed_model_id=subject.encoder.model_id)
    report = report_of(result, subject, manifest)
    write_atomic(run_dir / "issues.jsonl", "".join(dump_line(i.to_dict()) + "\n" for i in result.issues))
    write_json(run_dir / "report.json", report)
    table = logs.rows(report, result.traces)
    logs.write_log(run_dir / "traces.log", table)
    logs.write_sqlite(run_dir / "rag_traces.sqlite", table)
    junit.write_junit(run_dir / "junit.xml", report)
    markdown.write_summary(run_dir / "summary.md", report)
    html.write_html(run_dir / "report.html", report)
    if len(report["summary"]["pipelines"]) > 1:
        write_comparison(run_dir, [report])
    rundir.stamp_outputs(run_dir)
    return report


def write_comparison(out_dir: Path, reports: list[dict], labels: list[str] | None = None) -> dict:
    """compare.json and compare.html for the systems (pipelines) of one or more reports."""
    from ragaudit.compare import compare, systems_of
    from ragaudit.report.compare_html import write_compare_html

    systems = [s for i, r in enumerate(reports) for s in systems_of(r, labels[i] if labels else None)]
    result = compare(systems)
    write_json(Path(out_dir) / "compare.json", result)
    write_compare_html(Path(out_dir) / "compare.html", result)
    return result
