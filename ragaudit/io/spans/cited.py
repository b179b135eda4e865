"""Citations that travel as data in spans (docs/production.md, "Citations in spans"), read per span
and matched with the trace's retrieved documents when the trace is joined.

An answer's citations come from the first of these a trace holds:

1. the attributes an app writes for ragaudit, on the span that answers (the outermost that has
   them wins): `ragaudit.answer.segments`, JSON `[{"text", "citations": [document id, ...]}, ...]`,
   or `ragaudit.answer.citations`, JSON `[document id, ...]` (or a string array) for the whole
   answer. A document id names a retrieved document by its `document.id`, else by its metadata's
   `doc_id` (its best-ranked document);
2. the citations in an LLM span's output (`output.value`, JSON, as the OpenInference Anthropic and
   OpenAI instrumentations write the response): an Anthropic `Message`'s text blocks with
   `citations`, or an OpenAI `Response`'s `output_text` annotations (`ragaudit.core.llm_citations`);
   without `output.value`, the Anthropic instrumentation's output message contents
   (`llm.output_messages.0.message.contents.*`) with the `citations` of its `metadata`;
3. a numbered context in an LLM span's prompt, "Source k:" then the chunk (LlamaIndex's
   CitationQueryEngine, which splits each retrieved node into such chunks): the answer's `[k]`
   cites the retrieved document that holds chunk k;
4. otherwise the answer's markers, read when the trace is parsed (`ragaudit.core.citing`).

How a structured citation names a document (`Ref`), matched in this order: a name that is a
retrieved `document.id`; the position among the documents sent to the model (Anthropic's
`document_index` / `search_result_index`), which is the retrieval's order when the app sends the
retrieved documents as they came, unless the names say otherwise; a name that is a retrieved
document's `doc_id` (its best-ranked document), `source_url` (or that URL without its fragment),
or a file's id or name (OpenAI: every retrieved chunk of the file). A citation that names none
keeps its first name (else its position from 1), which validation reports as `dangling_citation`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Callable, Mapping

import orjson

from ragaudit.core.citing import names, numbered_segments
from ragaudit.core.errors import describe
from ragaudit.core.llm_citations import Mark, anthropic_marks, field, openai_marks, segments
from ragaudit.core.markers import ALL_FORMS
from ragaudit.core.types import FieldError
from ragaudit.io.corpus import revision

APP_SEGMENTS = "ragaudit.answer.segments"
APP_CITATIONS = "ragaudit.answer.citations"
_DOCUMENT_LOCATIONS = ("char_location", "page_location", "content_block_location")
_FILE_CITATIONS = ("file_citation", "container_file_citation")
_SOURCE = re.compile(r"^Source (\d+):\n", re.MULTILINE)
_PROMPT_KEYS = ("input.value", "llm.prompts", "llm.input_messages", "llm.prompt_template.variables")


@dataclass(frozen=True, slots=True)
class Ref:
    """One structured citation, before it is matched with the retrieved documents."""

    names: tuple[str, ...] = ()  # what it names the document by: id, title, URL, file id or name
    index: int | None = None  # its position among the documents sent to the model, from 0
    every: bool = False  # a file's citation: every retrieved chunk of the file


@dataclass(frozen=True, slots=True)
class Cited:
    """An answer's structured citations: `by` "attributes", "anthropic" or "openai"; `text` the
    answer they split (None: the trace's answer); `segments` (text, refs), a text None being the
    whole answer."""

    by: str
    text: str | None
    segments: tuple[tuple[str | None, tuple[Ref, ...]], ...]


def from_app(get: Callable[[str], Any]) -> tuple[Cited | None, FieldError | None]:
    """The citations of the `ragaudit.answer.*` attributes, or a located problem with them."""
    raw = get(APP_SEGMENTS)
    if raw is not None:
        value = _json(raw)
        found = []
        for item in value if isinstance(value, list) else (None,):
            text, cites = field(item, "text"), field(item, "citations") if isinstance(item, dict) else None
            ids = _ids(cites)
            if not isinstance(text, str) or ids is None:
                return None, FieldError(
                    "$.answer.segments",
                    f'attribute {APP_SEGMENTS} as JSON [{{"text": ..., "citations": [document id, ...]}}, ...]',
                    describe(value),
                )
            found.append((text, tuple(Ref((i,)) for i in ids)))
        return (Cited("attributes", None, tuple(found)) if found else None), None
    raw = get(APP_CITATIONS)
    if raw is not None:
        value = _json(raw)
        ids = _ids(value)
        if ids is None:
            return None, FieldError(
                "$.answer.citations", f"attribute {APP_CITATIONS} as JSON [document id, ...]", describe(value)
            )
        return Cited("attributes", None, ((None, tuple(Ref((i,)) for i in ids)),)), None
    return None, None


@dataclass(frozen=True, slots=True)
class Response:
    """What ragaudit reads of an LLM's response: its answer, its citations (None: it has none) and
    the documents an OpenAI file search in it returned (None: none)."""

    text: str
    cited: Cited | None
    documents: list[dict[str, Any]] | None = None


def from_output(value: Any) -> Response | None:
    """An Anthropic `Message` or an OpenAI `Response` (JSON text or its value), else None."""
    response = _json(value) if isinstance(value, str) and value.startswith("{") else value
    if not isinstance(response, dict):
        return None
    if response.get("type") == "message" and isinstance(response.get("content"), list):
        text, marks = anthropic_marks(response)
        return Response(text, _cited("anthropic", text, marks, _anthropic_ref))
    if response.get("object") == "response" and isinstance(response.get("output"), list):
        text, marks = openai_marks(response)
        return Response(text, _cited("openai", text, marks, _openai_ref), _file_search(response["output"]))
    return None


def from_contents(attributes: Mapping[str, Any], prefix: str) -> Response | None:
    """An Anthropic response as the OpenInference instrumentation also writes it, for an export
    without `output.value`: the content blocks of the output message at `prefix`
    (`<prefix>.message.contents.{j}.message_content.type` / `.text`) and the citations of its
    `metadata` attribute (JSON `{"citations": {"<j>": [...]}}`)."""
    metadata = _json(attributes.get("metadata"))
    citations = metadata.get("citations") if isinstance(metadata, dict) else None
    if not isinstance(citations, dict):
        return None
    blocks = []
    for j in range(256):
        kind = attributes.get(f"{prefix}.message.contents.{j}.message_content.type")
        if kind is None:
            break
        text = attributes.get(f"{prefix}.message.contents.{j}.message_content.text")
        blocks.append({"type": kind, "text": text, "citations": citations.get(str(j))})
    text, marks = anthropic_marks({"content": blocks})
    return Response(text, _cited("anthropic", text, marks, _anthropic_ref)) if blocks else None


def request_query(value: Any) -> str | None:
    """The question of an OpenAI Responses request (`input.value` JSON): its `input` text, else
    the text of its last user message."""
    request = _json(value)
    asked = field(request, "input") if isinstance(request, dict) else None
    if isinstance(asked, str):
        return asked
    messages: list[Any] = asked if isinstance(asked, list) else []
    for message in reversed(messages):
        content = field(message, "content")
        if field(message, "role") == "user":
            if isinstance(content, str):
                return content
            texts = [field(p, "text") for p in content or () if isinstance(field(p, "text"), str)]
            return "".join(texts) or None
    return None


def _cited(by: str, text: str, marks: list[Mark], ref: Callable[[Any], Ref | None]) -> Cited | None:
    # a citation that names no document at all (neither a name nor a position) is left out
    refs = [(a, b, [r for c in cites if (r := ref(c)) and (r.names or r.index is not None)]) for a, b, cites in marks]
    if not any(found for *_, found in refs):
        return None  # no structured citation: the answer's markers, if any, say what it cites
    return Cited(by, text, tuple((s["text"], tuple(s["citations"])) for s in segments(text, refs)))


def _anthropic_ref(c: Any) -> Ref | None:
    kind = field(c, "type")
    if kind in _DOCUMENT_LOCATIONS:
        return Ref(_texts(field(c, "document_title")), _index(field(c, "document_index")))
    if kind == "search_result_location":
        return Ref(_texts(field(c, "source"), field(c, "title")), _index(field(c, "search_result_index")))
    if kind == "web_search_result_location":
        return Ref(_texts(field(c, "url")))
    return None


def _openai_ref(note: Any) -> Ref | None:
    kind = field(note, "type")
    if kind in _FILE_CITATIONS:
        return Ref(_texts(field(note, "file_id"), field(note, "filename")), every=True)
    if kind == "url_citation":
        return Ref(_texts(field(note, "url")))
    return None


def _file_search(output: list[Any]) -> list[dict[str, Any]] | None:
    """The chunks an OpenAI file search returned (`include=["file_search_call.results"]`) as
    documents: id `<doc_id>#<revision of the text>` (doc_id: the `doc_id` attribute, else the file
    name without its extension), the attributes, file id and name in the metadata."""
    results = [r for item in output if field(item, "type") == "file_search_call" for r in field(item, "results") or ()]
    documents = []
    for position, r in enumerate(results):
        if not isinstance(r, dict):
            documents.append({"position": position, "invalid": r})
            continue
        given = r.get("attributes")
        attributes: dict[str, Any] = given if isinstance(given, dict) else {}
        filename, text = r.get("filename"), r.get("text")
        doc_id = attributes.get("doc_id")
        if not isinstance(doc_id, str):
            doc_id = (
                PurePosixPath(filename).with_suffix("").as_posix() if isinstance(filename, str) else r.get("file_id")
            )
        metadata = {**attributes, "doc_id": doc_id, "file_id": r.get("file_id"), "filename": filename}
        document = {"position": position, "content": text, "score": r.get("score"), "metadata": metadata}
        if isinstance(text, str):
            document["id"] = f"{doc_id}#{revision(text)}"
        documents.append(document)
    return documents or None


def prompt_sources(attributes: Mapping[str, Any]) -> tuple[tuple[int, str], ...]:
    """The "Source k:" chunks of an LLM span's prompt, (k, chunk) in order of appearance."""
    found: dict[int, str] = {}
    for key, value in attributes.items():
        if key.startswith(_PROMPT_KEYS) and not (isinstance(value, str) and "Source " not in value):
            parsed = _json(value) if key != "input.value" or str(value)[:1] in ("[", "{") else value
            for text in _strings(parsed):
                if "Source " in text:
                    _sources(text, found)
    return tuple(found.items())


def _sources(text: str, found: dict[int, str]) -> None:
    heads = list(_SOURCE.finditer(text))
    for head, after in zip(heads, heads[1:] + [None]):
        chunk = text[head.end() : after.start() if after is not None else len(text)]
        found.setdefault(int(head.group(1)), chunk)


def _strings(value: Any, depth: int = 0) -> list[str]:
    if isinstance(value, str):
        return [value]
    if depth > 8:
        return []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v, depth + 1)]
    return []


