"""Compute every metric of every run, then aggregate: run → question → section → pipeline.

Every aggregate keeps the keys of what it was computed from, so each figure in a report can be
traced down to its runs. Embedding work is batched over all runs: each distinct text once.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from statistics import fmean

from ragaudit.metrics.citation import RunView
from ragaudit.metrics.delta_s import JOIN, delta_s_runs, payload_text, top_k_text, zone
from ragaudit.metrics.embed import delta_s_pairs
from ragaudit.metrics.lam import RunPoint, chain_states, question_lambda
from ragaudit.metrics.registry import RUN_METRICS
from ragaudit.metrics.steps import step_attribution
from ragaudit.metrics.support import hallucinated_numbers
from ragaudit.types import Corpus, GoldItem, Trace

AVERAGED = ("coverage", "citation_match", "citation_precision", "citation_recall", "hit@k", "recall@k", "mrr",
            "ndcg@10", "delta_s_qr", "delta_s_ra", "support", "grounded_rate", "hallucinations")


@dataclass(frozen=True)
class Settings:
    k: int = 5
    match_tolerance: int = 30
    css_min: float = 0.70
    spread_max: float = 0.10
    support_threshold: float = 0.5

    @classmethod
    def from_config(cls, config) -> "Settings":
        return cls(k=config.metrics["k"], match_tolerance=config.metrics["match_tolerance"],
                   css_min=config.lambda_["css_min"], spread_max=config.lambda_["spread_max"],
                   support_threshold=config.support["threshold"])


@dataclass
class Evaluation:
    runs: list[dict] = field(default_factory=list)
    questions: list[dict] = field(default_factory=list)
    sections: list[dict] = field(default_factory=list)
    pipelines: dict[str, dict] = field(default_factory=dict)
    unmatched: list[str] = field(default_factory=list)  # runs whose qid is not in the gold set


def mean(values) -> float | None:
    kept = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return fmean(kept) if kept else None


def _nan_to_none(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def evaluate(traces: list[Trace], items: list[GoldItem], corpus: Corpus | None, encoder,
             settings: Settings = Settings(), support=None) -> Evaluation:
    """`support`, when given, scores many (segment, cited texts) pairs at once (a SupportScorer)."""
    gold = {i.qid: i for i in items}
    result = Evaluation()
    views = []
    for trace in traces:
        if trace.qid in gold:
            views.append(RunView(trace, gold[trace.qid], corpus, settings.k, settings.match_tolerance))
        else:
            result.unmatched.append(f"{trace.config} {trace.qid} v{trace.variant} s{trace.seed}")
    queries = [v.trace.query or v.item.variants[min(v.trace.variant, len(v.item.variants) - 1)] for v in views]
    retrieved = [top_k_text(v.trace.retrieved, corpus, settings.k) for v in views]
    qr, ra = delta_s_runs(encoder, queries, retrieved, [v.item.anchor.text for v in views])
    segments = _segment_support(views, corpus, support, settings)
    chains = _chains(views, corpus, encoder)
    for i, view in enumerate(views):
        result.runs.append(_run_record(view, _nan_to_none(qr[i]), _nan_to_none(ra[i]), segments[i], chains[i]))
    _aggregate(result, gold, settings)
    return result


def _run_record(view: RunView, qr, ra, segments: list[dict], chain: dict | None) -> dict:
    t = view.trace
    metrics = {m.name: (None if t.error else m.compute(view)) for m in RUN_METRICS}
    scored = [s for s in segments if s["support"] is not None]
    metrics.update(delta_s_qr=qr, delta_s_ra=ra,
                   support=mean(s["support"] for s in scored) if scored else None,
                   grounded_rate=mean(1.0 if s["grounded"] else 0.0 for s in scored) if scored else None,
                   hallucinations=float(sum(len(s["hallucinated"]) for s in segments)) if segments else None)
    record = {
        "pipeline": t.config, "qid": t.qid, "variant": t.variant, "seed": t.seed, "query": t.query,
        "error": t.error, "zone": zone(qr), "metrics": metrics,
        "citations": [p.snippet_id for p in view.cited],
        "segments": segments,
    }
    if chain is not None:
        record["chain"] = chain
    if t.steps:
        record["attribution"] = step_attribution(t)
    return record


def _segment_support(views: list[RunView], corpus, support, settings: Settings) -> list[list[dict]]:
    by_id = [{p.snippet_id: p for p in v.trace.retrieved} for v in views]
    pairs, where = [], []
    for i, view in enumerate(views):
        answer = view.trace.answer
        for segment in (answer.segments if answer else ()):
            texts = [payload_text(by_id[i][c], corpus) for c in segment.citations if c in by_id[i]]
            pairs.append((segment.text, texts))
            where.append((i, segment.seg))
    scores = support.score_many(pairs) if support is not None and pairs else [None] * len(pairs)
    out: list[list[dict]] = [[] for _ in views]
    for (i, seg), (text, texts), score in zip(where, pairs, scores):
        score = None if score is None else float(score)
        out[i].append({"seg": seg, "support": score,
                       "grounded": score is not None and score >= settings.support_threshold,
                       "hallucinated": hallucinated_numbers(text, texts)})
    return out


def _chains(views: list[RunView], corpus, encoder) -> list[dict | None]:
    """λ per reasoning chain for runs with two or more steps: d_t = dS(step question, its cited texts)."""
    lefts, rights, owners = [], [], []
    for i, view in enumerate(views):
        steps = view.trace.steps
        if len(steps) < 2:
            continue
        by_id = {p.snippet_id: p for p in view.trace.retrieved}
        for step in steps:
            lefts.append(step.question)
            rights.append(JOIN.join(payload_text(by_id[c], corpus) for c in step.citations if c in by_id))
            owners.append(i)
    out: list[dict | None] = [None] * len(views)
    if not owners:
        return out
    distances = delta_s_pairs(encoder, lefts, rights)
    per_run: dict[int, list[float]] = defaultdict(list)
    for owner, d in zip(owners, distances):
        per_run[owner].append(float(d))
    for i, ds in per_run.items():
        states = chain_states(ds)
        out[i] = {"delta_s": ds, "states": states, "state": states[-1]}
    return out


def _aggregate(result: Evaluation, gold: dict[str, GoldItem], settings: Settings) -> None:
    by_question: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for run in result.runs:
        by_question[(run["pipeline"], run["qid"])].append(run)
    for (pipeline, qid), runs in sorted(by_question.items()):
        item = gold[qid]
        lam = question_lambda([RunPoint(frozenset(r["citations"]), r["metrics"]["citation_match"] == 1.0,
                                        r["metrics"]["delta_s_qr"], r["error"] is not None) for r in runs],
                              css_min=settings.css_min, spread_max=settings.spread_max)
        result.questions.append({
            "pipeline": pipeline, "qid": qid, "doc_id": item.doc_id, "section_id": item.section_id,
            "question": item.question, "runs": len(runs),
            "lambda": {"state": lam.state, "symbol": lam.symbol, "css": lam.css, "spread": lam.spread},
            "metrics": {name: mean(r["metrics"][name] for r in runs) for name in AVERAGED},
        })
    by_section: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for q in result.questions:
        by_section[(q["pipeline"], q["doc_id"], q["section_id"])].append(q)
    for (pipeline, doc_id, section_id), questions in sorted(by_section.items()):
        result.sections.append({
            "pipeline": pipeline, "doc_id": doc_id, "section_id": section_id,
            "qids": [q["qid"] for q in questions],
            "convergent": sum(q["lambda"]["state"] == "convergent" for q in questions),
            "metrics": {name: mean(q["metrics"][name] for q in questions) for name in AVERAGED},
        })
    for pipeline in sorted({r["pipeline"] for r in result.runs}):
        runs = [r for r in result.runs if r["pipeline"] == pipeline]
        questions = [q for q in result.questions if q["pipeline"] == pipeline]
        states = [q["lambda"]["state"] for q in questions]
        result.pipelines[pipeline] = {
            "runs": len(runs), "questions": len(questions),
            "errors": sum(r["error"] is not None for r in runs),
            "metrics": {name: mean(r["metrics"][name] for r in runs) for name in AVERAGED},
            "citation_match_rate": mean(r["metrics"]["citation_match"] for r in runs),
            "lambda": {s: states.count(s) for s in ("convergent", "recursive", "chaotic", "divergent")},
            "zones": {z: sum(r["zone"] == z for r in runs) for z in ("stable", "transit", "risk", "danger")},
        }
