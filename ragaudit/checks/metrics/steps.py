"""Step attribution for chain-of-thought traces: which sources each reasoning step used."""

from __future__ import annotations

from typing import Any

from ragaudit.core.types import Trace


def payload_relevance(score_norm: float | None, rank: int, confidence: float | None) -> float:
    """score_norm, or max(0.3, 1 − 0.1·rank) by 0-based rank when absent; times the step's confidence."""
    base = score_norm if score_norm is not None else max(0.3, 1.0 - 0.1 * rank)
    return base * confidence if confidence is not None else base


def step_attribution(trace: Trace) -> dict[str, Any]:
    """all_sources (unique by doc_id, highest relevance, sorted desc), primary_sources (top 3 with
    relevance > 0.7, else top 3) and usage by step (step number → doc ids, in citation order)."""
    position = {p.snippet_id: (i, p) for i, p in enumerate(trace.retrieved)}
    best: dict[str | None, dict[str, Any]] = {}  # by doc_id; a payload may lack one
    usage: dict[int, list[str | None]] = {}
    for step in trace.steps:
        used: list[str | None] = []
        for cited in step.citations:
            if cited not in position:
                continue
            rank, payload = position[cited]
            relevance = payload_relevance(payload.score_norm, rank, step.confidence_score)
            if payload.doc_id not in used:
                used.append(payload.doc_id)
            current = best.get(payload.doc_id)
            if current is None or relevance > current["relevance"]:
                best[payload.doc_id] = {
                    "doc_id": payload.doc_id,
                    "snippet_id": cited,
                    "relevance": relevance,
                    "section_id": payload.section_id,
                    "retrieval_rank": rank + 1,
                }
        usage[step.step_number] = used
    all_sources = sorted(best.values(), key=lambda s: (-s["relevance"], s["doc_id"]))
    strong = [s for s in all_sources if s["relevance"] > 0.7]
    return {"all_sources": all_sources, "primary_sources": (strong or all_sources)[:3], "usage_by_step": usage}
