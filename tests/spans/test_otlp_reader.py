"""OTLP JSON as exporters write it: typed attribute values, hex and base64 ids, gzip, one request
per line or one document, GenAI retrieval attributes, and located problems on defective lines."""

import gzip
import json

import pytest
from helpers import KEYS_SENTENCE, PASSWORDS_SENTENCE, otlp_line, otlp_request, rag_spans, span_recorder

from ragaudit.checks.validation import Context, validate_trace
from ragaudit.core.types import Trace
from ragaudit.io.jsonl import BadLine
from ragaudit.io.spans import read_traces


@pytest.fixture
def documents(corpus) -> list[dict]:
    """Two retrieved documents of the `corpus` fixture, their payload fields in the metadata."""
    out = []
    for sentence, section, score in (
        (KEYS_SENTENCE, "policies/security/keys", 0.9),
        (PASSWORDS_SENTENCE, "policies/security/passwords", 0.4),
    ):
        start = corpus["policies"].text.index(sentence)
        out.append(
            {
                "id": f"pol-{section.rsplit('/', 1)[1]}",
                "content": sentence,
                "score": score,
                "metadata": {
                    "doc_id": "policies",
                    "section_id": section,
                    "start_char_idx": start,
                    "end_char_idx": start + len(sentence),
                    "rev": corpus["policies"].rev,
                    "source": f"file:///corpus/policies.md#{section}",
                    "tokens": len(sentence.split()),
                    "index_hash": "sha256:abc",
                    "embed_model": "all-MiniLM-L6-v2:mean",
                    "analyzer": "whitespace",
                },
            }
        )
    return out


def recorded(documents, *, count: int = 1, genai: bool = False):
    provider, exporter = span_recorder("policies-bot")
    tracer = provider.get_tracer("app")
    for i in range(count):
        rag_spans(tracer, f"How often are hardware keys rotated? ({i})", documents, "Every 12 months.", genai=genai)
    return exporter.get_finished_spans()


def traces_of(items) -> list[Trace]:
    assert [i for i in items if isinstance(i, BadLine)] == []
    return [i for i in items if isinstance(i, Trace)]


def test_one_trace_per_trace_id_with_every_payload_field(tmp_path, documents, corpus):
    spans = recorded(documents, count=3)
    path = tmp_path / "otlp.jsonl"
    path.write_text(otlp_line(spans) + "\n")
    reader = read_traces("otlp", [path])
    traces = traces_of(list(reader))
    assert (reader.spans, reader.traces, reader.skipped) == (9, 3, 0)
    assert sorted(t.qid for t in traces) == sorted({f"{s.context.trace_id:032x}" for s in spans})
    for trace in traces:
        assert trace.config == "policies-bot" and trace.answer.text == "Every 12 months."
        assert trace.query.startswith("How often are hardware keys rotated?")
        assert [(p.snippet_id, p.text, p.score_raw, p.k_pos) for p in trace.retrieved] == [
            (d["id"], d["content"], d["score"], k) for k, d in enumerate(documents, 1)
        ]
        p = trace.retrieved[0]
        assert (p.doc_id, p.section_id, p.source_url, p.tokens) == (
            "policies",
            "policies/security/keys",
            "file:///corpus/policies.md#policies/security/keys",
            len(KEYS_SENTENCE.split()),
        )
        # everything a payload needs came through: only the absent live index is noted, when asked
        assert [i.code for i in validate_trace(trace, Context(corpus=corpus))] == []
        asked = Context(corpus=corpus, live_index=True)
        assert [i.code for i in validate_trace(trace, asked)] == ["missing_live_index"]


