"""Per-run metrics on spans and snippets (docs/reference.md §3): coverage, citation match / precision / recall,
and the retrieval metrics. Each takes a `RunView`, the run bound to its gold item once."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from ragaudit.checks.metrics.spans import in_unit, intersection_length, length, merge
from ragaudit.core.types import Corpus, ExpectedCitation, GoldItem, Payload, Span, Trace


def cited_payloads(trace: Trace, k: int = 5) -> tuple[Payload, ...]:
    """A run's cited payloads (docs/reference.md §3): the answer's citations when there is an answer, else the
    top-k retrieved."""
    if trace.answer is None:
        return trace.retrieved[:k]
    cited = set(trace.answer.citations)
    return tuple(p for p in trace.retrieved if p.snippet_id in cited)


@dataclass(frozen=True)
class RunView:
    trace: Trace
    item: GoldItem
    corpus: Corpus | None = None
    k: int = 5
    tolerance: int = 0
    ndcg_k: int | None = None  # nDCG's own cutoff; k when unset

    @property
    def ndcg_cutoff(self) -> int:
        return self.ndcg_k or self.k

    @cached_property
    def cited(self) -> tuple[Payload, ...]:
        return cited_payloads(self.trace, self.k)

    @cached_property
    def gold(self) -> tuple[ExpectedCitation, ...]:
        return self.item.gold_citations

    def span_of(self, payload: Payload, unit: str) -> Span | None:
        return in_unit(payload, unit, self.corpus)

    def overlapping(self, payload: Payload, *, widen: int = 0) -> list[int]:
        """Indices of the gold spans the payload overlaps (gold spans widened by `widen` units)."""
        out = []
        for i, gold in enumerate(self.gold):
            if payload.doc_id != gold.doc_id:
                continue
            span = self.span_of(payload, gold.span.unit)
            if span is not None and span.overlaps(gold.span, widen=widen):
                out.append(i)
        return out

    def matches(self, payload: Payload, i: int) -> bool:
        """The citation-match rule for one payload and gold span i: same document and section, and
        the expected snippet_id or an overlap with the gold span widened by the tolerance."""
        gold = self.gold[i]
        if payload.doc_id != gold.doc_id or (gold.section_id is not None and payload.section_id != gold.section_id):
            return False
        if gold.snippet_id and payload.snippet_id == gold.snippet_id:
            return True
        span = self.span_of(payload, gold.span.unit)
        return span is not None and span.overlaps(gold.span, widen=self.tolerance)

    def gold_text(self, i: int) -> str | None:
        """Gold span i's text: as the gold gives it, else its slice of the corpus (a char span)."""
        gold = self.gold[i]
        if gold.text is None and self.corpus is not None and gold.span.unit == "char" and gold.doc_id in self.corpus:
            return self.corpus[gold.doc_id].text[gold.span.start : gold.span.end]
        return gold.text

    @cached_property
    def dangling(self) -> tuple[str, ...]:
        """Answer citations that name no retrieved snippet."""
        if self.trace.answer is None:
            return ()
        retrieved = {p.snippet_id for p in self.trace.retrieved}
        return tuple(c for c in self.trace.answer.citations if c not in retrieved)

    @cached_property
    def matched(self) -> tuple[tuple[Payload, int], ...]:
        """(cited payload, gold index) for every pair the match rule accepts; empty when an answer
        citation dangles, since then the answer cites something nobody retrieved."""
        if self.dangling:
            return ()
        return tuple((p, i) for p in self.cited for i in range(len(self.gold)) if self.matches(p, i))

    @property
    def any_of(self) -> bool:
        return self.item.accept == "any"

    @cached_property
    def relevance(self) -> tuple[list[int], int]:
        return _relevance(self)

    @cached_property
    def unreconciled(self) -> bool:
        """Some cited payload of a gold document has a span that cannot be put in the gold unit."""
        units = {g.doc_id: g.span.unit for g in self.gold}
        return any(
            p.doc_id in units and p.span is not None and self.span_of(p, units[p.doc_id]) is None for p in self.cited
        )


def _coverage_of(run: RunView, gold: list[ExpectedCitation]) -> float | None:
    covered = total = 0
    for doc_id in sorted({g.doc_id for g in gold}):
        mine = [g for g in gold if g.doc_id == doc_id]
        unit = mine[0].span.unit
        merged = merge((g.span.start, g.span.end) for g in mine)
        cited = merge(
            (s.start, s.end) for p in run.cited if p.doc_id == doc_id and (s := run.span_of(p, unit)) is not None
        )
        covered += intersection_length(cited, merged)
        total += length(merged)
    return covered / total if total else None


def coverage(run: RunView) -> float | None:
    """|∪ cited ∩ ∪ gold| / |∪ gold|, per document, in the gold unit; None when units cannot be
    reconciled. For an accept = "any" item, the best coverage over its alternatives."""
    if run.unreconciled or len({g.span.unit for g in run.gold}) > 1:
        return None
    if run.any_of:
        return max(_coverage_of(run, [g]) or 0.0 for g in run.gold)
    return _coverage_of(run, list(run.gold))


def citation_match(run: RunView) -> float:
    """1 when a cited payload is in a gold span's document and section and names its expected
    snippet or overlaps it widened by the tolerance, and every answer citation was retrieved."""
    return 1.0 if run.matched else 0.0


def citation_precision(run: RunView) -> float:
    if not run.cited:
        return 0.0
    return sum(1 for p in run.cited if run.overlapping(p)) / len(run.cited)


def citation_recall(run: RunView) -> float:
    """Gold spans overlapped by a cited payload / gold spans; for an accept = "any" item, 1 when
    any alternative is overlapped."""
    hit = {i for p in run.cited for i in run.overlapping(p)}
    if run.any_of:
        return 1.0 if hit else 0.0
    return len(hit) / len(run.gold)


# ---- retrieval metrics over the retrieved list ---------------------------------------------


def _relevance(run: RunView) -> tuple[list[int], int]:
    """(binary relevance of each retrieved payload in order, size of the relevant set).

    The relevant set is the relevant retrieved snippets plus one item per gold span that no
    retrieved snippet overlaps, as a qrels file would list it; for an accept = "any" item, plus one
    item only when no alternative is overlapped. A repeated snippet counts once.
    """
    rels, seen, matched = [], set(), set()
    for p in run.trace.retrieved:
        hits = run.overlapping(p)
        rels.append(1 if hits and p.snippet_id not in seen else 0)
        seen.add(p.snippet_id)
        matched.update(hits)
    unseen = (0 if matched else 1) if run.any_of else len(run.gold) - len(matched)
    return rels, sum(rels) + unseen


def hit_at_k(run: RunView) -> float:
    rels, _ = run.relevance
    return float(any(rels[: run.k]))


def recall_at_k(run: RunView) -> float:
    rels, total = run.relevance
    return sum(rels[: run.k]) / total if total else 0.0


def mrr(run: RunView) -> float:
    rels, _ = run.relevance
    return next((1.0 / (i + 1) for i, r in enumerate(rels) if r), 0.0)


def ndcg_at_k(run: RunView) -> float:
    """nDCG over the top `ndcg_k` retrieved (k unless set), binary gain, log2 discount."""
    rels, total = run.relevance
    cutoff = run.ndcg_cutoff
    dcg = sum(r / math.log2(i + 2) for i, r in enumerate(rels[:cutoff]))
    ideal = sum(1 / math.log2(i + 2) for i in range(min(total, cutoff)))
    return dcg / ideal if ideal else 0.0
