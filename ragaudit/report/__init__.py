"""Everything a run directory holds besides its traces is built here, from the traces alone, so
that `ragaudit report RUN_DIR` rebuilds it identically."""
from __future__ import annotations

import json
from pathlib import Path

from ragaudit.io.jsonl import dump_line
from ragaudit.io.traces import read_trace_file

MANIFEST = "manifest.json"


def load_manifest(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / MANIFEST).read_text(encoding="utf-8"))


def update_manifest(run_dir: Path, **fields) -> dict:
    manifest = load_manifest(run_dir)
    manifest.update(fields)
    (Path(run_dir) / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return manifest


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n",
                    encoding="utf-8")


def build(run_dir: Path, subject, *, baseline: dict | None = None) -> dict:
    """Audit the stored traces of `run_dir`, then write every output. Returns the report."""
    from ragaudit.audit import audit, report_of
    from ragaudit.report import html, junit, logs, markdown
    from ragaudit.runner import sha256_file

    run_dir = Path(run_dir)
    result = audit(read_trace_file(run_dir / "traces.jsonl"), subject, baseline=baseline)
    manifest = update_manifest(run_dir, traces_sha256=sha256_file(run_dir / "traces.jsonl"),
                               embed_model_id=subject.encoder.model_id)
    report = report_of(result, subject, manifest)
    with open(run_dir / "issues.jsonl", "w", encoding="utf-8") as out:
        for issue in result.issues:
            out.write(dump_line(issue.to_dict()) + "\n")
    write_json(run_dir / "report.json", report)
    table = logs.rows(report, result.traces)
    logs.write_log(run_dir / "traces.log", table)
    logs.write_sqlite(run_dir / "rag_traces.sqlite", table)
    junit.write_junit(run_dir / "junit.xml", report)
    markdown.write_summary(run_dir / "summary.md", report)
    html.write_html(run_dir / "report.html", report)
    if len(report["summary"]["pipelines"]) > 1:
        write_comparison(run_dir, [report])
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
