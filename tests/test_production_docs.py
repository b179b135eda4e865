"""docs/production.md runs as written: LlamaIndex, LangChain and Haystack, instrumented with
OpenInference, export OTLP JSON spans whose traces validate clean against the handbook corpus and
pass `ragaudit audit-log`.

Only the models are replaced: a deterministic hashing embedding and an LLM with a canned answer
(no network, no weights). Everything else is the real libraries and their instrumentation.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from helpers import DEMO, invoke, otlp_line, span_recorder

from ragaudit.checks.validation import Context, validate_trace
from ragaudit.core.types import Trace
from ragaudit.io.corpus import load_corpus
from ragaudit.io.spans import read_traces
from ragaudit.io.traces import parse_trace

DOC = Path(__file__).resolve().parents[1] / "docs" / "production.md"
QUERY = "How often are administrator hardware keys rotated?"
ANSWER = "Administrator hardware keys are rotated every 12 months."
ROTATION = "key-management/hardware-keys"


def blocks() -> dict[str, str]:
    """The python block under each `## ` heading."""
    found = {}
    for part in re.split(r"^## ", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE)[1:]:
        block = re.search(r"```python\n(.*?)```", part, re.DOTALL)
        if block:
            found[part.splitlines()[0].strip()] = block.group(1)
    return found


def run(*titles: str, **given) -> dict:
    """Execute the blocks in order in one namespace (what a reader pastes into one script)."""
    namespace = {"__name__": "__production_doc__", **given}
    for title in titles:
        exec(compile(blocks()[title], f"{DOC}:{title}", "exec", dont_inherit=True), namespace)
    return namespace


def vector(text: str, dim: int = 256) -> list[float]:
    """A bag of hashed words: similar texts score higher, and scores are rarely tied."""
    out = np.zeros(dim)
    for word in re.findall(r"\w+", text.lower()):
        digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        out[digest % dim] += 1.0 if (digest >> 32) & 1 else -1.0
    norm = np.linalg.norm(out)
    return list(out / norm) if norm else list(out)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    (tmp_path / "gold_sets" / "handbook").mkdir(parents=True)
    (tmp_path / "gold_sets" / "handbook" / "corpus").symlink_to(DEMO / "corpus", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def audited(workdir: Path) -> Trace:
    """The one trace the example's spans hold, after checking that every rule accepts it against the
    handbook (spans carry no live index, and are not asked for one unless the user asks: no issue at
    all) and that audit-log passes it."""
    traces = list(read_traces("otlp", [workdir / "spans.jsonl"]))
    assert all(isinstance(t, Trace) for t in traces), traces
    [trace] = traces
    issues = validate_trace(trace, Context(corpus=load_corpus(DEMO / "corpus")))
    assert issues == [], issues
    (workdir / "hashing.toml").write_text('[embedder]\nmodel = "hashing"\n', encoding="utf-8")  # no model to load
    result = invoke(
        "audit-log", "spans.jsonl", "--from", "otlp", "--corpus", "gold_sets/handbook/corpus",
        "--config", "hashing.toml", "--out", "audited",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    model = json.loads((workdir / "audited" / "audit_log.json").read_text(encoding="utf-8"))
    assert model["summary"]["traces"] == 1 and model["summary"]["errors"] == 0
    assert model["summary"]["hallucinations"] == 0
    assert model["windows"][0]["index"]["index_hash"].keys() == {"sha256:handbook-2026-11-24"}
    return trace


def test_every_example_is_there():
    assert set(blocks()) == {
        "Export the spans",
        "LlamaIndex",
        "LangChain",
        "The same chain under `ragaudit run`",
        "Haystack",
        "The same Haystack pipeline under `ragaudit run`",
        "Citations in spans",
    }


def test_citations_example(tmp_path):
    """The app's `ragaudit.answer.segments` attribute, written by the page's function on a real
    span, gives the trace's segments, in the app's order, not the retrieval's."""
    record_citations = run("Citations in spans")["record_citations"]
    provider, exporter = span_recorder()
    tracer = provider.get_tracer("handbook-app")
    retrieved = {
        "openinference.span.kind": "RETRIEVER",
        "retrieval.documents.0.document.id": "keys",
        "retrieval.documents.0.document.content": ANSWER,
        "retrieval.documents.1.document.id": "backups",
        "retrieval.documents.1.document.content": "Daily backups are kept for 35 days.",
    }
    with tracer.start_as_current_span(
        "rag", attributes={"openinference.span.kind": "CHAIN", "input.value": QUERY}
    ) as span:
        with tracer.start_as_current_span("retrieve", attributes=retrieved):
            pass
        record_citations(span, [("Daily backups are kept for 35 days.", ["backups"]), (ANSWER, ["keys", "backups"])])
    path = tmp_path / "spans.jsonl"
    path.write_text(otlp_line(exporter.get_finished_spans()) + "\n")
    (trace,) = read_traces("otlp", [path])
    assert trace.answer.text == "Daily backups are kept for 35 days. " + ANSWER
    assert [(s.text, s.citations) for s in trace.answer.segments] == [
        ("Daily backups are kept for 35 days.", ("backups",)),
        (ANSWER, ("keys", "backups")),
    ]


