"""Langfuse observation exports: JSON lines of observations, or one JSON document holding an
array of them (the UI export) or `{"data": [...], "meta": {...}}` (a page of `GET
/api/public/observations`, or of the v2 `GET /api/public/v2/observations` with `fields=core,basic,io,metadata`,
whose `input` and `output` are raw JSON text: read as the values they hold).

An observation: `id`, `traceId`, `parentObservationId`, `type`, `name`, `startTime`, `input`,
`output`, `metadata`, `level`, `statusMessage`. Its kind: `GENERATION` is an LLM span;
`RETRIEVER`, `CHAIN`, `AGENT`, `TOOL`, `EMBEDDING`, ... (Langfuse's typed observations) are
themselves; a `SPAN` or `EVENT` takes `openinference.span.kind` from its metadata (top level or
under `attributes`, as Langfuse stores the attributes of OpenTelemetry spans), is otherwise a
RETRIEVER exactly when its output holds documents, and else a `SPAN` is a CHAIN (a step of the
application) and an `EVENT` has no kind. Documents in `output`: a list, or
`{"documents" | "nodes": [...]}`, each `{id, content | text | page_content, score, metadata}` or
OpenInference `document.*` keys. `input` and `output` are text, or an object whose `query` /
`query_str` / `input` / `question` (input) or `content` / `text` / `output` / `response` /
`answer` (output) is text. The service name comes from `metadata.resourceAttributes`, and the
run key from `ragaudit.qid` / `ragaudit.variant` / `ragaudit.seed` in the metadata, read as
pandas writes them (an integral float is an integer, null or NaN is absent; `record.run_key_of`).
Citations (`ragaudit.io.spans.cited`): the `ragaudit.answer.*` attributes in the metadata (top level or
under `attributes`), a GENERATION's output that is an Anthropic `Message` or an OpenAI `Response`,
and the "Source k:" chunks of a GENERATION's input.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator

import orjson

from ragaudit.core.errors import describe
from ragaudit.io.jsonl import BadLine, member_path
from ragaudit.io.spans.cited import from_app, from_output, prompt_sources
from ragaudit.io.spans.documents import openinference_document, plain_document
from ragaudit.io.spans.lines import json_values
from ragaudit.io.spans.record import CHAIN, LLM, RETRIEVER, RUN_KEY_ATTRIBUTES, SpanRecord, ns_of_iso, run_key_of

_KINDS = {"GENERATION": LLM}
_PLAIN = {"SPAN": CHAIN, "EVENT": None}  # a plain span is a step of the application, as a CHAIN is
_QUERY_KEYS = ("query", "query_str", "input", "question")
_ANSWER_KEYS = ("content", "text", "output", "response", "answer")
_DOCUMENT_KEYS = ("documents", "nodes")
_RUN_KEY_PATHS = tuple(member_path(k, ".metadata") for k in RUN_KEY_ATTRIBUTES)
_CONTENT_KEYS = ("content", "text", "page_content", "document.content", "document.id")


def read_langfuse(path: str | os.PathLike[str]) -> Iterator[SpanRecord | BadLine]:
    name = os.fspath(path)
    for line, value, notes in json_values(name):
        if notes:  # a NaN run key is a missing one, as pandas writes it
            notes = tuple(n for n in notes if not (n.found == "NaN" and n.path.endswith(_RUN_KEY_PATHS)))
        for note in notes:
            yield BadLine(name, line, f"expected {note.expected}, found {note.found}", note.path)
        if isinstance(value, BadLine):
            yield value
            continue
        if isinstance(value, dict) and isinstance(value.get("data"), list):
            observations, at = value["data"], "$.data"
        elif isinstance(value, list):
            observations, at = value, "$"
        else:
            observations, at = [value], None
        for i, observation in enumerate(observations):
            yield from _observation(observation, name, line, "$" if at is None else f"{at}[{i}]")


def _observation(obs: Any, name: str, line: int, at: str) -> Iterator[SpanRecord | BadLine]:
    if not isinstance(obs, dict):
        yield BadLine(name, line, f"expected an observation object, found {describe(obs)}", at)
        return
    trace_id = obs.get("traceId")
    if not isinstance(trace_id, str) or not trace_id:
        found = "none" if trace_id is None else describe(trace_id)
        yield BadLine(name, line, f"expected an observation with a traceId string, found {found}", f"{at}.traceId")
        return
    started = obs.get("startTime")
    start_ns = ns_of_iso(started) if isinstance(started, str) else None
    if started is not None and start_ns is None:
        yield BadLine(name, line, f"expected startTime as ISO 8601 text, found {describe(started)}", f"{at}.startTime")
    metadata = obs.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    output = _io(obs.get("output"))
    documents = _documents(output)
    kind = _kind(obs.get("type"), metadata, documents)
    observation_name = obs.get("name")
    level, message = obs.get("level"), obs.get("statusMessage")
    run_key, problems = run_key_of(metadata)
    attributes = metadata.get("attributes")
    cited, cited_problem = from_app(_either(metadata, attributes if isinstance(attributes, dict) else {}))
    response = from_output(output) if kind == LLM else None
    llm_output = response.text if response is not None else _text_of(output, _ANSWER_KEYS) if kind == LLM else None
    yield SpanRecord(
        trace_id=trace_id,
        span_id=_text(obs.get("id")),
        parent_id=_text(obs.get("parentObservationId")),
        name=observation_name if isinstance(observation_name, str) else None,
        kind=kind,
        start_ns=start_ns,
        query=_text_of(_io(obs.get("input")), _QUERY_KEYS),
        output=None if kind == RETRIEVER else _text_of(output, _ANSWER_KEYS),
        llm_output=llm_output,
        # an OpenAI file search's results are the documents its LLM observation retrieved
        documents=documents if kind == RETRIEVER else response.documents if response is not None else None,
        cited=cited,
        cited_problem=cited_problem,
        llm_cited=response.cited if response is not None else None,
        sources=prompt_sources({"input.value": obs.get("input")}) if kind == LLM else (),
        service=_service(metadata),
        error=((message or f"observation {observation_name!r} ended at level ERROR") if level == "ERROR" else None),
        run_key=run_key,
        file=name,
        line=line,
        key_problems=tuple((member_path(key, f"{at}.metadata"), found) for key, found in problems),
    )


def _either(first: dict[str, Any], second: dict[str, Any]) -> Callable[[str], Any]:
    """A lookup in `first`, else in `second`."""
    return lambda key: first[key] if first.get(key) is not None else second.get(key)


def _io(value: Any) -> Any:
    """An input or output as the v2 observations API returns it, raw JSON text (`"[{...}]"`,
    `"{\"query\": ...}"`, `"\"text\""`), read as its value; text that is no JSON is text."""
    if isinstance(value, str) and value[:1] in ('"', "[", "{"):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _kind(kind: Any, metadata: dict[str, Any], documents: list[dict[str, Any]] | None) -> str | None:
    if isinstance(kind, str) and kind.upper() not in _PLAIN:
        return _KINDS.get(kind.upper(), kind.upper())
    attributes = metadata.get("attributes")
    declared = (attributes if isinstance(attributes, dict) else metadata).get("openinference.span.kind")
    if isinstance(declared, str):
        return declared.upper()
    if documents is not None:
        return RETRIEVER
    return _PLAIN.get(kind.upper()) if isinstance(kind, str) else None


def _documents(output: Any) -> list[dict[str, Any]] | None:
    if isinstance(output, dict):
        output = next((output[k] for k in _DOCUMENT_KEYS if isinstance(output.get(k), list)), None)
    if not isinstance(output, list) or not output or not all(isinstance(d, dict) for d in output):
        return None
    if not all(_is_document(d) for d in output):
        return None
    return [
        openinference_document(d, i) if any(k.startswith("document.") for k in d) else plain_document(d, i)
        for i, d in enumerate(output)
    ]


def _is_document(item: dict[str, Any]) -> bool:
    """A retrieved document has content, or at least an id and a score."""
    return any(k in item for k in _CONTENT_KEYS) or ("id" in item and "score" in item)


def _text_of(value: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return next((value[k] for k in keys if isinstance(value.get(k), str)), None)
    return value if isinstance(value, str) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _service(metadata: dict[str, Any]) -> str | None:
    resource = metadata.get("resourceAttributes")
    service = resource.get("service.name") if isinstance(resource, dict) else None
    return service if isinstance(service, str) else None
