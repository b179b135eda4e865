"""Markers → citations: where a citation marker binds, and which retrieved context it names.

Where a marker binds (one grammar for the validator, the claims splitter and this mapping): to
the sentence it stands in or closes. `text [1].`, `text. [1]`, `text.[1][2]` and a last sentence
without a full stop (`… to HTTPS:: [3]`) all cite that sentence: a marker that opens a sentence
belongs to the sentence before it, as LLMs often write it. A sentence without a marker of its own
takes those of the next marked sentence of its paragraph (LLMs often cite once at a paragraph's
end), and cites nothing when none follows.

What a marker names: an LLM app numbers the context it retrieved (`[1]` is the first), or names
its snippets or documents. Against a trace's retrieved payloads a marker id is read as

* a number `n` (`[1]`, `[1, 2]`, `[^1]`, `【1】`, `【1:0†source】`): the payload whose `k_pos` is `n`
  (the n-th payload when none has a `k_pos`);
* otherwise a `snippet_id`, else a `doc_id` (the best-ranked payload of that document).

A marker that names no retrieved payload keeps its id as written, which validation reports as
`dangling_citation`. Which brackets are markers at all is `ragaudit.core.markers.markers`' to say: given
the retrieved payloads' names and the forms a config accepts, never code, `flask[async]`, a TOML
table header or a timestamp. An answer with text and markers but no segments (and no cite-first JSON
`citations`, which say what it cites) gets one segment per sentence, citing the payloads its markers name (`cite_markers`); the trace reader does this for
every trace, so every pipeline, a replay of spans and `audit-log` read markers the same way.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable

from ragaudit.core.forgetting import forgotten
from ragaudit.core.markers import ALL_FORMS, marker_ids, markers
from ragaudit.core.text import sentence_spans
from ragaudit.core.types import Answer, Payload, Segment

_PARAGRAPH = re.compile(r"\n\s*\n")
_FILE_NUMBER = re.compile(r"【\s*(\d+)")
_BETWEEN_MARKERS = re.compile(r"[ \t.,;:]*")  # read in place: slicing the rest of a piece per marker is quadratic


@dataclass(frozen=True, slots=True)
class Bound:
    """A sentence of an answer with the ids of the markers that bind to it."""

    text: str  # as written, its own markers included
    ids: tuple[str, ...]  # from its own markers, leading markers moved to the sentence before
    paragraph: int


def marker_sources(match: re.Match[str]) -> list[str]:
    """The ids a marker found by `MARKER` names, as the context numbers or names them: `[^1^]` and
    `【1:0†source】` name `1`; a GraphRAG data reference names none here (its adapter reads it)."""
    text = match.group()
    if text.startswith("【"):
        number = _FILE_NUMBER.match(text)
        return [number.group(1)] if number else []
    return [i.strip("^") or i for i in marker_ids(match)]


@forgotten
@lru_cache(maxsize=1 << 14)
def bound_sentences(
    text: str, names: frozenset[str] | None = None, forms: frozenset[str] = ALL_FORMS
) -> tuple[Bound, ...]:
    """The sentences of `text` with the ids of the markers that bind to each; `names` and `forms`
    as `ragaudit.core.markers.markers` reads them."""
    out: list[Bound] = []
    for paragraph, block in enumerate(p for p in _PARAGRAPH.split(text) if p.strip()):
        found = list(markers(block, names=names, forms=forms))
        pieces: list[list[Any]] = []  # [text, ids]
        for a, b in sentence_spans(block):
            mine = [m for m in found if a <= m.start() < b]
            lead = _leading_markers(block, a, mine)
            if lead > a and pieces:
                pieces[-1][0] = f"{pieces[-1][0]} {block[a:lead].strip()}"
                pieces[-1][1] += _ids(m for m in mine if m.end() <= lead)
                piece = block[lead:b].strip()
                if not piece:
                    continue
                pieces.append([piece, _ids(m for m in mine if m.start() >= lead)])
            else:
                pieces.append([block[a:b], _ids(mine)])
        out += [Bound(p, tuple(dict.fromkeys(ids)), paragraph) for p, ids in pieces]
    return tuple(out)


def _leading_markers(block: str, at: int, found: list[re.Match[str]]) -> int:
    """Where the run of markers (and spaces or closing punctuation) that opens the sentence at `at`
    ends (`at` itself when none does); `found` are the sentence's markers, in order."""
    for m in found:
        gap = _BETWEEN_MARKERS.match(block, at)
        if gap is None or gap.end() != m.start():
            break
        at = m.end()
    return at


