"""LlamaIndex `NodeWithScore`s → payloads; a `CitationQueryEngine` response → a trace.

Offsets come from `start_char_idx`/`end_char_idx`, which a node parser sets relative to the text
it parsed: with chained parsers (e.g. MarkdownNodeParser then SentenceSplitter) that is the
parent node, not the document, and ragaudit reports `span_text_mismatch`. Offsets the parser
left as None are looked up in the source text.

CitationQueryEngine re-splits each retrieved node into "Source k:\\n<chunk>\\n" nodes. Older
releases copy the parent's id and offsets into every one of them; newer ones give each a random
id and no offsets. Neither the id nor k is stable across runs, so these nodes are identified by
where their chunk lies in the source document (`doc_id:start-end`, searched inside the parent's
span when it is known), else by a hash of the chunk; without a source text they have no offsets.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from ragaudit.adapters.common import (
    Hit,
    IndexInfo,
    Sources,
    build_payloads,
    corpus_root,
    doc_id_from_meta,
    make_trace,
    payloads_in_order,
    rank,
    url_of,
)
from ragaudit.core.citing import names, numbered_segments

_SOURCE = re.compile(r"\ASource (\d+):\n(.*?)\n?\Z", re.DOTALL)


def default_doc_id(node: Any, root: str | None = None) -> str | None:
    """`metadata["doc_id"]`, else the reader's `metadata["file_path"]`, else `ref_doc_id`."""
    return doc_id_from_meta(node.metadata or {}, "file_path", root) or node.ref_doc_id


def _text(node: Any) -> str:
    text = getattr(node, "text", None)
    return text if isinstance(text, str) else node.get_content()


def source_number(node: Any) -> int | None:
    """k of a CitationQueryEngine "Source k" node, else None."""
    match = _SOURCE.match(_text(node))
    return int(match.group(1)) if match else None


def _hit(scored: Any, doc_id: str | None) -> Hit:
    node = getattr(scored, "node", scored)
    meta = node.metadata or {}
    text, start, end = _text(node), node.start_char_idx, node.end_char_idx
    hit = Hit(
        text=text,
        doc_id=doc_id,
        start=start,
        end=end,
        snippet_id=node.node_id,
        section_id=meta.get("section_id"),
        rev=meta.get("rev"),
        source_url=meta.get("source_url") or url_of(meta.get("file_path")),
        score=getattr(scored, "score", None),
    )
    match = _SOURCE.match(text)
    if match:
        hit.text = match.group(2)
        hit.start = hit.end = hit.snippet_id = None
        if type(start) is int and type(end) is int and 0 <= start < end:
            hit.within = (start, end)
    return hit


def _hits(nodes: Iterable[Any], sources: Sources, doc_id: Callable[[Any], str | None] | None) -> list[Hit]:
    root = corpus_root(sources)
    hits = []
    for scored in nodes:
        node = getattr(scored, "node", scored)
        hits.append(_hit(scored, doc_id(node) if doc_id is not None else default_doc_id(node, root)))
    return hits


def from_llamaindex(
    nodes: Iterable[Any],
    *,
    index: IndexInfo,
    sources: Sources = None,
    score_kind: str | None = None,
    doc_id: Callable[[Any], str | None] | None = None,
) -> list[dict[str, Any]]:
    """Payloads for `NodeWithScore`s (or bare nodes), in the order given.

    `score_kind` names what `NodeWithScore.score` is for your vector store (see `SCORE_KINDS`):
    the default SimpleVectorStore gives a cosine similarity (`"cosine"`).
    """
    return build_payloads(_hits(nodes, sources, doc_id), index=index, sources=sources, score_kind=score_kind)


def from_llamaindex_response(
    response: Any,
    *,
    qid: str,
    query: str | None,
    index: IndexInfo,
    sources: Sources = None,
    score_kind: str | None = None,
    doc_id: Callable[[Any], str | None] | None = None,
    **trace: Any,
) -> dict[str, Any]:
    """A trace from a query engine's `Response`: its source nodes become the payloads and, for a
    CitationQueryEngine, each `[k]` in the answer cites the payload of "Source k". The answer's
    sentences and the markers that bind to each are read as for any answer with markers (one
    segment per sentence, as written; a sentence without a marker takes the next one's in its
    paragraph); a number no source has, or a name no payload has, is kept as written.

    Other keyword arguments (`variant`, `seed`, `config`, …) go to `make_trace`.
    """
    nodes = list(response.source_nodes or ())
    unranked = payloads_in_order(_hits(nodes, sources, doc_id), index=index, sources=sources, score_kind=score_kind)
    cited = {}
    for scored, p in zip(nodes, unranked):
        k = source_number(getattr(scored, "node", scored))
        if k is not None:
            cited[k] = p["snippet_id"]
    payloads = rank(unranked)
    answer = response.response
    if answer is None or not cited:
        return make_trace(qid, query, payloads, answer_text=answer, index=index, **trace)
    named = names([(p.get("snippet_id"), p.get("doc_id")) for p in payloads])
    marked = numbered_segments(answer, cited, named)
    return make_trace(qid, query, payloads, answer_text=answer, segments=marked, index=index, **trace)