# ---- matching with the retrieved documents, when the trace is joined --------------------------


class Retrieved:
    """The retrieved documents as citations name them: `payloads` (their payload dicts, in
    order) and `documents` (as read from the span, for the metadata payloads leave out)."""

    def __init__(
        self,
        payloads: list[dict[str, Any]],
        documents: list[dict[str, Any]],
        metadata: Callable[[dict[str, Any]], dict[str, Any]],
    ):
        self.ranked = [p.get("snippet_id") for p in payloads]
        self.ids = {i for i in self.ranked if isinstance(i, str)}
        pairs = [(p.get("snippet_id"), p.get("doc_id")) for p in payloads]
        self.named = names([(s, d) for s, d in pairs if isinstance(s, str) and (d is None or isinstance(d, str))])
        self.groups: dict[str, list[str]] = {}  # doc_id, URL, file id or name -> snippet ids, in order
        for snippet_id, payload, document in zip(self.ranked, payloads, documents):
            if not isinstance(snippet_id, str):
                continue
            meta = metadata(document)
            url = payload.get("source_url")
            for name in (payload.get("doc_id"), url, url.partition("#")[0] if isinstance(url, str) else None):
                self._group(name, snippet_id)
            for key in ("file_id", "filename"):
                self._group(meta.get(key), snippet_id)
        self.contents: list[str] = [c if isinstance(c := d.get("content"), str) else "" for d in documents]

    def _group(self, name: Any, snippet_id: str) -> None:
        if isinstance(name, str) and name:
            ids = self.groups.setdefault(name, [])
            if snippet_id not in ids:
                ids.append(snippet_id)

    def resolve(self, ref: Ref) -> list[str]:
        exact = [n for n in ref.names if n in self.ids]
        if exact:
            return exact[:1]
        grouped = next((self.groups[n] for n in ref.names if n in self.groups), [])
        if ref.index is not None and 0 <= ref.index < len(self.ranked):
            at = self.ranked[ref.index]
            if isinstance(at, str) and (not grouped or at in grouped):
                return [at]
        if grouped:
            return list(grouped) if ref.every else grouped[:1]
        return [ref.names[0] if ref.names else str((ref.index or 0) + 1)]  # dangling