def _ids(found: Iterable[re.Match[str]]) -> list[str]:
    return [i for m in found for i in marker_sources(m)]


def inherit(sentences: list[Bound]) -> list[tuple[tuple[str, ...], str]]:
    """Each sentence's marker ids and how it got them: `marker` (its own), else `next` (the next
    marked sentence's of its paragraph), else `none`."""
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


def names(retrieved: list[tuple[str | None, str | None]]) -> dict[str, str]:
    """The snippet id each name a marker may give stands for, from the retrieved (snippet_id,
    doc_id) pairs in their order: a snippet_id itself, else a doc_id's first (best-ranked) snippet."""
    named: dict[str, str] = {}
    for snippet_id, _ in retrieved:
        if snippet_id is not None:
            named.setdefault(snippet_id, snippet_id)
    for snippet_id, doc_id in retrieved:
        if snippet_id is not None and doc_id is not None:
            named.setdefault(doc_id, snippet_id)
    return named


def resolve(ids: tuple[str, ...], retrieved: tuple[Payload, ...]) -> tuple[str, ...]:
    """The snippet ids of the retrieved payloads that marker ids name (see the module's docstring);
    an id that names none stays as written."""
    numbered: dict[int, str] = {}
    ranked = any(p.k_pos is not None for p in retrieved)
    for n, p in enumerate(retrieved, start=1):
        if p.snippet_id is None:
            continue
        if ranked:
            if p.k_pos is not None:
                numbered.setdefault(p.k_pos, p.snippet_id)
        else:
            numbered.setdefault(n, p.snippet_id)
    named = names([(p.snippet_id, p.doc_id) for p in retrieved])
    out = []
    for i in ids:
        number = int(i) if i.isdecimal() and len(i) < 6 else None
        out.append(numbered.get(number, named.get(i, i)) if number is not None else named.get(i, i))
    return tuple(dict.fromkeys(out))


def numbered_segments(
    text: str, numbered: Mapping[int, str], named: Mapping[str, str], forms: frozenset[str] = ALL_FORMS
) -> list[dict[str, Any]]:
    """One segment per sentence of `text`, citing what its markers name when the context was
    numbered otherwise than by rank (a LlamaIndex CitationQueryEngine's "Source k" chunks): a number
    through `numbered`, any other id through `named` (`names`); an id that names nothing stays as
    written. The sentences and the markers that bind to each are read as for any marked answer."""
    sentences = list(bound_sentences(text, frozenset(named), frozenset(forms)))
    return [
        {
            "seg": n,
            "text": s.text,
            "citations": list(
                dict.fromkeys(numbered.get(int(i), i) if i.isdecimal() else named.get(i, i) for i in ids)
            ),
        }
        for n, (s, (ids, _)) in enumerate(zip(sentences, inherit(sentences)), start=1)
    ]


def retrieved_names(retrieved: tuple[Payload, ...]) -> frozenset[str]:
    """The snippet and document ids a marker may name."""
    return frozenset(n for p in retrieved for n in (p.snippet_id, p.doc_id) if n)


def cite_markers(
    answer: Answer | None, retrieved: tuple[Payload, ...], forms: frozenset[str] = ALL_FORMS
) -> Answer | None:
    """The answer with one segment per sentence citing what its markers name, when it has text
    with markers (of `forms`) and neither segments nor a cite-first JSON `citations` list (`marked`
    then says how each segment got its citations: "marker", "next" or "none"); any other answer as
    it is."""
    if answer is None or answer.segments or answer.raw_citations or not answer.text:
        return answer  # segments, or the `citations` of a cite-first JSON answer, say what it cites
    names = retrieved_names(retrieved)
    if next(markers(answer.text, names=names, forms=forms), None) is None:
        return answer
    sentences = list(bound_sentences(answer.text, names, frozenset(forms)))
    if not any(s.ids for s in sentences):
        return answer  # only GraphRAG data references: nothing a numbered context names
    bound = inherit(sentences)
    segments = tuple(
        Segment(n, s.text, resolve(ids, retrieved) if ids else ())
        for n, (s, (ids, _)) in enumerate(zip(sentences, bound), start=1)
    )
    return dataclasses.replace(answer, segments=segments, marked=tuple(how for _, how in bound))
