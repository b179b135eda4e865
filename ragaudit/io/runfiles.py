"""The files of a run directory, by name: what `ragaudit run` writes and stamps in its manifest
(`ragaudit.io.rundir`), and what no later command may replace (`ragaudit.io.files.refuse_overwriting`)."""

from __future__ import annotations

import os
from pathlib import Path

MANIFEST = "manifest.json"
TRACES = "traces.jsonl"
OUTPUTS = (
    "runs.parquet",
    "issues.jsonl",
    "report.json",
    "report.html",
    "traces.log",
    "rag_traces.sqlite",
    "junit.xml",
    "summary.md",
    "compare.json",
    "compare.html",
    "questions.parquet",
)


def run_of(path: str | os.PathLike[str]) -> Path | None:
    """The run directory whose own file `path` is (its symlinks followed): a folder holding a
    manifest, and the file its manifest, its traces or one of its outputs; None otherwise."""
    real = Path(os.path.realpath(path))
    if real.name in (MANIFEST, TRACES, *OUTPUTS) and (real.parent / MANIFEST).is_file():
        return real.parent
    return None
