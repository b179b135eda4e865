"""An answer traced to its sources: claims → citations → text units → documents, optionally verified.

Sources are numbered by first appearance in the answer, one number per cited (kind, id). A
claim's support is scored against the text of the text units each of its sources reaches: the
source documents, not the summaries (reports, entity descriptions) the model was shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Protocol, Sequence

from ragaudit.adapters.graphrag.answers import read_answers
from ragaudit.adapters.graphrag.cite import (
    KINDS,
    Block,
    Claim,
    parse_blocks,
    split_claims,
)
from ragaudit.adapters.graphrag.load import GraphIndex, load_index
from ragaudit.adapters.graphrag.resolve import Resolution, Resolver
from ragaudit.core.errors import RagauditError
from ragaudit.core.types import DEFAULT_MODEL

DEFAULT_THRESHOLD = 0.5


class Scorer(Protocol):
    def score_many(self, pairs: Sequence[tuple[str, Sequence[str]]]) -> Iterable[float]: ...


@dataclass(frozen=True, slots=True)
class ClaimTrace:
    claim: Claim
    sources: tuple[int, ...]
    support: dict[int, float] | None = None  # source number → score, when verified


@dataclass
class GraphRAGTrace:
    output_dir: str
    layout: str
    answer: str
    blocks: list[Block]
    claims: list[ClaimTrace]
    sources: list[Resolution]  # source n is sources[n - 1]
    block_sources: list[tuple[int, ...]]  # per block, the numbers it cites
    origin: str | None = None
    query: str | None = None
    threshold: float | None = None  # set when verified

    @property
    def verified(self) -> bool:
        return self.threshold is not None

    @property
    def dangling(self) -> list[tuple[int, Resolution]]:
        return [(n, r) for n, r in enumerate(self.sources, 1) if r.dangling]

    def mark(self, number: int, claim: ClaimTrace | None) -> str:
        """`✓`/`✗` for a verified source of a claim, `?` when it cannot be checked, else nothing."""
        if self.threshold is None:  # not verified
            return ""
        score = None if claim is None or claim.support is None else claim.support.get(number)
        return "?" if score is None else ("✓" if score >= self.threshold else "✗")

    def counts(self) -> dict[str, Any]:
        """Cited ids as written (every occurrence), resolved and dangling, by kind."""
        by_kind: dict[str, dict[str, int]] = {}
        total = {"citations": 0, "resolved": 0, "dangling": 0}
        more = 0
        for numbers, block in zip(self.block_sources, self.blocks):
            more += sum(c.more for c in block.citations)
            for n in numbers:
                source = self.sources[n - 1]
                kind = source.kind if source.kind in KINDS else "unknown"
                row = by_kind.setdefault(kind, {"citations": 0, "resolved": 0, "dangling": 0})
                outcome = "dangling" if source.dangling else "resolved"
                for counter in (row, total):
                    counter["citations"] += 1
                    counter[outcome] += 1
        cited = [c for c in self.claims if c.sources]
        out = {
            **total,
            "by_kind": by_kind,
            "blocks": len(self.blocks),
            "more": more,
            "distinct": len(self.sources),
            "claims": len(self.claims),
            "cited_claims": len(cited),
        }
        if (threshold := self.threshold) is not None:  # verified
            scores = [s >= threshold for c in cited for s in (c.support or {}).values()]
            out["checked"], out["supported"] = len(scores), sum(scores)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "query": self.query,
            "answer": self.answer,
            "layout": self.layout,
            "output_dir": self.output_dir,
            "verified": self.verified,
            "threshold": self.threshold,
            "counts": self.counts(),
            "claims": [
                {
                    "index": c.claim.index,
                    "start": c.claim.start,
                    "end": c.claim.end,
                    "text": c.claim.text,
                    "sources": list(c.sources),
                    "support": None if c.support is None else {str(n): s for n, s in c.support.items()},
                    "marks": None if not self.verified else {str(n): self.mark(n, c) for n in c.sources},
                }
                for c in self.claims
            ],
            "sources": [{"number": n, **r.to_dict()} for n, r in enumerate(self.sources, 1)],
            "dangling": [
                {"number": n, "kind": r.kind, "id": r.key, "reason": r.reason, "message": r.message}
                for n, r in self.dangling
            ],
        }


def default_scorer(model: str = DEFAULT_MODEL) -> Scorer:
    """The support scorer of `ragaudit.checks.metrics.support` over the named encoder."""
    try:
        from ragaudit.pipelines.inputs import encoder_for, support_for

        scorer: Scorer = support_for(None, encoder_for(model))
        return scorer
    except ImportError as exc:
        raise RagauditError(
            f"verification needs ragaudit.checks.metrics.support, which cannot be imported: {exc}"
        ) from exc


def trace_answer(
    output_dir: str | Path | GraphIndex,
    answer_text: str,
    *,
    verify: bool = False,
    scorer: Scorer | None = None,
    threshold: float | None = None,
    origin: str | None = None,
    query: str | None = None,
) -> GraphRAGTrace:
    """Trace one answer against an output folder (or an already loaded GraphIndex). Passing a
    `scorer` implies `verify`; the threshold defaults to the scorer's own, else 0.5."""
    index = output_dir if isinstance(output_dir, GraphIndex) else load_index(output_dir)
    resolver = Resolver(index)
    blocks = parse_blocks(answer_text)
    numbers: dict[tuple[str, int | str], int] = {}
    sources: list[Resolution] = []
    block_sources = []
    for block in blocks:
        cited = []
        for citation in block.citations:
            keys: tuple[int | str, ...] = (*citation.ids, *citation.bad)
            for key in keys:
                resolution = resolver.resolve(citation.kind, key, known=citation.known)
                if (citation.kind, key) not in numbers:
                    sources.append(resolution)
                    numbers[citation.kind, key] = len(sources)
                cited.append(numbers[citation.kind, key])
        block_sources.append(tuple(cited))
    per_block = {id(b): s for b, s in zip(blocks, block_sources)}
    claims = [
        ClaimTrace(c, tuple(dict.fromkeys(n for b in c.blocks for n in per_block[id(b)])))
        for c in split_claims(answer_text, blocks)
    ]
    trace = GraphRAGTrace(
        str(index.path), index.layout, answer_text, blocks, claims, sources, block_sources, origin=origin, query=query
    )
    if verify or scorer is not None:
        _verify(trace, scorer or default_scorer(), threshold)
    return trace


