"""Claims (docs/reference.md §3): an answer split into the sentences it asserts, each with the sources it cites.

A claim is a sentence of the answer, by the one sentence splitter. It cites the snippets named by
its own citation markers; a marker that opens a sentence belongs to the sentence before it ("…
within 12 hours. [1] Keys are …", "…12 hours.[1][2]"), as LLMs often write it. A sentence without
a marker of its own takes those of the next marked sentence of its paragraph (LLMs often cite once
at the end of a paragraph), and is uncited when none follows. When the answer gives segments,
every sentence of a segment without markers cites the segment's citations; when it gives a
cite-first JSON list and no marker at all, every sentence cites that list.

Sentences that assert nothing are not claims: an opener such as "According to the documentation:"
or "Here is what I found." has no content word beyond the words answers use to talk about sources.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import lru_cache

from ragaudit.markers import MARKER, marker_ids
from ragaudit.text import STOPWORDS, sentence_spans
from ragaudit.types import Answer, Segment

# Words answers use to talk about their sources and themselves; a sentence of only these (and
# stopwords) asserts nothing about the question.
DISCOURSE = frozenset(
    """according accordingly answer answers based brief briefly certainly context contexts document documentation
documents excerpt excerpts explains following found general generally given here information mentioned note noted
passage passages provided question questions quick quickly reference references says short source sources state
stated states summary summarise summarize sure text texts typically way yes""".split()
)
_WORD = re.compile(r"[^\W_]+")
_PARAGRAPH = re.compile(r"\n\s*\n")


@dataclass(frozen=True, slots=True)
class Claim:
    n: int  # 1-based position among the answer's claims
    seg: int  # the answer segment it belongs to (1 for an answer given as text alone)
    text: str  # the sentence as written, its own markers included
    citations: tuple[str, ...]  # the snippet ids it cites
    cited_by: str  # "marker", "next" (the next marked sentence's), "segment", "answer" or "none"


def asserts(text: str) -> bool:
    """Does the sentence say anything? Some word that is neither a stopword nor discourse."""
    plain = MARKER.sub(" ", text)
    return any(w not in STOPWORDS and w not in DISCOURSE for w in (t.lower() for t in _WORD.findall(plain)))


@dataclass(frozen=True, slots=True)
class _Sentence:
    text: str
    ids: tuple[str, ...]  # from its own markers, leading markers moved to the sentence before
    paragraph: int


@lru_cache(maxsize=1 << 14)
def _sentences(text: str) -> tuple[_Sentence, ...]:
    """The sentences of `text` with the ids of the markers that belong to each."""
    out: list[_Sentence] = []
    for paragraph, block in enumerate(_split_paragraphs(text)):
        pieces: list[list] = []  # [text, ids]
        for a, b in sentence_spans(block):
            piece = block[a:b]
            lead = _leading_markers(piece)
            if lead and pieces:
                head = piece[:lead]
                pieces[-1][0] = f"{pieces[-1][0]} {head.strip()}"
                pieces[-1][1] += _ids(head)
                piece = piece[lead:].strip()
                if not piece:
                    continue
            pieces.append([piece, _ids(piece)])
        out += [_Sentence(p, tuple(dict.fromkeys(ids)), paragraph) for p, ids in pieces]
    return tuple(out)


def _split_paragraphs(text: str) -> list[str]:
    return [p for p in _PARAGRAPH.split(text) if p.strip()]


def _leading_markers(piece: str) -> int:
    """Length of the run of markers (and spaces or closing punctuation) that opens `piece`."""
    at = 0
    while m := MARKER.match(piece, at + len(piece[at:]) - len(piece[at:].lstrip(" \t.,;:"))):
        at = m.end()
    return at


def _ids(text: str) -> list[str]:
    return [i for m in MARKER.finditer(text) for i in marker_ids(m)]


def _inherit(sentences: list[_Sentence]) -> list[tuple[tuple[str, ...], str]]:
    """Each sentence's citations and how it got them: its own markers, else the next marked
    sentence's of its paragraph, else none."""
    out: list[tuple[tuple[str, ...], str]] = []
    following: tuple[str, ...] = ()
    paragraph = None
    for s in reversed(sentences):
        if s.paragraph != paragraph:
            following, paragraph = (), s.paragraph
        if s.ids:
            following = s.ids
            out.append((s.ids, "marker"))
        else:
            out.append((following, "next" if following else "none"))
    return out[::-1]


def claims_of(answer: Answer | None) -> list[Claim]:
    """The claims of an answer, in order (docs/reference.md §3)."""
    if answer is None:
        return []
    claims: list[Claim] = []
    if answer.segments:
        for segment in answer.segments:
            # a segment's own citations say what it cites: a bracket in its text that names none of
            # them ("[2]" copied from a web page) is text, not a marker
            sentences = [
                dataclasses.replace(s, ids=tuple(i for i in s.ids if i in segment.citations))
                for s in _sentences(segment.text)
            ]
            for s, (ids, how) in zip(sentences, _inherit(sentences)):
                if how == "none":
                    ids, how = segment.citations, ("segment" if segment.citations else "none")
                if asserts(s.text):
                    claims.append(Claim(len(claims) + 1, segment.seg, s.text, ids, how))
        return claims
    if not answer.text:
        return []
    sentences = list(_sentences(answer.text))
    inherited = _inherit(sentences)
    marked = any(s.ids for s in sentences)
    for s, (ids, how) in zip(sentences, inherited):
        if not marked and answer.raw_citations:
            ids, how = tuple(answer.raw_citations), "answer"
        if asserts(s.text):
            claims.append(Claim(len(claims) + 1, 1, s.text, ids, how))
    return claims


def answer_segments(answer: Answer | None) -> tuple[Segment, ...]:
    """The answer's segments; an answer with text but no segments is one segment citing what the
    answer cites."""
    if answer is None:
        return ()
    if answer.segments:
        return answer.segments
    if answer.text:
        return (Segment(1, answer.text, answer.citations),)
    return ()
