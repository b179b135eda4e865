"""A finished run directory as pandas DataFrames, for notebooks and scripts: `load_run(run_dir)`.

    run = ragaudit.load_run("reports/20261124-101500-3fa2c1")
    run.runs        # one row per run (runs.parquet): pipeline, qid, variant, seed, correct, why,
                    #   errored, zone, query, answer, and every metric as a column (citation_match, ...)
    run.questions   # one row per (pipeline, question) of report.json: lambda_state, css, spread,
                    #   the run counts (runs, correct, errored, ...) and the metrics' means
    run.sections    # one row per (pipeline, doc_id, section_id): λ state counts and the metrics' means
    run.issues      # one row per validator issue (issues.jsonl): code, severity, pipeline, qid, ...
    run.report      # report.json as a dict; run.manifest: manifest.json

Metric columns keep the metric's name (`citation_match`, `delta_s_qr`, `hit@k`), except where a
run column has that name already (`correct`, a boolean; its metric stays `m.correct`, 0 or 1);
nested values (citations, segments, spans) stay JSON text in `runs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ragaudit.errors import InputError, Problem

RUNS, REPORT, ISSUES, MANIFEST = "runs.parquet", "report.json", "issues.jsonl", "manifest.json"
METRIC_PREFIX = "m."


@dataclass
class Run:
    """A run directory's results; each table is read when first asked for."""

    path: Path

    @cached_property
    def report(self) -> dict:
        from ragaudit.io.jsonl import read_json_file

        return read_json_file(self.path / REPORT, what="report")

    @cached_property
    def manifest(self) -> dict:
        from ragaudit.io.jsonl import read_json_file

        return read_json_file(self.path / MANIFEST, what="manifest")

    @cached_property
    def runs(self) -> Any:
        import pandas as pd

        frame = pd.read_parquet(self.path / RUNS)
        taken = set(frame.columns)
        return frame.rename(
            columns={
                c: c[len(METRIC_PREFIX) :]
                for c in frame.columns
                if c.startswith(METRIC_PREFIX) and c[len(METRIC_PREFIX) :] not in taken
            }
        )

    @cached_property
    def questions(self) -> Any:
        import pandas as pd

        rows = []
        for q in self.report.get("questions", []):
            lam = q.get("lambda") or {}
            rows.append(
                {
                    "pipeline": q["pipeline"],
                    "qid": q["qid"],
                    "lambda_state": lam.get("state"),
                    "css": lam.get("css"),
                    "spread": lam.get("spread"),
                    **(q.get("stats") or {}),
                    **(q.get("metrics") or {}),
                }
            )
        return pd.DataFrame(rows)

    @cached_property
    def sections(self) -> Any:
        import pandas as pd

        rows = []
        for s in self.report.get("summary", {}).get("sections", []):
            counts = {state: s.get(state, 0) for state in ("convergent", "recursive", "chaotic", "divergent")}
            rows.append(
                {
                    "pipeline": s["pipeline"],
                    "doc_id": s["doc_id"],
                    "section_id": s["section_id"],
                    "questions": len(s.get("qids") or []),
                    **counts,
                    **(s.get("metrics") or {}),
                }
            )
        return pd.DataFrame(rows)

    @cached_property
    def issues(self) -> Any:
        import pandas as pd

        from ragaudit.io.jsonl import JsonLines

        path = self.path / ISSUES
        if not path.exists():
            return pd.DataFrame(columns=["code", "severity", "pipeline", "qid", "variant", "seed", "path", "message"])
        rows = [obj for _, obj, _ in JsonLines(path) if isinstance(obj, dict)]
        return pd.DataFrame(rows)


def load_run(run_dir: str | Path) -> Run:
    """The results of a finished run directory (see the module docstring); InputError (exit 3 in
    the CLI) when it is not one."""
    path = Path(run_dir)
    missing = [name for name in (RUNS, REPORT, MANIFEST) if not (path / name).is_file()]
    if missing:
        raise InputError(
            Problem(str(path), f"expected a finished ragaudit run directory with {', '.join(missing)}, found none")
        )
    return Run(path)
