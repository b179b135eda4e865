"""Citations that travel as data in spans are the answer's citations; markers only without them
(docs/production.md, "Citations in spans").

The spans are made by the real libraries, no network: the Anthropic and OpenAI SDKs under the
OpenInference instrumentations (openinference-instrumentation-anthropic / -openai), their HTTP
transport an `httpx2.MockTransport` answering with a response in the shape the Messages API and
the Responses API return; a LlamaIndex CitationQueryEngine under OpenInference's LlamaIndex
instrumentation; and an app's own spans with the `ragaudit.answer.*` attributes. Expected
citations are written out from the requests and responses below, never read from ragaudit."""

import hashlib
import json

import pytest
from helpers import (
    DEMO,
    invoke,
    langfuse_observations,
    otlp_line,
    span_recorder,
    write_phoenix,
)

from ragaudit.core.types import Trace
from ragaudit.io.corpus import load_corpus
from ragaudit.io.spans import read_traces

pytestmark = [
    # the LlamaIndex instrumentation calls pydantic's old `json()`; pandas announces a change of to_json's dates
    pytest.mark.filterwarnings("ignore:The `json` method is deprecated"),
    pytest.mark.filterwarnings("ignore:The default formatting of datetime"),
]

CORPUS = DEMO / "corpus"
KEYS, BACKUPS, RETENTION = (
    ("key-management", "key-management/hardware-keys"),
    ("backups", "backups-and-disaster-recovery/backup-retention"),
    ("data-retention", "data-retention/customer-data-retention"),
)
QUESTION = "How long are daily backups kept, and when are customer records deleted?"
# the answer cites the first document sent by its markers, and the others by its citations
FIRST = "Daily database backups are retained for 35 days [1]."
SECOND = " Customer records are deleted after the contract ends [1]."
THIRD = " Ask the Security team about anything else [1]."


def section(doc_id: str, section_id: str) -> dict:
    """A retrieved document as docs/production.md puts it into a span: the section's text, its id
    `doc_id#section_id`, and its payload fields in the metadata."""
    doc = load_corpus(CORPUS)[doc_id]
    part = next(s for s in doc.sections if s.section_id == section_id)
    return {
        "id": f"{doc_id}#{section_id}",
        "content": doc.text[part.start : part.end],
        "score": 0.5,
        "metadata": {
            "doc_id": doc_id,
            "section_id": section_id,
            "start_char_idx": part.start,
            "end_char_idx": part.end,
            "rev": doc.rev,
        },
    }


DOCUMENTS = [section(*KEYS), section(*BACKUPS), section(*RETENTION)]
IDS = [d["id"] for d in DOCUMENTS]


def retriever_attributes(documents: list[dict]) -> dict:
    attributes = {"openinference.span.kind": "RETRIEVER", "input.value": QUESTION}
    for i, d in enumerate(documents):
        attributes |= {
            f"retrieval.documents.{i}.document.id": d["id"],
            f"retrieval.documents.{i}.document.content": d["content"],
            f"retrieval.documents.{i}.document.score": d["score"],
            f"retrieval.documents.{i}.document.metadata": json.dumps(d["metadata"]),
        }
    return attributes


def mock_client(sdk, body: dict):
    """An SDK client whose HTTP transport answers every request with `body`."""
    import httpx2

    transport = httpx2.MockTransport(lambda request: httpx2.Response(200, json=body))
    return sdk(api_key="test-key", http_client=httpx2.Client(transport=transport))


def message(*blocks: dict) -> dict:
    """A Messages API response body."""
    return {
        "id": "msg_01XbN5gq2R7v",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": list(blocks),
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 2412, "output_tokens": 96},
    }


def search_result(index: int, source: str, cited_text: str) -> dict:
    return {
        "type": "search_result_location",
        "cited_text": cited_text,
        "search_result_index": index,
        "source": source,
        "title": "Handbook",
        "start_block_index": 0,
        "end_block_index": 1,
    }


