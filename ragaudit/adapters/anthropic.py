"""An Anthropic `Message` with citations → a trace.

Each distinct cited location becomes a payload, ordered by document (the order of `documents`,
which is how the request numbered them) and then by position; each sentence of the answer cites
the locations of the text blocks it overlaps.

* `char_location` (plain-text documents): `start_char_index`/`end_char_index` index the text
  sent. When that text is an excerpt of the source document, the excerpt is located in the source
  and the offsets shifted.
* `page_location` (PDFs): pages `start_page_number` (from 1) to `end_page_number` (exclusive)
  become char offsets only with a ragaudit corpus whose document has `pages`: the cited text
  where it can be found in those pages, else the whole pages. Otherwise the payload carries
  `page` and no offsets.
* `content_block_location` (custom-content documents): blocks `start_block_index` to
  `end_block_index` (exclusive) become char offsets when the source text is known and the blocks
  are found in it in order; otherwise no offsets.

The API does not score documents: pass the scores your retriever gave them (`scores`, one per
document) or ragaudit reports `missing_score`. Other citation types (web and search results)
are not projected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragaudit.adapters.common import (
    Hit,
    IndexInfo,
    Sources,
    as_corpus,
    locate,
    make_trace,
    payloads_in_order,
    rank,
    source_document,
)
from ragaudit.core.llm_citations import anthropic_marks, field, segments
from ragaudit.core.types import Document
from ragaudit.io.corpus import text_document


@dataclass
class _Sent:
    """A document as sent in the request."""

    doc_id: str | None
    text: str | None = None  # plain-text source data
    blocks: tuple[str, ...] | None = None  # custom-content block texts


def _sent(document: Any, doc_id: str | None) -> _Sent:
    source = field(document, "source") or {}
    kind = field(source, "type")
    if kind == "text":
        return _Sent(doc_id, text=field(source, "data"))
    if kind == "content":
        content = field(source, "content")
        if isinstance(content, str):
            return _Sent(doc_id, blocks=(content,))
        return _Sent(doc_id, blocks=tuple(field(b, "text") or "" for b in content or ()))
    return _Sent(doc_id)


def _char_hit(c: Any, sent: _Sent, doc: Document | None) -> Hit:
    start, end = c.start_char_index, c.end_char_index
    if doc is None:
        # the text sent is all that is known of the document: its sections and revision
        return Hit(
            c.cited_text,
            sent.doc_id,
            start,
            end,
            source=text_document(sent.doc_id, sent.text) if sent.text and sent.doc_id else None,
        )
    if sent.text is not None and doc.text != sent.text:
        base = locate(sent.text, doc.text)
        if base is None:
            return Hit(c.cited_text, sent.doc_id)  # found by its cited text, if at all
        start, end = start + base[0], end + base[0]
    return Hit(c.cited_text, sent.doc_id, start, end)


def _page_hit(c: Any, sent: _Sent, doc: Document | None) -> Hit:
    first, stop = c.start_page_number, c.end_page_number
    pages = doc.pages if doc is not None else ()
    if doc is None or not (pages and 1 <= first < stop <= len(pages) + 1):
        # with a source text the cited text may still be found in it; without one, name the pages
        snippet_id = f"{sent.doc_id}:page{first}-{stop}" if doc is None else None
        return Hit(c.cited_text, sent.doc_id, snippet_id=snippet_id, page=first)
    lo, hi = pages[first - 1][0], pages[stop - 2][1]
    found = locate(c.cited_text, doc.text[lo:hi])
    if found is not None:
        return Hit(c.cited_text, sent.doc_id, lo + found[0], lo + found[1], page=first)
    return Hit(doc.text[lo:hi], sent.doc_id, lo, hi, page=first)


def _block_hit(c: Any, sent: _Sent, doc: Document | None) -> Hit:
    first, stop = c.start_block_index, c.end_block_index
    fallback = Hit(c.cited_text, sent.doc_id, snippet_id=f"{sent.doc_id}:block{first}-{stop}" if doc is None else None)
    if doc is None or sent.blocks is None or not 0 <= first < stop <= len(sent.blocks):
        return fallback
    starts, cut = [], 0
    for block in sent.blocks[:stop]:
        at = doc.text.find(block, cut)
        if at < 0:
            return fallback
        starts.append(at)
        cut = at + len(block)
    lo, hi = starts[first], cut
    return Hit(doc.text[lo:hi], sent.doc_id, lo, hi)


_LOCATIONS = {"char_location": _char_hit, "page_location": _page_hit, "content_block_location": _block_hit}


def from_anthropic(
    message: Any,
    documents: Sequence[Any],
    *,
    qid: str,
    query: str | None,
    index: IndexInfo,
    sources: Sources = None,
    doc_ids: Sequence[str] | None = None,
    scores: Sequence[float] | None = None,
    score_kind: str | None = None,
    **trace: Any,
) -> dict[str, Any]:
    """A trace from a `Message` and the `documents` content blocks of its request, in request order.

    `doc_ids[i]` is the corpus doc_id of `documents[i]` (default: its `title`). Other keyword
    arguments (`variant`, `seed`, `config`, …) go to `make_trace`.
    """
    corpus = as_corpus(sources)
    sent = [_sent(d, doc_ids[i] if doc_ids is not None else field(d, "title")) for i, d in enumerate(documents)]
    hits: dict[tuple[Any, ...], tuple[int, Hit]] = {}  # (document index, location type, *location)
    text, blocks = anthropic_marks(message)
    marks = []
    for start, end, citations in blocks:
        keys = []
        for c in citations:
            project = _LOCATIONS.get(c.type)
            if project is None or not 0 <= c.document_index < len(sent):
                continue
            d = sent[c.document_index]
            key = (c.document_index, c.type, *_location(c))
            if key not in hits:
                hit = project(c, d, source_document(corpus, d.doc_id))
                if scores is not None:
                    hit.score = scores[c.document_index]
                hits[key] = (c.document_index, hit)
            keys.append(key)
        marks.append((start, end, keys))
    order = sorted(hits, key=lambda k: (k[0], hits[k][1].start if hits[k][1].start is not None else -1, k))
    unranked = payloads_in_order((hits[k][1] for k in order), index=index, sources=corpus, score_kind=score_kind)
    snippet = {k: p["snippet_id"] for k, p in zip(order, unranked)}
    cited = [(a, b, [snippet[k] for k in keys]) for a, b, keys in marks if keys]
    return make_trace(
        qid, query, rank(unranked), answer_text=text, segments=segments(text, cited), index=index, **trace
    )


def _location(c: Any) -> tuple[int, int]:
    for a, b in (
        ("start_char_index", "end_char_index"),
        ("start_page_number", "end_page_number"),
        ("start_block_index", "end_block_index"),
    ):
        if hasattr(c, a):
            return getattr(c, a), getattr(c, b)
    return (0, 0)
