"""A finished run directory as pandas DataFrames, for notebooks and scripts:

    run = ragaudit.load_run("reports/20261124-101500-3fa2c1")
    run.runs.groupby("pipeline")["citation_match"].mean()

`Run` lists every table and column; docs/notebook.md has worked examples.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

from ragaudit.checks.metrics.lam import STATES
from ragaudit.core.errors import InputError, Problem, require
from ragaudit.core.shape import RENAMED_METRICS

RUNS, REPORT, ISSUES, MANIFEST = "runs.parquet", "report.json", "issues.jsonl", "manifest.json"
METRIC_PREFIX = "m."
# a question's run counts in report.json, and their column names here
RUN_COUNTS = {
    "correct": "correct_runs",
    "errored": "errored_runs",
    "unmatched": "unmatched_runs",
    "hallucinating": "hallucinating_runs",
    "ungrounded": "ungrounded_runs",
    "coverage_missing": "coverage_missing_runs",
}


def _pandas() -> Any:  # the pandas module (which ships no type information)
    require("pandas", extra="notebook", purpose="a run's tables as DataFrames")
    import pandas

    return pandas


@dataclass
class Run:
    """A run directory's results; each table is read when first used.

    `run.runs`: one row per run, from `runs.parquet`, in the order of traces.jsonl (plan order; a replay
        pipeline's runs in its recording's order).
        pipeline, qid, gold_doc_id, gold_section_id (the question's gold section), variant, seed,
        query, answer, error, errored (bool), correct (bool), why (why the run is or is not correct),
        zone (of delta_s_qr), ts, store, index_hash, embed_model, analyzer; every metric as a column
        of its own name: citation_match, coverage, citation_precision, citation_recall, hit@k,
        recall@k, mrr, ndcg@k, delta_s_qr, delta_s_gold, delta_s_excess, delta_s_topk, delta_s_ra,
        support, grounded, fully_grounded, anchor_support, key_content, hallucinations (a metric a run
        lacks is NaN); and as JSON text to decode with `json.loads`: citations (the cited
        snippet_ids), sections (the cited [doc_id, section_id] pairs), stated_sections (those cited by
        the claims that state the gold anchor), segments, claims (each claim with its citations, its
        grounding and support, and how it stands to the gold anchor), spans (every retrieved payload:
        snippet_id, scores, k_pos, k_final, cited), steps, chain, attribution.
    `run.questions`: one row per (pipeline, question), from `report.json`.
        pipeline, qid, doc_id, section_id (its gold section), question, lambda_state, css, spread,
        runs, correct_runs, errored_runs, unmatched_runs, hallucinating_runs, ungrounded_runs,
        coverage_missing_runs, max_delta_s, max_delta_s_excess, min_coverage, and one per metric: the
        mean over its runs (`correct` is the share
        of its runs that are correct).
    `run.sections`: one row per (pipeline, doc_id, section_id) of the gold set, from `report.json`.
        pipeline, doc_id, section_id, questions, convergent, recursive, chaotic, divergent (questions
        in each λ state), and one per metric: the mean of its questions' means.
    `run.issues`: one row per validator issue, from `issues.jsonl`.
        pipeline, code, severity, qid, variant, seed, seg, citation, path, file, line, message, fix.
    `run.report`, `run.manifest`: `report.json` and `manifest.json` as dicts.

    A directory that is not a finished run, or a file there that cannot be read, is an
    InputError naming the path.
    """

    path: Path

    @cached_property
    def report(self) -> dict[str, Any]:
        from ragaudit.io.jsonfiles import read_json_file

        report: dict[str, Any] = read_json_file(self.path / REPORT, what="report")
        return report

    @cached_property
    def manifest(self) -> dict[str, Any]:
        from ragaudit.io.jsonfiles import read_json_file

        manifest: dict[str, Any] = read_json_file(self.path / MANIFEST, what="manifest")
        return manifest

    @cached_property
    def runs(self) -> Any:
        pd = _pandas()

        try:
            frame = pd.read_parquet(self.path / RUNS)
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise InputError(
                Problem(str(self.path / RUNS), f"expected a parquet table of runs, found: {exc}")
            ) from None
        # the metric `correct` (0/1) is the run's `correct` column (a bool) again
        frame = frame.drop(columns=[f"{METRIC_PREFIX}correct"], errors="ignore")
        frame = frame.rename(
            columns={
                c: RENAMED_METRICS.get(c[len(METRIC_PREFIX) :], c[len(METRIC_PREFIX) :])
                for c in frame.columns
                if c.startswith(METRIC_PREFIX)
            }
        )
        gold = {q["qid"]: (q.get("doc_id"), q.get("section_id")) for q in self._question_rows()}
        at = list(frame.columns).index("qid") + 1
        frame.insert(at, "gold_section_id", [gold.get(qid, (None, None))[1] for qid in frame["qid"]])
        frame.insert(at, "gold_doc_id", [gold.get(qid, (None, None))[0] for qid in frame["qid"]])
        return frame

    def _question_rows(self) -> Iterator[dict[str, Any]]:
        """Every question row as report.json holds it; those it does not hold (above 2,000 rows)
        read from questions.parquet beside it, a batch at a time."""
        held = self.report.get("questions", [])
        if (self.report.get("summary") or {}).get("question_rows") is None:
            yield from held
            return
        from ragaudit.checks.questionstore import complete
        from ragaudit.core.model import Report

        for row in complete(Report.from_json(self.report, str(self.path / REPORT)), self.path / REPORT):
            yield row.to_json()

    @cached_property
    def questions(self) -> Any:
        pd = _pandas()

        rows = []
        for q in self._question_rows():
            lam = q.get("lambda") or {}
            stats = {RUN_COUNTS.get(name, name): value for name, value in (q.get("stats") or {}).items()}
            rows.append(
                {
                    "pipeline": q["pipeline"],
                    "qid": q["qid"],
                    "doc_id": q.get("doc_id"),
                    "section_id": q.get("section_id"),
                    "question": q.get("question"),
                    "lambda_state": lam.get("state"),
                    "css": lam.get("css"),
                    "spread": lam.get("spread"),
                    **stats,
                    **(q.get("metrics") or {}),
                }
            )
        return pd.DataFrame(rows)

    @cached_property
    def sections(self) -> Any:
        pd = _pandas()

        state_of = {(q["pipeline"], q["qid"]): (q.get("lambda") or {}).get("state") for q in self._question_rows()}
        rows = []
        for s in self.report.get("summary", {}).get("sections", []):
            states = [state_of.get((s["pipeline"], qid)) for qid in s.get("qids") or []]
            rows.append(
                {
                    "pipeline": s["pipeline"],
                    "doc_id": s["doc_id"],
                    "section_id": s["section_id"],
                    "questions": len(states),
                    **{state: states.count(state) for state in STATES},
                    **(s.get("metrics") or {}),
                }
            )
        return pd.DataFrame(rows)

    @cached_property
    def issues(self) -> Any:
        pd = _pandas()

        from ragaudit.core.types import Issue
        from ragaudit.io.jsonfiles import JsonLines
        from ragaudit.io.jsonl import BadLine

        columns = ["pipeline", *(f.name for f in fields(Issue) if f.name != "pipeline")]
        rows = []
        for number, issue, _ in JsonLines(self.path / ISSUES):
            if isinstance(issue, BadLine) or not isinstance(issue, dict):
                found = issue.message if isinstance(issue, BadLine) else f"a JSON {type(issue).__name__}"
                raise InputError(Problem(str(self.path / ISSUES), f"expected an issue object, found {found}", number))
            rows.append(issue)
        frame = pd.DataFrame(rows, columns=columns)
        extra = sorted({key for row in rows for key in row} - set(columns))
        return frame.join(pd.DataFrame(rows, columns=extra)) if extra else frame


def load_run(run_dir: str | Path) -> Run:
    """The results of a finished run directory as a `Run` (whose docstring lists every table and
    column); InputError (exit 3 in the CLI) when it is not one."""
    path = Path(run_dir)
    if not path.is_dir():
        found = "a file" if path.exists() else "nothing there"
        raise InputError(Problem(str(path), f"expected a ragaudit run directory, found {found}"))
    missing = [name for name in (RUNS, REPORT, ISSUES, MANIFEST) if not (path / name).is_file()]
    if missing:
        unfinished = (path / "traces.jsonl").is_file()
        hint = f"; the run did not finish: `ragaudit run CONFIG --resume {path}` finishes it" if unfinished else ""
        raise InputError(
            Problem(str(path), f"expected a finished ragaudit run directory, found no {', '.join(missing)}{hint}")
        )
    return Run(path)
