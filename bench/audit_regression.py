"""Benchmark `ragaudit audit-log`'s window-over-window regression check: false-alarm and detection
rates over simulated days of production spans.

Traffic: the handbook's reference RAG (BM25 over the bundled corpus, the extractive cite-first
answerer) serving the gold set's questions and paraphrases (240 queries). A day draws
`--traces` requests from that distribution (with replacement: days differ in which questions
come), each request recorded as OpenInference spans by the OpenTelemetry SDK (a CHAIN root with
the question and the answer with its `[snippet_id]` markers, a RETRIEVER span whose documents
carry every payload field, an LLM span) at a time within its UTC day, and exported as OTLP JSON.
A replicate is `--days` days of one export, the last one the case's:

* `unchanged`: the same traffic; any regression named is a false alarm;
* `uncited_fact`: one answer in ten gets a sentence from a retrieved passage it does not cite,
  under the citation marker of its last sentence (the index id is unchanged);
* `k_5_to_2`: the retriever returns 2 documents instead of 5.

Each replicate is audited by `ragaudit.audit_log(..., fmt="otlp", window="1d")`; the earlier days
give the noise floor. Printed per case: the replicates, how many named a regression in the last
window (detection, or false alarm for `unchanged`) and in any window, and the metrics named.

    python bench/audit_regression.py [--replicates 20] [--days 5] [--traces 150] [--model hashing]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HANDBOOK = ROOT / "gold_sets" / "handbook"
SEED = 20261207
CASES = ("unchanged", "uncited_fact", "k_5_to_2")
PLANTED_SHARE = 0.1


def queries() -> list[tuple[str, int, str]]:
    """(qid, variant, text) of every gold question and paraphrase."""
    out = []
    for line in (HANDBOOK / "gold.jsonl").read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        for variant, text in enumerate([item["question"], *item.get("paraphrases", [])]):
            out.append((item["qid"], variant, text))
    return out


def served(corpus, encoder, k: int) -> dict[tuple[str, int], object]:
    """The trace of every query under the reference pipeline with cutoff k."""
    from ragaudit.pipelines.base import Request
    from ragaudit.pipelines.reference import ReferencePipeline

    pipeline = ReferencePipeline("handbook-rag", corpus, retriever="bm25", k=k, encoder=encoder)
    return {(qid, v): pipeline.run(Request(qid, v, 1, text, k)) for qid, v, text in queries()}


def answer_text(trace) -> str:
    """The answer as an LLM app logs it: each sentence followed by its `[snippet_id]` markers."""
    return " ".join(s.text.rstrip(".") + "".join(f" [{c}]" for c in s.citations) + "." for s in trace.answer.segments)


def planted(trace, rng: random.Random) -> str:
    """The answer with one more sentence, taken from a retrieved passage it does not cite, under
    the marker of its last sentence."""
    from ragaudit.core.text import sentences

    cited = {c for s in trace.answer.segments for c in s.citations}
    others = [p for p in trace.retrieved if p.snippet_id not in cited and p.text]
    facts = [s for p in others for s in sentences(p.text) if len(s.split()) >= 5 and not s.lstrip().startswith("#")]
    text = answer_text(trace)
    if not facts or not trace.answer.segments:
        return text
    fact = rng.choice(facts).strip().rstrip(".")
    marker = "".join(f" [{c}]" for c in trace.answer.segments[-1].citations)
    return f"{text} {fact}{marker}."


def record(tracer, trace, answer: str, at_ns: int) -> None:
    """One request as OpenInference spans, starting at `at_ns`."""
    from openinference.semconv.trace import DocumentAttributes as D
    from openinference.semconv.trace import OpenInferenceSpanKindValues as Kind
    from openinference.semconv.trace import SpanAttributes as S

    documents = {}
    for i, p in enumerate(trace.retrieved):
        prefix = f"{S.RETRIEVAL_DOCUMENTS}.{i}."
        metadata = {
            "doc_id": p.doc_id,
            "section_id": p.section_id,
            "start_char_idx": p.offsets.start,
            "end_char_idx": p.offsets.end,
            "rev": p.rev,
            "source_url": p.source_url,
            "tokens": p.tokens,
            "index_hash": p.index_hash,
            "analyzer": p.analyzer,
            "embed_model": p.embed_model,
        }
        documents[prefix + D.DOCUMENT_ID] = p.snippet_id
        documents[prefix + D.DOCUMENT_CONTENT] = p.text
        documents[prefix + D.DOCUMENT_SCORE] = p.score_raw
        documents[prefix + D.DOCUMENT_METADATA] = json.dumps(metadata)
    root = {S.OPENINFERENCE_SPAN_KIND: Kind.CHAIN.value, S.INPUT_VALUE: trace.query}
    with tracer.start_as_current_span("rag", attributes=root, start_time=at_ns) as span:
        retriever = {S.OPENINFERENCE_SPAN_KIND: Kind.RETRIEVER.value, S.INPUT_VALUE: trace.query, **documents}
        with tracer.start_as_current_span("retrieve", attributes=retriever, start_time=at_ns + 1_000_000):
            pass
        llm = {S.OPENINFERENCE_SPAN_KIND: Kind.LLM.value, S.OUTPUT_VALUE: answer}
        with tracer.start_as_current_span("llm", attributes=llm, start_time=at_ns + 2_000_000):
            pass
        span.set_attribute(S.OUTPUT_VALUE, answer)


def export(days: list[list[tuple[object, str]]], path: Path) -> None:
    """Days of (trace, answer) as OTLP JSON lines, one request per line, as a Collector writes them."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "handbook-rag"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("handbook-rag")
    first = int(datetime(2026, 11, 2, tzinfo=timezone.utc).timestamp())
    with path.open("w", encoding="utf-8") as out:
        for d, day in enumerate(days):
            for i, (trace, answer) in enumerate(day):
                at = (first + d * 86_400 + (i * 86_000) // len(day)) * 1_000_000_000
                record(tracer, trace, answer, at)
            out.write(MessageToJson(encode_spans(exporter.get_finished_spans()), indent=None) + "\n")
            exporter.clear()


def day_of(pool: dict, keys: list, rng: random.Random, count: int, plant: bool) -> list[tuple[object, str]]:
    out = []
    for key in rng.choices(keys, k=count):
        trace = pool[key]
        answer = planted(trace, rng) if plant and rng.random() < PLANTED_SHARE else answer_text(trace)
        out.append((trace, answer))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--days", type=int, default=5)
    parser.add_argument("--traces", type=int, default=150)
    parser.add_argument("--model", default="hashing", help="hashing, or all-MiniLM-L6-v2 (the bundled model)")
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args(argv)

    import ragaudit
    from ragaudit.checks.metrics.embed import make_encoder
    from ragaudit.io.corpus import load_corpus

    corpus = load_corpus(HANDBOOK / "corpus")
    encoder = make_encoder(args.model)
    pools = {5: served(corpus, encoder, 5), 2: served(corpus, encoder, 2)}
    keys = sorted(pools[5])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "audit.toml"
        config.write_text(f'[embedder]\nmodel = "{args.model}"\n', encoding="utf-8")
        for case in args.cases.split(","):
            last = anywhere = 0
            named: Counter = Counter()
            started = time.perf_counter()
            for r in range(args.replicates):
                rng = random.Random(f"{SEED}/{case}/{r}")
                days = [day_of(pools[5], keys, rng, args.traces, False) for _ in range(args.days - 1)]
                days.append(
                    day_of(pools[2 if case == "k_5_to_2" else 5], keys, rng, args.traces, case == "uncited_fact")
                )
                spans = Path(tmp) / f"{case}-{r}.jsonl"
                export(days, spans)
                result = ragaudit.audit_log(
                    [spans], fmt="otlp", corpus=HANDBOOK / "corpus", config=config, window="1d",
                    out=Path(tmp) / f"{case}-{r}", encoder=encoder,
                )  # fmt: skip
                found = result.model["health"]["regressions"]
                final = result.model["windows"][args.days - 1]["window"]
                in_last = [f for f in found if f["window"] == final and f["against"] == "previous"]
                last += bool(in_last)
                anywhere += bool(found)
                named.update({f["metric"] for f in in_last})
            seconds = time.perf_counter() - started
            rows.append((case, args.replicates, last, anywhere, named, seconds / args.replicates))
    print(f"{args.days} days of {args.traces} traces per replicate, model {args.model}; a regression named in:")
    print(f"{'case':<14} {'pairs':>5} {'last day':>9} {'any day':>8}  {'s/replicate':>11}  metrics named (last day)")
    for case, n, last, anywhere, named, seconds in rows:
        rate = "false alarms" if case == "unchanged" else "detected"
        metrics = ", ".join(f"{m} {c}" for m, c in named.most_common()) or "-"
        print(f"{case:<14} {n:>5} {last / n:>8.0%} {anywhere / n:>8.0%}  {seconds:>11.1f}  {metrics}  ({rate})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
