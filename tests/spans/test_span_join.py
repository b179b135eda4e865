"""Joining the spans of a trace id (docs/reference.md §10) from a stream: which span gives the query, the
documents and the answer; traces without a RETRIEVER; the window that bounds memory."""

import itertools
import json
from datetime import datetime, timezone

import pytest
from helpers import invoke, otlp_line, otlp_request, rag_spans, span_recorder, write_phoenix

from ragaudit.checks.validation import validate_trace
from ragaudit.core.types import Trace
from ragaudit.io.jsonl import BadLine
from ragaudit.io.spans import read_traces
from ragaudit.io.spans.join import TraceJoiner
from ragaudit.io.spans.otlp import read_otlp
from ragaudit.io.stream import read_trace_file
from ragaudit.io.traces import dump_trace


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

    reader = read_traces("otlp", [path], window=4)
    items = list(reader)
    traces = [t for t in items if isinstance(t, Trace)]
    # A was joined from its retriever span alone when it fell out of the window (its question is
    # the retriever's input, it has no answer); its last two spans are late: described where they
    # stand, left out, and A is not written a second time
    assert sorted(t.query for t in traces) == ["question A", "question B", "question C"]
    assert len({t.qid for t in traces}) == 3 and not [b for b in items if isinstance(b, BadLine)]
    trace_a = next(t for t in traces if t.query == "question A")
    assert trace_a.answer is None and [p.snippet_id for p in trace_a.retrieved] == ["A-doc"]
    assert next(t for t in traces if t.query == "question B").answer.text == "answer B"
    assert reader.late == 2
    assert [(p.file, p.line, p.message) for p in reader.late_problems] == [
        (
            str(path),
            line,
            f"late span: expected the spans of trace {trace_a.qid} within 4 spans of each other, found span "
            f"{name!r} after the trace was written (left out; a larger --window joins it)",
        )
        for line, name in ((8, "llm"), (9, "rag"))
    ]


def test_a_span_far_beyond_the_window_never_makes_a_second_trace(tmp_path):
    provider, exporter = span_recorder()
    tracer = provider.get_tracer("app")
    rag_spans(tracer, "first", [{"id": "x1", "content": "x"}], "answer")
    for i in range(30):
        rag_spans(tracer, f"q{i}", [{"id": f"d{i}", "content": "x"}], "a")
    spans = exporter.get_finished_spans()
    first = spans[:3]  # retrieve, llm, rag
    # its LLM span and root first, then 30 other traces (far more than 4 x the window), then its
    # RETRIEVER span: the trace was joined without a retriever (skipped), and the retriever is late
    path = tmp_path / "late.jsonl"
    path.write_text("\n".join(one_span_lines([first[1], first[2], *spans[3:], first[0]])) + "\n")
    reader = read_traces("otlp", [path], window=2)
    traces = list(reader)
    trace_id = f"{first[0].context.trace_id:032x}"
    assert len(traces) == 30 and trace_id not in {t.qid for t in traces}
    assert len({t.qid for t in traces}) == 30
    assert (reader.skipped, reader.late) == (1, 1)
    assert reader.late_problems[0].line == 2 + 30 * 3 + 1 and "'retrieve'" in reader.late_problems[0].message


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


def test_traces_are_handed_on_once_the_window_has_passed(tmp_path):
    provider, exporter = span_recorder()
    tracer = provider.get_tracer("app")
    for i in range(50):
        rag_spans(tracer, f"q{i}", [{"id": f"d{i}", "content": "x"}], "a")
    spans = exporter.get_finished_spans()
    path = tmp_path / "many.jsonl"
    path.write_text("".join(otlp_line(spans[i : i + 3]) + "\n" for i in range(0, len(spans), 3)))
    reader = read_traces("otlp", [path], window=6)
    first = next(reader)
    # held until more than 6 spans are: the 7th span read hands on the first trace, not the file's end
    assert first.query == "q0" and reader.spans == 7
    assert [t.query for t in reader] == [f"q{i}" for i in range(1, 50)]


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


