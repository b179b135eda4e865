"""Claims (docs/reference.md §3): an answer split into the sentences it asserts, each with the sources it cites.

A claim is a sentence of the answer, by the one sentence splitter. It cites the snippets named by
the citation markers that bind to it, by the one grammar of `ragaudit.core.citing`: a marker that opens
a sentence belongs to the sentence before it ("… within 12 hours. [1] Keys are …", "…12
hours.[1][2]"), and a sentence without a marker of its own takes those of the next marked sentence
of its paragraph, and is uncited when none follows. An answer whose segments were read from its
markers (`Answer.marked`) keeps how each sentence got them ("marker", "next"); when the answer
gives segments, every sentence of a segment without markers cites the segment's citations; when
it gives a cite-first JSON list and no marker at all, every sentence cites that list.

Sentences that assert nothing are not claims: an opener such as "According to the documentation:"
or "Here is what I found." has no content word beyond the words answers use to talk about sources.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from ragaudit.checks.metrics.memo import LONGEST, SIZE, Memo
from ragaudit.core.citing import bound_sentences as _sentences
from ragaudit.core.citing import inherit as _inherit
from ragaudit.core.markers import strip_markers
from ragaudit.core.text import STOPWORDS
from ragaudit.core.types import Answer, Segment

# Words answers use to talk about their sources and themselves; a sentence of only these (and
# stopwords) asserts nothing about the question.
DISCOURSE = frozenset(
    """according accordingly answer answers based brief briefly certainly context contexts document documentation
documents excerpt excerpts explains following found general generally given here information mentioned note noted
passage passages provided question questions quick quickly reference references says short source sources state
stated states summary summarise summarize sure text texts typically way yes""".split()
)
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class Claim:
    n: int  # 1-based position among the answer's claims
    seg: int  # the answer segment it belongs to (1 for an answer given as text alone)
    text: str  # the sentence as written, its own markers included
    citations: tuple[str, ...]  # the snippet ids it cites
    cited_by: str  # "marker", "next" (the next marked sentence's), "segment", "answer" or "none"


def asserts(text: str) -> bool:
    """Does the sentence say anything? Some word that is neither a stopword nor discourse."""
    plain = strip_markers(text)
    return any(w not in STOPWORDS and w not in DISCOURSE for w in (t.lower() for t in _WORD.findall(plain)))


def claims_of(answer: Answer | None) -> list[Claim]:
    """The claims of an answer, in order (docs/reference.md §3)."""
    if answer is None:
        return []
    size = len(answer.raw or "") + len(answer.text or "") + sum(len(s.text) for s in answer.segments)
    if size > LONGEST:
        return _claims(answer)
    return list(_CLAIMS.get(answer, _claim_tuple, answer))


_CLAIMS: Memo[tuple[Claim, ...]] = Memo(SIZE)  # the seeds and variants of a question often give the same answer


def _claim_tuple(answer: Answer) -> tuple[Claim, ...]:
    return tuple(_claims(answer))


def _claims(answer: Answer) -> list[Claim]:
    claims: list[Claim] = []
    if answer.marked:  # one segment per sentence, and how it got its citations
        for segment, how in zip(answer.segments, answer.marked):
            if asserts(segment.text):
                claims.append(Claim(len(claims) + 1, segment.seg, segment.text, segment.citations, how))
        return claims
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
