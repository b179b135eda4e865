"""The Report: one plain dict (docs/reference.md §6) that every renderer reads. Built from an audit; nothing
in it but `meta` depends on time or machine.

It holds the aggregates, the gate, every question's row and, for the questions a reader needs to
open, their runs: every question's when the run is small, else the questions that failing checks
name (at most DETAILED per pipeline, each with at most RUNS_SHOWN runs, failing ones first). Every
run, whatever its size, stays in runs.parquet.
"""

from __future__ import annotations

import platform
from importlib import metadata

from ragaudit import __version__, runstore
from ragaudit.gate import flagged_questions
from ragaudit.types import Corpus, GoldItem
from ragaudit.validate import CODES

SCHEMA_VERSION = "ragaudit.report/2"
ALL_RUNS_UP_TO = 20_000  # below this many runs, every question's runs are in the report
DETAILED = 500  # above it, at most this many flagged questions per pipeline carry their runs,
RUNS_SHOWN = 50  # ... each at most this many: its failing runs first
UNMATCHED_SHOWN = 200
LOG_FIELDS = ("ts", "store", "index_hash", "embed_model", "analyzer")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict:
    packages = ("numpy", "scikit-learn", "torch", "sentence-transformers", "orjson", "click", "pyarrow")
    return {"ragaudit": __version__, "python": platform.python_version(), **{p: _version(p) for p in packages}}


def _gold(item: GoldItem, corpus: Corpus | None) -> dict:
    a = item.anchor.span
    return {
        "doc_id": item.doc_id,
        "section_id": item.section_id,
        "anchor": {"start": a.start, "end": a.end, "unit": a.unit, "text": item.anchor.text},
        "context": runstore.context(corpus, item.doc_id, a.start, a.end) if a.unit == "char" else None,
        "reference_answer": item.reference_answer,
        "decoy": None if item.decoy is None else {"doc_id": item.decoy.doc_id, "section_id": item.decoy.section_id},
    }


def detailed_questions(audit, questions: list[dict]) -> set[tuple[str, str]]:
    """The questions whose runs the report carries."""
    total = sum(p["runs"] for p in audit.evaluation.pipelines.values())
    if total <= ALL_RUNS_UP_TO:
        return {(q["pipeline"], q["qid"]) for q in questions}
    chosen: set[tuple[str, str]] = set()
    for pipeline, qids in flagged_questions(audit.gate).items():
        chosen |= {(pipeline, qid) for qid in sorted(qids)[:DETAILED]}
    return chosen


def build_report(
    *,
    audit,
    items: list[GoldItem],
    corpus: Corpus | None,
    manifest: dict,
    pipelines: dict[str, dict],
    gold_findings: list | tuple = (),
) -> dict:
    evaluation, gate = audit.evaluation, audit.gate
    gold: dict[str, GoldItem] = {}
    for item in items:
        gold.setdefault(item.qid, item)
    large = sum(p["runs"] for p in evaluation.pipelines.values()) > ALL_RUNS_UP_TO
    runs = runstore.runs_of(
        audit.runs_path, detailed_questions(audit, evaluation.questions), limit=RUNS_SHOWN if large else None
    )
    used = {s["ref"] for found in runs.values() for run in found for s in run.get("spans") or []}
    questions = []
    for q in evaluation.questions:
        row = {**q, "gold": _gold(gold[q["qid"]], corpus)}
        if (q["pipeline"], q["qid"]) in runs:  # the log fields (times, live index) stay in runs.parquet
            row["runs"] = [{k: v for k, v in r.items() if k not in LOG_FIELDS} for r in runs[(q["pipeline"], q["qid"])]]
            omitted = (q.get("stats") or {}).get("runs", 0) - len(row["runs"])
            if omitted > 0:
                row["runs_omitted"] = omitted
        questions.append(row)
    counts = audit.issue_counts
    severity = {code: (CODES[code].severity if code in CODES else "error") for code in counts}
    summary = {
        "verdict": gate["verdict"],
        "runs": sum(p["runs"] for p in evaluation.pipelines.values()),
        "questions": len({q["qid"] for q in evaluation.questions}),
        "detailed_questions": len(runs),
        "issues": {
            "errors": sum(n for c, n in counts.items() if severity[c] == "error"),
            "warnings": sum(n for c, n in counts.items() if severity[c] == "warning"),
            "by_code": dict(sorted(counts.items())),
        },
        "gold_check": {
            "errors": sum(1 for i in gold_findings if i.severity == "error"),
            "warnings": sum(1 for i in gold_findings if i.severity == "warning"),
        },
        "pipelines": evaluation.pipelines,
        "sections": evaluation.sections,
        "unmatched_runs": evaluation.unmatched[:UNMATCHED_SHOWN],
        "unmatched_count": len(evaluation.unmatched),
    }
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
    snippets = {ref: audit.snippets[ref] for ref in sorted(used) if ref in audit.snippets}
    return {
        "schema_version": SCHEMA_VERSION,
        "meta": meta,
        "summary": summary,
        "gate": gate,
        "questions": questions,
        "snippets": snippets,
        "issues": [i.to_dict() for i in audit.issue_sample],
        "gold_check": [i.to_dict() for i in gold_findings],
        "pipelines": pipelines,
    }
