"""Production spans of a real, instrumented LlamaIndex engine (OpenInference + the OpenTelemetry
SDK) written as OTLP JSON, a Phoenix span export and a Langfuse observations export, read back
by `ragaudit.io.spans`: the traces hold what the engine retrieved and answered."""

import json

import pytest
from adapter_helpers import PAYLOAD_METADATA, handbook, handbook_nodes, keyword_retriever, traced_queries, words
from helpers import (
    DEMO,
    LENIENT,
    invoke,
    langfuse_observations,
    otlp_line,
    run_dir_of,
    span_recorder,
    write_config,
    write_phoenix,
)

from ragaudit.adapters.llamaindex import source_number
from ragaudit.checks.validation import Context, validate_trace
from ragaudit.core.types import REQUIRED_PAYLOAD_FIELDS, Trace
from ragaudit.io.spans import read_traces
from ragaudit.io.spans.record import iso_time
from ragaudit.io.stream import read_trace_file

pytestmark = [
    # the instrumentation calls pydantic's old `json()`; pandas announces a change of to_json's dates
    pytest.mark.filterwarnings("ignore:The `json` method is deprecated"),
    pytest.mark.filterwarnings("ignore:The default formatting of datetime"),
]

GOLD = [json.loads(line) for line in (DEMO / "gold.jsonl").read_text().splitlines()[:3]]
QUESTIONS = [g["question"] for g in GOLD]
ANSWERS = [g["reference_answer"] for g in GOLD]
NOT_IN_METADATA = sorted(set(REQUIRED_PAYLOAD_FIELDS) - {"doc_id", "section_id", "rev", "snippet_id", "offsets"})


@pytest.fixture(scope="module")
def recorded():
    """Three questions asked of the instrumented engine: its responses and the finished spans."""
    provider, exporter = span_recorder("handbook-rag")
    responses = traced_queries(QUESTIONS, ANSWERS, provider=provider)
    return responses, exporter.get_finished_spans()


def expected_runs(responses, digits: int | None = None) -> dict[str, dict]:
    """What each query's engine response says, read from the response object alone."""
    corpus = handbook()
    runs = {}
    for question, response in zip(QUESTIONS, responses):
        documents = []
        for n in response.source_nodes:
            doc_id, section_id = n.node.node_id.split("#")
            start, end = n.node.start_char_idx, n.node.end_char_idx
            documents.append(
                {
                    "snippet_id": n.node.node_id,
                    "text": n.node.get_content(),
                    "score_raw": n.score if digits is None else round(n.score, digits),
                    "doc_id": doc_id,
                    "section_id": section_id,
                    "offsets": (start, end, "char"),
                    "rev": corpus[doc_id].rev,
                }
            )
        runs[question] = {"answer": response.response, "documents": documents}
    return runs


def as_run(trace: Trace) -> dict:
    return {
        "answer": trace.answer.text if trace.answer else None,
        "documents": [
            {
                "snippet_id": p.snippet_id,
                "text": p.text,
                "score_raw": p.score_raw,
                "doc_id": p.doc_id,
                "section_id": p.section_id,
                "offsets": (p.offsets.start, p.offsets.end, p.offsets.unit),
                "rev": p.rev,
            }
            for p in trace.retrieved
        ],
    }


def check_ingested(items, responses, *, config: str | None, trace_ids: set[str], digits: int | None = None):
    """`digits`: the export keeps scores to that many decimals (pandas JSON writes 10)."""
    traces = [t for t in items if isinstance(t, Trace)]
    assert [t for t in items if not isinstance(t, Trace)] == []
    assert len(traces) == len(QUESTIONS)
    assert {t.query: as_run(t) for t in traces} == expected_runs(responses, digits)
    corpus = handbook()
    for trace in traces:
        assert trace.qid in trace_ids and (trace.variant, trace.seed) == (0, 0)
        assert trace.config == config
        assert [p.k_pos for p in trace.retrieved] == [1, 2, 3]
        assert trace.retrieved_at is not None and trace.retriever_name.endswith("retrieve")
        # the fields put into node metadata are right for the corpus; the others are missing
        issues = validate_trace(trace, Context(corpus=corpus))
        errors = sorted((i.code, i.citation) for i in issues if i.severity == "error")
        assert errors == sorted((f"missing_{f}", p.snippet_id) for p in trace.retrieved for f in NOT_IN_METADATA)
        assert [i.code for i in issues if i.severity == "warning"] == []  # spans: no live index asked
        asked = validate_trace(trace, Context(corpus=corpus, live_index=True))
        assert [i.code for i in asked if i.severity == "warning"] == ["missing_live_index"]
    return traces


