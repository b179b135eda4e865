"""One span as every reader hands it to the joiner: the few things docs/reference.md §10 reads from it.

Readers convert their format at the edge; the joiner never looks at raw attributes. The
OpenInference / OpenTelemetry attribute names are read here once (`from_attributes`), for the
OTLP and Phoenix readers alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Mapping

import orjson

from ragaudit.core.errors import describe
from ragaudit.core.types import FieldError
from ragaudit.io.spans.cited import Cited, from_app, from_contents, from_output, prompt_sources, request_query
from ragaudit.io.spans.documents import documents_of
from ragaudit.io.spans.haystack import is_haystack, read_haystack

# OpenInference span kinds; GenAI `gen_ai.operation.name` values map onto them.
RETRIEVER, LLM, CHAIN = "RETRIEVER", "LLM", "CHAIN"
_GENAI_KINDS = {
    "retrieval": RETRIEVER,
    "chat": LLM,
    "text_completion": LLM,
    "generate_content": LLM,
    "embeddings": "EMBEDDING",
    "execute_tool": "TOOL",
    "invoke_agent": "AGENT",
    "create_agent": "AGENT",
    "invoke_workflow": CHAIN,
}
# Spans whose output is documents, vectors or scores, never an answer.
NOT_ANSWERS = frozenset({RETRIEVER, "EMBEDDING", "RERANKER"})
_TEXT_MIME = (None, "text/plain")
QID_ATTRIBUTE = "ragaudit.qid"
RUN_KEY_ATTRIBUTES = (QID_ATTRIBUTE, "ragaudit.variant", "ragaudit.seed")


@dataclass(slots=True)
class SpanRecord:
    """A span, reduced to what joining reads. `query`/`output` hold `input.value`/`output.value`
    only when they are text (no JSON mime type); `documents` are the retrieved documents as
    `{id, content, score, metadata}` dicts (values unchecked), None when the span carries none."""

    trace_id: str
    span_id: str | None
    parent_id: str | None
    name: str | None
    kind: str | None
    start_ns: int | None
    query: Any = None
    output: Any = None
    llm_output: Any = None
    documents: list[dict[str, Any]] | None = None
    service: str | None = None
    error: str | None = None
    run_key: dict[str, Any] | None = None  # ragaudit.qid (text), ragaudit.variant / ragaudit.seed (integers)
    file: str = ""
    line: int = 0
    # run key values that are not one, as (where, "expected ..., found ..."): the span's trace
    # cannot be keyed, so it is reported (a located error) instead of joined under a wrong key
    key_problems: tuple[tuple[str, str], ...] = ()
    # structured citations (`ragaudit.io.spans.cited`): the app's `ragaudit.answer.*` attributes (and
    # what is wrong with them), an LLM response's own, and the "Source k:" chunks of an LLM prompt
    cited: Cited | None = None
    cited_problem: FieldError | None = None
    llm_cited: Cited | None = None
    sources: tuple[tuple[int, str], ...] = ()

    @property
    def is_root(self) -> bool:
        return not self.parent_id


def from_attributes(
    attributes: dict[str, Any],
    *,
    trace_id: str,
    span_id: str | None,
    parent_id: str | None,
    name: str | None,
    start_ns: int | None,
    service: str | None = None,
    error: str | None = None,
    file: str = "",
    line: int = 0,
    locate: Callable[[str], str] | None = None,
) -> SpanRecord:
    """A span from its OpenInference / GenAI attributes (flat dotted keys; document lists may be
    flat `retrieval.documents.{i}.document.*` keys or one list, as Phoenix stores them), or from
    the `haystack.*` tags of Haystack's own tracer (`ragaudit.io.spans.haystack`). `locate`
    says where in the input an attribute is, for the run key's problems ("attribute <name>")."""
    get = attributes.get
    run_key, problems = run_key_of(attributes)
    located = tuple((locate(name) if locate else f"attribute {name}", message) for name, message in problems)
    cited, cited_problem = from_app(get)
    common = dict(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=name,
        start_ns=start_ns,
        cited=cited,
        cited_problem=cited_problem,
        service=service if service is not None else get("service.name"),
        error=error,
        run_key=run_key,
        file=file,
        line=line,
        key_problems=located,
    )
    if get("openinference.span.kind") is None and is_haystack(attributes, name):
        return SpanRecord(**common, **read_haystack(attributes, name))  # type: ignore[arg-type]
    kind, operation = get("openinference.span.kind"), get("gen_ai.operation.name")
    if isinstance(kind, str):
        kind = kind.upper()
    else:
        kind = _GENAI_KINDS.get(operation) if isinstance(operation, str) else None
    # only a RETRIEVER span's documents are read, and a span of no declared kind that has some is one
    documents = documents_of(attributes) if kind is None or kind == RETRIEVER else None
    if kind is None and documents is not None:
        kind = RETRIEVER
    query = get("input.value") if get("input.mime_type") in _TEXT_MIME else None
    if query is None:
        query = get("gen_ai.retrieval.query.text")
    output = get("output.value") if get("output.mime_type") in _TEXT_MIME and kind not in NOT_ANSWERS else None
    llm_output = response = None
    if kind == LLM:
        response = from_output(get("output.value")) or from_contents(attributes, "llm.output_messages.0")
        llm_output = response.text if response is not None else _llm_output(attributes)
        if response is not None and response.documents is not None:  # an OpenAI file search retrieved them
            documents = response.documents
            query = query if query is not None else request_query(get("input.value"))
    return SpanRecord(
        **common,  # type: ignore[arg-type]
        kind=kind,
        query=query,
        output=output,
        llm_output=llm_output,
        llm_cited=response.cited if response is not None else None,
        sources=prompt_sources(attributes) if kind == LLM else (),
        documents=documents,
    )