def two_service_trace():
    """One request across two services: the frontend's root CHAIN span and LLM span, and the
    search service's RETRIEVER span (with an EMBEDDING span inside it), as each one's SDK records
    them; (spans, what the trace must hold)."""
    front, front_spans = span_recorder("frontend")
    search, search_spans = span_recorder("search")
    app, svc = front.get_tracer("app"), search.get_tracer("svc")
    root = {"openinference.span.kind": "CHAIN", "input.value": "Which keys rotate?"}
    with app.start_as_current_span("rag", attributes=root) as span:
        with svc.start_as_current_span("search", attributes=docs("k1", "k2")) as retriever:
            with svc.start_as_current_span("embed", attributes={"openinference.span.kind": "EMBEDDING"}):
                pass
        llm = {"openinference.span.kind": "LLM", "output.value": "Hardware keys."}
        with app.start_as_current_span("llm", attributes=llm):
            pass
        span.set_attribute("output.value", "Hardware keys rotate yearly.")
    spans = [*front_spans.get_finished_spans(), *search_spans.get_finished_spans()]
    started = retriever.start_time
    expected = {
        "qid": f"{span.context.trace_id:032x}",
        "query": "Which keys rotate?",
        "retrieved": ["k1", "k2"],
        "answer": "Hardware keys rotate yearly.",  # the root's: the outermost text output
        "config": "frontend",  # the root's service
        "retriever_name": "search",
        "retrieved_at": datetime.fromtimestamp(started // 10**9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        + f".{started % 10**9 // 1000:06d}Z",
    }
    return spans, expected


def seen(trace: Trace) -> dict:
    return {
        "qid": trace.qid,
        "query": trace.query,
        "retrieved": [p.snippet_id for p in trace.retrieved],
        "answer": trace.answer.text,
        "config": trace.config,
        "retriever_name": trace.retriever_name,
        "retrieved_at": trace.retrieved_at,
    }


@pytest.mark.parametrize("layout", ["a line per span", "one line, a resource per span", "two files"])
def test_every_arrival_order_of_a_trace_across_services_joins_the_same_trace(tmp_path, layout):
    spans, expected = two_service_trace()
    assert len(spans) == 4 and len({s.resource.attributes["service.name"] for s in spans}) == 2
    written = set()
    for n, order in enumerate(itertools.permutations(spans)):
        if layout == "a line per span":
            paths = [tmp_path / f"{n}.jsonl"]
            paths[0].write_text("".join(otlp_line([s], hex_ids=True) + "\n" for s in order))
        elif layout == "one line, a resource per span":
            requests = [otlp_request([s]) for s in order]
            paths = [tmp_path / f"{n}.jsonl"]
            paths[0].write_text(json.dumps({"resourceSpans": [r["resourceSpans"][0] for r in requests]}) + "\n")
        else:
            paths = [tmp_path / f"{n}-a.jsonl", tmp_path / f"{n}-b.jsonl"]
            paths[0].write_text(otlp_line(order[:2]) + "\n")
            paths[1].write_text(otlp_line(order[2:]) + "\n")
        reader = read_traces("otlp", paths, window=3)
        (trace,) = list(reader)
        assert seen(trace) == expected, [s.name for s in order]
        assert (reader.late, reader.skipped, reader.bad) == (0, 0, 0)
        written.add(dump_trace(trace))
    assert len(written) == 1  # the same trace, byte for byte, whatever the order


def test_ingest_writes_a_trace_whose_root_span_came_first(tmp_path):
    spans, expected = two_service_trace()
    by_name = {s.name: s for s in spans}
    path = tmp_path / "root-first.jsonl"  # one service exporting [root, RETRIEVER, LLM], then the other
    path.write_text(otlp_line([by_name["rag"], by_name["search"], by_name["llm"]]) + "\n")
    path.write_text(path.read_text() + otlp_line([by_name["embed"]]) + "\n")
    out = tmp_path / "traces.jsonl"
    result = invoke("ingest", "otlp", path, "--out", out)
    assert result.exit_code == 0, result.output
    assert "4 spans, 1 traces written" in result.output
    (trace,) = read_trace_file(out)
    assert seen(trace) == expected