def otel_trace_ids(spans) -> set[str]:
    return {f"{s.context.trace_id:032x}" for s in spans}


@pytest.mark.parametrize("hex_ids", [False, True], ids=["protobuf-json", "otlp-json-hex"])
def test_otlp_json_of_the_sdk_encoder(recorded, tmp_path, hex_ids):
    responses, spans = recorded
    path = tmp_path / "spans.jsonl"
    # the SDK exports in batches: one request per line, a trace's spans spread over two lines
    half = len(spans) // 2
    path.write_text(otlp_line(spans[:half], hex_ids=hex_ids) + "\n" + otlp_line(spans[half:], hex_ids=hex_ids) + "\n")
    reader = read_traces("otlp", [path])
    check_ingested(list(reader), responses, config="handbook-rag", trace_ids=otel_trace_ids(spans))
    assert (reader.spans, reader.skipped) == (len(spans), 0)


@pytest.mark.parametrize("suffix, date_format", [(".parquet", None), (".jsonl", "epoch"), (".jsonl", "iso")])
def test_phoenix_span_export(recorded, tmp_path, suffix, date_format):
    responses, spans = recorded
    path = write_phoenix(spans, tmp_path / f"spans{suffix}", date_format=date_format or "epoch")
    # a Phoenix export holds no resource attributes: config comes from --config-name
    items = list(read_traces("phoenix", [path], config_name="prod-rag"))
    digits = 10 if suffix == ".jsonl" else None
    traces = check_ingested(items, responses, config="prod-rag", trace_ids=otel_trace_ids(spans), digits=digits)
    retriever_starts = {
        f"{s.context.trace_id:032x}": s.start_time for s in spans if s.name == "KeywordRetriever.retrieve"
    }
    for trace in traces:  # to the millisecond at least: pandas writes epoch milliseconds
        assert trace.retrieved_at[:23] == iso_time(retriever_starts[trace.qid])[:23]


@pytest.mark.parametrize("retriever_type", ["SPAN", "RETRIEVER"])
@pytest.mark.parametrize("layout", ["array", "jsonl", "api-page"])
def test_langfuse_observations_export(recorded, tmp_path, retriever_type, layout):
    responses, spans = recorded
    observations = langfuse_observations(spans, retriever_type=retriever_type)
    path = tmp_path / "observations.json"
    if layout == "array":
        path.write_text(json.dumps(observations, indent=2))
    elif layout == "jsonl":
        path.write_text("".join(json.dumps(o) + "\n" for o in observations))
    else:
        path.write_text(json.dumps({"data": observations, "meta": {"page": 1, "totalItems": len(observations)}}))
    items = list(read_traces("langfuse", [path]))
    check_ingested(items, responses, config="handbook-rag", trace_ids=otel_trace_ids(spans))


def test_fields_left_out_of_the_metadata_are_reported_missing(tmp_path):
    provider, exporter = span_recorder()
    nodes = handbook_nodes(fields=("doc_id", "rev"))  # no section, no offsets
    traced_queries(QUESTIONS[:1], ANSWERS[:1], nodes=nodes, provider=provider)
    path = tmp_path / "spans.jsonl"
    path.write_text(otlp_line(exporter.get_finished_spans()) + "\n")
    (trace,) = list(read_traces("otlp", [path]))
    codes = {i.code for i in validate_trace(trace, Context(corpus=handbook())) if i.severity == "error"}
    assert codes == {f"missing_{f}" for f in [*NOT_IN_METADATA, "section_id", "offsets"]}
    assert all(p.doc_id and p.rev for p in trace.retrieved)
    assert set(PAYLOAD_METADATA) - {"doc_id", "rev"} == {"section_id", "start_char_idx", "end_char_idx"}


