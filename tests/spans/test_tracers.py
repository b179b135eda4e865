"""Every tracer users run gives the same runs and the same audit-log verdict as the OpenInference
export of the same traffic.

The traffic: a real Haystack pipeline (InMemoryDocumentStore of the handbook's chunks, each with
every payload field in its meta, InMemoryBM25Retriever, and an answer component that cites the
first document as [1]), asked a dozen gold questions, no network. It is recorded
* by Haystack's own OpenTelemetry tracer (`opentelemetry-haystack`'s OpenTelemetryTracer, content
  tracing on) into the OpenTelemetry SDK's in-memory exporter;
* by OpenInference's Haystack instrumentation under a CHAIN span of the app (docs/production.md);
* as OpenTelemetry GenAI spans (`gen_ai.retrieval.documents`, names from
  opentelemetry-semantic-conventions) of the same results;
* as a Langfuse v2 observations API page: `ObservationV2` models of the `langfuse` package
  (`langfuse.api.ObservationsV2Response`), input and output as the raw JSON text that API returns.
"""

import json
from datetime import datetime, timezone

import pytest
from helpers import DEMO, invoke, otlp_line, rag_spans, span_recorder

pytest.importorskip("haystack")
pytest.importorskip("haystack_integrations.tracing.opentelemetry")
pytest.importorskip("langfuse")

from haystack import Document, component  # noqa: E402

from ragaudit.core.types import Trace  # noqa: E402
from ragaudit.io.spans import read_traces  # noqa: E402

CORPUS = DEMO / "corpus"
QUESTIONS = [json.loads(line)["question"] for line in (DEMO / "gold.jsonl").read_text().splitlines()[:12]]


@component
class CiteFirst:
    """Answers with the first sentence of the first document, cited as [1]."""

    @component.output_types(answer=str)
    def run(self, query: str, documents: list[Document]):
        first = documents[0].content.split("\n\n")[-1].split(". ")[0].rstrip(".")
        return {"answer": f"{first} [1]."}


@pytest.fixture(scope="module")
def app():
    """A Haystack pipeline over the handbook: (pipeline, answer of the documents)."""
    from haystack import Document, Pipeline

    from ragaudit.io.corpus import load_corpus
    from ragaudit.pipelines.reference import ReferencePipeline

    reference = ReferencePipeline("chunks", load_corpus(CORPUS), k=3)
    documents = []
    for chunk in reference.chunks:
        p = reference.payload(chunk, 0.0, 0.0, 1)
        meta = {
            "doc_id": p.doc_id,
            "section_id": p.section_id,
            "offsets": {"start": p.offsets.start, "end": p.offsets.end, "unit": "char"},
            "rev": p.rev,
            "source_url": p.source_url,
            "tokens": p.tokens,
            "index_hash": p.index_hash,
            "analyzer": p.analyzer,
            "embed_model": p.embed_model,
        }
        documents.append(Document(id=p.snippet_id, content=p.text, meta=meta))

    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    store = InMemoryDocumentStore()
    store.write_documents(documents)
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(store, top_k=3))
    pipeline.add_component("answer", CiteFirst())
    pipeline.connect("retriever.documents", "answer.documents")
    return pipeline


def ask(pipeline, question: str) -> tuple[list, str]:
    out = pipeline.run(
        {"retriever": {"query": question}, "answer": {"query": question}}, include_outputs_from={"retriever"}
    )
    return out["retriever"]["documents"], out["answer"]["answer"]