def test_llamaindex_example(workdir, monkeypatch, caplog):
    from llama_index.core import Settings
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
    from llama_index.core.llms.callbacks import llm_completion_callback
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    class Hashing(BaseEmbedding):
        def _get_query_embedding(self, query):
            return vector(query)

        async def _aget_query_embedding(self, query):
            return vector(query)

        def _get_text_embedding(self, text):
            return vector(text)

    class Canned(CustomLLM):
        @property
        def metadata(self):
            return LLMMetadata(context_window=4096, num_output=256)

        @llm_completion_callback()
        def complete(self, prompt, formatted=False, **kwargs):
            return CompletionResponse(text=ANSWER)

        @llm_completion_callback()
        def stream_complete(self, prompt, formatted=False, **kwargs):
            yield CompletionResponse(text=ANSWER, delta=ANSWER)

    monkeypatch.setattr(Settings, "_embed_model", Hashing())
    monkeypatch.setattr(Settings, "_llm", Canned())
    try:
        with caplog.at_level(logging.WARNING, logger="opentelemetry"):
            run("Export the spans", "LlamaIndex")
    finally:
        LlamaIndexInstrumentor().uninstrument()
    # the export holds the query's spans, not the indexing's embeddings (thousands of attributes)
    kinds = Counter(
        a["value"].get("stringValue")
        for line in (workdir / "spans.jsonl").read_text(encoding="utf-8").splitlines()
        for r in json.loads(line)["resourceSpans"]
        for scope in r["scopeSpans"]
        for span in scope["spans"]
        for a in span.get("attributes", [])
        if a["key"] == "openinference.span.kind"
    )
    assert kinds["RETRIEVER"] >= 1 and kinds["EMBEDDING"] == 0, kinds
    assert (workdir / "spans.jsonl").stat().st_size < 100_000  # 806 kB with the indexing's spans
    assert not [r for r in caplog.records if "dict is full" in r.getMessage()]
    trace = audited(workdir)
    assert trace.query == QUERY and trace.answer is not None and trace.answer.text == ANSWER
    assert [p.k_pos for p in trace.retrieved] == [1, 2, 3]
    assert ROTATION in {p.section_id for p in trace.retrieved}
    assert all(p.score_raw is not None and p.tokens and p.rev for p in trace.retrieved)


def test_langchain_example(workdir):
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from openinference.instrumentation.langchain import LangChainInstrumentor

    class Hashing(Embeddings):
        def embed_documents(self, texts):
            return [vector(t) for t in texts]

        def embed_query(self, text):
            return vector(text)

    cited = f"{ANSWER} [1]"  # after the full stop, as many models place it
    try:
        run("Export the spans", "LangChain", embeddings=Hashing(), llm=FakeListChatModel(responses=[cited]))
    finally:
        LangChainInstrumentor().uninstrument()
    trace = audited(workdir)
    assert trace.query == QUERY and trace.answer is not None and trace.answer.text == cited
    assert [p.k_pos for p in trace.retrieved] == [1, 2, 3]
    assert trace.answer.citations == (trace.retrieved[0].snippet_id,)  # [1]: the first chunk the model read
    assert ROTATION in {p.section_id for p in trace.retrieved}
    assert all(p.snippet_id == f"{p.doc_id}:{p.span.start}" for p in trace.retrieved if p.span)


def extractive(context: str, question: str) -> str:
    """What a model answering from its numbered context alone writes: the context sentence sharing
    most words with the question (the first such), its source's `[n]` after the full stop."""
    asked = set(re.findall(r"\w+", question.lower()))
    best = max(
        (
            (len(asked & set(re.findall(r"\w+", sentence.lower()))), -int(n), sentence, n)
            for n, chunk in re.findall(
                r"^\[(\d+)\] (.*?)(?=\n+\[\d+\] |\n+Question: |\Z)", context, re.DOTALL | re.MULTILINE
            )
            for sentence in re.split(r"(?<=[.!?])\s+", " ".join(chunk.split()))
        ),
        default=(0, 0, "I do not know.", None),
    )
    _, _, sentence, n = best
    return f"{sentence} [{n}]" if n else sentence