def test_replay_pipeline_reads_a_span_recording(tmp_path):
    """A gold replay recorded as spans: runs line up with gold runs by the ragaudit.* attributes."""
    items = GOLD[:2]
    keys = [(g["qid"], v, 1) for g in items for v in range(3)]
    questions = [([g["question"], *g["paraphrases"]])[v] for g in items for v in range(3)]
    answers = [g["reference_answer"] for g in items for _ in range(3)]
    provider, exporter = span_recorder()
    responses = traced_queries(questions, answers, provider=provider, run_keys=keys)
    (tmp_path / "spans.jsonl").write_text(otlp_line(exporter.get_finished_spans()) + "\n")
    config = write_config(
        tmp_path,
        '[[pipelines]]\nname = "prod"\nkind = "replay"\ntraces = "spans.jsonl"\nformat = "otlp"\n',
        items=2,
        seeds="[1]",
        extra="",
    )
    config.write_text(config.read_text() + LENIENT)
    result = invoke("run", config)
    assert result.exit_code == 0, result.output
    traces = {t.key: t for t in read_trace_file(run_dir_of(result) / "traces.jsonl")}
    assert sorted((k.qid, k.variant, k.seed) for k in traces) == sorted(keys)
    assert all(t.index is None for t in traces.values())  # spans record no live index: not asked for one
    assert "missing_live_index" not in (run_dir_of(result) / "issues.jsonl").read_text()
    for key, question, response in zip(keys, questions, responses):
        trace = traces[next(k for k in traces if (k.qid, k.variant, k.seed) == key)]
        assert trace.error is None and trace.query == question
        assert [p.snippet_id for p in trace.retrieved] == [n.node.node_id for n in response.source_nodes]
        assert trace.answer.text == response.response


