"""What every adapter shares: the index the user describes, score conversion, locating chunks in
their source documents, building docs/reference.md §1.4 payloads and a §1.3 trace.

The stacks know their chunks but not ragaudit's view of them. The adapters fill the gaps this way:

* offsets: non-negative char offsets from the library are kept as given, even when they do not
  match the chunk text (a stale index then shows as `span_text_mismatch`). Missing or negative
  offsets (LangChain's `start_index = -1`) are recovered by finding the chunk text in the source
  document, when one is known and the text occurs there exactly once; otherwise the payload has
  no `offsets` and ragaudit reports `missing_offsets`.
* section_id: the object's `section_id` metadata, else the source section holding the span,
  else `_preamble`.
* rev: the object's `rev` metadata, else the revision of the source document's text.
* source_url: the source document's URL + `#section_id`; else the URL the object names (its
  `source_url` metadata, a URL or an absolute path where the library keeps one); else
  `urn:ragaudit:doc:<doc_id>#<section_id>` (percent-encoded), which names the same document and
  section in every run, so a chunk never lacks the URL docs/reference.md §1.4 requires.
* tokens: counted in the chunk text with the named analyzer when ragaudit knows it, else the
  number of whitespace-separated words.
* snippet_id: the stable id the library gives, else `doc_id:start-end`, else `doc_id#` + a hash
  of the text.
* order: the library's order, equal scores included (a re-sort of ties would renumber the
  documents a prompt numbered `[1]`, `[2]`, … in that order); `k_pos` is the position, from 1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from ragaudit.core.analyzers import get_analyzer
from ragaudit.core.types import TRACE_SCHEMA, Corpus, Document
from ragaudit.io.corpus import PREAMBLE, revision, text_document
from ragaudit.pipelines.base import now


@dataclass(frozen=True)
class IndexInfo:
    """The live index as the user knows it; nothing in the stacks' objects records it."""

    index_hash: str
    analyzer: str
    embed_model: str
    store: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index_hash": self.index_hash,
            "analyzer": self.analyzer,
            "embed_model": self.embed_model,
            "store": self.store,
        }


# How a raw score becomes score_norm in [0, 1]. The caller names the kind: the same call
# (LangChain's similarity_search_with_score) returns a distance from FAISS and Chroma but a
# similarity from InMemoryVectorStore, so it cannot be told from the numbers.
SCORE_KINDS = {
    "similarity": lambda s: s,  # already in [0, 1], higher is better
    "cosine": lambda s: (1.0 + s) / 2.0,  # cosine similarity in [-1, 1]
    "cosine_distance": lambda d: 1.0 - d / 2.0,  # 1 - cos, in [0, 2]
    "l2_distance": lambda d: 1.0 / (1.0 + d),  # any distance >= 0 (L2 or squared L2)
    "raw": None,  # unbounded (BM25 …): score_raw only
}
_SLACK = 1e-6  # float noise at the bounds (1.0000001 from an inner product) is clipped


def check_score_kind(score_kind: str | None, *, scored: bool) -> None:
    if score_kind is None:
        if scored:
            raise ValueError(
                "The 'score_kind' parameter must be set when the results carry scores: "
                f"one of {sorted(SCORE_KINDS)}. Got None instead."
            )
        return
    if score_kind not in SCORE_KINDS:
        raise ValueError(
            f"The 'score_kind' parameter must be one of {sorted(SCORE_KINDS)}. Got {score_kind!r} instead."
        )


def normalize_score(score: float, score_kind: str) -> float | None:
    convert = SCORE_KINDS[score_kind]
    if convert is None:
        return None
    value = float(convert(float(score)))
    if -_SLACK <= value < 0.0:
        return 0.0
    if 1.0 < value <= 1.0 + _SLACK:
        return 1.0
    return value  # out of range on purpose: ragaudit reports score_out_of_range


