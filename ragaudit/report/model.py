"""The Report: one plain dict (SPEC §6) that every renderer reads. Built from traces, issues,
the evaluation and the gate; nothing in it but `meta` depends on time or machine."""
from __future__ import annotations

import hashlib
import platform
from collections import Counter
from importlib import metadata

from ragaudit import __version__
from ragaudit.metrics.delta_s import payload_text
from ragaudit.types import Corpus, GoldItem, Trace

SCHEMA_VERSION = "ragaudit.report/2"
CONTEXT = 160  # characters of document shown on each side of a span in the drill-down


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict:
    packages = ("numpy", "scikit-learn", "torch", "sentence-transformers", "orjson", "click")
    return {"ragaudit": __version__, "python": platform.python_version(), **{p: _version(p) for p in packages}}


def _context(corpus: Corpus | None, doc_id: str | None, start: int, end: int) -> dict | None:
    if corpus is None or doc_id not in corpus:
        return None
    text = corpus[doc_id].text
    return {"before": text[max(0, start - CONTEXT):start], "after": text[end:end + CONTEXT]}


def _snippet_ref(p) -> str:
    """A short key for a snippet's content, so each distinct snippet is stored once per report."""
    body = f"{p.doc_id}|{p.snippet_id}|{p.offsets and (p.offsets.start, p.offsets.end, p.offsets.unit)}|{p.text}"
    return hashlib.sha1(body.encode("utf-8")).hexdigest()[:12]


def _spans(trace: Trace, corpus: Corpus | None, snippets: dict) -> list[dict]:
    """The run's retrieved payloads as references into `snippets` (filled here), with their scores."""
    cited = set(trace.answer.citations) if trace.answer else None
    out = []
    for p in trace.retrieved:
        ref = _snippet_ref(p)
        if ref not in snippets:
            span = p.span
            snippets[ref] = {
                "snippet_id": p.snippet_id, "doc_id": p.doc_id, "section_id": p.section_id,
                "offsets": None if span is None else {"start": span.start, "end": span.end, "unit": span.unit},
                "text": payload_text(p, corpus),
                "context": _context(corpus, p.doc_id, span.start, span.end) if span and span.unit == "char" else None,
            }
        out.append({"ref": ref, "snippet_id": p.snippet_id, "score_norm": p.score_norm, "score_raw": p.score_raw,
                    "rerank_score": p.rerank_score, "k_pos": p.k_pos, "k_final": p.k_final,
                    "cited": cited is None or p.snippet_id in cited})
    return out


def _gold(item: GoldItem, corpus: Corpus | None) -> dict:
    a = item.anchor.span
    return {"doc_id": item.doc_id, "section_id": item.section_id,
            "anchor": {"start": a.start, "end": a.end, "unit": a.unit, "text": item.anchor.text},
            "context": _context(corpus, item.doc_id, a.start, a.end) if a.unit == "char" else None,
            "reference_answer": item.reference_answer,
            "decoy": None if item.decoy is None else {"doc_id": item.decoy.doc_id, "section_id": item.decoy.section_id}}


def build_report(*, traces: list[Trace], items: list[GoldItem], corpus: Corpus | None, evaluation, gate: dict,
                 issues: list, manifest: dict, pipelines: dict[str, dict], gold_findings: list = ()) -> dict:
    by_key = {(t.config, t.qid, t.variant, t.seed): t for t in traces}
    gold = {i.qid: i for i in items}
    runs_by_question: dict[tuple, list] = {}
    snippets: dict[str, dict] = {}
    for run in evaluation.runs:
        trace = by_key[(run["pipeline"], run["qid"], run["variant"], run["seed"])]
        answer = trace.answer
        scored = {s["seg"]: s for s in run["segments"]}
        runs_by_question.setdefault((run["pipeline"], run["qid"]), []).append({
            **run,
            "answer": None if answer is None else answer.text,
            "segments": [{"seg": s.seg, "text": s.text, "citations": list(s.citations), **scored.get(s.seg, {})}
                         for s in (answer.segments if answer else ())],
            "spans": _spans(trace, corpus, snippets),
            **({"steps": [{"step_number": st.step_number, "question": st.question, "citations": list(st.citations),
                           "confidence_score": st.confidence_score} for st in trace.steps]} if trace.steps else {}),
        })
    questions = [{**q, "gold": _gold(gold[q["qid"]], corpus), "runs": runs_by_question[(q["pipeline"], q["qid"])]}
                 for q in evaluation.questions]
    counts = Counter(i.code for i in issues)
    summary = {
        "verdict": gate["verdict"],
        "runs": len(evaluation.runs), "questions": len({q["qid"] for q in evaluation.questions}),
        "issues": {"errors": sum(1 for i in issues if i.severity == "error"),
                   "warnings": sum(1 for i in issues if i.severity == "warning"), "by_code": dict(sorted(counts.items()))},
        "gold_check": {"errors": sum(1 for i in gold_findings if i.severity == "error"),
                       "warnings": sum(1 for i in gold_findings if i.severity == "warning")},
        "pipelines": evaluation.pipelines,
        "sections": evaluation.sections,
        "unmatched_runs": evaluation.unmatched,
    }
    meta = {
        "versions": versions(),
        "run_id": manifest.get("run_id"),
        "started": manifest.get("started"), "finished": manifest.get("finished"),
        "seeds": manifest.get("seeds"), "paraphrases": manifest.get("paraphrases"),
        "embed_model": manifest.get("embed_model"), "embed_model_id": manifest.get("embed_model_id"),
        "inputs": manifest.get("inputs"), "traces_sha256": manifest.get("traces_sha256"),
        "index": manifest.get("index"), "config_path": manifest.get("config_path"),
        "gold_checked": manifest.get("gold_checked", True),
    }
    return {"schema_version": SCHEMA_VERSION, "meta": meta, "summary": summary, "gate": gate,
            "questions": questions, "snippets": dict(sorted(snippets.items())),
            "issues": [i.to_dict() for i in issues], "gold_check": [i.to_dict() for i in gold_findings],
            "pipelines": pipelines}
