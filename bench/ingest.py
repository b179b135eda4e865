"""Benchmark reading production spans: `ragaudit ingest otlp` and `ragaudit validate --from otlp`
on generated OTLP JSON, at two sizes side by side.

The workload is what a Collector's file exporter writes for a RAG service: one
ExportTraceServiceRequest per line holding a batch of 512 spans (the SDK's default export
batch), ids in hex, typed attribute values; each request of the service makes four spans
(a CHAIN root, an EMBEDDING span, a RETRIEVER span with 5 documents whose metadata carries every
payload field, an LLM span), children ending before their root, and a batch boundary falls
inside traces. Each command runs in a process of its own, timed from the outside (start-up
included) with its peak RSS (the kernel's, from wait4).

Target: at least 20,000 spans/s for ingest + validate, with peak RSS flat across sizes.

    python bench/ingest.py [--spans 1000000] [--small 250000] [--out DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from measure import measure

SEED = 20261124
BATCH = 512
DOCUMENTS = 5
TARGET_RATE = 20_000.0
CLI = Path(sys.executable).with_name("ragaudit")
if not CLI.exists():
    CLI = Path(shutil.which("ragaudit") or "ragaudit")
WORDS = (
    "key rotation admin hardware policy security token password account access review audit "
    "quarterly annual retention backup restore incident report owner vendor contract laptop "
    "device network firewall encryption certificate expiry renewal approval manager request"
).split()
INDEX_HASH = "sha256:" + hashlib.sha256(b"bench-index").hexdigest()


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def attribute(key: str, value) -> dict:
    if isinstance(value, bool):
        typed = {"boolValue": value}
    elif isinstance(value, int):
        typed = {"intValue": str(value)}  # int64 as a string, as protobuf's JSON mapping writes it
    elif isinstance(value, float):
        typed = {"doubleValue": value}
    else:
        typed = {"stringValue": value}
    return {"key": key, "value": typed}


def span(trace_id: str, span_id: str, parent: str, name: str, start: int, attributes: dict) -> dict:
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": "SPAN_KIND_INTERNAL",
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 1_000_000),
        "attributes": [attribute(k, v) for k, v in attributes.items()],
        "status": {},
    }


def request_spans(rng: random.Random, number: int) -> list[dict]:
    """The four spans of one request, in the order they end (children first)."""
    trace_id = f"{rng.getrandbits(128):032x}"
    ids = [f"{rng.getrandbits(64):016x}" for _ in range(4)]
    start = 1_795_000_000_000_000_000 + number * 10_000_000
    question = text(rng, 9).rstrip(".") + "?"
    retriever = {"openinference.span.kind": "RETRIEVER", "input.value": question}
    for i in range(DOCUMENTS):
        section = f"doc-{rng.randrange(200)}/section-{rng.randrange(8)}"
        begin = rng.randrange(20_000)
        content = text(rng, 24)
        metadata = {
            "doc_id": section.split("/")[0],
            "section_id": section,
            "start_char_idx": begin,
            "end_char_idx": begin + len(content),
            "rev": f"{rng.getrandbits(48):012x}",
            "source_url": f"file:///kb/{section}",
            "tokens": 24,
            "index_hash": INDEX_HASH,
            "embed_model": "all-MiniLM-L6-v2:mean",
            "analyzer": "lowercase",
        }
        retriever[f"retrieval.documents.{i}.document.id"] = f"{section}#{begin}"
        retriever[f"retrieval.documents.{i}.document.content"] = content
        retriever[f"retrieval.documents.{i}.document.score"] = round(1.0 - 0.1 * i - rng.random() * 0.05, 6)
        retriever[f"retrieval.documents.{i}.document.metadata"] = json.dumps(metadata)
    answer = text(rng, 14)
    return [
        span(trace_id, ids[1], ids[0], "embed", start + 1, {"openinference.span.kind": "EMBEDDING"}),
        span(trace_id, ids[2], ids[0], "retrieve", start + 2, retriever),
        span(
            trace_id, ids[3], ids[0], "generate", start + 3, {"openinference.span.kind": "LLM", "output.value": answer}
        ),
        span(
            trace_id,
            ids[0],
            "",
            "rag",
            start,
            {"openinference.span.kind": "CHAIN", "input.value": question, "output.value": answer},
        ),
    ]


def generate(path: Path, spans: int) -> int:
    """Write about `spans` spans (whole requests) as OTLP JSON lines; returns the bytes written."""
    rng = random.Random(SEED)
    resource = {"attributes": [attribute("service.name", "kb-rag"), attribute("service.version", "1.4.2")]}
    pending: list[dict] = []
    with open(path, "w", encoding="utf-8") as out:
        for number in range((spans + 3) // 4):
            pending.extend(request_spans(rng, number))
            while len(pending) >= BATCH:
                batch, pending = pending[:BATCH], pending[BATCH:]
                out.write(json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": batch}]}]}))
                out.write("\n")
        if pending:
            out.write(json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": pending}]}]}))
            out.write("\n")
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=1_000_000, help="spans in the large file")
    parser.add_argument("--small", type=int, default=250_000, help="spans in the small file")
    parser.add_argument("--out", type=Path, help="keep the files here (default: a temporary folder)")
    args = parser.parse_args()
    folder = args.out or Path(tempfile.mkdtemp(prefix="ragaudit-ingest-"))
    folder.mkdir(parents=True, exist_ok=True)
    env = {"HF_HUB_OFFLINE": "1", "PATH": str(CLI.parent)}
    rows = []
    try:
        for spans in (args.small, args.spans):
            path = folder / f"otlp-{spans}.jsonl"
            t0 = time.perf_counter()
            size = generate(path, spans)
            spans = (spans + 3) // 4 * 4
            print(f"generated {spans:,} spans ({size / 1e6:,.0f} MB) in {time.perf_counter() - t0:.1f} s", flush=True)
            commands = {
                "ingest": [str(CLI), "-q", "ingest", "otlp", str(path), "--out", str(folder / "traces.jsonl")],
                "ingest + validate": [str(CLI), "-q", "validate", "--from", "otlp", str(path), "--format", "json"],
            }
            for name, command in commands.items():
                before = _children_cpu()
                seconds, rss, _, code = measure(command, env=env)
                cpu = _children_cpu() - before
                rows.append((name, spans, seconds, cpu, rss))
                print(
                    f"  {name:<18} {spans / seconds:>10,.0f} spans/s  {seconds:7.1f} s wall  {cpu:7.1f} s CPU  "
                    f"{rss:6.0f} MB  exit {code}",
                    flush=True,
                )
    finally:
        if args.out is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(
        f"\n{'command':<18} {'spans':>10} {'spans/s':>10} {'spans/CPU-s':>12} {'wall s':>8} {'CPU s':>8} "
        f"{'peak RSS MB':>12}"
    )
    for name, spans, seconds, cpu, rss in rows:
        print(
            f"{name:<18} {spans:>10,} {spans / seconds:>10,.0f} {spans / cpu:>12,.0f} {seconds:>8.1f} {cpu:>8.1f} "
            f"{rss:>12.0f}"
        )
    both = [r for r in rows if r[0] == "ingest + validate"]
    rate = min(spans / seconds for _, spans, seconds, _, _ in both)
    growth = both[-1][4] / both[0][4]
    verdict = "meets" if rate >= TARGET_RATE else "MISSES"
    print(
        f"\ningest + validate: {rate:,.0f} spans/s wall at the slower size ({verdict} the {TARGET_RATE:,.0f} target); "
        f"peak RSS x{growth:.2f} from {both[0][1]:,} to {both[-1][1]:,} spans. Wall time counts waiting for a "
        f"CPU on a busy machine; spans per CPU-second do not (load average now {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} CPUs)."
    )


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