CITED = message(
    # cites the second search result by its source, which is the document's id
    {"type": "text", "text": FIRST, "citations": [search_result(1, IDS[1], "Daily database backups")]},
    # cites the third by its position: its source names no retrieved document
    {"type": "text", "text": SECOND, "citations": [search_result(2, "data-retention.md", "Customer records")]},
    {"type": "text", "text": THIRD},  # cites nothing, whatever its marker says
)
UNCITED = message({"type": "text", "text": FIRST + SECOND})


def anthropic_spans(body: dict):
    """An app's request: a CHAIN span over its RETRIEVER span and the instrumented Messages API
    call, which sends the retrieved documents as search results; the finished spans."""
    import anthropic
    from openinference.instrumentation.anthropic import AnthropicInstrumentor

    provider, exporter = span_recorder()
    tracer = provider.get_tracer("handbook-app")
    client = mock_client(anthropic.Anthropic, body)
    results = [
        {
            "type": "search_result",
            "source": d["id"],
            "title": d["id"],
            "content": [{"type": "text", "text": d["content"]}],
            "citations": {"enabled": True},
        }
        for d in DOCUMENTS
    ]
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with tracer.start_as_current_span(
            "rag", attributes={"openinference.span.kind": "CHAIN", "input.value": QUESTION}
        ) as root:
            with tracer.start_as_current_span("retrieve", attributes=retriever_attributes(DOCUMENTS)):
                pass
            reply = client.messages.create(
                model="claude-sonnet-4-5-20250929",
                max_tokens=512,
                messages=[{"role": "user", "content": [*results, {"type": "text", "text": QUESTION}]}],
            )
            root.set_attribute("output.value", "".join(b.text for b in reply.content if b.type == "text"))
    finally:
        instrumentor.uninstrument()
    return exporter.get_finished_spans()


def write(spans, fmt: str, tmp_path):
    if fmt == "otlp":
        path = tmp_path / "spans.jsonl"
        path.write_text(otlp_line(spans) + "\n")
    elif fmt == "phoenix":
        path = write_phoenix(spans, tmp_path / "spans.parquet")
    else:
        path = tmp_path / "observations.json"
        path.write_text(json.dumps(langfuse_observations(spans)))
    return path


def only_trace(path, fmt: str) -> Trace:
    (trace,) = list(read_traces(fmt, [path]))
    assert isinstance(trace, Trace), trace
    return trace


def cited(trace: Trace) -> list[tuple[str, list[str]]]:
    return [(s.text.strip(), list(s.citations)) for s in trace.answer.segments]


@pytest.mark.parametrize("fmt", ["otlp", "phoenix", "langfuse"])
def test_anthropic_citations_in_the_llm_span_win_over_the_markers(tmp_path, fmt):
    trace = only_trace(write(anthropic_spans(CITED), fmt, tmp_path), fmt)
    assert trace.answer.text == FIRST + SECOND + THIRD
    assert [d.snippet_id for d in trace.retrieved] == IDS
    assert cited(trace) == [(FIRST, [IDS[1]]), (SECOND.strip(), [IDS[2]]), (THIRD.strip(), [])]


@pytest.mark.parametrize("fmt", ["otlp", "langfuse"])
def test_an_anthropic_answer_without_citations_is_read_by_its_markers(tmp_path, fmt):
    trace = only_trace(write(anthropic_spans(UNCITED), fmt, tmp_path), fmt)
    assert cited(trace) == [(FIRST, [IDS[0]]), (SECOND.strip(), [IDS[0]])]


def audited_segments(tmp_path, path) -> list[list[str]]:
    """The citations of the answer's segments in `audit-log`'s example of the one trace."""
    (tmp_path / "audit.toml").write_text('[embedder]\nmodel = "hashing"\n')
    out = tmp_path / "log"
    result = invoke(
        "audit-log", path, "--from", "otlp", "--corpus", CORPUS, "--config", tmp_path / "audit.toml", "--out", out
    )
    assert result.exit_code in (0, 1) and "error:" not in result.stderr, result.output
    (example,) = {e["id"]: e for e in json.loads((out / "audit_log.json").read_text())["examples"]}.values()
    return [s["citations"] for s in example["segments"]]