def _verify(trace: GraphRAGTrace, scorer: Scorer, threshold: float | None) -> None:
    pairs, where = [], []
    for i, claim in enumerate(trace.claims):
        for n in claim.sources:
            source = trace.sources[n - 1]
            if not source.dangling and claim.claim.text:
                pairs.append((claim.claim.text, [u.text for u in source.units]))
                where.append((i, n))
    scores = list(scorer.score_many(pairs)) if pairs else []
    support: dict[int, dict[int, float]] = {}
    for (i, n), score in zip(where, scores):
        support.setdefault(i, {})[n] = float(score)
    trace.claims = [
        ClaimTrace(c.claim, c.sources, support.get(i, {})) if c.sources else c for i, c in enumerate(trace.claims)
    ]
    trace.threshold = float(threshold if threshold is not None else getattr(scorer, "threshold", DEFAULT_THRESHOLD))


def trace_file(
    output_dir: str | Path | GraphIndex,
    answer_path: str | Path,
    *,
    verify: bool = False,
    scorer: Scorer | None = None,
    threshold: float | None = None,
    model: str = DEFAULT_MODEL,
) -> list[GraphRAGTrace]:
    """Trace every answer recorded in a file (text, JSON or notebook) against one output folder."""
    answers = read_answers(answer_path)
    index = output_dir if isinstance(output_dir, GraphIndex) else load_index(output_dir)
    if verify and scorer is None:
        scorer = default_scorer(model)
    return [
        trace_answer(index, a.text, scorer=scorer, threshold=threshold, origin=a.origin, query=a.query) for a in answers
    ]