@pytest.fixture(scope="module")
def exports(app, tmp_path_factory):
    """The same traffic in every format: {format name: (--from, path)}, and the results asked."""
    from haystack import tracing
    from haystack.tracing import tracer as haystack_tracer
    from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer
    from openinference.instrumentation.haystack import HaystackInstrumentor

    folder = tmp_path_factory.mktemp("exports")
    out = {}

    provider, exporter = span_recorder("handbook-rag")
    tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("haystack")))
    haystack_tracer.is_content_tracing_enabled = True
    try:
        results = [ask(app, q) for q in QUESTIONS]
    finally:
        tracing.disable_tracing()
        haystack_tracer.is_content_tracing_enabled = False
    path = folder / "haystack.jsonl"
    path.write_text(otlp_line(exporter.get_finished_spans(), hex_ids=True) + "\n")
    out["haystack"] = ("otlp", path)

    provider, exporter = span_recorder("handbook-rag")
    instrumentor = HaystackInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    tracer = provider.get_tracer("handbook-rag")
    try:
        for q in QUESTIONS:
            with tracer.start_as_current_span(
                "rag", attributes={"openinference.span.kind": "CHAIN", "input.value": q}
            ) as span:
                span.set_attribute("output.value", ask(app, q)[1])
    finally:
        instrumentor.uninstrument()
    path = folder / "openinference.jsonl"
    path.write_text(otlp_line(exporter.get_finished_spans()) + "\n")
    out["openinference"] = ("otlp", path)

    provider, exporter = span_recorder("handbook-rag")
    tracer = provider.get_tracer("handbook-rag")
    for q, (documents, answer) in zip(QUESTIONS, results):
        rag_spans(tracer, q, [plain(d) for d in documents], answer, genai=True)
    path = folder / "genai.jsonl"
    path.write_text(otlp_line(exporter.get_finished_spans()) + "\n")
    out["genai"] = ("otlp", path)

    path = folder / "langfuse.json"
    path.write_text(json.dumps(langfuse_page(results)))
    out["langfuse"] = ("langfuse", path)
    return out, results


def plain(document) -> dict:
    return {"id": document.id, "content": document.content, "score": document.score, "metadata": document.meta}


def langfuse_page(results) -> dict:
    """A page of GET /api/public/v2/observations (fields core, basic, io) for the traffic, made of
    the langfuse package's own models and serialised as they serialise (camelCase aliases)."""
    from langfuse.api import ObservationsV2Response, ObservationV2
    from langfuse.api.observations.types.observations_v2meta import ObservationsV2Meta

    now = datetime.now(timezone.utc).replace(microsecond=0)
    data = []
    for i, (q, (documents, answer)) in enumerate(zip(QUESTIONS, results)):
        root = f"root{i}"
        common = {"trace_id": f"{i:032x}", "start_time": now, "project_id": "p", "environment": "default"}
        retrieved = json.dumps({"documents": [plain(d) for d in documents]})
        data += [
            ObservationV2(**common, id=root, type="SPAN", name="rag", input=json.dumps(q), output=json.dumps(answer)),
            ObservationV2(
                **common,
                id=f"ret{i}",
                parent_observation_id=root,
                type="RETRIEVER",
                name="retriever",
                input=json.dumps({"query": q}),
                output=retrieved,
            ),  # fmt: skip
            ObservationV2(
                **common,
                id=f"gen{i}",
                parent_observation_id=root,
                type="GENERATION",
                name="llm",
                output=json.dumps(answer),
            ),
        ]
    return json.loads(ObservationsV2Response(data=data, meta=ObservationsV2Meta(cursor=None)).json())


def runs(path, fmt) -> dict[str, tuple]:
    """Per query: the documents retrieved (id, text, score, every payload field) and the answer."""
    items = list(read_traces(fmt, [path]))
    traces = [t for t in items if isinstance(t, Trace)]
    assert len(traces) == len(items) == len(QUESTIONS)
    fields = (
        "snippet_id",
        "text",
        "doc_id",
        "section_id",
        "offsets",
        "rev",
        "source_url",
        "tokens",
        "index_hash",
        "analyzer",
        "embed_model",
        "k_pos",
    )
    return {
        t.query: (
            tuple(tuple(getattr(p, f) for f in fields) + (round(p.score_raw, 9),) for p in t.retrieved),
            t.answer.text,
            tuple(s.citations for s in t.answer.segments),
        )
        for t in traces
    }


