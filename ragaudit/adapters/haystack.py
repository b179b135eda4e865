"""Haystack `Document`s → payloads.

Offsets come from `meta["split_idx_start"]`, which `DocumentSplitter` sets on each split. With
`split_by="function"` a splitter that rewrites text makes Haystack fall back to a running offset
that may not match the split; ragaudit then reports `span_text_mismatch`. `Document.id` (a hash
of content and meta) is the snippet_id; `meta["page_number"]` the page.

`source_url` is the corpus document's URL + `#section_id` when `sources` gives one; else
`meta["source_url"]`; else `meta["url"]` (set by `LinkContentFetcher` and kept by the HTML
converter); else `meta["file_path"]` as a `file:` URL when it is absolute; else
`urn:ragaudit:doc:<doc_id>#<section_id>`, the rule every adapter shares (`common.doc_urn`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ragaudit.adapters.common import (
    Hit,
    IndexInfo,
    Sources,
    build_payloads,
    corpus_root,
    doc_id_from_meta,
    url_of,
)


def default_doc_id(document: Any, root: str | None = None) -> str | None:
    """`meta["doc_id"]`, else the converter's `meta["file_path"]` as a corpus doc_id."""
    return doc_id_from_meta(document.meta or {}, "file_path", root)


def _hit(document: Any, doc_id: str | None) -> Hit:
    meta = document.meta or {}
    page = meta.get("page_number")
    return Hit(
        text=document.content or "",
        doc_id=doc_id,
        start=meta.get("split_idx_start"),
        snippet_id=document.id,
        section_id=meta.get("section_id"),
        rev=meta.get("rev"),
        source_url=meta.get("source_url") or url_of(meta.get("url")) or url_of(meta.get("file_path")),
        score=document.score,
        page=page if type(page) is int and page >= 1 else None,
    )


def from_haystack(
    documents: Iterable[Any],
    *,
    index: IndexInfo,
    sources: Sources = None,
    score_kind: str | None = None,
    doc_id: Callable[[Any], str | None] | None = None,
) -> list[dict]:
    """Payloads for retrieved `Document`s, in the order given.

    `score_kind` names what `Document.score` is (see `SCORE_KINDS`): BM25 and embedding
    retrievers with `scale_score=True` give `"similarity"`; InMemoryBM25Retriever with
    `scale_score=False` gives unbounded BM25 scores (`"raw"`).
    """
    root = corpus_root(sources)
    hits = [_hit(d, doc_id(d) if doc_id is not None else default_doc_id(d, root)) for d in documents]
    return build_payloads(hits, index=index, sources=sources, score_kind=score_kind)
