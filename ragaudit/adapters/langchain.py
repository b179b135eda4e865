"""LangChain `Document`s (optionally with scores) → payloads.

Offsets come from `metadata["start_index"]` (a text splitter with `add_start_index=True`). The
splitter writes `-1` when it cannot find a chunk in its source: the chunk is then looked up in the
source text when `sources` has it, and otherwise left without offsets (`missing_offsets`).
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

_ID_KEYS = ("snippet_id", "chunk_id", "id")


def default_doc_id(document: Any, root: str | None = None) -> str | None:
    """`metadata["doc_id"]`, else the loader's `metadata["source"]` path as a corpus doc_id."""
    return doc_id_from_meta(document.metadata or {}, "source", root)


def _hit(document: Any, score: float | None, doc_id: str | None) -> Hit:
    meta = document.metadata or {}
    snippet_id = next((str(meta[k]) for k in _ID_KEYS if meta.get(k) is not None), None)
    page = meta.get("page")  # PyPDFLoader numbers pages from 0
    return Hit(
        text=document.page_content,
        doc_id=doc_id,
        start=meta.get("start_index"),
        snippet_id=snippet_id or getattr(document, "id", None),
        section_id=meta.get("section_id"),
        rev=meta.get("rev"),
        source_url=meta.get("source_url") or url_of(meta.get("source")),
        score=score,
        page=page + 1 if type(page) is int and page >= 0 else None,
    )


def from_langchain(
    results: Iterable[Any],
    *,
    index: IndexInfo,
    sources: Sources = None,
    score_kind: str | None = None,
    doc_id: Callable[[Any], str | None] | None = None,
) -> list[dict[str, Any]]:
    """Payloads for `Document`s or `(Document, score)` pairs, in the order given.

    `score_kind` says what the scores are (see `SCORE_KINDS`): `similarity_search_with_score`
    returns a distance from FAISS and Chroma (`"l2_distance"`, `"cosine_distance"`) but a cosine
    similarity from `InMemoryVectorStore` (`"cosine"`); `similarity_search_with_relevance_scores`
    returns `"similarity"`.
    """
    root = corpus_root(sources)
    hits = []
    for item in results:
        document, score = item if isinstance(item, tuple) else (item, None)
        name = doc_id(document) if doc_id is not None else default_doc_id(document, root)
        hits.append(_hit(document, score, name))
    return build_payloads(hits, index=index, sources=sources, score_kind=score_kind)
