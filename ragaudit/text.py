"""Sentence splitting shared by the chunker, the answerer and the support scorer."""

from __future__ import annotations

import re
from functools import lru_cache

_LINE = re.compile(r"[^\n]+")


@lru_cache(maxsize=1)
def _segmenter():
    import pysbd

    return pysbd.Segmenter(language="en", clean=False, char_span=True)


@lru_cache(maxsize=65_536)  # the same passages come back run after run
def _line_sentences(line: str) -> tuple[tuple[int, int], ...]:
    """Char spans of the sentences of one line, by pysbd (which keeps "e.g.", "Dr.", "U.S.", "3.5"
    and ellipses inside their sentence), whitespace trimmed; a piece that opens in lower case
    continues the sentence before it."""
    spans: list[tuple[int, int]] = []
    for found in _segmenter().segment(line):
        piece = line[found.start : found.end]
        stripped = piece.strip()
        if not stripped:
            continue
        start = found.start + len(piece) - len(piece.lstrip())
        if spans and stripped[0].islower():  # "approx. five dollars": no sentence opens in lower case
            spans[-1] = (spans[-1][0], start + len(stripped))
        else:
            spans.append((start, start + len(stripped)))
    return tuple(spans)


def sentence_spans(text: str, offset: int = 0) -> list[tuple[int, int]]:
    """Char spans of the sentences of `text`, shifted by `offset`. A line break always ends a
    sentence (headings, bullets, table rows); within a line, pysbd decides. This is the one
    sentence splitter: the chunker, the answerer, the support scorer and the adapters use it."""
    spans: list[tuple[int, int]] = []
    for line in _LINE.finditer(text):
        base = offset + line.start()
        spans.extend((base + a, base + b) for a, b in _line_sentences(line.group()))
    return spans


def sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]


# The one stopword list: function words that say nothing about what a sentence claims.
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each either else etc ever every few
for from further had has have having he her here hers herself him himself his how however i if in into is it
its itself just may me might more most much must my myself no nor not now of off often on once one only or
other our ours ourselves out over own per same shall she should so some such than that the their theirs them
themselves then there these they this those through thus to too under until up upon us very via was we were
what when where which while who whom whose why will with within without would yet you your yours""".split()
)
_WORD = re.compile(r"[^\W_]+")


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A crude suffix stripper: enough to match "rotated"/"rotation"/"rotates" on both sides."""
    for suffix in (
        "ational",
        "ations",
        "ation",
        "ities",
        "ity",
        "ments",
        "ment",
        "ness",
        "ings",
        "ing",
        "ies",
        "ied",
        "ers",
        "er",
        "ed",
        "es",
        "ly",
        "s",
        "e",
        "al",
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_stems(text: str) -> list[str]:
    """The stems of the words of `text` that are neither stopwords nor bare numbers, in order."""
    return [stem(w) for w in (t.lower() for t in _WORD.findall(text)) if w not in STOPWORDS and not w.isdigit()]
