"""Finding a text in a corpus, for gold upkeep: exactly, then with whitespace, case and inline
markup folded, then by similarity (an embedding model, or difflib's ratio of characters).

Every span found lies inside one section of its document: a gold anchor must (`gold check`).
Results are in corpus order (documents by id, spans by start), so a tie always breaks the same way.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from ragaudit.core.types import Corpus, Document, Section

if TYPE_CHECKING:
    from ragaudit.checks.metrics.embed import Encoder

MARKUP = frozenset("*_`~")  # emphasis, strong, inline code and strike-through marks, Markdown and reST alike


@dataclass(frozen=True)
class Found:
    """A span of a document, with how it was found (`exact`, `normalised`, `similar`, `fuzzy`) and,
    for the last two, its similarity (cosine) or ratio (difflib)."""

    doc_id: str
    section_id: str
    start: int
    end: int
    text: str
    how: str
    score: float | None = None


def section_at(document: Document, start: int, end: int) -> Section | None:
    """The section holding [start, end) whole, else None."""
    return next((s for s in document.sections if s.start <= start and end <= s.end), None)


def _found(document: Document, start: int, end: int, how: str, score: float | None = None) -> Found | None:
    section = section_at(document, start, end)
    if section is None:
        return None
    return Found(document.doc_id, section.section_id, start, end, document.text[start:end], how, score)


def exact(corpus: Corpus, text: str, doc_ids: list[str] | None = None) -> list[Found]:
    """Every occurrence of `text` inside one section, in the documents `doc_ids` (default: all)."""
    out: list[Found] = []
    for doc_id in doc_ids if doc_ids is not None else sorted(corpus.documents):
        document = corpus[doc_id]
        at = document.text.find(text)
        while at >= 0 and text:
            found = _found(document, at, at + len(text), "exact")
            if found is not None:
                out.append(found)
            at = document.text.find(text, at + 1)
    return out


def normalised_text(text: str) -> tuple[str, list[int]]:
    """`text` lowercased, without inline markup marks, every run of whitespace one space; and for
    each character of the result, the index of the character of `text` it comes from."""
    out: list[str] = []
    where: list[int] = []
    space = False
    for i, char in enumerate(text):
        if char in MARKUP:
            continue
        if char.isspace():
            if out and not space:
                out.append(" ")
                where.append(i)
            space = True
            continue
        space = False
        for lower in char.lower():
            out.append(lower)
            where.append(i)
    return "".join(out), where


def normalised(corpus: Corpus, text: str) -> list[Found]:
    """Occurrences of `text` once whitespace, case and inline markup are folded on both sides."""
    wanted = normalised_text(text)[0].strip()
    out: list[Found] = []
    if not wanted:
        return out
    for doc_id in sorted(corpus.documents):
        document = corpus[doc_id]
        folded, where = normalised_text(document.text)
        at = folded.find(wanted)
        while at >= 0:
            found = _found(document, where[at], where[at + len(wanted) - 1] + 1, "normalised")
            if found is not None:
                out.append(found)
            at = folded.find(wanted, at + 1)
    return out


def sentence_windows(document: Document, longest: int) -> Iterator[tuple[int, int]]:
    """Spans of 1 to `longest` consecutive sentences of one section, for every section."""
    from ragaudit.core.text import sentence_spans

    for section in document.sections:
        spans = sentence_spans(document.text[section.start : section.end], offset=section.start)
        for i in range(len(spans)):
            for j in range(i, min(i + longest, len(spans))):
                yield spans[i][0], spans[j][1]


def similar(corpus: Corpus, text: str, encoder: Encoder, *, top: int = 3) -> list[Found]:
    """The `top` sentences most like `text` by the encoder's cosine similarity (ties: corpus order);
    headings and lines of fewer than three words are not candidates."""
    import numpy as np

    from ragaudit.core.text import WORD

    spans = [
        (doc_id, a, b)
        for doc_id in sorted(corpus.documents)
        for a, b in sentence_windows(corpus[doc_id], 1)
        # a heading or an adornment line is no answer
        if len(WORD.findall(corpus[doc_id].text[a:b])) >= 3 and not corpus[doc_id].text[a:b].startswith("#")
    ]
    if not spans:
        return []
    texts = [corpus[d].text[a:b] for d, a, b in spans]
    vectors = encoder.encode([text, *texts])
    scores = vectors[1:] @ vectors[0]
    order = sorted(range(len(spans)), key=lambda i: (-float(scores[i]), i))[:top]
    out = []
    for i in order:
        doc_id, a, b = spans[i]
        found = _found(corpus[doc_id], a, b, "similar", round(float(np.clip(scores[i], -1.0, 1.0)), 6))
        if found is not None:
            out.append(found)
    return out


def fuzzy(corpus: Corpus, text: str, doc_ids: list[str], *, min_ratio: float) -> tuple[Found | None, float]:
    """The run of whole sentences of one section most like `text` by difflib's ratio (at most one
    sentence more than `text` holds), among `doc_ids`: (it, when its ratio reaches `min_ratio`;
    the best ratio seen). Ties: corpus order."""
    from ragaudit.core.text import sentence_spans

    longest = max(1, len(sentence_spans(text))) + 1
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(text)
    best: tuple[float, str, int, int] | None = None
    for doc_id in doc_ids:
        document = corpus[doc_id]
        for a, b in sentence_windows(document, longest):
            matcher.set_seq1(document.text[a:b])
            floor = best[0] if best else 0.0
            # quick upper bounds first: only a window that could beat the best is compared in full
            if matcher.real_quick_ratio() <= floor or matcher.quick_ratio() <= floor:
                continue
            ratio = matcher.ratio()
            if ratio > floor:
                best = (ratio, doc_id, a, b)
    if best is None:
        return None, 0.0
    ratio, doc_id, a, b = best
    if ratio < min_ratio:
        return None, ratio
    return _found(corpus[doc_id], a, b, "fuzzy", round(ratio, 6)), ratio