def test_a_citation_engine_answer_cites_the_sources_its_markers_name(tmp_path):
    """CitationQueryEngine numbers its sources ("Source 1:", "Source 2:", ...) in the order the
    retriever returned them, and the answer's `[n]` names them. Read from the spans, by `audit-log`
    as by the trace reader, the answer cites the n-th retrieved node, not the whole top-k."""
    from llama_index.core.query_engine import CitationQueryEngine

    provider, exporter = span_recorder()
    first, second = (a.rstrip(".") for a in ANSWERS[:2])
    answer = f"{first}. [1] {second}. [2]"  # the markers after the full stop, as the model wrote them
    [response] = traced_queries(QUESTIONS[:1], [answer], provider=provider, engine=CitationQueryEngine)
    assert [source_number(n.node) for n in response.source_nodes][:2] == [1, 2]
    path = tmp_path / "spans.jsonl"
    path.write_text(otlp_line(exporter.get_finished_spans()) + "\n")
    (trace,) = list(read_traces("otlp", [path]))
    named = [p.snippet_id for p in trace.retrieved[:2]]
    assert [s.citations for s in trace.answer.segments] == [(named[0],), (named[1],)]
    (tmp_path / "hashing.toml").write_text('[embedder]\nmodel = "hashing"\n', encoding="utf-8")
    result = invoke(
        "audit-log", path, "--from", "otlp", "--corpus", DEMO / "corpus", "--config", tmp_path / "hashing.toml",
        "--out", tmp_path / "audited",
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    model = json.loads((tmp_path / "audited" / "audit_log.json").read_text(encoding="utf-8"))
    [example] = model["examples"]
    assert example["held_to_context"] is False
    assert [s["citations"] for s in example["segments"]] == [[named[0]], [named[1]]]


def extractive_llm():
    """A LlamaIndex LLM that answers a CitationQueryEngine prompt from its numbered sources alone:
    the source sentence sharing most words with the query, its `[n]` after the full stop."""
    import re

    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
    from llama_index.core.llms.callbacks import llm_completion_callback

    def answer(prompt: str) -> str:
        context, query = prompt.rsplit("\n------\nQuery: ", 1)
        context = context.rsplit("Below are several numbered sources of information:\n------\n", 1)[1]
        asked = set(re.findall(r"\w+", query.split("\nAnswer:", 1)[0].lower()))
        sentences = [
            (len(asked & set(re.findall(r"\w+", sentence.lower()))), -int(n), sentence, n)
            for n, chunk in re.findall(r"^Source (\d+):\n(.*?)(?=^Source \d+:\n|\Z)", context, re.DOTALL | re.MULTILINE)
            for line in chunk.splitlines()
            if line.strip() and not line.startswith("#")  # not a heading
            for sentence in re.split(r"(?<=[.!?])\s+", line.strip())
        ]
        _, _, sentence, n = max(sentences, default=(0, 0, "I do not know.", None))
        return f"{sentence} [{n}]" if n else sentence

    class Extractive(CustomLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(context_window=8192, num_output=256)

        @llm_completion_callback()
        def complete(self, prompt, formatted=False, **kwargs):
            return CompletionResponse(text=answer(prompt))

        @llm_completion_callback()
        def stream_complete(self, prompt, formatted=False, **kwargs):
            text = answer(prompt)
            yield CompletionResponse(text=text, delta=text)

    return Extractive()


def citation_app():
    """A CitationQueryEngine app over the handbook as a ragaudit python pipeline, the way the
    adapter docs write it: `from_llamaindex_response` with a placeholder qid."""
    import types

    from llama_index.core.query_engine import CitationQueryEngine

    from ragaudit.adapters import IndexInfo, from_llamaindex_response

    engine = CitationQueryEngine(keyword_retriever(handbook_nodes()), llm=extractive_llm())
    index = IndexInfo(index_hash="sha256:handbook-v1", analyzer="lowercase", embed_model="keywords", store="memory")

    class CitationRAG:
        def index_info(self):
            return index

        def run(self, query, *, seed, k):
            response = engine.query(query)
            return from_llamaindex_response(
                response, qid="-", query=query, index=index, sources=handbook(), score_kind="raw"
            )

    app = types.ModuleType("citation_app")
    app.engine, app.make_pipeline = engine, CitationRAG
    return app


def test_a_citation_engine_run_live_and_its_otlp_and_phoenix_exports_agree(tmp_path, monkeypatch):
    """One CitationQueryEngine app, audited three ways against the gold set: run live as a python
    pipeline, and replayed from its OpenInference spans exported as OTLP JSON and as a Phoenix span
    dataframe (parquet). The three give the same runs (keys, queries, payloads, citations) and the
    same verdict, question by question."""
    import sys

    import llama_index.core
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    monkeypatch.setattr(llama_index.core, "global_tokenizer", words)  # no tiktoken download
    app = citation_app()
    monkeypatch.setitem(sys.modules, "citation_app", app)
    monkeypatch.chdir(tmp_path)

    def audited(name: str, pipeline: str):
        config = write_config(tmp_path, f'[[pipelines]]\nname = "{name}"\n{pipeline}\n', items=8, seeds="[1]")
        config.write_text(config.read_text().replace('out = "runs"', f'out = "runs-{name}"'))
        result = invoke("run", config)
        assert result.exit_code in (0, 1), result.output
        run = run_dir_of(result)
        report = json.loads((run / "report.json").read_text(encoding="utf-8"))
        by_question = {q["qid"]: (q["stats"]["correct"], q["stats"]["runs"]) for q in report["questions"]}
        return report["gate"]["verdict"], by_question, read_trace_file(run / "traces.jsonl")

    def seen(traces) -> dict:
        """Each run as the audit saw it; a payload by where its text lies in the corpus."""
        runs = {}
        for t in traces:
            located = {p.snippet_id: (p.doc_id, p.section_id, p.offsets.start, p.offsets.end) for p in t.retrieved}
            runs[(t.qid, t.variant, t.seed)] = (
                t.query,
                [(*located[p.snippet_id], p.text, p.rev, p.k_pos, p.score_raw) for p in t.retrieved],
                t.answer.text,
                [(s.text, sorted(located[c] for c in s.citations)) for s in t.answer.segments],
            )
        return runs

    live_verdict, live_correct, live = audited("citation", 'kind = "python"\nfactory = "citation_app:make_pipeline"')
    assert len(live) == 24 and sum(c for c, _ in live_correct.values()) > 0
    assert all(s.citations for t in live for s in t.answer.segments)  # every answer cites its [n]

    provider, exporter = span_recorder("citation-rag")
    tracer = provider.get_tracer("gold-runs")
    LlamaIndexInstrumentor().instrument(tracer_provider=provider)
    try:
        for t in live:  # the same calls, each inside a span naming its gold run
            key = {"ragaudit.qid": t.qid, "ragaudit.variant": t.variant, "ragaudit.seed": t.seed}
            with tracer.start_as_current_span("gold run", attributes=key):
                app.engine.query(t.query)
    finally:
        LlamaIndexInstrumentor().uninstrument()
    spans = exporter.get_finished_spans()
    (tmp_path / "spans.jsonl").write_text(otlp_line(spans) + "\n")
    write_phoenix(spans, tmp_path / "spans.parquet")

    for name, form, path in [("otlp", "otlp", "spans.jsonl"), ("phoenix", "phoenix", "spans.parquet")]:
        verdict, correct, replayed = audited(name, f'kind = "replay"\nformat = "{form}"\ntraces = "{path}"')
        assert seen(replayed) == seen(live), name
        assert (verdict, correct) == (live_verdict, live_correct), name