@dataclass
class Hit:
    """One retrieved unit as an adapter reads it from a library object."""

    text: str
    doc_id: str | None
    start: int | None = None  # char offset in the source document, as the library claims
    end: int | None = None
    within: tuple[int, int] | None = None  # where to look for the text when start is unknown
    snippet_id: str | None = None
    section_id: str | None = None
    rev: str | None = None
    source_url: str | None = None
    score: float | None = None
    page: int | None = None
    source: Document | None = None  # the document as the pipeline saw it, when not in `sources`


Sources = Corpus | Mapping[str, str] | None


def as_corpus(sources: Sources) -> Corpus | None:
    """`sources` as a ragaudit corpus; the texts of a {doc_id: text} mapping are read as markdown, once."""
    if sources is None or isinstance(sources, Corpus):
        return sources
    return Corpus({doc_id: text_document(doc_id, text) for doc_id, text in sources.items() if isinstance(text, str)})


def source_document(corpus: Corpus | None, doc_id: str | None) -> Document | None:
    return corpus.documents.get(doc_id) if corpus is not None and doc_id is not None else None


def corpus_root(sources: Sources) -> str | None:
    return sources.path if isinstance(sources, Corpus) and sources.path else None


def doc_id_from_meta(meta: Mapping[str, Any], path_key: str, root: str | None = None) -> str | None:
    """`meta["doc_id"]`, else the loader's file path `meta[path_key]` as a corpus doc_id."""
    if isinstance(meta.get("doc_id"), str):
        doc_id: str = meta["doc_id"]
        return doc_id
    path = meta.get(path_key)
    return doc_id_from_path(path, root) if isinstance(path, str) and path else None


def doc_id_from_path(path: str, root: str | None = None) -> str:
    """A corpus doc_id from a file path: relative to the corpus root when it lies under it, else
    the file name; without the extension, `/`-separated."""
    p = PurePath(path)
    if root is not None:
        try:
            p = Path(path).resolve().relative_to(Path(root).resolve())
        except (ValueError, OSError):
            p = PurePath(p.name)
    else:
        p = PurePath(p.name)
    return p.with_suffix("").as_posix()


def url_of(value: Any) -> str | None:
    """A URL from a `source` field: URLs as given, absolute paths as `file:` URLs."""
    if not isinstance(value, str) or not value:
        return None
    if re.match(r"^[a-zA-Z][\w+.-]*:", value) and not re.match(r"^[a-zA-Z]:[\\/]", value):
        return value
    path = Path(value)
    return path.as_uri() if path.is_absolute() else None


def doc_urn(doc_id: str, section_id: str) -> str:
    """The URL of a section whose document has none: stable, and naming nothing on any disk."""
    return f"urn:ragaudit:doc:{quote(doc_id, safe='/')}#{quote(section_id, safe='/')}"


