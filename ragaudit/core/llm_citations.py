"""Citations an LLM returns as data, read one way from the SDKs' objects (`ragaudit.adapters`) and
from their JSON (production spans, `ragaudit.io.spans.cited`).

* An Anthropic Messages API `Message`: its `text` content blocks, joined, are the answer; each
  block's `citations` (`char_location`, `page_location`, `content_block_location`,
  `search_result_location`, `web_search_result_location`) cite that block's text.
* An OpenAI Responses API `Response`: the `output_text` parts of its `message` items, joined, are
  the answer; each part's `annotations` cite a place in it: a `file_citation` the point at its
  `index`, a `url_citation` or `container_file_citation` the text from `start_index` to `end_index`.

`segments` turns the answer and its cited places into one segment per sentence.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ragaudit.core.text import sentence_spans

Id = TypeVar("Id", bound=Hashable)
Mark = tuple[int, int, Sequence[Any]]  # (start, end, what the text from start to end cites)


def field(obj: Any, name: str, default: Any = None) -> Any:
    """A field of an SDK object, or of the dict its JSON parses to."""
    return obj.get(name, default) if isinstance(obj, Mapping) else getattr(obj, name, default)


def anthropic_marks(message: Any) -> tuple[str, list[Mark]]:
    """The answer of a `Message` and, per text block, `(start, end, citations)`."""
    text, marks = "", list[Mark]()
    for block in field(message, "content") or ():
        piece = field(block, "text")
        if field(block, "type") != "text" or not isinstance(piece, str):
            continue
        marks.append((len(text), len(text) + len(piece), list(field(block, "citations") or ())))
        text += piece
    return text, marks


def openai_marks(response: Any) -> tuple[str, list[Mark]]:
    """The answer of a `Response` and, per annotation, `(start, end, [annotation])` (a point,
    start == end, for a `file_citation`)."""
    text, marks = "", list[Mark]()
    for item in field(response, "output") or ():
        if field(item, "type") != "message":
            continue
        for part in field(item, "content") or ():
            piece = field(part, "text")
            if field(part, "type") != "output_text" or not isinstance(piece, str):
                continue
            for note in field(part, "annotations") or ():
                start, end = field(note, "start_index"), field(note, "end_index")
                if type(start) is not int or type(end) is not int:
                    start = end = field(note, "index")
                if type(start) is int and type(end) is int:
                    marks.append((len(text) + start, len(text) + end, [note]))
            text += piece
    return text, marks


def segments(text: str, marks: Iterable[tuple[int, int, Sequence[Id]]]) -> list[dict[str, Any]]:
    """Answer segments: one per sentence of `text`, citing what the marks it holds cite.

    A mark `(start, end, ids)` with start < end belongs to every sentence it overlaps; a point
    mark (start == end, e.g. an OpenAI annotation index) to the last sentence starting at or
    before it, so a citation placed after a full stop stays with its sentence.
    """
    spans = sentence_spans(text)
    cites: list[dict[Id, None]] = [{} for _ in spans]
    for start, end, ids in marks:
        if start < end:
            hit = [k for k, (a, b) in enumerate(spans) if a < end and start < b]
        else:
            before = [k for k, (a, _) in enumerate(spans) if a <= start]
            hit = [before[-1] if before else 0] if spans else []
        for k in hit:
            cites[k].update(dict.fromkeys(ids))
    return [
        {"seg": n, "text": text[a:b], "citations": list(c)} for n, ((a, b), c) in enumerate(zip(spans, cites), start=1)
    ]
