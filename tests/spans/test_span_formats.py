"""Phoenix and Langfuse exports at their edges: rows and observations that are not what the format
says are located, the rest is read; Langfuse's shapes of documents and answers."""

import json

import pytest

from ragaudit.core.errors import InputError
from ragaudit.core.types import Trace
from ragaudit.io.jsonl import BadLine
from ragaudit.io.spans import read_traces


def phoenix_row(trace_id: str, span_id: str, parent: str | None, kind: str, **attributes) -> dict:
    return {
        "name": kind.lower(),
        "span_kind": kind,
        "parent_id": parent,
        "start_time": 1_795_000_000_000,  # epoch milliseconds, as pandas writes them
        "status_code": "OK",
        "context.trace_id": trace_id,
        "context.span_id": span_id,
        **{f"attributes.{k}": v for k, v in attributes.items()},
    }


def test_phoenix_rows_that_are_not_spans_are_located(tmp_path):
    documents = [{"document.id": "d1", "document.content": "one", "document.metadata": {"doc_id": "x"}}]
    rows = [
        phoenix_row("t1", "s1", None, "CHAIN", **{"input.value": "q", "output.value": "a"}),
        {"context.span_id": "s9", "span_kind": "LLM"},
        "a string",
        {**phoenix_row("t1", "s2", "s1", "RETRIEVER", **{"retrieval.documents": documents}), "start_time": "soon"},
    ]
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = list(read_traces("phoenix", [path]))
    assert [(b.line, b.path, b.message) for b in items if isinstance(b, BadLine)] == [
        (2, "$", "expected a context.trace_id, found null"),
        (3, "$", "expected a span row object, found string 'a string'"),
        (
            4,
            "$.start_time",
            "expected a start_time (a timestamp, ISO 8601 text or epoch milliseconds), found string 'soon'",
        ),
    ]
    (trace,) = [t for t in items if isinstance(t, Trace)]
    assert (trace.qid, trace.query, trace.answer.text, trace.retrieved_at) == ("t1", "q", "a", None)
    assert [(p.snippet_id, p.text, p.doc_id) for p in trace.retrieved] == [("d1", "one", "x")]


def test_an_unreadable_parquet_file_is_an_input_problem_and_the_others_are_read(tmp_path):
    path = tmp_path / "spans.parquet"
    path.write_bytes(b"PAR1" + b"\0" * 64)
    good = tmp_path / "spans.jsonl"
    good.write_text(json.dumps(phoenix_row("t1", "r", None, "RETRIEVER", **{"input.value": "q"})) + "\n")
    reader = read_traces("phoenix", [path, good])
    assert [t.qid for t in reader] == ["t1"]
    (problem,) = reader.unreadable
    assert problem.file == str(path) and "expected a Phoenix spans parquet file" in problem.message
    with pytest.raises(InputError, match="no such file"):  # an input that does not open: nothing is read
        list(read_traces("phoenix", [good, tmp_path / "missing.parquet"]))


def observation(obs_id: str, kind: str, parent: str | None = None, **fields) -> dict:
    return {
        "id": obs_id,
        "traceId": "lf-trace-1",
        "parentObservationId": parent,
        "type": kind,
        "name": obs_id,
        "startTime": f"2026-11-20T10:00:0{len(obs_id)}.250Z",
        **fields,
    }


def test_langfuse_langchain_documents_and_a_generation_answer(tmp_path):
    documents = [
        {
            "page_content": "Keys rotate yearly.",
            "metadata": {"source": "kb/keys.md", "start_index": 12},
            "type": "Document",
        },
        {
            "page_content": "Passwords rotate.",
            "metadata": {"source": "kb/pw.md", "start_index": -1},
            "type": "Document",
        },
    ]
    observations = [
        observation("r", "SPAN", input={"question": "Which keys rotate?"}, metadata={"ragaudit.qid": "KEYS-1"}),
        observation("ret", "SPAN", "r", input="Which keys rotate?", output=documents),
        observation("gen", "GENERATION", "r", output={"role": "assistant", "content": "Hardware keys."}),
    ]
    path = tmp_path / "observations.json"
    path.write_text(json.dumps(observations))
    (trace,) = list(read_traces("langfuse", [path]))
    assert (trace.qid, trace.query, trace.answer.text) == ("KEYS-1", "Which keys rotate?", "Hardware keys.")
    assert trace.retrieved_at == "2026-11-20T10:00:03.250000Z"
    first, second = trace.retrieved
    assert (first.text, first.source_url, first.offsets.start, first.offsets.end) == (
        "Keys rotate yearly.",
        "kb/keys.md",
        12,
        12 + len("Keys rotate yearly."),
    )
    assert second.offsets is None  # LangChain's -1: the chunk was not found, no offsets
    assert first.doc_id is None and first.snippet_id is None  # never made up from the source


def test_langfuse_defects_are_located_and_levels_become_errors(tmp_path):
    page = {
        "data": [
            observation("r", "CHAIN", input="q", level="ERROR", statusMessage="rate limited"),
            {"id": "x", "type": "SPAN"},
            observation("ret", "RETRIEVER", "r", output={"documents": [{"id": "d", "score": 0.5}]}, startTime=7),
        ]
    }
    path = tmp_path / "page.json"
    path.write_text(json.dumps(page, indent=2))
    items = list(read_traces("langfuse", [path]))
    assert [(b.line, b.path, b.message) for b in items if isinstance(b, BadLine)] == [
        (1, "$.data[1].traceId", "expected an observation with a traceId string, found none"),
        (1, "$.data[2].startTime", "expected startTime as ISO 8601 text, found number 7"),
    ]
    (trace,) = [t for t in items if isinstance(t, Trace)]
    assert trace.error == "rate limited" and trace.retrieved_at is None
    assert [(p.snippet_id, p.score_raw, p.text) for p in trace.retrieved] == [("d", 0.5, None)]
