"""The Report (`ragaudit.core.model.Report`) of an audit, which every renderer reads. Nothing in it but
`meta` depends on time or machine.

It holds the aggregates, the gate, every question's row and, for the questions a reader needs to
open, their runs: every question's when the run is small, else the questions that failing checks
name (at most DETAILED per pipeline, each with at most RUNS_SHOWN runs, failing ones first). Every
run, whatever its size, stays in runs.parquet. report.json holds every question's row up to
QUESTION_ROWS rows; above, the questions with runs and then the others worst first (fewest correct
runs) up to QUESTION_ROWS, with `summary.question_rows` saying how many there are: every row is in
questions.parquet (`ragaudit.checks.questionstore`), written and read back a batch at a time.
"""

from __future__ import annotations

import dataclasses
import heapq
import platform
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, cast

from ragaudit._version import __version__
from ragaudit.checks import runstore
from ragaudit.core.codes import CODES
from ragaudit.core.model import IssueCounts, PipelineResult, Question, Report, Summary
from ragaudit.core.types import Corpus, GoldItem, Issue

if TYPE_CHECKING:
    from ragaudit.auditing.audit import Audit

SCHEMA_VERSION = "ragaudit.report/3"  # 3: every check's threshold a number, its bar in words as `bound`
ALL_RUNS_UP_TO = 20_000  # below this many runs, every question's runs are in the report
DETAILED = 500  # above it, at most this many flagged questions per pipeline carry their runs,
RUNS_SHOWN = 50  # ... each at most this many: its failing runs first
QUESTION_ROWS = 2_000  # question rows report.json holds when a run has more (questions.parquet has all)
UNMATCHED_SHOWN = 200
LOG_FIELDS = ("ts", "store", "index_hash", "embed_model", "analyzer")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    packages = ("numpy", "scikit-learn", "torch", "sentence-transformers", "orjson", "click", "pyarrow")
    return {"ragaudit": __version__, "python": platform.python_version(), **{p: _version(p) for p in packages}}


def gold_row(item: GoldItem, corpus: Corpus | None) -> dict[str, Any]:
    """A question's gold reference as its row holds it."""
    a = item.anchor.span
    return {
        "doc_id": item.doc_id,
        "section_id": item.section_id,
        "anchor": {"start": a.start, "end": a.end, "unit": a.unit, "text": item.anchor.text},
        "context": runstore.context(corpus, item.doc_id, a.start, a.end) if a.unit == "char" else None,
        "reference_answer": item.reference_answer,
        "decoy": None if item.decoy is None else {"doc_id": item.decoy.doc_id, "section_id": item.decoy.section_id},
    }


def detailed_questions(audit: Audit, questions: list[Question]) -> set[tuple[str, str]]:
    """The questions whose runs the report carries."""
    total = sum(p.runs for p in audit.evaluation.pipelines.values())
    if total <= ALL_RUNS_UP_TO:
        return {q.key for q in questions}
    chosen: set[tuple[str, str]] = set()
    for pipeline, qids in audit.gate.flagged_questions().items():
        chosen |= {(pipeline, qid) for qid in sorted(qids)[:DETAILED]}
    return chosen


