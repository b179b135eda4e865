"""Benchmark `ragaudit audit-log` on generated production traces, at two sizes side by side.

The workload is what a handbook RAG service would log over 28 days: each trace retrieves 5
chunks of the handbook corpus (sentences of one section, exact offsets, every payload field), and
answers with one or two sentences of its first chunk citing it; one answer in 50 states a changed
number, one payload in 200 carries a stale revision, and the index is rebuilt on day 21. Queries
and answers vary, so scoring has new texts to encode throughout. Each size runs in a process of
its own, timed from the outside (start-up included) with its peak RSS (the kernel's, from wait4).

Target: peak RSS flat across sizes (memory depends on the windows, not the traces).

    python bench/audit_log.py [--traces 40000] [--small 10000] [--model hashing] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from measure import measure

from ragaudit.core.analyzers import ANALYZERS
from ragaudit.core.text import sentence_spans
from ragaudit.io.corpus import load_corpus

SEED = 20261124
CORPUS = Path(__file__).resolve().parents[1] / "gold_sets" / "handbook" / "corpus"
CLI = Path(sys.executable).with_name("ragaudit")
if not CLI.exists():
    CLI = Path(shutil.which("ragaudit") or "ragaudit")
DAYS = 28
REBUILT_ON = 21
ANALYZER = "lowercase+ascii_fold"


def chunks_of(corpus) -> list[dict]:
    """Every sentence of every section with at least three words, as a payload without rank or score."""
    count = ANALYZERS[ANALYZER].count
    out = []
    for doc in corpus.documents.values():
        for section in doc.sections:
            for start, end in sentence_spans(doc.text[section.start : section.end], section.start):
                text = doc.text[start:end]
                if len(text.split()) < 3 or text.lstrip().startswith("#"):
                    continue
                out.append(
                    {
                        "doc_id": doc.doc_id,
                        "section_id": section.section_id,
                        "snippet_id": f"{doc.doc_id}:{start}-{end}",
                        "source_url": f"{doc.source_url}#{section.section_id}",
                        "offsets": {"start": start, "end": end, "unit": "char"},
                        "tokens": count(text),
                        "embed_model": "bench-embedder",
                        "analyzer": ANALYZER,
                        "rev": doc.rev,
                        "text": text,
                    }
                )
    return out


def generate(path: Path, traces: int, chunks: list[dict]) -> None:
    rng = random.Random(SEED)
    with open(path, "w", encoding="utf-8") as out:
        for n in range(traces):
            day = n * DAYS // traces
            index_hash = "sha256:bench-index-v2" if day >= REBUILT_ON else "sha256:bench-index-v1"
            picked = rng.sample(chunks, 5)
            retrieved = []
            for k, chunk in enumerate(picked, start=1):
                payload = dict(chunk, index_hash=index_hash, score_raw=round(10.0 - k - rng.random() / 2, 4), k_pos=k)
                if rng.random() < 0.005:
                    payload["rev"] = "000000000000"
                retrieved.append(payload)
            words = picked[0]["text"].split()
            query = f"{rng.choice(['What', 'How', 'When', 'Who'])} {' '.join(rng.sample(words, min(6, len(words))))}?"
            answer = picked[0]["text"]
            if rng.random() < 0.02:
                answer = f"{answer.rstrip('.')} within {rng.randint(100, 999)} days."
            stamp = f"2026-11-{1 + day:02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z"
            trace = {
                "schema": "ragaudit.trace/1",
                "qid": f"trace-{n:08d}",
                "query": query,
                "config": "handbook-rag",
                "retrieved_at": stamp,
                "index": {"index_hash": index_hash, "analyzer": ANALYZER, "embed_model": "bench-embedder"},
                "retrieved": retrieved,
                "answer": {
                    "text": f"{answer.rstrip('.')} [{picked[0]['snippet_id']}].",
                    "segments": [{"seg": 1, "text": answer, "citations": [picked[0]["snippet_id"]]}],
                },
            }
            out.write(json.dumps(trace) + "\n")


def run(path: Path, out: Path, model: str) -> tuple[float, float, dict]:
    config = path.with_suffix(".toml")
    config.write_text(f'[embedder]\nmodel = "{model}"\n', encoding="utf-8")
    command = [str(CLI), "--quiet", "audit-log", str(path), "--corpus", str(CORPUS), "--config", str(config)]
    seconds, rss, _, _ = measure([*command, "--window", "1d", "--out", str(out)])
    return seconds, rss, json.loads((out / "audit_log.json").read_text(encoding="utf-8"))


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument("--traces", type=int, default=40_000)
    ap.add_argument("--small", type=int, default=10_000)
    ap.add_argument("--model", default="hashing", help="the embedder: hashing, or all-MiniLM-L6-v2")
    ap.add_argument("--out", type=Path, help="keep the inputs and outputs here (default: a temporary folder)")
    args = ap.parse_args()
    chunks = chunks_of(load_corpus(CORPUS))
    with tempfile.TemporaryDirectory(prefix="ragaudit-bench-") as tmp:
        root = args.out or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        print(f"{'traces':>8} {'seconds':>8} {'traces/s':>9} {'peak RSS MB':>12} {'windows':>8} {'drift':>6} "
              f"{'errors':>7} {'halluc.':>8} {'json KB':>8} {'html KB':>8} {'sqlite MB':>10}")  # fmt: skip
        peaks = []
        for size in (args.small, args.traces):
            path = root / f"traces-{size}.jsonl"
            t0 = time.perf_counter()
            generate(path, size, chunks)
            made = time.perf_counter() - t0
            out = root / f"audit-log-{size}"
            seconds, rss, model = run(path, out, args.model)
            peaks.append(rss)
            s = model["summary"]
            print(
                f"{size:>8} {seconds:>8.1f} {size / seconds:>9.0f} {rss:>12.0f} {s['windows']:>8} {s['drift']:>6} "
                f"{s['errors']:>7} {s['hallucinations']:>8} {(out / 'audit_log.json').stat().st_size / 1024:>8.0f} "
                f"{(out / 'audit_log.html').stat().st_size / 1024:>8.0f} "
                f"{(out / 'rag_traces.sqlite').stat().st_size / 2**20:>10.1f}"
                f"   (generated in {made:.1f} s)"
            )
        growth = peaks[1] / peaks[0] if peaks[0] else float("inf")
        print(f"peak RSS x{growth:.2f} for x{args.traces / args.small:.0f} the traces (model {args.model})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
