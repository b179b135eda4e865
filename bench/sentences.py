"""What the one sentence splitter (pysbd, cached per line) costs, against the regex it replaced.

Over the distinct texts the support scorer reads for the ExpertQA claims (claims and evidence
passages), and over the demo corpus's sections:
  * regex: the replaced splitter (a sentence ends at . ! or ? before a space; a line break ends
    one), re-implemented here as the reference;
  * pysbd, cold: `ragaudit.core.text.sentence_spans` with its line cache emptied;
  * pysbd, warm: the same texts again, every line cached, as an audit meets the same passages run
    after run.
Then `SupportScorer.score_many` over every claim with a hashing encoder (no model, so the time is
text handling), with the splitter's cache cold and warm: the splitter's share of scoring.

    python bench/sentences.py [--data PATH]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from support_cost import DATA, load_pairs

from ragaudit.checks.metrics.embed import HashingEncoder
from ragaudit.checks.metrics.support import SupportScorer
from ragaudit.core.text import _line_sentences, sentence_spans
from ragaudit.io.corpus import load_corpus

CORPUS = Path(__file__).resolve().parents[1] / "gold_sets" / "handbook" / "corpus"
_UNIT = re.compile(r"[^\n]+?(?:[.!?](?=\s)|$)", re.MULTILINE)


def regex_spans(text: str) -> list[tuple[int, int]]:
    """The replaced splitter."""
    spans = []
    for match in _UNIT.finditer(text):
        piece = match.group()
        stripped = piece.strip()
        if stripped:
            start = match.start() + len(piece) - len(piece.lstrip())
            spans.append((start, start + len(stripped)))
    return spans


def timed(split, texts: list[str]) -> tuple[float, list]:
    started = time.perf_counter()
    found = [split(t) for t in texts]
    return time.perf_counter() - started, found


def splitting(name: str, texts: list[str]) -> None:
    chars = sum(map(len, texts))
    print(f"{name}: {len(texts):,} distinct texts, {chars / 1e6:.2f} M characters")
    regex, old = timed(regex_spans, texts)
    _line_sentences.cache_clear()
    cold, new = timed(sentence_spans, texts)
    warm, _ = timed(sentence_spans, texts)
    for label, seconds in (("regex (replaced)", regex), ("pysbd, cold", cold), ("pysbd, warm", warm)):
        print(
            f"  {label:<18} {seconds:8.3f} s  {len(texts) / seconds:12,.0f} texts/s  "
            f"{chars / seconds / 1e6:8.2f} M chars/s"
        )
    differ = sum(a != b for a, b in zip(old, new))
    print(
        f"  cold / regex = {cold / regex:.1f}x, warm / regex = {warm / regex:.2f}x; "
        f"{differ:,} texts ({differ / len(texts):.1%}) split differently"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)

    pairs = load_pairs(args.data)
    texts = list(dict.fromkeys([claim for claim, _ in pairs] + [p for _, cited in pairs for p in cited]))
    splitting(f"{args.data.name}", texts)
    corpus = load_corpus(CORPUS)
    sections = [d.text[s.start : s.end] for d in corpus.documents.values() for s in d.sections]
    splitting("demo corpus sections", sections)

    scorer = SupportScorer(HashingEncoder())
    scorer.score_many(pairs[:20])  # imports and first calls out of the clock
    print(f"support scoring, {len(pairs):,} claims, hashing encoder (text handling only):")
    for label in ("splitter cold", "splitter warm"):
        if label == "splitter cold":
            _line_sentences.cache_clear()
        scorer = SupportScorer(HashingEncoder())
        started = time.perf_counter()
        scorer.score_many(pairs)
        seconds = time.perf_counter() - started
        print(f"  {label:<14} {seconds:8.2f} s  {len(pairs) / seconds:8.1f} claims/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
