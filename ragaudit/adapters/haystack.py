"""Haystack `Document`s → payloads.

Offsets index the whole corpus document: `meta["offsets"]` (`{start, end, unit: "char"}`, the key
docs/production.md stores and the span reader reads), else `meta["split_idx_start"]`, which
`DocumentSplitter` sets on each split as an offset into the `Document` it was given: the whole
document's offset only when the splitter was given whole documents (split a section, and add the
section's start into `offsets`). With `split_by="function"` a splitter that rewrites text makes
Haystack fall back to a running offset that may not match the split; ragaudit then reports
`span_text_mismatch`. `Document.id` (a hash of content and meta) is the snippet_id;
`meta["page_number"]` the page. Documents keep the order the pipeline gives them, ties included:
`k_pos` is the number a prompt gives each document (`[1]` the first).

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


def _offsets(document: Any) -> tuple[Any, Any]:
    """(start, end) of the document's whole-document offsets as its metadata gives them (see the module)."""
    meta = document.meta or {}
    given = meta.get("offsets")
    if given is None:
        return meta.get("split_idx_start"), None
    if not isinstance(given, dict) or given.get("unit", "char") != "char":
        raise ValueError(
            f"Document {document.id!r}: expected meta['offsets'] as {{start, end, unit: 'char'}}, found {given!r}"
        )
    return given.get("start"), given.get("end")


def _hit(document: Any, doc_id: str | None) -> Hit:
    meta = document.meta or {}
    page = meta.get("page_number")
    start, end = _offsets(document)
    return Hit(
        text=document.content or "",
        doc_id=doc_id,
        start=start,
        end=end,
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
) -> list[dict[str, Any]]:
    """Payloads for retrieved `Document`s, in the order given (equal scores too).

    `score_kind` names what `Document.score` is (see `SCORE_KINDS`): BM25 and embedding
    retrievers with `scale_score=True` give `"similarity"`; InMemoryBM25Retriever with
    `scale_score=False` gives unbounded BM25 scores (`"raw"`).
    """
    root = corpus_root(sources)
    hits = [_hit(d, doc_id(d) if doc_id is not None else default_doc_id(d, root)) for d in documents]
    return build_payloads(hits, index=index, sources=sources, score_kind=score_kind)
