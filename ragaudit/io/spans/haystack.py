"""Spans of Haystack's own OpenTelemetry tracer (`haystack-ai` with `OpenTelemetryTracer` from
`opentelemetry-haystack`, content tracing on: `HAYSTACK_CONTENT_TRACING_ENABLED=true`).

Haystack writes a `haystack.pipeline.run` span per pipeline run, tagged `haystack.pipeline.input_data`
and `haystack.pipeline.output_data` (JSON: `{component: {socket: value}}`), and a
`haystack.component.run` span per component, tagged `haystack.component.name`, `.type`, `.input`
and `.output` (JSON: `{socket: value}`). Read as:

* the pipeline span is a CHAIN: its query is the first text under a `query` (or `question`,
  `text`) socket of its input data, its answer the answer of its output data (below);
* a component whose type names a Retriever (or that takes a text `query` and outputs `documents`,
  and is no Ranker) is a RETRIEVER: its documents are `output.documents`, each a serialised
  Haystack `Document` (`id`, `content`, `score`, and its `meta`, nested or flattened beside them);
* a Ranker is a RERANKER, a Generator an LLM whose answer is its first reply.

An answer among outputs: `answers[0].data` (an AnswerBuilder's GeneratedAnswer), else the first of
`replies` (a text, or a ChatMessage's text parts), else the text of a socket named `answer`,
`response`, `reply`, `text`, `output` or `content`.
"""

from __future__ import annotations

from typing import Any

import orjson

PIPELINE = "haystack.pipeline."
COMPONENT_TYPE = "haystack.component.type"
_QUERY_SOCKETS = ("query", "question", "text")
_ANSWER_SOCKETS = ("answer", "response", "reply", "text", "output", "content")
_DOCUMENT_FIELDS = frozenset({"id", "content", "score", "blob", "embedding", "sparse_embedding", "meta", "dataframe"})


def is_haystack(attributes: dict[str, Any], name: str | None) -> bool:
    return (
        COMPONENT_TYPE in attributes
        or (name or "").startswith(PIPELINE)
        or any(key.startswith(PIPELINE) for key in attributes)
    )


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value


def read_haystack(attributes: dict[str, Any], name: str | None) -> dict[str, Any]:
    """kind, query, output, llm_output and documents of a Haystack span (absent: None)."""
    out: dict[str, Any] = {"kind": None, "query": None, "output": None, "llm_output": None, "documents": None}
    component = attributes.get(COMPONENT_TYPE)
    if not isinstance(component, str):
        out["kind"] = "CHAIN"
        inputs = _json(attributes.get(PIPELINE + "input_data"))
        if isinstance(inputs, dict):
            out["query"] = next((q for sockets in inputs.values() if (q := _query(sockets)) is not None), None)
        outputs = _json(attributes.get(PIPELINE + "output_data"))
        if isinstance(outputs, dict):
            out["output"] = next((a for sockets in outputs.values() if (a := answer_of(sockets)) is not None), None)
        return out
    inputs, outputs = (
        _json(attributes.get("haystack.component.input")),
        _json(attributes.get("haystack.component.output")),
    )
    query = _query(inputs)
    documents = outputs.get("documents") if isinstance(outputs, dict) else None
    if "Ranker" in component:
        out["kind"] = "RERANKER"
    elif "Retriever" in component or (query is not None and isinstance(documents, list)):
        out.update(kind="RETRIEVER", query=query)
        if isinstance(documents, list):
            out["documents"] = [haystack_document(d, i) for i, d in enumerate(documents)]
    elif "Generator" in component:
        out.update(kind="LLM", llm_output=answer_of(outputs))
    return out


def _query(sockets: Any) -> str | None:
    if not isinstance(sockets, dict):
        return None
    return next((sockets[k] for k in _QUERY_SOCKETS if isinstance(sockets.get(k), str)), None)


def answer_of(sockets: Any) -> str | None:
    """The answer among a component's output sockets, or None."""
    if not isinstance(sockets, dict):
        return None
    answers = sockets.get("answers")
    if (
        isinstance(answers, list)
        and answers
        and isinstance(answers[0], dict)
        and isinstance(answers[0].get("data"), str)
    ):
        data: str = answers[0]["data"]
        return data
    replies = sockets.get("replies")
    if isinstance(replies, list) and replies:
        return _text(replies[0])
    return next((sockets[k] for k in _ANSWER_SOCKETS if isinstance(sockets.get(k), str)), None)


def _text(reply: Any) -> str | None:
    """A reply: a text, or a serialised ChatMessage (`content` parts with `text`, or `_content`)."""
    if isinstance(reply, str):
        return reply
    if not isinstance(reply, dict):
        return None
    parts = reply.get("content", reply.get("_content"))
    if isinstance(parts, str):
        return parts
    texts = (
        [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if isinstance(parts, list)
        else []
    )
    return "".join(texts) if texts else None


def haystack_document(item: Any, position: int) -> dict[str, Any]:
    """A serialised Haystack Document as `{id, content, score, metadata, position}`."""
    if not isinstance(item, dict):
        return {"position": position, "invalid": item}
    meta = item.get("meta")
    if not isinstance(meta, dict):  # Document.to_dict(flatten=True): the meta beside the fields
        meta = {k: v for k, v in item.items() if k not in _DOCUMENT_FIELDS}
    out: dict[str, Any] = {"position": position, "metadata": meta}
    for key in ("id", "content", "score"):
        if item.get(key) is not None:
            out[key] = item[key]
    return out