def test_gzip_hex_ids_and_a_whole_document_read_alike(tmp_path, documents):
    spans = recorded(documents, count=2)
    plain = tmp_path / "plain.jsonl"
    plain.write_text(otlp_line(spans) + "\n")
    zipped = tmp_path / "spans.json.gz"
    zipped.write_bytes(gzip.compress((otlp_line(spans, hex_ids=True) + "\n").encode()))
    pretty = tmp_path / "request.json"
    pretty.write_text(json.dumps(otlp_request(spans), indent=2))  # one request, as MessageToJson writes it
    expected = sorted((t.qid, t.query, t.retrieved) for t in traces_of(list(read_traces("otlp", [plain]))))
    assert len(expected) == 2
    for path in (zipped, pretty):
        got = traces_of(list(read_traces("otlp", [path])))
        assert sorted((t.qid, t.query, t.retrieved) for t in got) == expected
        assert all(t.file == str(path) and t.line == 1 for t in got)


def typed_request(**seed) -> str:
    """A request built with the OTLP protobuf classes, every kind of typed value in it: a GenAI
    retrieval span whose documents are an array of key/value lists (bytes id, double score,
    integer offsets), and run-key attributes as integer and double values (the seed: `seed`)."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    def kv(key, **value):
        return KeyValue(key=key, value=AnyValue(**value))

    metadata = KeyValueList(
        values=[kv("doc_id", string_value="policies"), kv("start_char_idx", int_value=40), kv("page", int_value=2)]
    )
    document = KeyValueList(
        values=[
            kv("id", bytes_value=b"\x0a\x0b"),
            kv("score", double_value=0.5),
            kv("text", string_value="Hardware keys"),
            kv("metadata", kvlist_value=metadata),
        ]
    )
    span = Span(
        trace_id=bytes(range(16)),
        span_id=bytes(range(8)),
        name="vector_search",
        start_time_unix_nano=1_795_000_000_123_456_789,
        attributes=[
            kv("gen_ai.operation.name", string_value="retrieval"),
            kv("gen_ai.retrieval.query.text", string_value="keys?"),
            kv("gen_ai.retrieval.documents", array_value=ArrayValue(values=[AnyValue(kvlist_value=document)])),
            kv("ragaudit.qid", string_value="SEC-KEYS-1"),
            kv("ragaudit.variant", int_value=2),
            kv("ragaudit.seed", **(seed or {"double_value": 3.0})),
        ],
    )
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=[kv("service.name", string_value="svc")]),
                scope_spans=[ScopeSpans(spans=[span])],
            )
        ]
    )
    return MessageToJson(request, indent=None)


def test_typed_attribute_values(tmp_path):
    line = typed_request()
    assert '"intValue": "2"' in line and '"bytesValue"' in line and '"kvlistValue"' in line
    assert '"doubleValue": 3.0' in line
    path = tmp_path / "typed.jsonl"
    path.write_text(line + "\n")
    (trace,) = traces_of(list(read_traces("otlp", [path])))
    assert (trace.qid, trace.variant, trace.seed, trace.config) == ("SEC-KEYS-1", 2, 3, "svc")
    assert trace.qid != "000102030405060708090a0b0c0d0e0f"  # the run key attribute wins over the trace id
    assert (trace.query, trace.retriever_name, trace.retrieved_at) == (
        "keys?",
        "vector_search",
        "2026-11-18T11:06:40.123456Z",  # date -u -d @1795000000
    )
    (p,) = trace.retrieved
    assert (p.snippet_id, p.score_raw, p.text, p.doc_id, p.page) == ("0a0b", 0.5, "Hardware keys", "policies", 2)
    # an end that was never given is not invented: the offsets are reported, not guessed
    assert (p.offsets.start, p.offsets.end) == (40, None)
    assert trace.field_errors == ()
    # a boolean where the seed's integer belongs is located, and its trace is not filed under seed 0
    path.write_text(typed_request(bool_value=True) + "\n")
    assert list(read_traces("otlp", [path])) == [
        BadLine(
            str(path),
            1,
            "attribute ragaudit.seed: expected the run's seed as an integer, found boolean true; "
            "trace 000102030405060708090a0b0c0d0e0f left out (its run key is unknown)",
        )
    ]


def test_defective_lines_are_located_and_reading_goes_on(tmp_path, documents):
    spans = recorded(documents, count=3)  # three traces of three spans: retrieve, llm, rag (the root)
    good = json.loads(otlp_line(spans[:3]))
    broken_span = json.loads(otlp_line(spans[3:6]))
    broken_span["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["traceId"] = "not-an-id"
    broken_attribute = json.loads(otlp_line(spans[6:]))
    target = broken_attribute["resourceSpans"][0]["scopeSpans"][0]["spans"][2]
    target["attributes"][0]["value"] = {"stringValue": 5}
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps({"resourceSpans": 3}),
        json.dumps(broken_span),
        json.dumps(broken_attribute),
        "[1, 2]",
    ]
    path = tmp_path / "otlp.jsonl"
    path.write_text("\n".join(lines) + "\n")
    items = list(read_traces("otlp", [path]))
    bad = [(b.line, b.path, b.message) for b in items if isinstance(b, BadLine)]
    key = target["attributes"][0]["key"]
    assert bad == [
        (
            2,
            "$",
            "expected a JSON value, found invalid JSON (Expecting property name enclosed in double quotes at column 2)",
        ),
        (3, "$.resourceSpans", "expected a resourceSpans array, found number 3"),
        (
            4,
            "$.resourceSpans[0].scopeSpans[0].spans[1].traceId",
            "expected an id of 32 hex digits or 16 bytes in base64, found string 'not-an-id'",
        ),
        (
            5,
            "$.resourceSpans[0].scopeSpans[0].spans[2].attributes[0].value.stringValue",
            f"attribute {key!r}: expected a string, found number 5",
        ),
        (6, "$", "expected an ExportTraceServiceRequest object, found array of 2"),
    ]
    assert all(b.file == str(path) for b in items if isinstance(b, BadLine))
    # every trace still comes: the second without its LLM span, the third's root without its kind
    traces = [t for t in items if isinstance(t, Trace)]
    assert [t.line for t in traces] == [1, 4, 5] and all(len(t.retrieved) == 2 for t in traces)
    assert [t.answer.text for t in traces] == ["Every 12 months."] * 3


def test_genai_retrieval_documents(tmp_path, documents, corpus):
    spans = recorded(documents, genai=True)
    path = tmp_path / "genai.jsonl"
    path.write_text(otlp_line(spans) + "\n")
    (trace,) = traces_of(list(read_traces("otlp", [path])))
    assert trace.query == "How often are hardware keys rotated? (0)"
    assert trace.answer.text == "Every 12 months."  # from gen_ai.output.messages of the chat span
    assert [(p.snippet_id, p.text, p.score_raw) for p in trace.retrieved] == [
        (d["id"], d["content"], d["score"]) for d in documents
    ]
    assert [i.code for i in validate_trace(trace, Context(corpus=corpus, live_index=True))] == ["missing_live_index"]


def test_document_text_under_text_and_metadata_as_an_object(tmp_path):
    provider, exporter = span_recorder()
    documents = [{"id": "a", "text": "Alpha.", "score": 1, "metadata": {"ref_doc_id": "d", "start_index": 3}}]
    rag_spans(provider.get_tracer("app"), "q", documents, "A.", genai=True)
    path = tmp_path / "genai.jsonl"
    path.write_text(otlp_line(exporter.get_finished_spans()) + "\n")
    (trace,) = traces_of(list(read_traces("otlp", [path])))
    (p,) = trace.retrieved
    # LangChain's start_index: the end is the start plus the content's length
    assert (p.text, p.doc_id, p.offsets.start, p.offsets.end, p.offsets.unit) == ("Alpha.", "d", 3, 9, "char")


def test_a_broken_pretty_printed_document_is_one_located_problem(tmp_path, documents):
    text = json.dumps(otlp_request(recorded(documents)), indent=2).splitlines()
    text[4] = text[4].rstrip(",") + " oops,"
    path = tmp_path / "request.json"
    path.write_text("\n".join(text) + "\n")
    items = list(read_traces("otlp", [path]))
    assert [(type(i).__name__, i.line) for i in items] == [("BadLine", 5)]
    assert items[0].message.startswith("expected a JSON value, found invalid JSON")
