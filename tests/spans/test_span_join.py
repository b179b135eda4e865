"""Joining the spans of a trace id (SPEC §10) from a stream: which span gives the query, the
documents and the answer; traces without a RETRIEVER; the window that bounds memory."""

import pytest

pytest.importorskip("opentelemetry.sdk")

from helpers import otlp_line, rag_spans, span_recorder, write_phoenix

from ragaudit.io.jsonl import BadLine
from ragaudit.spans import read_traces
from ragaudit.spans.join import TraceJoiner
from ragaudit.spans.otlp import read_otlp
from ragaudit.types import Trace
from ragaudit.validate import validate_trace


def docs(*ids: str) -> dict:
    attributes = {"openinference.span.kind": "RETRIEVER"}
    for i, snippet in enumerate(ids):
        attributes[f"retrieval.documents.{i}.document.id"] = snippet
        attributes[f"retrieval.documents.{i}.document.content"] = f"text of {snippet}"
    return attributes


def agent_spans():
    """An agent that retrieves, thinks, retrieves again through a wrapper, answers, and then
    retrieves follow-up suggestions."""
    provider, exporter = span_recorder("agent-svc")
    tracer = provider.get_tracer("app")
    root = {"openinference.span.kind": "CHAIN", "input.value": "Which keys rotate?"}
    with tracer.start_as_current_span("agent", attributes=root) as agent:
        plan = {"openinference.span.kind": "CHAIN", "input.value": '{"q": 1}', "input.mime_type": "application/json"}
        with tracer.start_as_current_span("plan", attributes=plan):
            pass
        with tracer.start_as_current_span("first-search", attributes=docs("a1", "a2")):
            pass
        with tracer.start_as_current_span(
            "think", attributes={"openinference.span.kind": "LLM", "output.value": "hmm"}
        ):
            pass
        with tracer.start_as_current_span("second-search", attributes=docs("b1", "b2", "b3")):
            inner = {"openinference.span.kind": "RETRIEVER", "input.value": "keys"}
            with tracer.start_as_current_span("second-search-inner", attributes=inner):
                pass
        answer = {"openinference.span.kind": "LLM", "output.value": "Hardware keys."}
        with tracer.start_as_current_span("answer", attributes=answer):
            pass
        with tracer.start_as_current_span("suggest", attributes=docs("c1")):
            pass
        agent.set_attribute("output.value", '{"answer": "Hardware keys."}')
        agent.set_attribute("output.mime_type", "application/json")
    return exporter.get_finished_spans()


def test_query_documents_and_answer_come_from_the_spans_the_spec_names(tmp_path):
    path = tmp_path / "agent.jsonl"
    path.write_text(otlp_line(agent_spans()) + "\n")
    (trace,) = list(read_traces("otlp", [path]))
    assert trace.query == "Which keys rotate?"  # the outermost CHAIN; the JSON one is no question
    # the last RETRIEVER before the answering LLM that carries documents (not its empty inner span,
    # not the one after the answer)
    assert [p.snippet_id for p in trace.retrieved] == ["b1", "b2", "b3"]
    assert trace.retriever_name == "second-search"
    # the root's output is JSON, not an answer: the outermost text output is the last LLM's
    assert trace.answer.text == "Hardware keys."
    assert trace.config == "agent-svc"


def test_a_failed_root_span_is_a_pipeline_error(tmp_path):
    from opentelemetry.trace import Status, StatusCode

    provider, exporter = span_recorder()
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("rag", attributes={"openinference.span.kind": "CHAIN"}) as root:
        with tracer.start_as_current_span("search", attributes=docs("x")):
            pass
        root.set_status(Status(StatusCode.ERROR, "LLM timed out"))
    path = tmp_path / "failed.jsonl"
    path.write_text(otlp_line(exporter.get_finished_spans()) + "\n")
    (trace,) = list(read_traces("otlp", [path]))
    assert trace.error == "LLM timed out"
    assert "pipeline_error" in {i.code for i in validate_trace(trace)}


def test_traces_without_a_retriever_are_counted_and_skipped(tmp_path):
    provider, exporter = span_recorder()
    tracer = provider.get_tracer("app")
    rag_spans(tracer, "q1", [{"id": "s1", "content": "one"}], "a1")
    with tracer.start_as_current_span("chat", attributes={"openinference.span.kind": "LLM", "output.value": "hi"}):
        pass
    rag_spans(tracer, "q2", [{"id": "s2", "content": "two"}], "a2")
    path = tmp_path / "mixed.jsonl"
    path.write_text(otlp_line(exporter.get_finished_spans()) + "\n")
    reader = read_traces("otlp", [path])
    traces = list(reader)
    assert [t.query for t in traces] == ["q1", "q2"]
    assert (reader.spans, reader.traces, reader.skipped) == (7, 2, 1)