def locate(text: str, haystack: str, within: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """The span of the single occurrence of `text` (in `within`, else anywhere); None if absent or ambiguous."""
    if not text.strip():
        return None
    for lo, hi in ([within] if within else []) + [(0, len(haystack))]:
        first = haystack.find(text, lo, hi)
        if first >= 0:
            if haystack.find(text, first + 1, hi) >= 0:
                return None
            return first, first + len(text)
    return None


def _span(hit: Hit, doc: Document | None) -> tuple[int, int] | None:
    if type(hit.start) is int and hit.start >= 0:
        end = hit.end if type(hit.end) is int else hit.start + len(hit.text)
        return hit.start, end
    if doc is None:
        return None
    return locate(hit.text, doc.text, hit.within)


def _section_at(doc: Document, start: int) -> str | None:
    for section in doc.sections:
        if section.start <= start < section.end:
            return section.section_id
    return None


def count_tokens(text: str, analyzer: str) -> int:
    known = get_analyzer(analyzer)
    return known.count(text) if known is not None else len(text.split())


def payload(
    hit: Hit, *, index: IndexInfo, corpus: Corpus | None = None, score_kind: str | None = None
) -> dict[str, Any]:
    """The payload of one hit, without its rank."""
    doc = source_document(corpus, hit.doc_id) or hit.source
    span = _span(hit, doc)
    section_id = hit.section_id or (doc and span and _section_at(doc, span[0])) or PREAMBLE
    source_url = hit.source_url
    if doc is not None and doc.source_url:
        source_url = doc.source_url if "#" in doc.source_url else f"{doc.source_url}#{section_id}"
    elif not source_url and hit.doc_id:
        source_url = doc_urn(hit.doc_id, section_id)
    if hit.snippet_id:
        snippet_id = hit.snippet_id
    elif span is not None:
        snippet_id = f"{hit.doc_id}:{span[0]}-{span[1]}"
    else:
        snippet_id = f"{hit.doc_id}#{revision(hit.text)}"
    out: dict[str, Any] = {
        "doc_id": hit.doc_id,
        "section_id": section_id,
        "snippet_id": snippet_id,
        "source_url": source_url,
        "tokens": count_tokens(hit.text, index.analyzer),
        "index_hash": index.index_hash,
        "embed_model": index.embed_model,
        "analyzer": index.analyzer,
        "rev": hit.rev or (doc.rev if doc is not None else None),
        "text": hit.text,
    }
    if span is not None:
        out["offsets"] = {"start": span[0], "end": span[1], "unit": "char"}
    if hit.page is not None:
        out["page"] = hit.page
    if hit.score is not None and score_kind is not None:
        out["score_raw"] = float(hit.score)
        norm = normalize_score(hit.score, score_kind)
        if norm is not None:
            out["score_norm"] = norm
    return {k: v for k, v in out.items() if v is not None}


def rank(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Numbers k_pos from 1 in the order given: the library's, ties included."""
    for k, p in enumerate(payloads, start=1):
        p["k_pos"] = k
    return payloads


def payloads_in_order(
    hits: Iterable[Hit], *, index: IndexInfo, sources: Sources = None, score_kind: str | None = None
) -> list[dict[str, Any]]:
    """One payload per hit, in the hits' order and without ranks."""
    hits = list(hits)
    check_score_kind(score_kind, scored=any(h.score is not None for h in hits))
    corpus = as_corpus(sources)
    return [payload(h, index=index, corpus=corpus, score_kind=score_kind) for h in hits]


def build_payloads(
    hits: Iterable[Hit], *, index: IndexInfo, sources: Sources = None, score_kind: str | None = None
) -> list[dict[str, Any]]:
    return rank(payloads_in_order(hits, index=index, sources=sources, score_kind=score_kind))


def make_trace(
    qid: str,
    query: str | None,
    payloads: Sequence[dict[str, Any]],
    answer_text: str | None = None,
    segments: Sequence[dict[str, Any]] | None = None,
    index: IndexInfo | None = None,
    variant: int = 0,
    seed: int = 0,
    *,
    config: str | None = None,
    retriever_name: str | None = None,
    retrieved_at: str | None = None,
    answer_raw: str | None = None,
) -> dict[str, Any]:
    """A `ragaudit.trace/1` record, ready for `ragaudit.io.traces.parse_trace` or a JSONL file.

    `retrieved_at` defaults to now (UTC, `2026-11-22T10:00:00Z`): the adapters run right after
    the retrieval they project, and a recorded trace without the time is harder to audit.
    """
    trace: dict[str, Any] = {
        "schema": TRACE_SCHEMA,
        "qid": qid,
        "variant": variant,
        "seed": seed,
        "query": query,
        "config": config,
        "retriever_name": retriever_name,
        "retrieved_at": retrieved_at if retrieved_at is not None else now(),
        "retrieved": list(payloads),
        "error": None,
    }
    if index is not None:
        trace["index"] = index.to_dict()
    if answer_text is not None or segments is not None or answer_raw is not None:
        trace["answer"] = {"raw": answer_raw, "text": answer_text, "segments": list(segments or ())}
    return trace