def haystack_llm():
    """A Haystack generator component that answers as `extractive` does, from the prompt alone."""
    from haystack import component

    @component
    class Extractive:
        @component.output_types(replies=list[str])
        def run(self, prompt: str):
            context, question = prompt.rsplit("Question: ", 1)
            return {"replies": [extractive(context, question.strip())]}

    globals()["Extractive"] = Extractive  # the instrumentation finds a component's class by its module and name
    return Extractive()


def test_haystack_example(workdir):
    from openinference.instrumentation.haystack import HaystackInstrumentor

    try:
        namespace = run("Export the spans", "Haystack", llm=haystack_llm())
    finally:
        HaystackInstrumentor().uninstrument()
    corpus = load_corpus(DEMO / "corpus")
    chunks = namespace["chunks"]
    assert Counter(c.meta["doc_id"] for c in chunks).keys() == corpus.documents.keys()
    for chunk in chunks:
        meta, doc = chunk.meta, corpus[chunk.meta["doc_id"]]
        offsets = meta["offsets"]
        assert doc.text[offsets["start"] : offsets["end"]] == chunk.content
        section = corpus.section(doc.doc_id, meta["section_id"])
        assert section is not None and section.start <= offsets["start"] < offsets["end"] <= section.end
    trace = audited(workdir)
    assert trace.query == QUERY and trace.answer is not None and trace.answer.text == namespace["answer"]
    assert [p.snippet_id for p in trace.retrieved] == [d.id for d in namespace["found"]]
    assert ROTATION in {p.section_id for p in trace.retrieved}
    assert (
        trace.answer.citations
        and {p.snippet_id: p.section_id for p in trace.retrieved}[trace.answer.citations[0]] == ROTATION
    )


