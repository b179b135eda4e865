"""An OpenAI Responses API `Response` with file search → a trace.

The payloads are the chunks in `file_search_call.results`, which the API returns only when the
request asks for them (`include=["file_search_call.results"]`). A result has no offsets: its
text is looked up in the source document when `sources` has it. A `file_citation` annotation
names a file and an `index` in the output text; the sentence holding that index cites every
retrieved chunk of the file, since the annotation does not say which one. A cited file with no
retrieved chunk is cited by its `file_id`, which ragaudit reports as `dangling_citation`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragaudit.adapters.common import (
    Hit,
    IndexInfo,
    Sources,
    doc_id_from_path,
    make_trace,
    payloads_in_order,
    rank,
)
from ragaudit.core.llm_citations import openai_marks, segments


def default_doc_id(result: Any) -> str | None:
    """`attributes["doc_id"]`, else the file name without its extension."""
    attributes = result.attributes or {}
    if isinstance(attributes.get("doc_id"), str):
        doc_id: str = attributes["doc_id"]
        return doc_id
    return doc_id_from_path(result.filename) if result.filename else None


def from_openai(
    response: Any,
    *,
    qid: str,
    query: str | None,
    index: IndexInfo,
    sources: Sources = None,
    score_kind: str = "similarity",
    doc_id: Callable[[Any], str | None] | None = None,
    **trace: Any,
) -> dict[str, Any]:
    """A trace from a `Response`. File search scores are documented as relevance in [0, 1], hence
    `score_kind="similarity"`. Other keyword arguments (`variant`, `seed`, …) go to `make_trace`."""
    results = [r for item in response.output if item.type == "file_search_call" for r in item.results or ()]
    hits = []
    for r in results:
        attributes = r.attributes or {}
        hits.append(
            Hit(
                text=r.text or "",
                doc_id=doc_id(r) if doc_id is not None else default_doc_id(r),
                section_id=attributes.get("section_id"),
                rev=attributes.get("rev"),
                source_url=attributes.get("source_url"),
                score=r.score,
            )
        )
    unranked = payloads_in_order(hits, index=index, sources=sources, score_kind=score_kind)
    by_file: dict[str, list[str]] = {}
    for r, p in zip(results, unranked):
        by_file.setdefault(r.file_id, []).append(p["snippet_id"])

    text, notes = openai_marks(response)
    marks = [
        (start, end, by_file.get(note.file_id, [note.file_id]))
        for start, end, (note,) in notes
        if note.type == "file_citation"
    ]
    return make_trace(
        qid, query, rank(unranked), answer_text=text, segments=segments(text, marks), index=index, **trace
    )
