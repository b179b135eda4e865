"""What the support scorer's batch path costs, cold and warm, against one raw batched encode.

Side by side, in one process and over the same ExpertQA claims:
  (a) raw:  sentence-transformers `encode` of the distinct texts the scorer needs
            (`support.texts_to_encode`), sorted by length, batch 64 — the floor for a cold run;
  (b) cold: `SupportScorer.score_many` over all claims with an empty embedding cache;
  (c) warm: the same again through a new cache object over the file (b) filled, as a later run sees it.
Models are loaded and warmed up before any clock starts, so (a) and (b) time the same work. (a)
runs before and after (b), and each is timed on the wall clock and in CPU seconds of this process:
on a machine others share, the wall clock moves with their load, CPU seconds much less. The goal
is b/a <= 1.2 in CPU seconds: encoding dominates, and each distinct text is encoded once.

    python bench/support_cost.py [--data PATH] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ragaudit.checks.metrics.embed import (
    DEFAULT_MODEL,
    CachedEncoder,
    SentenceTransformerEncoder,
)
from ragaudit.checks.metrics.support import SupportScorer, texts_to_encode

DATA = Path(__file__).resolve().parents[1].parent / "shared/data/expertqa/rand_val.jsonl"
HEADER = re.compile(r"^\[\d+\][ \t]+\S*[ \t]*(?:\n|$)")  # "[3] URL" before each evidence passage
BATCH = 64


def load_pairs(path: Path) -> list[tuple[str, list[str]]]:
    """Every claim with its evidence passages (whatever its label); a claim without one scores 0 at no cost."""
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for _, answer in sorted(record["answers"].items()):
            for claim in answer["claims"]:
                passages = [p for p in (HEADER.sub("", e, count=1).strip() for e in claim["evidence"]) if p]
                pairs.append((claim["claim_string"], passages))
    return pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--limit", type=int, default=None, help="only the first N claims (a quicker run)")
    args = parser.parse_args(argv)

    pairs = load_pairs(args.data)[: args.limit]
    texts = texts_to_encode(pairs)  # distinct, longest first
    with_evidence = sum(1 for _, cited in pairs if cited)
    print(
        f"{args.data.name}: {len(pairs)} claims ({with_evidence} with evidence passages); "
        f"{len(texts)} distinct texts to embed, {sum(map(len, texts))} characters"
    )

    raw_model = SentenceTransformerEncoder(DEFAULT_MODEL, batch_size=BATCH).model
    inner = SentenceTransformerEncoder(DEFAULT_MODEL, batch_size=BATCH)
    warm_up = ["A sentence to warm the model up, not among the texts."] * 8
    raw_model.encode(warm_up, batch_size=BATCH)
    inner.encode(warm_up)  # loads and warms the scorer's model without touching its cache

    with tempfile.TemporaryDirectory() as tmp:
        cache_path = Path(tmp) / "embeddings.sqlite"

        def raw_encode() -> tuple[float, float]:
            started, cpu = time.perf_counter(), time.process_time()
            raw_model.encode(
                texts, batch_size=BATCH, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
            )
            return time.perf_counter() - started, time.process_time() - cpu

        before = raw_encode()
        cold_encoder = CachedEncoder(inner, path=cache_path)
        started, cpu = time.perf_counter(), time.process_time()
        cold_scores = SupportScorer(cold_encoder).score_many(pairs)
        cold, cold_cpu = time.perf_counter() - started, time.process_time() - cpu
        cold_encoder.close()
        after = raw_encode()
        raw, raw_cpu = (before[0] + after[0]) / 2, (before[1] + after[1]) / 2

        warm_encoder = CachedEncoder(inner, path=cache_path)
        started = time.perf_counter()
        warm_scores = SupportScorer(warm_encoder).score_many(pairs)
        warm = time.perf_counter() - started
        warm_encoder.close()

    rows = [
        (
            "(a) raw batched encode of the distinct texts",
            raw,
            f"mean of {before[0]:.1f} s before and {after[0]:.1f} s after (b); {raw_cpu:.1f} CPU s",
        ),
        (
            "(b) score_many, cold cache",
            cold,
            f"{cold_encoder.encoded} texts encoded, {cold_encoder.encode_seconds:.1f} s in the model; {cold_cpu:.1f} CPU s",
        ),
        ("(c) score_many, warm cache", warm, f"{warm_encoder.encoded} texts encoded"),
    ]
    width = max(len(name) for name, _, _ in rows)
    for name, seconds, note in rows:
        line = f"  {name:<{width}}  {seconds:8.1f} s  {len(pairs) / seconds:8.1f} claims/s"
        print(line + (f"  ({note})" if note else ""))
    print(
        f"ratio cold / raw = {cold_cpu / raw_cpu:.2f} in CPU seconds, {cold / raw:.2f} on the wall clock; warm / cold = {warm / cold:.3f}"
    )
    problems = []
    if cold_encoder.encoded != len(texts):
        problems.append(f"the cold run encoded {cold_encoder.encoded} texts, expected each of {len(texts)} once")
    if warm_encoder.encoded:
        problems.append(f"the warm run encoded {warm_encoder.encoded} texts, expected none")
    if not np.allclose(cold_scores, warm_scores, atol=1e-6):
        problems.append("warm scores differ from cold ones")
    for problem in problems:
        print("problem: " + problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