def test_ingest_and_audit_log_give_the_structured_citations(tmp_path):
    path = write(anthropic_spans(CITED), "otlp", tmp_path)
    result = invoke("ingest", "otlp", path, "--out", tmp_path / "traces.jsonl")
    assert result.exit_code == 0, result.output
    (written,) = [json.loads(line) for line in (tmp_path / "traces.jsonl").read_text().splitlines()]
    assert [s["citations"] for s in written["answer"]["segments"]] == [[IDS[1]], [IDS[2]], []]
    assert audited_segments(tmp_path, path) == [[IDS[1]], [IDS[2]], []]


def test_ingest_and_audit_log_fall_back_to_the_markers(tmp_path):
    path = write(anthropic_spans(UNCITED), "otlp", tmp_path)
    result = invoke("ingest", "otlp", path, "--out", tmp_path / "traces.jsonl")
    assert result.exit_code == 0, result.output
    (written,) = [json.loads(line) for line in (tmp_path / "traces.jsonl").read_text().splitlines()]
    assert written["answer"]["text"] == FIRST + SECOND  # its markers are read again from the text
    assert audited_segments(tmp_path, path) == [[IDS[0]], [IDS[0]]]


# ---- OpenAI: a Responses API file search, its results the retrieval ---------------------------

FILE_SEARCH = [  # (file id, file name, document)
    ("file-KEYS", "key-management.md", DOCUMENTS[0]),
    ("file-BACKUPS", "backups.md", DOCUMENTS[1]),
    ("file-BACKUPS", "backups.md", section("backups", "backups-and-disaster-recovery/restore-testing")),
]


