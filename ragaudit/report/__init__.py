"""Everything a run directory holds besides its traces is built here, from the traces alone, so
that `ragaudit report RUN_DIR` rebuilds it identically."""
from __future__ import annotations

import json
import os
from pathlib import Path

from ragaudit.io.jsonl import BadLine, dump_line
from ragaudit.io.traces import dump_trace, read_traces
from ragaudit.types import Trace


def run_order(trace: Trace) -> tuple:
    return (trace.config or "", trace.qid, trace.variant, trace.seed)


def sort_traces(path: Path) -> list[Trace]:
    """Rewrite a traces file in run order (atomically) and return its traces."""
    traces = [t for t in read_traces(path) if not isinstance(t, BadLine)]
    traces.sort(key=run_order)
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for trace in traces:
            out.write(dump_trace(trace) + "\n")
    os.replace(tmp, path)
    return [t for t in read_traces(path) if not isinstance(t, BadLine)]  # now with their line numbers


def write_issues(path: Path, issues) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for issue in issues:
            out.write(dump_line(issue.to_dict()) + "\n")


def load_manifest(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "manifest.json").read_text(encoding="utf-8"))


def build(run_dir: Path, config, corpus) -> dict:
    """Rebuild the outputs of a run directory from its traces. Returns the counts of issues by code."""
    from collections import Counter

    from ragaudit.validate import Context, validate_trace

    run_dir = Path(run_dir)
    traces = sort_traces(run_dir / "traces.jsonl")
    ctx = Context(corpus=corpus, allow_cross_section=config.allow_cross_section,
                  cross_section_whitelist=config.cross_section_whitelist)
    issues = [i for t in traces for i in validate_trace(t, ctx)]
    write_issues(run_dir / "issues.jsonl", issues)
    return dict(Counter(i.code for i in issues))
