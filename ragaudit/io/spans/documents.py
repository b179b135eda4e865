"""Retrieved documents of a span, and each document as a citation payload (docs/reference.md §10).

A span carries its documents as OpenInference attributes (`retrieval.documents.{i}.document.id |
content | score | metadata`, flat, or one list of such dicts as Phoenix stores them) or as the
OpenTelemetry GenAI attribute `gen_ai.retrieval.documents` (a JSON string or list of `{id, score,
content | text, metadata}`). Every form becomes `{id, content, score, metadata, position}`.

A document maps to a payload: `snippet_id` = id, `text` = content, `score_raw` = score,
`k_pos` = position + 1 (LangChain's spans record no id and no score: the metadata's `snippet_id`
and `score` stand in), and from the metadata (an object or a JSON string) `doc_id` (or
`ref_doc_id`, `document_id`), `section_id` (or `section`), offsets (`offsets` as given, else
LlamaIndex `start_char_idx`/`end_char_idx`, else LangChain `start_index` with end = start +
len(content); -1 means unknown), `rev`, `index_hash`, `analyzer`, `embed_model`, `source_url` (or
`source`, `url`), `tokens`, `page`. A document `title` is not read: a payload has no title, and
a title is not a section id. Nothing absent is filled in; values keep their types, so a wrong one
is reported by validation (`wrong_type`), and a missing one by its `missing_<field>` code.
"""

from __future__ import annotations

from typing import Any

import orjson

from ragaudit.core.errors import describe
from ragaudit.core.types import FieldError

_OPENINFERENCE = "retrieval.documents"
_FLAT = _OPENINFERENCE + "."
_GENAI = "gen_ai.retrieval.documents"
_FIELDS = {"id": "id", "content": "content", "text": "content", "score": "score", "metadata": "metadata"}
# metadata key -> payload field, first present wins
_ALIASES = (
    ("doc_id", ("doc_id", "ref_doc_id", "document_id")),
    ("section_id", ("section_id", "section")),
    ("source_url", ("source_url", "source", "url")),
)
_SAME = ("rev", "index_hash", "analyzer", "embed_model", "tokens", "page")
# LangChain's spans record neither a document's id nor its score: the metadata's stand in
_STAND_INS = (("snippet_id", "snippet_id"), ("score_raw", "score"))