def chunk_id(doc_id: str, text: str) -> str:
    return f"{doc_id}#{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def openai_spans(annotations: list[dict]):
    import openai
    from openinference.instrumentation.openai import OpenAIInstrumentor

    text = FIRST + SECOND
    body = {
        "id": "resp_68b1",
        "object": "response",
        "created_at": 1767225600,
        "status": "completed",
        "model": "gpt-4.1-2025-04-14",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [{"type": "file_search", "vector_store_ids": ["vs_handbook"]}],
        "output": [
            {
                "type": "file_search_call",
                "id": "fs_68b1",
                "status": "completed",
                "queries": [QUESTION],
                "results": [
                    {
                        "file_id": f,
                        "filename": n,
                        "score": 0.8,
                        "text": d["content"],
                        "attributes": {"doc_id": d["metadata"]["doc_id"]},
                    }
                    for f, n, d in FILE_SEARCH
                ],
            },
            {
                "type": "message",
                "id": "msg_68b1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": annotations}],
            },
        ],
        "usage": {
            "input_tokens": 1200,
            "output_tokens": 40,
            "total_tokens": 1240,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    provider, exporter = span_recorder()
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        mock_client(openai.OpenAI, body).responses.create(
            model="gpt-4.1",
            input=QUESTION,
            tools=[{"type": "file_search", "vector_store_ids": ["vs_handbook"]}],
            include=["file_search_call.results"],
        )
    finally:
        instrumentor.uninstrument()
    return exporter.get_finished_spans()


def test_openai_file_citations_cite_every_retrieved_chunk_of_the_file(tmp_path):
    # the first sentence's marker names the first result; its annotation names the backups file
    at = len(FIRST)
    notes = [{"type": "file_citation", "file_id": "file-BACKUPS", "filename": "backups.md", "index": at}]
    trace = only_trace(write(openai_spans(notes), "otlp", tmp_path), "otlp")
    chunks = [chunk_id(d["metadata"]["doc_id"], d["content"]) for _, _, d in FILE_SEARCH]
    assert trace.query == QUESTION and trace.answer.text == FIRST + SECOND
    assert [p.snippet_id for p in trace.retrieved] == chunks
    assert cited(trace) == [(FIRST, chunks[1:]), (SECOND.strip(), [])]


def test_openai_answer_without_annotations_is_read_by_its_markers(tmp_path):
    trace = only_trace(write(openai_spans([]), "otlp", tmp_path), "otlp")
    first = chunk_id("key-management", DOCUMENTS[0]["content"])
    assert cited(trace) == [(FIRST, [first]), (SECOND.strip(), [first])]


# ---- the attributes an app writes for ragaudit -----------------------------------------------


def app_spans(root: dict, answer: str):
    provider, exporter = span_recorder()
    tracer = provider.get_tracer("handbook-app")
    attributes = {"openinference.span.kind": "CHAIN", "input.value": QUESTION, **root}
    with tracer.start_as_current_span("rag", attributes=attributes) as span:
        with tracer.start_as_current_span("retrieve", attributes=retriever_attributes(DOCUMENTS)):
            pass
        with tracer.start_as_current_span("llm", attributes={"openinference.span.kind": "LLM", "output.value": answer}):
            pass
        span.set_attribute("output.value", answer)
    return exporter.get_finished_spans()


@pytest.mark.parametrize("fmt", ["otlp", "phoenix", "langfuse"])
def test_the_apps_answer_segments_attribute_wins(tmp_path, fmt):
    segments = [
        {"text": FIRST, "citations": [IDS[1]]},
        {"text": SECOND.strip(), "citations": ["retention", "data-retention"]},
    ]
    spans = app_spans({"ragaudit.answer.segments": json.dumps(segments)}, FIRST + SECOND)
    trace = only_trace(write(spans, fmt, tmp_path), fmt)
    # a document id names a retrieved document, else a doc_id its best-ranked one; else it dangles
    assert cited(trace) == [(FIRST, [IDS[1]]), (SECOND.strip(), ["retention", IDS[2]])]


def test_the_apps_answer_citations_attribute_cites_the_whole_answer(tmp_path):
    spans = app_spans({"ragaudit.answer.citations": (IDS[2], IDS[1])}, FIRST + SECOND)
    trace = only_trace(write(spans, "otlp", tmp_path), "otlp")
    assert cited(trace) == [(FIRST + SECOND, [IDS[2], IDS[1]])]


def test_a_malformed_citations_attribute_is_reported_and_the_markers_used(tmp_path):
    spans = app_spans({"ragaudit.answer.segments": '{"text": "not a list"}'}, FIRST + SECOND)
    path = write(spans, "otlp", tmp_path)
    trace = only_trace(path, "otlp")
    assert cited(trace) == [(FIRST, [IDS[0]]), (SECOND.strip(), [IDS[0]])]
    (error,) = trace.field_errors
    assert (error.path, error.found) == ("$.answer.segments", "object")
    assert "ragaudit.answer.segments" in error.expected


# ---- LlamaIndex: a CitationQueryEngine's "Source k" chunks --------------------------------------


def test_llamaindex_citation_engine_markers_name_the_source_chunks(tmp_path):
    from adapter_helpers import handbook_nodes, sentences, traced_queries, words
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.query_engine import CitationQueryEngine

    splitter = SentenceSplitter(chunk_size=20, chunk_overlap=0, tokenizer=words, chunking_tokenizer_fn=sentences)
    answer = "Monthly backups are kept for a year [4]. A restore is tested every quarter [2][5]."
    provider, exporter = span_recorder()
    (response,) = traced_queries(
        ["How long are monthly backups retained and how often are restores tested?"],
        [answer],
        provider=provider,
        engine=lambda retriever, llm: CitationQueryEngine(retriever=retriever, llm=llm, text_splitter=splitter),
    )
    # which retrieved node each "Source k" chunk came from, read from the engine's own objects
    nodes = {n.node_id: n.text for n in handbook_nodes()}
    holder = {}
    for k, scored in enumerate(response.source_nodes, start=1):
        chunk = scored.node.text.removeprefix(f"Source {k}:\n").strip()
        (holder[k],) = [node_id for node_id, text in nodes.items() if chunk in text]
    assert len(holder) >= 5 > len(set(holder.values()))  # more chunks than retrieved nodes
    path = tmp_path / "spans.jsonl"
    path.write_text(otlp_line(exporter.get_finished_spans()) + "\n")
    trace = only_trace(path, "otlp")
    assert len(trace.retrieved) < 4  # by rank, [4] and [5] would name nothing
    assert [s.citations for s in trace.answer.segments] == [
        (holder[4],),
        tuple(dict.fromkeys((holder[2], holder[5]))),
    ]