def build_report(
    *,
    audit: Audit,
    items: list[GoldItem],
    corpus: Corpus | None,
    manifest: dict[str, Any],
    pipelines: dict[str, PipelineResult],
    gold_findings: list[Issue] | tuple[Issue, ...] = (),
) -> Report:
    evaluation, gate = audit.evaluation, audit.gate
    gold: dict[str, GoldItem] = {}
    for item in items:
        gold.setdefault(item.qid, item)
    large = sum(p.runs for p in evaluation.pipelines.values()) > ALL_RUNS_UP_TO
    runs_path = cast(Path, audit.runs_path)  # a report is built of a streaming audit: its runs are on disk
    runs = runstore.runs_of(
        runs_path, detailed_questions(audit, evaluation.questions), limit=RUNS_SHOWN if large else None
    )
    used = {s["ref"] for found in runs.values() for run in found for s in run.get("spans") or []}
    held = held_keys(evaluation.questions, set(runs))
    questions = []
    for q in evaluation.questions:
        if held is not None and q.key not in held:
            questions.append(q)  # its gold reference goes to questions.parquet only
            continue
        row = dataclasses.replace(q, gold=gold_row(gold[q.qid], corpus))
        if q.key in runs:  # the log fields (times, live index) stay in runs.parquet
            row.runs = [{k: v for k, v in r.items() if k not in LOG_FIELDS} for r in runs[q.key]]
            omitted = q.stats.runs - len(row.runs)
            if omitted > 0:
                row.runs_omitted = omitted
        questions.append(row)
    counts = audit.issue_counts
    severity = {code: (CODES[code].severity if code in CODES else "error") for code in counts}
    summary = Summary(
        verdict=gate.verdict,
        runs=sum(p.runs for p in evaluation.pipelines.values()),
        questions=len({q.qid for q in evaluation.questions}),
        detailed_questions=len(runs),
        issues=IssueCounts(
            errors=sum(n for c, n in counts.items() if severity[c] == "error"),
            warnings=sum(n for c, n in counts.items() if severity[c] == "warning"),
            by_code=dict(sorted(counts.items())),
        ),
        gold_errors=sum(1 for i in gold_findings if i.severity == "error"),
        gold_warnings=sum(1 for i in gold_findings if i.severity == "warning"),
        pipelines=evaluation.pipelines,
        sections=evaluation.sections,
        unmatched_runs=evaluation.unmatched[:UNMATCHED_SHOWN],
        unmatched_count=len(evaluation.unmatched),
        question_rows=None if held is None else len(questions),
    )
    meta = {
        "versions": versions(),
        "run_id": manifest.get("run_id"),
        "started": manifest.get("started"),
        "finished": manifest.get("finished"),
        "seeds": manifest.get("seeds"),
        "paraphrases": manifest.get("paraphrases"),
        "embed_model": manifest.get("embed_model"),
        "embed_model_id": manifest.get("embed_model_id"),
        "inputs": manifest.get("inputs"),
        "traces_sha256": manifest.get("traces_sha256"),
        "index": manifest.get("index"),
        "config_path": manifest.get("config_path"),
        "gold_checked": manifest.get("gold_checked", True),
    }
    shown = audit.snippets.get(used)
    snippets = {ref: shown[ref].to_json() for ref in sorted(shown)}
    return Report(
        schema_version=SCHEMA_VERSION,
        meta=meta,
        summary=summary,
        gate=gate,
        questions=questions,
        snippets=snippets,
        issues=[i.to_dict() for i in audit.issue_sample],
        gold_check=[i.to_dict() for i in gold_findings],
        pipelines=pipelines,
    )


def held_keys(questions: list[Question], detailed: set[tuple[str, str]]) -> set[tuple[str, str]] | None:
    """The question rows report.json holds: all of them (None) up to QUESTION_ROWS rows; above,
    the questions with runs and the others worst first (fewest correct runs), QUESTION_ROWS in all."""
    if len(questions) <= QUESTION_ROWS:
        return None

    def worst(q: Question) -> tuple[float, str, str]:
        return (q.correct / max(q.stats.runs or 1, 1), q.pipeline, q.qid)

    others = (q for q in questions if q.key not in detailed)
    kept = heapq.nsmallest(max(0, QUESTION_ROWS - len(detailed)), others, key=worst)
    return {q.key for q in questions if q.key in detailed} | {q.key for q in kept}


def held_rows(report: Report) -> list[Question]:
    """The question rows report.json holds (the rows with their gold reference, in a bounded report)."""
    if report.summary.question_rows is None:
        return report.questions
    return [q for q in report.questions if q.gold is not None]


def report_text(report: Report, rows: list[Question] | None = None) -> Iterator[str]:
    """report.json in pieces, a question row at a time (`rows`: the rows it holds, every one when
    None): together the same text as `files.dumps(report.to_json(rows))` (keys sorted, compact),
    without the whole document in memory at once."""
    from ragaudit.io.files import dumps

    def text(value: Any) -> str:
        return dumps(value)[:-1]  # dumps ends the document with a newline

    document = report.to_json(questions=[])
    for i, key in enumerate(sorted(document)):
        yield ("{" if i == 0 else ",") + text(key) + ":"
        if key != "questions":
            yield text(document[key])
            continue
        yield "["
        for n, row in enumerate(report.questions if rows is None else rows):
            yield ("," if n else "") + text(row.to_json())
        yield "]"
    yield "}\n"


def write_report(path: Path, report: Report) -> None:
    """report.json, written a question row at a time: the rows it holds (`held_rows`)."""
    from ragaudit.io.files import atomic_path

    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        out.writelines(report_text(report, held_rows(report)))


def write_questions(path: Path, report: Report, items: list[GoldItem], corpus: Corpus | None) -> int:
    """questions.parquet: every question row of `report`, each with its gold reference."""
    from ragaudit.checks.metrics.registry import AVERAGED
    from ragaudit.checks.questionstore import write_questions as write

    gold: dict[str, GoldItem] = {}
    for item in items:
        gold.setdefault(item.qid, item)

    def gold_of(q: Question) -> dict[str, Any] | None:
        return q.gold if q.gold is not None else gold_row(gold[q.qid], corpus) if q.qid in gold else None

    return write(path, report.questions, AVERAGED, gold_of)
