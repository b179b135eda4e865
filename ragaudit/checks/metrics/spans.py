"""Intervals: union, intersection length, and bringing payload spans into the gold unit."""

from __future__ import annotations

from typing import Iterable

from ragaudit.core.analyzers import get_analyzer
from ragaudit.core.types import Corpus, Payload, Span


def merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of half-open intervals as sorted, disjoint, non-touching intervals."""
    out: list[list[int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def length(merged: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in merged)


def intersection_length(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """|a ∩ b| for two merged interval lists, in one sweep."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def in_unit(payload: Payload, unit: str, corpus: Corpus | None) -> Span | None:
    """The payload's span in `unit`, or None when it has no valid span or the units cannot be
    reconciled (token ↔ char needs the corpus and an analyzer ragaudit can reproduce)."""
    span = payload.span
    if span is None or span.unit == unit:
        return span
    analyzer = get_analyzer(payload.analyzer)
    if corpus is None or analyzer is None or payload.doc_id is None or payload.doc_id not in corpus:
        return None
    if unit == "char":
        return corpus.char_span(payload.doc_id, span, analyzer)
    tokens = corpus.token_spans(payload.doc_id, analyzer)
    inside = [i for i, (a, b) in enumerate(tokens) if a < span.end and span.start < b]
    return Span(inside[0], inside[-1] + 1, "token") if inside else None