@pytest.mark.parametrize("name", ["haystack", "genai", "langfuse"])
def test_each_tracer_gives_the_runs_of_the_openinference_export(exports, name):
    formats, results = exports
    expected = runs(*reversed(formats["openinference"]))
    assert set(expected) == set(QUESTIONS)
    assert {q: (tuple(d.id for d in docs), answer) for q, (docs, answer) in zip(QUESTIONS, results)} == {
        q: (tuple(doc[0] for doc in documents), text) for q, (documents, text, _) in expected.items()
    }
    assert runs(*reversed(formats[name])) == expected


@pytest.mark.parametrize("name", ["haystack", "genai", "langfuse"])
def test_each_tracer_gives_the_verdict_of_the_openinference_export(exports, tmp_path, name):
    formats, _ = exports
    (tmp_path / "audit.toml").write_text('[embedder]\nmodel = "hashing"\n')
    summaries = {}
    for which in ("openinference", name):
        fmt, path = formats[which]
        out = tmp_path / which
        result = invoke(
            "audit-log", path, "--from", fmt, "--corpus", CORPUS, "--config", tmp_path / "audit.toml", "--out", out
        )
        assert result.exit_code in (0, 1) and "error:" not in result.stderr, result.output
        model = json.loads((out / "audit_log.json").read_text())
        keep = ("verdict", "traces", "errors", "warnings", "segments", "grounded", "issues", "hallucinations", "zones")
        summaries[which] = ({k: model["summary"][k] for k in keep}, result.exit_code)
    assert summaries[name] == summaries["openinference"]
    assert summaries[name][0]["traces"] == len(QUESTIONS)


def test_haystack_without_content_tracing_is_an_error_naming_what_is_missing(app, tmp_path):
    from haystack import tracing
    from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer

    provider, exporter = span_recorder("handbook-rag")
    tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("haystack")))
    try:
        ask(app, QUESTIONS[0])
    finally:
        tracing.disable_tracing()
    path = tmp_path / "spans.jsonl"
    path.write_text(otlp_line(exporter.get_finished_spans()) + "\n")
    result = invoke("ingest", "otlp", path, "--out", tmp_path / "traces.jsonl")
    assert result.exit_code == 3
    assert "expected retrieved documents, found 1 traces whose retrieval holds none" in result.stderr
    assert "HAYSTACK_CONTENT_TRACING_ENABLED=true" in result.stderr
    logged = invoke("audit-log", path, "--from", "otlp", "--corpus", CORPUS, "--out", tmp_path / "log")
    assert logged.exit_code == 3 and "HAYSTACK_CONTENT_TRACING_ENABLED=true" in logged.stderr


@pytest.mark.parametrize(
    ("spans", "expected"),
    [
        ([], "expected otlp spans, found none"),
        ([("chat", {"gen_ai.operation.name": "chat"})], "expected spans of a retrieval, found 1 spans in 1 traces"),
        (
            [
                (
                    "retrieve",
                    {
                        "openinference.span.kind": "RETRIEVER",
                        "input.value": "q",
                        "retrieval.documents.0.document.id": "d",
                    },
                )
            ],
            "expected an answer, found 1 traces and none answers",
        ),
    ],
)
def test_spans_that_hold_no_usable_trace_exit_3(tmp_path, spans, expected):
    provider, exporter = span_recorder("app")
    tracer = provider.get_tracer("app")
    for name, attributes in spans:
        with tracer.start_as_current_span(name, attributes=attributes):
            pass
    path = tmp_path / "spans.jsonl"
    path.write_text((otlp_line(exporter.get_finished_spans()) + "\n") if spans else '{"resourceSpans": []}\n')
    result = invoke("ingest", "otlp", path, "--out", tmp_path / "traces.jsonl")
    assert result.exit_code == 3 and expected in result.stderr, result.output
