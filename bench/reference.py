"""Throughput of the reference pipeline on the handbook corpus and on a copy of it 100 times the
size, for the committed code ("before") and the working tree ("after"), side by side.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/reference.py [--copies 100] [--retriever bm25]
        [--rerank mmr] [--before HEAD] [--model all-MiniLM-L6-v2|hashing] [--cache PATH] [--profile]

The large corpus is built in a temporary folder: the handbook documents as they are, plus
`copies - 1` copies of each named `<doc>--copy<NNN>.md`, every section of a copy ending with one
more sentence naming its copy number, so that no chunk of a copy equals another. The gold set is
the handbook's `gold.jsonl`, whose questions point at the original documents.

Each implementation builds its own `ReferencePipeline` and runs gold x 3 variants x seeds 1, 2
directly (no runner): one untimed pass warms the embedding cache (the answerer encodes the
query and the retrieved sentences), then `--passes` timed passes. The "before" code is the
reference package and `metrics/embed.py` at `--before` (read with `git show`), loaded under
another name next to the working tree's; the rest of ragaudit is the working tree's for both.
The traces of the two are compared: retrieved snippets in order, every score, every answer.

Target: bm25 on the 100x corpus >= 600 runs/s in one process with a warm embedding cache.
Nothing is downloaded; the model is loaded from a local folder or the installed package.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HANDBOOK = ROOT / "gold_sets" / "handbook"
sys.path.insert(0, str(ROOT))

PACKAGE = "ragaudit/pipelines/reference"
EMBED = "ragaudit/checks/metrics/embed.py"
BEFORE = "_ragaudit_before"  # the name the committed copy is imported under
TARGET = 600.0


def build_corpus(folder: Path, copies: int) -> Path:
    """The handbook corpus and `copies - 1` perturbed copies of each of its documents, in `folder`."""
    from ragaudit.io.corpus import markdown_sections

    folder.mkdir(parents=True, exist_ok=True)
    for source in sorted((HANDBOOK / "corpus").iterdir()):
        text = source.read_text(encoding="utf-8")
        (folder / source.name).write_text(text, encoding="utf-8")
        ends = [s.start + len(text[s.start : s.end].rstrip()) for s in markdown_sections(text)]
        for copy in range(1, copies):
            changed = text
            for end in sorted(ends, reverse=True):  # from the back, so earlier offsets stay valid
                changed = f"{changed[:end]}\n\nThis is copy {copy} of the section.{changed[end:]}"
            (folder / f"{source.stem}--copy{copy:03d}{source.suffix}").write_text(changed, encoding="utf-8")
    return folder


def load_before(rev: str, folder: Path):
    """The reference package and embed module at `rev`, importable as `_ragaudit_before`."""

    def show(path: str) -> str:
        return subprocess.run(
            ["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout

    names = subprocess.run(
        ["git", "ls-tree", "--name-only", rev, f"{PACKAGE}/"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    package = folder / BEFORE
    package.mkdir(parents=True)
    for path in [*names, EMBED]:
        if not path.endswith(".py"):
            continue
        source = show(path).replace("ragaudit.pipelines.reference", BEFORE)
        source = source.replace("ragaudit.checks.metrics.embed", f"{BEFORE}.embed")
        (package / Path(path).name).write_text(source, encoding="utf-8")
    sys.path.insert(0, str(folder))
    return importlib.import_module(BEFORE), importlib.import_module(f"{BEFORE}.embed")


def make_encoder(embed, spec: str, cache: Path, model=None):
    """A cached encoder from the module `embed`, sharing one loaded model between implementations."""
    if spec == "hashing":
        return embed.CachedEncoder(embed.HashingEncoder(), cache), None
    model = model or embed.SentenceTransformerEncoder(spec)
    _ = model.model  # load the weights before anything is timed
    return embed.CachedEncoder(model, cache), model


def requests(items, seeds=(1, 2)):
    from ragaudit.pipelines.base import Request

    return [
        Request(item.qid, variant, seed, query, 5)
        for item in items
        for variant, query in enumerate(item.variants[:3])
        for seed in seeds
    ]


def fingerprint(trace) -> tuple:
    """Everything a run decides: the retrieved list with its scores, and the answer."""
    rows = tuple((p.snippet_id, p.k_pos, p.k_final, p.score_raw, p.score_norm, p.rerank_score) for p in trace.retrieved)
    return rows, trace.answer.raw if trace.answer else None


def measure(package, corpus, encoder, batch, *, retriever: str, rerank: str | None, passes: int, profile: bool) -> dict:
    encoded, started = encoder.encoded, time.perf_counter()
    pipeline = package.ReferencePipeline("bench", corpus, retriever=retriever, rerank=rerank, encoder=encoder)
    indexing = time.perf_counter() - started
    cold = encoder.encoded - encoded  # chunk texts a dense index found missing from the cache
    traces = [fingerprint(pipeline.run(r)) for r in batch]  # warms the embedding cache
    profiler = cProfile.Profile() if profile else None
    elapsed = 0.0
    for _ in range(passes):
        if profiler:
            profiler.enable()
        started = time.perf_counter()
        for r in batch:
            pipeline.run(r)
        elapsed += time.perf_counter() - started
        if profiler:
            profiler.disable()
    report = None
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(12)
        report = out.getvalue()
    return {
        "chunks": len(pipeline.chunks),
        "indexing": indexing,
        "cold": cold,
        "rate": passes * len(batch) / elapsed,
        "traces": traces,
        "profile": report,
    }


def index_time(result: dict) -> str:
    return f"{result['indexing']:.2f}{'*' if result['cold'] else ''}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=100, help="size of the large corpus, in handbooks")
    parser.add_argument("--retriever", default="bm25", choices=("bm25", "tfidf", "dense", "hybrid"))
    parser.add_argument("--rerank", choices=("mmr",), default=None)
    parser.add_argument("--before", default="HEAD", help="git revision of the 'before' code; 'none' to skip it")
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="embedding model, or 'hashing' (no model)")
    parser.add_argument(
        "--cache", type=Path, default=None, help="embedding cache file (default: ragaudit's, so later runs start warm)"
    )
    parser.add_argument("--passes", type=int, default=2, help="timed passes over the runs")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions of each")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import ragaudit.pipelines.reference as after
    from ragaudit.checks.metrics import embed as embed_after
    from ragaudit.checks.metrics.embed import cache_dir
    from ragaudit.io.corpus import load_corpus
    from ragaudit.io.gold import read_gold

    items, problems = read_gold(HANDBOOK / "gold.jsonl")
    if problems:
        raise SystemExit(f"gold set: {problems}")
    batch = requests(items)
    cache = args.cache or cache_dir() / "embeddings.sqlite"
    with tempfile.TemporaryDirectory() as tmp:
        implementations = {}
        if args.before != "none":
            try:
                implementations["before"] = load_before(args.before, Path(tmp) / "before")
            except (OSError, subprocess.CalledProcessError) as exc:
                print(f"no 'before' code at {args.before!r} ({exc}); measuring the working tree only")
        implementations["after"] = (after, embed_after)
        started = time.perf_counter()
        corpora = {
            "1x": load_corpus(HANDBOOK / "corpus"),
            f"{args.copies}x": load_corpus(build_corpus(Path(tmp) / "corpus", args.copies)),
        }
        print(f"built and loaded the {args.copies}x corpus in {time.perf_counter() - started:.1f}s")

        results, model = {}, None
        for label, corpus in corpora.items():
            for name, (package, embed) in implementations.items():
                encoder, model = make_encoder(embed, args.model, cache, model)
                results[label, name] = measure(
                    package,
                    corpus,
                    encoder,
                    batch,
                    retriever=args.retriever,
                    rerank=args.rerank,
                    passes=args.passes,
                    profile=args.profile,
                )
                encoder.close()
                print(f"  {label:>5} {name:<7} {results[label, name]['rate']:9.0f} runs/s", flush=True)

    title = f"{args.retriever}{'+' + args.rerank if args.rerank else ''}"
    print(
        f"\nreference {title}: {len(batch)} runs per pass (gold x 3 variants x 2 seeds), "
        f"{args.passes} timed passes, warm cache, model {args.model}"
    )
    print(
        f"{'corpus':>8}{'chunks':>9}{'':3}{'index s':>10}{'runs/s':>10}{'index s':>10}{'runs/s':>10}"
        f"{'speed-up':>10}  traces"
    )
    print(f"{'':20}{'---- before ----':>20}{'---- after -----':>20}")
    for label in corpora:
        a = results[label, "after"]
        b = results.get((label, "before"))
        same = "" if b is None else ("identical" if a["traces"] == b["traces"] else "DIFFERENT")
        left = f"{index_time(b):>10}{b['rate']:>10.0f}" if b else f"{'-':>10}{'-':>10}"
        speedup = f"{a['rate'] / b['rate']:>9.1f}x" if b else f"{'-':>10}"
        print(f"{label:>8}{a['chunks']:>9,}{'':3}{left}{index_time(a):>10}{a['rate']:>10.0f}{speedup}  {same}")
    if any(r["cold"] for r in results.values()):
        print("* the index time includes encoding chunk texts that were not in the embedding cache yet")
    big = results[f"{args.copies}x", "after"]["rate"]
    if args.retriever == "bm25" and args.rerank is None and args.copies == 100:
        print(
            f"\nbm25 on the 100x corpus: {big:.0f} runs/s (target >= {TARGET:.0f}: "
            f"{'met' if big >= TARGET else 'NOT met'})"
        )
    if args.profile:
        for (label, name), r in results.items():
            print(f"\n== profile: {label} {name}\n{r['profile']}")


if __name__ == "__main__":
    main()