def langchain_models():
    """A hashing embedding and a chat model that answers from its numbered context alone: the
    context sentence sharing most words with the question, its source's `[n]` after the full stop."""
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class Hashing(Embeddings):
        def embed_documents(self, texts):
            return [vector(t) for t in texts]

        def embed_query(self, text):
            return vector(text)

    class Extractive(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "extractive"

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            context, question = messages[-1].content.rsplit("\n\nQuestion: ", 1)
            text = extractive(context, question)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    return Hashing(), Extractive()


def gold_config(folder: Path, name: str, pipeline: str, items: tuple[int, ...] = tuple(range(8))) -> Path:
    """Handbook questions (by line, the first 8 by default) in 3 variants, one seed, with the fast
    hashing encoder."""
    gold = folder / "gold.jsonl"
    lines = (DEMO / "gold.jsonl").read_text().splitlines(keepends=True)
    gold.write_text("".join(lines[i] for i in items), encoding="utf-8")
    corpus = DEMO / "corpus"
    config = folder / f"{name}.toml"
    config.write_text(
        f"""[audit]
gold = "gold.jsonl"
corpus = "{corpus}"
paraphrases = 3
seeds = [1]
out = "runs-{name}"

[embedder]
model = "hashing"

[[pipelines]]
name = "{name}"
{pipeline}
""",
        encoding="utf-8",
    )
    return config


def correct_by_question(config: Path) -> tuple[str, dict[str, tuple[int, int]], int]:
    from helpers import run_dir_of

    result = invoke("run", config)
    assert result.exit_code in (0, 1), result.output
    report = json.loads((run_dir_of(result) / "report.json").read_text(encoding="utf-8"))
    by_question = {q["qid"]: (q["stats"]["correct"], q["stats"]["runs"]) for q in report["questions"]}
    cited = sum(1 for line in (run_dir_of(result) / "traces.jsonl").read_text().splitlines() if '"answer"' in line)
    return report["gate"]["verdict"], by_question, cited


def test_the_langchain_chain_run_live_and_its_spans_replayed_agree(workdir, monkeypatch):
    """The docs' chain, whose model cites its numbered context as `[n]`, audited twice against the
    gold set: run live as a python pipeline, and replayed from the OTLP spans the OpenInference
    instrumentation exports for the same calls. No mapping code: both read the markers."""
    import sys
    import types

    from openinference.instrumentation.langchain import LangChainInstrumentor

    embeddings, llm = langchain_models()
    app = types.ModuleType("handbook_app")
    try:
        app.__dict__.update(
            run("Export the spans", "LangChain", "The same chain under `ragaudit run`", embeddings=embeddings, llm=llm)
        )
    finally:
        LangChainInstrumentor().uninstrument()  # instrumented again below, for the spans of the gold runs
    monkeypatch.setitem(sys.modules, "handbook_app", app)
    (workdir / "spans.jsonl").unlink()  # the example's own question, not a gold run
    live = gold_config(workdir, "langchain", 'kind = "python"\nfactory = "handbook_app:make_pipeline"')
    verdict, live_correct, answered = correct_by_question(live)
    assert answered == 24 and sum(c for c, _ in live_correct.values()) > 0

    [traces] = workdir.glob("runs-langchain/*/traces.jsonl")  # the live run's traces give the plan
    plan = [json.loads(line) for line in traces.read_text(encoding="utf-8").splitlines()]
    tracer = app.tracer_provider.get_tracer("gold-runs")
    LangChainInstrumentor().instrument(tracer_provider=app.tracer_provider)
    try:
        for t in plan:
            key = {"ragaudit.qid": t["qid"], "ragaudit.variant": t["variant"], "ragaudit.seed": t["seed"]}
            with tracer.start_as_current_span("gold run", attributes=key):
                app.chain.invoke(t["query"])
    finally:
        LangChainInstrumentor().uninstrument()
    spans = gold_config(workdir, "spans", 'kind = "replay"\nformat = "otlp"\ntraces = "spans.jsonl"')
    assert correct_by_question(spans) == (verdict, live_correct, 24)


def runs_of(folder: Path) -> dict[tuple, dict]:
    """The traces of the one run directory under `folder`, by run key."""
    [traces] = folder.glob("*/traces.jsonl")
    return {
        (t["qid"], t["variant"], t["seed"]): t
        for t in (json.loads(line) for line in traces.read_text(encoding="utf-8").splitlines())
    }


def test_the_haystack_pipeline_run_live_and_its_spans_replayed_validate_clean_and_agree(workdir, monkeypatch):
    """The docs' Haystack pipeline (sections split on their own, whole-document offsets, BM25 with
    its ties, a model citing its numbered context as `[n]`) run over the gold set live through
    `from_haystack`, and replayed from the OTLP spans of the same calls: both validate without an
    error, every payload's offsets hold its text, and the two give the same documents in the
    retriever's order (ties too: a re-sort renumbers what the prompt numbered), the same citations
    and the same verdict."""
    import sys
    import types

    from openinference.instrumentation.haystack import HaystackInstrumentor

    app = types.ModuleType("handbook_app")
    try:
        app.__dict__.update(
            run("Export the spans", "Haystack", "The same Haystack pipeline under `ragaudit run`", llm=haystack_llm())
        )
    finally:
        HaystackInstrumentor().uninstrument()
    monkeypatch.setitem(sys.modules, "handbook_app", app)
    (workdir / "spans.jsonl").unlink()  # the example's own question, not a gold run
    items = (*range(6), 51, 52)  # 51, 52: BK-RET-1 and -2, whose BM25 scores tie
    live = gold_config(workdir, "haystack", 'kind = "python"\nfactory = "handbook_app:make_pipeline"', items)
    verdict, live_correct, answered = correct_by_question(live)
    assert answered == 24 and sum(c for c, _ in live_correct.values()) > 0
    live_runs = runs_of(workdir / "runs-haystack")

    tracer = app.tracer_provider.get_tracer("gold-runs")
    HaystackInstrumentor().instrument(tracer_provider=app.tracer_provider)
    try:
        for (qid, variant, seed), t in sorted(live_runs.items()):
            key = {"ragaudit.qid": qid, "ragaudit.variant": variant, "ragaudit.seed": seed}
            with tracer.start_as_current_span("gold run", attributes=key):
                app.ask(t["query"])
    finally:
        HaystackInstrumentor().uninstrument()
    spans = gold_config(workdir, "spans", 'kind = "replay"\nformat = "otlp"\ntraces = "spans.jsonl"', items)
    assert correct_by_question(spans) == (verdict, live_correct, 24)
    replayed = runs_of(workdir / "runs-spans")

    corpus = load_corpus(DEMO / "corpus")
    for name in ("haystack", "spans"):
        [report] = (workdir / f"runs-{name}").glob("*/report.json")
        issues = json.loads(report.read_text(encoding="utf-8"))["summary"]["issues"]
        assert issues["errors"] == 0, (name, issues)
    tied = 0
    for key, t in live_runs.items():
        mine, theirs = t["retrieved"], replayed[key]["retrieved"]
        assert [(p["snippet_id"], p["k_pos"], p["offsets"]) for p in mine] == [
            (p["snippet_id"], p["k_pos"], p["offsets"]) for p in theirs
        ]
        for p in mine:
            assert corpus[p["doc_id"]].text[p["offsets"]["start"] : p["offsets"]["end"]] == p["text"]
        assert parse_trace(t).answer.citations == parse_trace(replayed[key]).answer.citations != ()
        if any(a["score_raw"] == b["score_raw"] for a, b in zip(mine, mine[1:])):
            tied += 1  # the retriever's order of equal scores is kept, not re-sorted
            documents, _ = app.ask(t["query"])  # Haystack's own order
            assert [p["snippet_id"] for p in mine] == [d.id for d in documents]
    assert tied > 0
