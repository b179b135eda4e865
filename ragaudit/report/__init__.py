"""Everything a run directory holds besides its traces is built here, from the traces alone, so
that `ragaudit report RUN_DIR` rebuilds it identically."""
from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from pathlib import Path

from ragaudit.io.jsonl import BadLine, dump_line
from ragaudit.io.traces import dump_trace, read_traces
from ragaudit.types import Trace

MANIFEST = "manifest.json"


def run_order(trace: Trace) -> tuple:
    return (trace.config or "", trace.qid, trace.variant, trace.seed)


def sort_traces(path: Path) -> list[Trace]:
    """Rewrite a traces file in run order (atomically) and return its traces with their line numbers."""
    traces = [t for t in read_traces(path) if not isinstance(t, BadLine)]
    traces.sort(key=run_order)
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for trace in traces:
            out.write(dump_trace(trace) + "\n")
    os.replace(tmp, path)
    return [dataclasses.replace(t, file=str(path), line=i) for i, t in enumerate(traces, start=1)]


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


def build(run_dir: Path, *, config, corpus, items, encoder, support=None, baseline: dict | None = None) -> dict:
    """Validate, measure and gate the traces of `run_dir`, then write every output. Returns the report."""
    from ragaudit.gate import evaluate_gate
    from ragaudit.metrics.evaluate import Settings, evaluate
    from ragaudit.report import html, junit, logs, markdown
    from ragaudit.report.model import build_report
    from ragaudit.runner import sha256_file
    from ragaudit.validate import Context, validate_trace

    run_dir = Path(run_dir)
    traces = sort_traces(run_dir / "traces.jsonl")
    ctx = Context(corpus=corpus, allow_cross_section=config.allow_cross_section,
                  cross_section_whitelist=config.cross_section_whitelist)
    issues = [i for t in traces for i in validate_trace(t, ctx)]
    errors = Counter(i.pipeline for i in issues if i.severity == "error")
    evaluation = evaluate(traces, items, corpus, encoder, Settings.from_config(config), support=support)
    manifest = update_manifest(run_dir, traces_sha256=sha256_file(run_dir / "traces.jsonl"),
                               embed_model_id=encoder.model_id)
    gate = evaluate_gate(evaluation, config.gate, error_counts=dict(errors), aborted=manifest.get("aborted", {}),
                         baseline=baseline)
    pipelines = {p.name: {"kind": p.kind, "options": {k: v for k, v in sorted(p.options.items()) if v is not None},
                          "index": (manifest.get("index") or {}).get(p.name),
                          "aborted": manifest.get("aborted", {}).get(p.name)} for p in config.pipelines}
    report = build_report(traces=traces, items=items, corpus=corpus, evaluation=evaluation, gate=gate,
                          issues=issues, manifest=manifest, pipelines=json.loads(json.dumps(pipelines, default=str)))
    with open(run_dir / "issues.jsonl", "w", encoding="utf-8") as out:
        for issue in issues:
            out.write(dump_line(issue.to_dict()) + "\n")
    write_json(run_dir / "report.json", report)
    table = logs.rows(report, traces)
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