def run_key_of(values: Mapping[str, Any]) -> tuple[dict[str, Any] | None, tuple[tuple[str, str], ...]]:
    """The run key among `values` (`ragaudit.qid` text, `ragaudit.variant` and `ragaudit.seed`
    integers), read as pandas and pyarrow store such columns: an integral float is an integer
    (a column of integers with gaps is float64), and null or NaN is absent. Returns the key (None
    when no attribute is there) and, for each value that is not what it should be, the attribute
    and "expected ..., found ...": such a value never keys a run, not even as a default."""
    key: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for name in RUN_KEY_ATTRIBUTES:
        value = values.get(name)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        if name == QID_ATTRIBUTE:
            if isinstance(value, str) and value:
                key[name] = value
            else:
                problems.append((name, f"expected the run's qid as text, found {describe(value)}"))
            continue
        number = _integer(value)
        if number is None:
            what = name.rpartition(".")[2]
            problems.append((name, f"expected the run's {what} as an integer, found {describe(value)}"))
        else:
            key[name] = number
    return key or None, tuple(problems)


def _integer(value: Any) -> int | None:
    """An integer, or a float that is one (2.0, as a float64 column holds 2); else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def _llm_output(attributes: dict[str, Any]) -> Any:
    """The text an LLM span answered: its last output message (OpenInference flat keys, or the
    list Phoenix stores), else its `output.value`, else its GenAI `gen_ai.output.messages`."""
    messages = attributes.get("llm.output_messages")
    if isinstance(messages, list) and messages:
        last = messages[-1]
        if isinstance(last, dict) and last.get("message.content") is not None:
            return last["message.content"]
    last_content = None
    for i in range(64):
        content = attributes.get(f"llm.output_messages.{i}.message.content")
        if content is None:
            content = _contents_text(attributes, f"llm.output_messages.{i}.message.contents")
        if content is None:
            break
        last_content = content
    if last_content is not None:
        return last_content
    if attributes.get("output.value") is not None:
        return attributes["output.value"]
    return _genai_output(attributes.get("gen_ai.output.messages"))


def _contents_text(attributes: dict[str, Any], prefix: str) -> str | None:
    """The text parts of a message written as contents (`<prefix>.{j}.message_content.type` "text"
    and `.text`, as the OpenInference Anthropic and OpenAI instrumentations write them), joined."""
    texts = []
    for j in range(256):
        kind = attributes.get(f"{prefix}.{j}.message_content.type")
        if kind is None:
            break
        text = attributes.get(f"{prefix}.{j}.message_content.text")
        if kind == "text" and isinstance(text, str):
            texts.append(text)
    return "".join(texts) if texts else None


def _genai_output(messages: Any) -> str | None:
    """The text parts of the last GenAI output message (`[{role, parts: [{type, content}]}]`,
    a JSON string or a list)."""
    if isinstance(messages, str):
        try:
            messages = orjson.loads(messages)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    parts = messages[-1].get("parts")
    texts = [
        p["content"]
        for p in (parts if isinstance(parts, list) else ())
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("content"), str)
    ]
    return "".join(texts) if texts else None


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


MAX_NS = 253_402_300_799_999_999_999  # 9999-12-31T23:59:59.999999999Z, the last time ISO 8601 writes


def iso_time(ns: int | None) -> str | None:
    """Nanoseconds since the epoch as an ISO 8601 UTC time (microseconds), or None (also for a
    time outside the years 1970 to 9999, which readers report)."""
    if ns is None or not 0 <= ns <= MAX_NS:
        return None
    global _last_second
    seconds, rest = divmod(ns, 1_000_000_000)
    cached = _last_second  # one tuple, read once: safe across threads
    if cached[0] != seconds:  # the spans of a stream share their seconds, mostly
        cached = _last_second = (
            seconds,
            datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"),
        )
    return f"{cached[1]}.{rest // 1000:06d}Z"


_last_second: tuple[int | None, str] = (None, "")


def ns_of_iso(text: str) -> int | None:
    """An ISO 8601 time as nanoseconds since the epoch (a zone-less time is UTC), or None when
    it is not one."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith(("Z", "z")) else text)
    except ValueError:
        return None
    return ns_of_datetime(moment)


def ns_of_datetime(moment: datetime) -> int:
    """A time (zone-less: UTC) as nanoseconds since the epoch, to the microsecond."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // _MICROSECOND * 1000