def one_span_lines(spans) -> list[str]:
    return [otlp_line([s]) for s in spans]


def three_traces():
    provider, exporter = span_recorder()
    tracer = provider.get_tracer("app")
    for name in "ABC":
        rag_spans(tracer, f"question {name}", [{"id": f"{name}-doc", "content": name}], f"answer {name}")
    spans = exporter.get_finished_spans()  # per trace: retrieve, llm, rag (the root ends last)
    return [spans[i : i + 3] for i in (0, 3, 6)]


def test_spans_far_apart_join_within_the_window_and_are_late_beyond_it(tmp_path):
    a, b, c = three_traces()
    # A's retriever first, then all of B and C, then the rest of A: A is 7 spans from its root
    path = tmp_path / "scattered.jsonl"
    path.write_text("\n".join(one_span_lines([a[0], *b, *c, a[1], a[2]])) + "\n")
    joined = {t.query: t for t in read_traces("otlp", [path], window=20)}
    assert joined["question A"].answer.text == "answer A" and len(joined) == 3

    items = list(read_traces("otlp", [path], window=4))
    traces = {t.query: t for t in items if isinstance(t, Trace)}
    late = [(b.line, b.message) for b in items if isinstance(b, BadLine)]
    # A was joined from its retriever span alone when it fell out of the window (its question is
    # the retriever's input, it has no answer); its last two spans are reported where they stand
    assert set(traces) == {"question A", "question B", "question C"}
    assert traces["question A"].answer is None and [p.snippet_id for p in traces["question A"].retrieved] == ["A-doc"]
    assert traces["question B"].answer.text == "answer B"
    trace_a = f"{a[0].context.trace_id:032x}"
    assert late == [
        (
            line,
            f"late span: expected the spans of trace {trace_a} within 4 spans of each other and before it "
            f"was joined, found span {name!r} after it",
        )
        for line, name in ((8, "llm"), (9, "rag"))
    ]


def test_memory_is_bounded_by_the_window(tmp_path):
    provider, exporter = span_recorder()
    tracer = provider.get_tracer("app")
    for i in range(300):
        rag_spans(tracer, f"q{i}", [{"id": f"d{i}", "content": "x"}], "a")
    spans = exporter.get_finished_spans()
    # two traces interleaved span by span, roots held back: no trace closes by its root in time
    order = [s for pair in zip(spans[0::6], spans[3::6]) for s in pair]
    order += [s for i in range(0, len(spans), 3) for s in spans[i + 1 : i + 3]]
    path = tmp_path / "interleaved.jsonl"
    path.write_text("\n".join(one_span_lines(order)) + "\n")
    joiner = TraceJoiner(window=10)
    most = 0
    for record in read_otlp(path):
        list(joiner.add(record))
        most = max(most, joiner.held)
    assert most == 10


def test_traces_are_handed_on_as_soon_as_their_root_ends(tmp_path):
    provider, exporter = span_recorder()
    tracer = provider.get_tracer("app")
    for i in range(50):
        rag_spans(tracer, f"q{i}", [{"id": f"d{i}", "content": "x"}], "a")
    spans = exporter.get_finished_spans()
    path = tmp_path / "many.jsonl"
    path.write_text("".join(otlp_line(spans[i : i + 3]) + "\n" for i in range(0, len(spans), 3)))
    reader = read_traces("otlp", [path])
    first = next(reader)
    assert first.query == "q0" and reader.spans == 3  # one line read, not the file


def test_phoenix_rows_root_first_still_join(tmp_path):
    """Phoenix rows sorted by start time put a root before its children: no trace is closed by
    its root there, so the order does not matter."""
    a, b, c = three_traces()
    spans = sorted([*a, *b, *c], key=lambda s: s.start_time)
    path = write_phoenix(spans, tmp_path / "spans.parquet")
    traces = list(read_traces("phoenix", [path]))
    assert sorted((t.query, t.answer.text, t.retrieved[0].snippet_id) for t in traces) == [
        (f"question {n}", f"answer {n}", f"{n}-doc") for n in "ABC"
    ]
    assert all(t.retrieved_at for t in traces)
