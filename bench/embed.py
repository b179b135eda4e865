"""Embedding cost of the demo: texts requested, unique texts, cache hit rate, and the time the
cached encoder spends against one raw `SentenceTransformer.encode` of the unique texts, measured
side by side in one run; then a warm second run, which must encode nothing.

    .venv/bin/python bench/embed.py [--config configs/default.toml]

Targets: overhead of the cached path <= 20% on a cold cache; a warm second run encodes nothing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class Recording:
    """Wraps the model encoder to record every text the cache could not answer."""

    def __init__(self, inner):
        self.inner, self.model_id, self.texts = inner, inner.model_id, []

    def encode(self, texts):
        self.texts.extend(texts)
        return self.inner.encode(texts)


def audit_once(config_path: Path, cache: Path, out: Path):
    """One full demo run (retrieval, metrics, support) through a cached encoder on `cache`."""
    from ragaudit.checks.metrics.embed import CachedEncoder, SentenceTransformerEncoder
    from ragaudit.io.config import load_config
    from ragaudit.outputs.writing import build
    from ragaudit.pipelines import runner

    config = load_config(config_path)
    model = Recording(SentenceTransformerEncoder(config.embedder.model))
    _ = model.inner.model  # load the weights before timing, as the raw baseline does
    encoder = CachedEncoder(model, cache)
    inputs = runner.Inputs.from_config(config, encoder=encoder)
    started = time.perf_counter()
    result = runner.run(config, inputs=inputs, out=out)
    inputs.check_gold()
    build(result.run_dir, inputs)
    return encoder, model, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "default.toml")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        cache, out = Path(tmp) / "embeddings.sqlite", Path(tmp) / "runs"
        cold, model, cold_total = audit_once(args.config, cache, out)
        unique = list(dict.fromkeys(model.texts))
        raw_model = model.inner.model
        started = time.perf_counter()
        raw_model.encode(
            unique,
            batch_size=model.inner.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        raw = time.perf_counter() - started
        warm, warm_model, warm_total = audit_once(args.config, cache, out)

    rate = cold.hits / cold.requested if cold.requested else 0.0
    overhead = (cold.encode_seconds - raw) / raw if raw else 0.0
    print(f"{'':34}{'cold':>12}{'warm':>12}")
    print(f"{'texts requested':34}{cold.requested:>12,}{warm.requested:>12,}")
    print(f"{'cache hits':34}{cold.hits:>12,}{warm.hits:>12,}")
    print(f"{'cache hit rate':34}{rate:>12.1%}{warm.hits / max(warm.requested, 1):>12.1%}")
    print(f"{'texts encoded by the model':34}{cold.encoded:>12,}{warm.encoded:>12,}")
    print(f"{'unique texts':34}{len(unique):>12,}")
    print(f"{'model time, cached path (s)':34}{cold.encode_seconds:>12.2f}{warm.encode_seconds:>12.2f}")
    print(f"{'whole audit (s)':34}{cold_total:>12.2f}{warm_total:>12.2f}")
    print(f"{'raw encode of unique texts (s)':34}{raw:>12.2f}")
    print(
        f"\noverhead of the cached path vs one raw encode = {overhead:+.1%}  (target <= +20%: "
        f"{'met' if overhead <= 0.20 else 'NOT met'})"
    )
    print(f"warm run encodes {warm.encoded} texts  (target 0: {'met' if warm.encoded == 0 else 'NOT met'})")


if __name__ == "__main__":
    main()