def documents_of(attributes: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The documents a span's attributes carry, in retrieval order, or None when it carries none."""
    listed = attributes.get(_OPENINFERENCE)
    if isinstance(listed, list):
        return [openinference_document(item, i) for i, item in enumerate(listed)]
    flat: dict[int, dict[str, Any]] = {}
    known = _FLAT_KEYS
    for key, value in attributes.items():
        parsed = known.get(key, _UNSEEN)
        if parsed is _UNSEEN:
            parsed = _flat_key(key)
        if parsed is not None:
            index, name = parsed
            document = flat.get(index)
            if document is None:
                document = flat[index] = {"position": index}
            document[name] = value
    if flat:
        return [flat[i] for i in sorted(flat)]
    genai = attributes.get(_GENAI)
    if genai is None:
        return None
    if isinstance(genai, str):
        try:
            genai = orjson.loads(genai)
        except orjson.JSONDecodeError:
            return [{"position": 0, "invalid": genai}]
    if not isinstance(genai, list):
        return [{"position": 0, "invalid": genai}]
    return [plain_document(item, i) for i, item in enumerate(genai)]


_FLAT_KEYS: dict[str, tuple[int, str] | None] = {}  # attribute name -> (index, field), or None
_FLAT_KEYS_MAX = 1 << 16  # bounded against hostile input
_UNSEEN = (-1, "")  # not looked at yet (None: looked at, not a document attribute)


def _flat_key(key: str) -> tuple[int, str] | None:
    """(index, field) of a flat OpenInference document attribute, None for any other attribute."""
    parsed = None
    if key.startswith(_FLAT):
        index, _, field = key[len(_FLAT) :].partition(".")
        if index.isdigit() and field.startswith("document."):
            name = _FIELDS.get(field[len("document.") :])
            if name is not None:
                parsed = (int(index), name)
    if len(_FLAT_KEYS) < _FLAT_KEYS_MAX:
        _FLAT_KEYS[key] = parsed
    return parsed


def openinference_document(item: Any, position: int) -> dict[str, Any]:
    if not isinstance(item, dict):
        return {"position": position, "invalid": item}
    nested = item.get("document")
    if isinstance(nested, dict):  # {"document": {"id": ...}}: a list unflattened one level further
        item = nested
    out: dict[str, Any] = {"position": position}
    for key, value in item.items():
        name = _FIELDS.get(key[len("document.") :] if key.startswith("document.") else key)
        if name is not None:
            out[name] = value
    return out


def plain_document(item: Any, position: int) -> dict[str, Any]:
    """A `{id, score, content | text | page_content, metadata}` document (GenAI, Langfuse output)."""
    if not isinstance(item, dict):
        return {"position": position, "invalid": item}
    out: dict[str, Any] = {"position": position}
    for key, value in item.items():
        name = "content" if key == "page_content" else _FIELDS.get(key)
        if name is not None and (name not in out or key != "text"):
            out[name] = value
    return out


def payload_of(document: dict[str, Any], index: int, notes: list[FieldError]) -> dict[str, Any]:
    """The payload dict of one document, the `index`-th of the trace's retrieved list; a document
    or metadata of the wrong type adds a note, which validation reports as `wrong_type`."""
    if "invalid" in document:
        notes.append(FieldError(f"$.retrieved[{index}]", "a document object", describe(document["invalid"])))
        return {"k_pos": document["position"] + 1}
    get = document.get
    content, snippet_id, score = get("content"), get("id"), get("score")
    payload: dict[str, Any] = {"k_pos": document["position"] + 1}
    if snippet_id is not None:
        payload["snippet_id"] = str(snippet_id) if type(snippet_id) is int else snippet_id
    if content is not None:
        payload["text"] = content
    if score is not None:
        payload["score_raw"] = score
    meta = get("metadata")
    if meta is not None:
        meta = _metadata(meta, index, notes)
        for field, keys in _ALIASES:
            for key in keys:
                value = meta.get(key)
                if value is not None:
                    payload[field] = value
                    break
        for field in _SAME:
            value = meta.get(field)
            if value is not None:
                payload[field] = value
        for field, key in _STAND_INS:
            value = meta.get(key)
            if field not in payload and value is not None:
                payload[field] = value
        offsets = _offsets(meta, content)
        if offsets is not None:
            payload["offsets"] = offsets
    return payload


def metadata_of(document: dict[str, Any]) -> dict[str, Any]:
    """A document's metadata as an object ({} when it is none), its problems left to `payload_of`."""
    return _metadata(document.get("metadata"), 0, [])


def _metadata(raw: Any, index: int, notes: list[FieldError]) -> dict[str, Any]:
    if type(raw) is str:
        try:
            raw = orjson.loads(raw) if raw.strip() else {}
        except orjson.JSONDecodeError:
            pass
    if type(raw) is not dict:
        notes.append(FieldError(f"$.retrieved[{index}].metadata", "document metadata as a JSON object", describe(raw)))
        return {}
    return raw


def _offsets(meta: dict[str, Any], content: Any) -> Any:
    given = meta.get("offsets")
    if given is not None:
        return given
    start, end = meta.get("start_char_idx"), meta.get("end_char_idx")
    if start is not None or end is not None:
        return {"start": start, "end": end, "unit": "char"}
    start = meta.get("start_index")
    if start is None or start == -1:  # LangChain writes -1 when it could not find the chunk
        return None
    if type(start) is int and isinstance(content, str):
        return {"start": start, "end": start + len(content), "unit": "char"}
    return {"start": start, "end": None, "unit": "char"}
