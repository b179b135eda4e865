"""Sentence splitting shared by the chunker, the answerer and the support scorer."""

from __future__ import annotations

import re
from functools import lru_cache

# A sentence ends at . ! or ? followed by space; a line break always ends a unit (headings, bullets).
_UNIT = re.compile(r"[^\n]+?(?:[.!?](?=\s)|$)", re.MULTILINE)


def sentence_spans(text: str, offset: int = 0) -> list[tuple[int, int]]:
    """Char spans of the sentences and lines of `text`, whitespace trimmed, shifted by `offset`."""
    spans = []
    for match in _UNIT.finditer(text):
        piece = match.group()
        stripped = piece.strip()
        if stripped:
            lead = len(piece) - len(piece.lstrip())
            start = offset + match.start() + lead
            spans.append((start, start + len(stripped)))
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