def cited_segments(cited: Cited, answer: str | None, retrieved: Retrieved) -> list[dict[str, Any]]:
    """The answer segments of structured citations, citing snippet ids."""
    out = []
    for n, (text, refs) in enumerate(cited.segments, start=1):
        ids = dict.fromkeys(i for r in refs for i in retrieved.resolve(r))
        out.append({"seg": n, "text": (answer or "") if text is None else text, "citations": list(ids)})
    return out


def source_segments(
    sources: dict[int, str], answer: str, retrieved: Retrieved, forms: frozenset[str] = ALL_FORMS
) -> list[dict[str, Any]] | None:
    """The segments of an answer whose `[k]` markers cite "Source k" chunks, each the retrieved
    document that holds it; None when no marker cites anything."""
    numbered: dict[int, str] = {}
    for k, chunk in sources.items():
        at = _holder(chunk, retrieved.contents)
        snippet_id = retrieved.ranked[at] if at is not None else None
        if isinstance(snippet_id, str):
            numbered[k] = snippet_id
    found = numbered_segments(answer, numbered, retrieved.named, forms)
    return found if any(s["citations"] for s in found) else None


def _holder(chunk: str, contents: list[str]) -> int | None:
    """The first (best-ranked) document whose content holds the chunk's lines: its first line
    chooses, each next one narrows while some document still holds it (text after the chunk, the
    next node's metadata, say, narrows nothing)."""
    lines = [line.strip() for line in chunk.splitlines() if line.strip()]
    found = [i for i, c in enumerate(contents) if lines and lines[0] in c]
    for line in lines[1:]:
        narrower = [i for i in found if line in contents[i]]
        if not narrower:
            break
        found = narrower
    return found[0] if found else None


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _ids(value: Any) -> list[str] | None:
    if isinstance(value, (list, tuple)) and all(isinstance(i, (str, int)) and not isinstance(i, bool) for i in value):
        return [str(i) for i in value]
    return None


def _texts(*values: Any) -> tuple[str, ...]:
    return tuple(v for v in values if isinstance(v, str) and v)


def _index(value: Any) -> int | None:
    return value if type(value) is int else None
