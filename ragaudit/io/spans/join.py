"""Spans of one trace id joined into one ragaudit trace (docs/reference.md §10), from a stream.

Joining, per OpenTelemetry trace id that holds a RETRIEVER span:

* `query`: the text `input.value` of the outermost CHAIN span that has one, else of the chosen
  RETRIEVER span (GenAI: `gen_ai.retrieval.query.text`);
* `retrieved`: the documents of the last RETRIEVER span (by start time) that carries documents
  and starts before the last LLM span (the one that answers); with no such span, the last
  RETRIEVER span itself (which may hold no documents: an empty retrieval stays empty). An LLM
  span whose response holds an OpenAI file search's results counts as a RETRIEVER span;
* `answer.text`: the text `output.value` of the outermost span that has one (RETRIEVER,
  EMBEDDING and RERANKER spans output documents, vectors and scores, and JSON outputs are
  structures, not answers), else the last LLM span's output message;
* `answer.segments`: from citations that travel as data (`ragaudit.io.spans.cited`), else none, and
  the answer's markers say what it cites when the trace is parsed;
* `retrieved_at`: that RETRIEVER span's start time; `retriever_name`: its name;
* `config`: the given name, else the service name; `error`: the outermost span's error status;
* run key: `qid` = the trace id, `variant` 0, `seed` 0, unless a span carries the attributes
  `ragaudit.qid`, `ragaudit.variant`, `ragaudit.seed` (the outermost span that has them wins),
  so that spans of a pipeline run over a gold set line up with its questions. A trace with a run
  key value that is not one (`record.run_key_of`) is not joined: each such value is a located
  BadLine instead, since a default key would file the run under another run's key. A second
  trace keyed by attributes under a run key (config, qid, variant, seed) already written is a
  BadLine naming both, never a run that replaces or shadows the first. Given a `period` (as
  `audit-log` gives its time window), the key also holds the period of the trace's
  `retrieved_at`: the same gold-tagged questions asked on two days are two sets of runs.

"Outermost" means fewest ancestors among the trace's spans (a span whose parent is not among
them counts as a root); of equal depth, the query comes from the earliest and the answer from the
latest span. Spans that start at the same time are ordered by span id, so the trace a set of spans
makes never depends on the order they arrive in.

Streaming. A trace's spans may arrive in any order, across lines, files and services (a root span
first, as when the retriever is another service whose exporter flushes later): no span says that
its trace is complete, so a trace is joined once `window` spans of other traces have arrived since
its last span, when more than `window` spans are held (the trace idle longest goes first), and at
the end of the input, which completes every trace. Memory is bounded by the window, plus the ids
of the traces written (a few dozen bytes each) and the run keys of those keyed by attributes
(a gold-set run's, never plain production traffic's). A trace id is written once: a span of a trace
already joined is a late span, reported (`late`, located) and left out, never a second trace.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

from ragaudit.core.errors import Problem
from ragaudit.core.markers import ALL_FORMS
from ragaudit.core.types import TRACE_SCHEMA, FieldError, Trace
from ragaudit.io.jsonl import BadLine
from ragaudit.io.spans.cited import Retrieved, cited_segments, source_segments
from ragaudit.io.spans.documents import metadata_of, payload_of
from ragaudit.io.spans.record import CHAIN, LLM, RETRIEVER, SpanRecord, iso_time
from ragaudit.io.traces import parse_trace

DEFAULT_WINDOW = 20_000
LATE_SHOWN = 100  # late spans described one by one; the rest are counted


class TraceJoiner:
    """Feed spans with `add`, then `finish`; both return the traces ready. `skipped` counts trace
    ids joined without a RETRIEVER span; `late` describes (the first LATE_SHOWN) and `late_spans`
    counts the spans that came after their trace was joined, left out."""

    def __init__(
        self,
        *,
        config_name: str | None = None,
        window: int = DEFAULT_WINDOW,
        markers: frozenset[str] = ALL_FORMS,
        period: Callable[[str | None], str] | None = None,
    ):
        if window < 1:
            raise ValueError(f"The 'window' parameter must be an int in [1, inf). Got {window} instead.")
        self.config_name, self.window, self.markers, self.period = config_name, window, markers, period
        self.skipped = self.late_spans = 0
        self.late: list[Problem] = []
        self._held: OrderedDict[str, list[SpanRecord]] = OrderedDict()  # least recently active first
        self._last: dict[str, int] = {}
        self._count = self._size = 0  # spans seen, spans held
        self._joined: set[int | str] = set()  # every joined trace id, packed (`_packed`)
        # run key (pipeline, qid, variant, seed, period) -> where its trace is, of traces keyed by attributes
        self._keys: dict[tuple[str | None, str, int, int, str | None], str | None] = {}

    def add(self, span: SpanRecord) -> list[Trace | BadLine]:
        """The traces this span pushes out of the window."""
        trace_id = span.trace_id
        self._count += 1
        if trace_id not in self._held and _packed(trace_id) in self._joined:
            self.late_spans += 1
            if len(self.late) < LATE_SHOWN:
                self.late.append(
                    Problem(
                        span.file,
                        f"late span: expected the spans of trace {trace_id} within {self.window} spans of each "
                        f"other, found span {span.name or span.span_id!r} after the trace was written (left out; "
                        "a larger --window joins it)",
                        span.line,
                    )
                )
            return []
        held = self._held
        spans = held.get(trace_id)
        if spans is None:
            spans = held[trace_id] = []
        else:
            held.move_to_end(trace_id)
        spans.append(span)
        self._size += 1
        self._last[trace_id] = self._count
        ready: list[Trace | BadLine] = []
        while held:
            oldest = next(iter(held))
            if self._size <= self.window and self._count - self._last[oldest] <= self.window:
                break
            self._join(oldest, ready)
        return ready

    @property
    def held(self) -> int:
        """Spans of unjoined traces held now."""
        return self._size

    def finish(self) -> list[Trace | BadLine]:
        """The traces still held, joined."""
        ready: list[Trace | BadLine] = []
        while self._held:
            self._join(next(iter(self._held)), ready)
        return ready

    def _join(self, trace_id: str, ready: list[Trace | BadLine]) -> None:
        spans = self._held.pop(trace_id)
        self._size -= len(spans)
        del self._last[trace_id]
        self._joined.add(_packed(trace_id))
        unkeyed = [
            BadLine(s.file, s.line, f"{where}: {found}; trace {trace_id} left out (its run key is unknown)")
            for s in spans
            for where, found in s.key_problems
        ]
        if unkeyed:
            ready.extend(unkeyed)
            return
        trace = join_spans(trace_id, spans, config_name=self.config_name, markers=self.markers)
        if trace is None:
            self.skipped += 1
        elif isinstance(trace, Trace) and any(s.run_key for s in spans):
            ready.append(self._keyed(trace))
        else:
            ready.append(trace)

    def _keyed(self, trace: Trace) -> Trace | BadLine:
        """The trace, or a BadLine naming both when another trace already had its run key."""
        period = None if self.period is None else self.period(trace.retrieved_at)
        key = (trace.config, trace.qid, trace.variant, trace.seed, period)
        first = self._keys.get(key)
        if first is None:
            self._keys[key] = trace.file if trace.line is None else f"{trace.file}:{trace.line}"
            return trace
        pipeline = repr(trace.config) if trace.config else "(unnamed)"
        fields, within = (
            ("pipeline, qid, variant, seed", "")
            if period is None
            else ("pipeline, qid, variant, seed, window", f" in window {period}")
        )
        return BadLine(
            trace.file or "",
            trace.line or 0,
            f"expected one trace per run key ({fields}), found pipeline {pipeline} "
            f"qid {trace.qid!r} variant {trace.variant} seed {trace.seed} again{within} (first at {first}); "
            "this trace is left out",
        )


def _packed(trace_id: str) -> int | str:
    """A trace id as it is remembered: lowercase hex (OTLP's ids) as an int that keeps its length,
    in about half the memory of the text; any other id as it is."""
    if 0 < len(trace_id) <= 32 and not trace_id.strip(_HEX):
        return int(trace_id, 16) << 6 | len(trace_id)
    return trace_id


_HEX = "0123456789abcdef"


def join_spans(
    trace_id: str, spans: list[SpanRecord], *, config_name: str | None = None, markers: frozenset[str] = ALL_FORMS
) -> Trace | BadLine | None:
    """The trace of one trace id's spans, or None when none of them is a RETRIEVER span."""
    # a RETRIEVER span, or an LLM span whose response holds what it retrieved (an OpenAI file search)
    retrievers = [s for s in spans if s.kind == RETRIEVER or s.documents is not None]
    if not retrievers:
        return None
    llms = [s for s in spans if s.kind == LLM]
    answering = _last(llms) if llms else None
    carrying = [
        r for r in retrievers if r.documents is not None and (answering is None or _start(r) <= _start(answering))
    ]
    retriever = _last(carrying or retrievers)
    # outermost first; of equal depth, the earlier first (the question comes in early, and the
    # answer goes out late: the last of the outermost spans that have one)
    depths = _depths(spans)
    order = [s for *_, s in sorted(zip(depths, map(_start, spans), map(_span_id, spans), range(len(spans)), spans))]
    depth = dict(zip(map(id, spans), depths))
    query = next((s.query for s in order if s.kind == CHAIN and s.query is not None), retriever.query)
    answers = [s for s in order if s.output is not None]
    if answers:
        outermost = depth[id(answers[0])]
        answer = [s for s in answers if depth[id(s)] == outermost][-1].output
    else:
        answer = answering.llm_output if answering else None
    run_key = next((s.run_key for s in order if s.run_key), None) or {}
    service = next((s.service for s in order if s.service is not None), None)
    error = order[0].error

    notes: list[FieldError] = []
    retrieved = [payload_of(d, i, notes) for i, d in enumerate(retriever.documents or ())]
    answer, segments = _cited(order, llms, answering, answer, retriever, retrieved, notes, markers)
    obj = {
        "schema": TRACE_SCHEMA,
        "qid": run_key.get("ragaudit.qid", trace_id),
        "variant": run_key.get("ragaudit.variant", 0),
        "seed": run_key.get("ragaudit.seed", 0),
        "query": query,
        "config": config_name if config_name is not None else service,
        "retriever_name": retriever.name,
        "retrieved_at": iso_time(retriever.start_ns),
        "retrieved": retrieved,
        "answer": None if answer is None else {"text": answer, "segments": segments},
        "error": error,
        "source": "spans",
    }
    # every value came through a reader that replaced what JSON cannot hold, so no scrub here
    return parse_trace(obj, file=retriever.file, line=retriever.line, markers=markers, notes=tuple(notes))


def _cited(
    order: list[SpanRecord],
    llms: list[SpanRecord],
    answering: SpanRecord | None,
    answer: str | None,
    retriever: SpanRecord,
    retrieved: list[dict[str, Any]],
    notes: list[FieldError],
    markers: frozenset[str],
) -> tuple[str | None, list[dict[str, Any]] | None]:
    """The answer and its segments from structured citations (`ragaudit.io.spans.cited`): the app's
    attributes (the outermost span's), else the answering LLM's response's (else the last LLM
    span's that has some), else the "Source k:" chunks of the LLM prompts; None: the answer's
    markers say what it cites, when the trace is parsed."""
    notes.extend(s.cited_problem for s in order if s.cited_problem is not None)
    cited = next((s.cited for s in order if s.cited is not None), None)
    if cited is None and answering is not None:
        cited = answering.llm_cited or next(
            (s.llm_cited for s in sorted(llms, key=_start, reverse=True) if s.llm_cited is not None), None
        )
    if cited is None and not any(s.sources for s in llms):
        return answer, None
    table = Retrieved(retrieved, list(retriever.documents or ()), metadata_of)
    if cited is not None:
        text = answer if answer is not None else cited.text
        return text, cited_segments(cited, text, table)
    sources: dict[int, str] = {}
    for span in sorted(llms, key=_start):
        for k, chunk in span.sources:
            sources.setdefault(k, chunk)
    return answer, source_segments(sources, answer, table, markers) if answer else None


def _start(span: SpanRecord) -> int:
    return span.start_ns if span.start_ns is not None else -1


def _span_id(span: SpanRecord) -> str:
    return span.span_id or ""


def _last(spans: list[SpanRecord]) -> SpanRecord:
    """The span that starts last (of equal starts, the greatest span id, then the last to arrive);
    `spans` is not empty."""
    return max(enumerate(spans), key=lambda pair: (_start(pair[1]), _span_id(pair[1]), pair[0]))[1]


def _depths(spans: list[SpanRecord]) -> list[int]:
    """Each span's number of ancestors among `spans` (a parent not among them ends the count)."""
    parents = {s.span_id: s.parent_id for s in spans if s.span_id}
    depth_of: dict[str, int] = {}
    out = []
    for span in spans:
        chain: list[str] = []
        node = span.span_id
        while node in parents and node not in depth_of and node not in chain:  # a cycle stops the walk
            chain.append(node)
            node = parents[node]
        base = depth_of.get(node, -1) if node else -1
        for link in reversed(chain):
            base += 1
            depth_of[link] = base
        out.append(depth_of[span.span_id] if span.span_id else 0)
    return out
